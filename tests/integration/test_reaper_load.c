/* Reaping under load: 100,000 finished step rows (inserted with SQL) are deleted by the reaper
 * (--reaper-interval 1) while 8 threads run BeginStep on fresh keys. BeginStep's p99 while the
 * reaper deletes stays under 2x its p99 while it does not.
 *
 * The rows expire in 4 bands of 25,000, 11 s apart, so windows with and without reaping
 * alternate within one run: a slow spell of the shared machine then falls on both sides
 * instead of on whichever phase it happened to hit. A window without reaping runs from the end
 * of one band's deletion until just before the next band expires (and 4 s after the last);
 * a window with reaping from the band's first deleted row to its last. The rows are in place,
 * analyzed and checkpointed before the first window, so the bulk insert's after-effects count
 * against neither side. Calls that straddle a change of window are dropped. Both sides poll the
 * row count at the same cadence. Prints both p99s and how much of each was measured.
 * Bounded: the last band expires 48 s after the insert; the test gives up 60 s after that. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define THREADS 8
#define ROWS 100000
#define BANDS 4
#define BAND (ROWS / BANDS)
#define FIRST_MS 15000 /* the first band expires this long after the insert begins */
#define GAP_MS 11000   /* between the bands' expiries */
#define LAST_BASE_MS 4000
#define MARGIN_MS 500 /* a window without reaping ends this long before a band expires */
#define MAX_SAMPLES 400000
#define POLL_MS 250

enum { PH_WAIT, PH_BASE, PH_REAP, PH_DONE };

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
    if (ph != atomic_load(&phase)) continue; /* straddled a change of window */
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

static const char *dead_tenant;

static long long left(void) {
  const char *p[] = {dead_tenant};
  return pgx_sql(NULL, "SELECT count(*) FROM idem_steps WHERE tenant = $1", 1, p);
}

/* Time spent in each kind of window, and how many windows of each. */
static int64_t ms_in[PH_DONE];
static int windows[PH_DONE];

/* Opens a window of kind ph; returns when it opened. */
static int64_t window_open(int ph) {
  atomic_store(&phase, ph);
  windows[ph]++;
  return h_now_ms();
}

static void window_close(int ph, int64_t opened) {
  ms_in[ph] += h_now_ms() - opened;
  atomic_store(&phase, PH_WAIT);
}

/* A window without reaping, polling the row count every POLL_MS, until the monotonic clock
 * reaches until (none if it already has). */
static void hold_base(int64_t until) {
  if (h_now_ms() >= until) return;
  int64_t opened = window_open(PH_BASE);
  while (h_now_ms() < until) {
    (void)left();
    h_sleep_ms(POLL_MS); /* not a wait: a window of the figure, sampled every POLL_MS */
  }
  window_close(PH_BASE, opened);
}

/* A window of kind ph while more than floor rows are left, polling every step_ms. False if
 * give_up passed first. */
static bool hold_while_above(int ph, long long floor, int64_t step_ms, int64_t give_up) {
  int64_t opened = window_open(ph);
  while (left() > floor) {
    if (h_now_ms() > give_up) return false;
    h_sleep_ms(step_ms); /* the next poll of the rows left: a window of the figure */
  }
  window_close(ph, opened);
  return true;
}

Test(reaper_load, begin_p99_while_reaping_100k_rows, .timeout = 240) {
  const char *args[] = {"--reaper-interval", "1", NULL};
  srv s;
  h_srv_start(&s, NULL, args);
  char t[64], dead[64];
  h_tenant(t);
  h_tenant(dead);
  dead_tenant = dead;
  C = h_client(&s, t, 5000);
  base_us = calloc(MAX_SAMPLES, sizeof *base_us);
  reap_us = calloc(MAX_SAMPLES, sizeof *reap_us);
  cr_assert(base_us && reap_us);

  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) cr_assert_eq(pthread_create(&th[i], NULL, load, NULL), 0);
  h_sleep_ms(1000); /* warm-up, not measured */

  /* The database's clock in ms, and the same instant on the monotonic clock. */
  int64_t wall =
      pgx_sql(NULL, "SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint", 0, NULL);
  int64_t mono = h_now_ms();
  char now_s[32], first_s[32], gap_s[32], band_s[32];
  snprintf(now_s, sizeof now_s, "%lld", (long long)wall);
  snprintf(first_s, sizeof first_s, "%d", FIRST_MS);
  snprintf(gap_s, sizeof gap_s, "%d", GAP_MS);
  snprintf(band_s, sizeof band_s, "%d", BAND);
  const char *p[] = {dead, now_s, first_s, gap_s, band_s};
  pgx_sql(NULL,
          "INSERT INTO idem_steps (tenant, global_id, service, operation, phase, state, attempt,"
          " outcome, code, body, completed_ms, created_ms, updated_ms, expires_ms)"
          " SELECT $1, 'g-' || i, 'payment', 'charge', 1, 2, 1, 1, 200, '\\x7b7d'::bytea,"
          " $2::bigint - 60000, $2::bigint - 60000, $2::bigint - 60000,"
          " $2::bigint + $3::bigint + ((i - 1) / $5::int) * $4::bigint"
          " FROM generate_series(1, 100000) i",
          5, p);
  printf("inserted %d rows (%d bands, the first expiring in %d s) in %lld ms\n", ROWS, BANDS,
         FIRST_MS / 1000, (long long)(h_now_ms() - mono));
  pgx_sql(NULL, "VACUUM ANALYZE idem_steps", 0, NULL);
  pgx_sql(NULL, "CHECKPOINT", 0, NULL);
  cr_assert_eq(left(), ROWS, "rows expired before the first window (slow insert?)");

  int64_t give_up = mono + FIRST_MS + (BANDS - 1) * GAP_MS + 60000;
  for (int k = 0; k < BANDS; k++) {
    int64_t expires = mono + FIRST_MS + (int64_t)k * GAP_MS;
    hold_base(expires - MARGIN_MS);
    /* Not measured: from just before the band expires to the reaper's first batch of it. */
    cr_assert(hold_while_above(PH_WAIT, ROWS - (long long)k * BAND - 1, 20, give_up),
              "the reaper did not start on band %d", k);
    cr_assert(hold_while_above(PH_REAP, ROWS - (long long)(k + 1) * BAND, POLL_MS, give_up),
              "band %d was not reaped within 60 s of the last expiry", k);
  }
  hold_base(h_now_ms() + LAST_BASE_MS);
  atomic_store(&phase, PH_DONE);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  cr_assert_eq(left(), 0);

  int nb = atomic_load(&n_base), nr = atomic_load(&n_reap);
  double pb = p99_ms(base_us, nb), pr = p99_ms(reap_us, nr);
  printf("BeginStep p99 without reaping: %.2f ms (%d calls in %lld ms, %d windows)\n", pb, nb,
         (long long)ms_in[PH_BASE], windows[PH_BASE]);
  printf(
      "BeginStep p99 while reaping:   %.2f ms (%d calls in %lld ms, %d windows; %d rows"
      " reaped)\n",
      pr, nr, (long long)ms_in[PH_REAP], windows[PH_REAP], ROWS);
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
