/* bench_stats.c — latency buffers and their percentiles (nearest rank on the sorted values), and
 * the error counts by code. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool lat_reserve(lat_buf *b, size_t need) {
  if (need <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < need) cap *= 2;
  double *v = realloc(b->v, cap * sizeof *v);
  if (!v) return false;
  b->v = v;
  b->cap = cap;
  return true;
}

void lat_add(lat_buf *b, double ms) {
  if (lat_reserve(b, b->n + 1)) b->v[b->n++] = ms;
}

bool lat_merge(lat_buf *into, lat_buf *from) {
  if (!lat_reserve(into, into->n + from->n)) return false;
  if (from->n) memcpy(into->v + into->n, from->v, from->n * sizeof *from->v);
  into->n += from->n;
  lat_free(from);
  return true;
}

void lat_free(lat_buf *b) {
  free(b->v);
  *b = (lat_buf){0};
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double pct(const double *v, size_t n, double p) {
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

lat_summary lat_summarize(lat_buf *b) {
  lat_summary s = {0};
  if (b->n == 0) return s;
  qsort(b->v, b->n, sizeof *b->v, cmp_double);
  s.n = b->n;
  s.p50 = pct(b->v, b->n, .50);
  s.p90 = pct(b->v, b->n, .90);
  s.p99 = pct(b->v, b->n, .99);
  s.max = b->v[b->n - 1];
  return s;
}

void bench_count_error(shared *sh, int code) {
  int i = (code >= 0 && code < BENCH_MAX_CODES) ? code : BENCH_MAX_CODES;
  atomic_fetch_add(&sh->errors[i], 1);
}
