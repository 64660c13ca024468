/* bench_stats.c — the clock and the error counts by code (the latency histogram: bench_hist.c). */
#include <time.h>

#include "bench.h"

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void bench_count_error(shared *sh, int code) {
  int i = (code >= 0 && code < BENCH_MAX_CODES) ? code : BENCH_MAX_CODES;
  atomic_fetch_add(&sh->errors[i], 1);
}
