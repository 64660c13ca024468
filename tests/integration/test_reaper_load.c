/* Reaping under load: 100,000 finished step rows (inserted with SQL, expiring 30 s later) are
 * deleted by the reaper (--reaper-interval 1) once they expire, while 8 threads run BeginStep
 * on fresh keys. BeginStep's p99 while the reaper deletes stays under 2x its p99 measured with
 * the same rows present but not yet expired (after a VACUUM ANALYZE and a CHECKPOINT, so that
 * the bulk insert's after-effects are not counted against either phase). Prints both.
 * Bounded: the baseline runs 4 s, the wait for expiry at most 30 s, the reaping at most 60 s. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define THREADS 8
#define ROWS 100000
#define MAX_SAMPLES 400000
#define POLL_MS 250

enum { PH_WARMUP, PH_BASE, PH_WAIT, PH_REAP, PH_DONE };

static atomic_int phase;
static atomic_int n_base, n_reap, n_errors;
static int64_t *base_us, *reap_us;
static idem_client *C;

static void *load(void *arg) {
  (void)arg;
  char gid[96];
  while (atomic_load(&phase) != PH_DONE) {
    h_unique("load", gid, sizeof gid);
    idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
    idem_begin b = {0};
    idem_error e = {0};
    int ph = atomic_load(&phase);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = idem_step_begin(C, &k, NULL, 0, 0, &b, &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    idem_begin_clear(&b);
    if (rc != IDEM_OK) {
      atomic_fetch_add(&n_errors, 1);
      continue;
    }
    int64_t us = (t1.tv_sec - t0.tv_sec) * 1000000LL + (t1.tv_nsec - t0.tv_nsec) / 1000;
    if (ph != atomic_load(&phase)) continue; /* straddled a phase change */
    if (ph == PH_BASE) {
      int i = atomic_fetch_add(&n_base, 1);
      if (i < MAX_SAMPLES) base_us[i] = us;
    } else if (ph == PH_REAP) {
      int i = atomic_fetch_add(&n_reap, 1);
      if (i < MAX_SAMPLES) reap_us[i] = us;
    }
  }
  return NULL;
}

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static double p99_ms(int64_t *v, int n) {
  if (n > MAX_SAMPLES) n = MAX_SAMPLES;
  qsort(v, (size_t)n, sizeof *v, cmp64);
  return v[(size_t)(n * 99 / 100)] / 1000.0;
}

static long long left(const char *tenant) {
  const char *p[] = {tenant};
  return h_sql_int("SELECT count(*) FROM idem_steps WHERE tenant = $1", 1, p);
}

Test(reaper_load, begin_p99_while_reaping_100k_rows, .timeout = 240) {
  const char *args[] = {"--reaper-interval", "1", NULL};
  srv s;
  h_srv_start(&s, NULL, args);
  char t[64], dead[64];
  h_tenant(t);
  h_tenant(dead);
  C = h_client(&s, t, 5000);
  base_us = calloc(MAX_SAMPLES, sizeof *base_us);
  reap_us = calloc(MAX_SAMPLES, sizeof *reap_us);
  cr_assert(base_us && reap_us);

  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) cr_assert_eq(pthread_create(&th[i], NULL, load, NULL), 0);
  h_sleep_ms(1000);
  atomic_store(&phase, PH_WAIT);
  int64_t t_ins = h_now_ms();
  const char *p[] = {dead};
  h_sql_int("INSERT INTO idem_steps (tenant, global_id, service, operation, phase, state, attempt,"
            " outcome, code, body, completed_ms, created_ms, updated_ms, expires_ms)"
            " SELECT $1, 'g-' || i, 'payment', 'charge', 1, 2, 1, 1, 200, '\\x7b7d'::bytea,"
            " n - 60000, n - 60000, n - 60000, n + 30000"
            " FROM generate_series(1, 100000) i,"
            " (SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint AS n) now",
            1, p);
  printf("inserted %d rows (expiring in 30 s) in %lld ms\n", ROWS,
         (long long)(h_now_ms() - t_ins));
  h_sql_int("VACUUM ANALYZE idem_steps", 0, NULL);
  h_sql_int("CHECKPOINT", 0, NULL);

  /* Both measured phases poll the row count at the same cadence, so the poll's own load is
   * the same in both. */
  atomic_store(&phase, PH_BASE);
  for (int64_t end = h_now_ms() + 4000; h_now_ms() < end;) {
    (void)left(dead);
    h_sleep_ms(POLL_MS);
  }
  atomic_store(&phase, PH_WAIT);
  cr_assert_eq(left(dead), ROWS, "the rows expired before the baseline ended (slow insert?)");

  int64_t give_up = h_now_ms() + 30000 + 60000, t_start = 0;
  long long n;
  while ((n = left(dead)) == ROWS) { /* until they expire and the reaper's first batch */
    cr_assert_lt(h_now_ms(), give_up, "the reaper did not start");
    h_sleep_ms(20);
  }
  atomic_store(&phase, PH_REAP);
  t_start = h_now_ms();
  while ((n = left(dead)) > 0) {
    if (h_now_ms() > give_up) break;
    h_sleep_ms(POLL_MS);
  }
  int64_t took = h_now_ms() - t_start;
  atomic_store(&phase, PH_DONE);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  cr_assert_eq(n, 0, "%lld rows left after 60 s", n);

  int nb = atomic_load(&n_base), nr = atomic_load(&n_reap);
  double pb = p99_ms(base_us, nb), pr = p99_ms(reap_us, nr);
  printf("BeginStep p99 without reaping: %.2f ms (%d calls in 4 s)\n", pb, nb);
  printf("BeginStep p99 while reaping:   %.2f ms (%d calls in %lld ms; %d rows reaped)\n", pr, nr,
         (long long)took, ROWS);
  printf("errors: %d\n", atomic_load(&n_errors));
  cr_assert_gt(nb, 100);
  cr_assert_gt(nr, 10, "too few calls while reaping to measure");
  cr_assert_eq(atomic_load(&n_errors), 0);
  cr_assert_lt(pr, 2 * pb, "p99 while reaping %.2f ms >= 2 x %.2f ms", pr, pb);
  free(base_us);
  free(reap_us);
  idem_close(C);
  cr_assert_eq(h_srv_stop(&s), 0);
}
