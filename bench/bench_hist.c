/* bench_hist.c — idem-bench's latency histogram (bench.h): log-linear buckets in the manner of
 * Gil Tene's HdrHistogram. Values below 2^LAT_SUB_BITS us have a bucket each; above, every
 * power of two [2^e, 2^(e+1)) is cut into 2^(LAT_SUB_BITS-1) equal buckets, so a bucket is at
 * most 1/512 of its values wide (0.2 %) and its upper edge is within 0.1 % of the midpoint. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { SUB = 1 << LAT_SUB_BITS, HALF = SUB / 2 };

/* The bucket of a value in us. */
static size_t slot_of(int64_t us) {
  if (us < 0) us = 0;
  if (us < SUB) return (size_t)us;
  int top = 63 - __builtin_clzll((unsigned long long)us); /* 2^top <= us */
  if (top >= LAT_MAX_EXP) return LAT_SLOTS - 1;
  int shift = top - (LAT_SUB_BITS - 1); /* us >> shift is in [HALF, SUB) */
  return (size_t)SUB + (size_t)(top - LAT_SUB_BITS) * HALF + (size_t)((us >> shift) - HALF);
}

/* The largest value in us that falls in bucket i. */
static int64_t upper_of(size_t i) {
  if (i < SUB) return (int64_t)i;
  size_t k = i - SUB;
  int top = LAT_SUB_BITS + (int)(k / HALF), shift = top - (LAT_SUB_BITS - 1);
  int64_t low = (int64_t)(HALF + k % HALF) << shift;
  return low + ((int64_t)1 << shift) - 1;
}

static bool lat_alloc(lat_buf *b) {
  if (!b->counts) b->counts = calloc(LAT_SLOTS, sizeof *b->counts);
  return b->counts != NULL;
}

void lat_add(lat_buf *b, double ms) {
  if (!lat_alloc(b)) return;
  int64_t us = (int64_t)(ms * 1000.0 + 0.5);
  b->counts[slot_of(us)]++;
  b->n++;
  if (us > b->max_us) b->max_us = us;
}

bool lat_merge(lat_buf *into, lat_buf *from) {
  if (from->n) {
    if (!lat_alloc(into)) return false;
    for (size_t i = 0; i < LAT_SLOTS; i++) into->counts[i] += from->counts[i];
    into->n += from->n;
    if (from->max_us > into->max_us) into->max_us = from->max_us;
  }
  lat_free(from);
  return true;
}

void lat_free(lat_buf *b) {
  free(b->counts);
  *b = (lat_buf){0};
}

/* The value of rank ceil(p * n) (nearest rank), as its bucket's upper edge, in ms; never above
 * the largest value recorded. */
static double pct(const lat_buf *b, double p) {
  size_t rank = (size_t)(p * (double)b->n + 0.999999), seen = 0;
  if (rank < 1) rank = 1;
  for (size_t i = 0; i < LAT_SLOTS; i++) {
    seen += b->counts[i];
    if (seen >= rank) {
      int64_t v = upper_of(i);
      return (double)(v < b->max_us ? v : b->max_us) / 1000.0;
    }
  }
  return (double)b->max_us / 1000.0;
}

lat_summary lat_summarize(const lat_buf *b) {
  lat_summary s = {0};
  if (b->n == 0 || !b->counts) return s;
  s.n = b->n;
  s.p50 = pct(b, .50);
  s.p90 = pct(b, .90);
  s.p99 = pct(b, .99);
  s.p999 = pct(b, .999);
  s.max = (double)b->max_us / 1000.0;
  return s;
}

long lat_count_over(const lat_buf *b, double ms) {
  if (!b->counts) return 0;
  int64_t us = (int64_t)(ms * 1000.0);
  long n = 0;
  for (size_t i = slot_of(us) + 1; i < LAT_SLOTS; i++) n += (long)b->counts[i];
  return n;
}
