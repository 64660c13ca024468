/* idem-bench's latency histogram (bench/bench_hist.c): percentiles within 0.1 % of the exact
 * nearest-rank value over five decades, merging, p99.9, and fixed memory. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "bench.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The exact nearest-rank percentile of sorted v. */
static double exact(const double *v, size_t n, double p) {
  size_t rank = (size_t)ceil(p * (double)n);
  if (rank < 1) rank = 1;
  return v[rank - 1];
}

Test(bench_hist, percentiles_within_a_tenth_of_a_percent) {
  enum { N = 100000 };
  double *v = malloc(N * sizeof *v);
  cr_assert_not_null(v);
  srand(7);
  lat_buf h = {0};
  for (size_t i = 0; i < N; i++) {
    /* log-uniform from 0.01 ms to 1000 ms, whole microseconds as the histogram records them */
    double ms = round(pow(10.0, -2.0 + 5.0 * rand() / (double)RAND_MAX) * 1000.0) / 1000.0;
    v[i] = ms;
    lat_add(&h, ms);
  }
  qsort(v, N, sizeof *v, cmp);
  lat_summary s = lat_summarize(&h);
  cr_assert_eq(s.n, (size_t)N);
  const double ps[] = {.50, .90, .99, .999};
  const double got[] = {s.p50, s.p90, s.p99, s.p999};
  for (int i = 0; i < 4; i++) {
    double want = exact(v, N, ps[i]);
    cr_expect_leq(fabs(got[i] - want), want * 0.001 + 0.0005, "p%g: %.4f ms, exact %.4f ms",
                  ps[i] * 100, got[i], want);
  }
  cr_expect_eq(s.max, v[N - 1], "max %.4f, exact %.4f", s.max, v[N - 1]);
  lat_free(&h);
  free(v);
}

Test(bench_hist, p999_sees_the_tail_a_p99_hides) {
  lat_buf h = {0};
  for (int i = 0; i < 9990; i++) lat_add(&h, 1.0);
  for (int i = 0; i < 10; i++) lat_add(&h, 250.0); /* 0.1 % of the values */
  lat_summary s = lat_summarize(&h);
  cr_expect_float_eq(s.p99, 1.0, 0.002, "p99 %.3f", s.p99);
  cr_expect_float_eq(s.p999, 1.0, 0.002, "p99.9 %.3f (rank 9990 is still 1 ms)", s.p999);
  lat_add(&h, 250.0); /* now 11 of 10001: rank ceil(.999 * 10001) = 9991 is in the tail */
  s = lat_summarize(&h);
  cr_expect_float_eq(s.p999, 250.0, 0.25, "p99.9 %.3f", s.p999);
  lat_free(&h);
}

Test(bench_hist, merge_adds_counts_and_empties_the_source) {
  lat_buf a = {0}, b = {0};
  for (int i = 1; i <= 100; i++) lat_add(&a, i);          /* 1..100 ms */
  for (int i = 101; i <= 200; i++) lat_add(&b, i);        /* 101..200 ms */
  cr_assert(lat_merge(&a, &b));
  cr_expect_eq(b.n, 0u);
  cr_expect_null(b.counts);
  lat_summary s = lat_summarize(&a);
  cr_expect_eq(s.n, 200u);
  cr_expect_float_eq(s.p50, 100.0, 0.1, "p50 %.3f", s.p50);
  cr_expect_float_eq(s.max, 200.0, 0.001, "max %.3f", s.max);
  lat_free(&a);
}

Test(bench_hist, out_of_range_values_are_kept_not_lost) {
  lat_buf h = {0};
  lat_add(&h, -5.0);          /* a clock step back: counts as 0 */
  lat_add(&h, 1e12);          /* beyond 2^36 us: counts in the last bucket */
  lat_summary s = lat_summarize(&h);
  cr_expect_eq(s.n, 2u);
  cr_expect_float_eq(s.p50, 0.0, 1e-9);
  cr_expect_gt(s.max, 1e11);
  cr_expect_eq(lat_summarize(&(lat_buf){0}).n, 0u, "an empty histogram summarizes to zeros");
  lat_free(&h);
}
