/* support_load.c — the load of ha.h and the checks after a fault.
 *
 * Each client thread loops (paced, so that the machine is not saturated and the times measured
 * are the failover's, not the CPU's): a BeginStep + CompleteStep(SUCCEEDED, code 200, body = the
 * key) on a fresh key, and every fourth round a replay (BeginStep again) of one of its own
 * acknowledged keys, which must answer REPLAY with that result. A call that fails with UNAVAILABLE
 * or an unknown outcome is asked again with the same key, as a real caller would (at most HA_TRIES
 * times in all); any other error is recorded as unexpected. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ha.h"

#define HA_TRIES 4
#define HA_OWN 256    /* a thread's recent acknowledged keys, for replays */
#define HA_PACE_MS 12 /* per thread: at most ~80 rounds/s, ~750 pairs/s from 12 threads */

typedef struct worker_arg {
  ha_load *L;
  int index;
} worker_arg;

static worker_arg args[HA_THREADS];

/* The errors a caller may see while the store fails over: UNAVAILABLE, any error whose outcome
 * libidem marks unknown (an answer lost), and ABORTED "in progress" on a repeat after such a
 * lost answer (our own first try began the step). */
static bool expected_error(int rc, const idem_error *e, bool unknown) {
  return rc == IDEM_UNAVAILABLE || e->outcome_unknown || (unknown && rc == IDEM_ABORTED);
}

static void bad(ha_op *o, const char *call, int rc, const idem_error *e) {
  if (o->bad_error) return;
  o->bad_error = true;
  snprintf(o->bad_msg, sizeof o->bad_msg, "%s: %s (%.100s)", call, idem_strerror(rc), e->message);
}

static void count_ack(ha_load *L, int64_t now) {
  int64_t b = (now - L->t_start) / HA_BUCKET_MS;
  if (b >= 0 && b < HA_MAX_BUCKETS) atomic_fetch_add(&L->acked_per_bucket[b], 1);
}

static void pair(ha_load *L, idem_client *c, ha_op *o) {
  idem_step_key k = {o->gid, "payment", "charge", IDEM_FORWARD};
  idem_error e;
  int rc = IDEM_UNAVAILABLE;
  o->begun_ms = h_now_ms();
  for (int t = 0; t < HA_TRIES; t++) {
    idem_begin b = {0};
    memset(&e, 0, sizeof e);
    rc = idem_step_begin(c, &k, NULL, 0, 0, &b, &e);
    if (rc == IDEM_OK) {
      if (b.decision == IDEM_DECISION_PROCEED) {
        if (o->attempt == b.attempt) o->dup_proceed = true;
        o->attempt = b.attempt;
        o->proceeds++;
      } else {
        snprintf(e.message, sizeof e.message, "decision %s on a fresh key",
                 idem_decision_name(b.decision));
        bad(o, "BeginStep", rc, &e);
      }
      idem_begin_clear(&b);
      break;
    }
    if (e.outcome_unknown) o->unknown = true;
    if (!expected_error(rc, &e, o->unknown)) {
      bad(o, "BeginStep", rc, &e);
      break;
    }
    if (rc == IDEM_ABORTED) break; /* in progress: our own lost try began it */
  }
  o->final_rc = rc;
  if (!o->attempt) return;
  for (int t = 0; t < HA_TRIES; t++) {
    memset(&e, 0, sizeof e);
    rc = idem_step_complete(c, &k, o->attempt, IDEM_OUTCOME_SUCCEEDED, 200, o->gid, strlen(o->gid),
                            NULL, &e);
    if (rc == IDEM_OK) {
      o->acked = true;
      o->acked_ms = h_now_ms();
      count_ack(L, o->acked_ms);
      break;
    }
    if (e.outcome_unknown) o->unknown = true;
    if (!expected_error(rc, &e, o->unknown)) {
      bad(o, "CompleteStep", rc, &e);
      break;
    }
  }
  o->final_rc = rc;
}

static void replay(ha_load *L, idem_client *c, ha_op *o) {
  idem_step_key k = {o->gid, "payment", "charge", IDEM_FORWARD};
  for (int t = 0; t < HA_TRIES; t++) {
    idem_begin b = {0};
    idem_error e = {0};
    int rc = idem_step_begin(c, &k, NULL, 0, 0, &b, &e);
    if (rc == IDEM_OK) {
      atomic_fetch_add(&L->replays, 1);
      if (b.decision == IDEM_DECISION_PROCEED) o->dup_proceed = true; /* completed: never again */
      bool same = b.decision == IDEM_DECISION_REPLAY && b.has_result && b.result.code == 200 &&
                  b.result.body_len == strlen(o->gid) &&
                  memcmp(b.result.body, o->gid, b.result.body_len) == 0;
      if (!same) atomic_fetch_add(&L->replay_bad, 1);
      idem_begin_clear(&b);
      return;
    }
    if (!expected_error(rc, &e, false)) {
      bad(o, "BeginStep (replay)", rc, &e);
      return;
    }
  }
}

static void *worker(void *arg) {
  worker_arg *wa = arg;
  ha_load *L = wa->L;
  idem_options opt = {.address = L->cl->addrs, .tenant = L->tenant, .deadline_ms = 2000};
  idem_client *c = NULL;
  idem_error e = {0};
  if (idem_connect(&opt, &c, &e) != IDEM_OK) return NULL;
  int own[HA_OWN], n_own = 0;
  unsigned seed = (unsigned)(wa->index * 7919 + 1);
  int64_t next = h_now_ms();
  for (int round = 0; !atomic_load(&L->stop); round++) {
    /* paced: one round per HA_PACE_MS at most (a load shape, not a wait for a condition) */
    int64_t now = h_now_ms();
    if (now < next) h_sleep_ms(next - now);
    next = (now > next + 100 ? now : next) + HA_PACE_MS;
    if (round % 4 == 3 && n_own > 0) {
      int n = n_own < HA_OWN ? n_own : HA_OWN;
      replay(L, c, &L->ops[own[rand_r(&seed) % n]]);
      continue;
    }
    int i = atomic_fetch_add(&L->n_ops, 1);
    if (i >= HA_MAX_OPS) break;
    ha_op *o = &L->ops[i];
    snprintf(o->gid, sizeof o->gid, "ha-%d", i);
    pair(L, c, o);
    if (o->acked) own[n_own++ % HA_OWN] = i;
  }
  idem_close(c);
  return NULL;
}

void ha_load_start(ha_load *L, ha_cluster *cl) {
  memset(L, 0, sizeof *L);
  L->cl = cl;
  h_tenant(L->tenant);
  L->ops = calloc(HA_MAX_OPS, sizeof *L->ops);
  cr_assert(L->ops);
  L->t_start = h_now_ms();
  for (int i = 0; i < HA_THREADS; i++) {
    args[i] = (worker_arg){.L = L, .index = i};
    cr_assert_eq(pthread_create(&L->th[i], NULL, worker, &args[i]), 0);
  }
}

void ha_load_stop(ha_load *L) {
  atomic_store(&L->stop, true);
  for (int i = 0; i < HA_THREADS; i++) pthread_join(L->th[i], NULL);
  L->t_stop = h_now_ms();
}

double ha_load_rate(const ha_load *L, int64_t from_ms, int64_t to_ms) {
  int64_t b0 = (from_ms - L->t_start) / HA_BUCKET_MS, b1 = (to_ms - L->t_start) / HA_BUCKET_MS;
  if (b0 < 0) b0 = 0;
  if (b1 > HA_MAX_BUCKETS) b1 = HA_MAX_BUCKETS;
  if (b1 <= b0) return 0;
  long n = 0;
  for (int64_t b = b0; b < b1; b++) n += atomic_load(&L->acked_per_bucket[b]);
  return (double)n * 1000.0 / (double)((b1 - b0) * HA_BUCKET_MS);
}

int64_t ha_load_full_at(const ha_load *L, int64_t t0, double rate_before) {
  int64_t now = h_now_ms();
  for (int64_t t = t0; t + 1000 <= now; t += HA_BUCKET_MS)
    if (ha_load_rate(L, t, t + 1000) >= 0.8 * rate_before) return t - t0;
  return -1;
}

int64_t ha_load_wait_full(const ha_load *L, int64_t t0, double rate_before, int64_t within_ms) {
  int64_t at = -1;
  bool full;
  H_WAITED_EVERY(100, full, (at = ha_load_full_at(L, t0, rate_before)) >= 0,
                 within_ms - (h_now_ms() - t0));
  return full ? at : -1;
}

static void longest_pause(const ha_load *L, int n, int64_t t0, ha_report *r);

void ha_check(ha_load *L, int64_t t0, ha_report *r) {
  memset(r, 0, sizeof *r);
  r->t0 = t0;
  r->rate_before = ha_load_rate(L, t0 - 2000, t0);
  r->rate_end = ha_load_rate(L, L->t_stop - 2000, L->t_stop);
  /* full: back to the rate before, or to the steady rate at the end when that is lower (the
   * machine is shared: the rate moves by tens of percent on its own) */
  double ref = r->rate_end < r->rate_before ? r->rate_end : r->rate_before;
  r->full_rate_ms = ha_load_full_at(L, t0, ref);
  r->first_served_ms = -1;
  int n = atomic_load(&L->n_ops);
  if (n > HA_MAX_OPS) n = HA_MAX_OPS;
  idem_options opt = {.address = L->cl->addrs, .tenant = L->tenant, .deadline_ms = 5000};
  idem_client *c = NULL;
  idem_error e = {0};
  cr_assert_eq(idem_connect(&opt, &c, &e), IDEM_OK, "%s", e.message);
  for (int i = 0; i < n; i++) {
    ha_op *o = &L->ops[i];
    if (o->dup_proceed) {
      r->dup_proceeds++;
      fprintf(stderr, "%s: two PROCEEDs (attempt %llu)\n", o->gid, (unsigned long long)o->attempt);
    }
    if (o->bad_error) {
      r->bad_errors++;
      if (r->bad_errors <= 5) fprintf(stderr, "%s: unexpected error: %s\n", o->gid, o->bad_msg);
    }
    if (o->unknown) r->unknown++;
    if (!o->acked) continue;
    if (o->acked_ms < t0)
      r->acked_before++;
    else
      r->acked_after++;
    if (o->begun_ms >= t0 && (r->first_served_ms < 0 || o->acked_ms - t0 < r->first_served_ms))
      r->first_served_ms = o->acked_ms - t0;
    idem_step_key k = {o->gid, "payment", "charge", IDEM_FORWARD};
    idem_record rec = {0};
    int rc = IDEM_UNAVAILABLE;
    for (int t = 0; t < 5 && rc != IDEM_OK; t++) {
      idem_record_clear(&rec);
      rc = idem_step_lookup(c, &k, &rec, &e);
    }
    cr_assert_eq(rc, IDEM_OK, "%s: LookupStep: %s", o->gid, e.message);
    bool same = rec.state == IDEM_STATE_SUCCEEDED && rec.attempt == o->attempt && rec.has_result &&
                rec.result.code == 200 && rec.result.body_len == strlen(o->gid) &&
                memcmp(rec.result.body, o->gid, rec.result.body_len) == 0;
    if (!same) {
      r->lost_acked++;
      fprintf(stderr,
              "%s: acknowledged complete not found as acknowledged: state %s attempt %llu\n",
              o->gid, idem_state_name(rec.state), (unsigned long long)rec.attempt);
    }
    idem_record_clear(&rec);
  }
  idem_close(c);
  longest_pause(L, n, t0, r);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The longest gap between consecutive acknowledgements that ends after t0 (the last one before
 * t0 starts the first gap), and when it ended. */
static void longest_pause(const ha_load *L, int n, int64_t t0, ha_report *r) {
  int64_t *t = malloc(((size_t)n + 1) * sizeof *t);
  cr_assert(t);
  int k = 0;
  for (int i = 0; i < n; i++)
    if (L->ops[i].acked) t[k++] = L->ops[i].acked_ms;
  qsort(t, (size_t)k, sizeof *t, cmp_i64);
  r->pause_ms = 0;
  r->served_again_ms = -1;
  for (int i = 1; i < k; i++) {
    if (t[i] < t0) continue;
    int64_t gap = t[i] - (t[i - 1] > t0 - 1000 ? t[i - 1] : t0);
    if (gap > r->pause_ms) {
      r->pause_ms = gap;
      r->served_again_ms = t[i] - t0;
    }
  }
  free(t);
}

void ha_print(const char *scenario, const ha_report *r, const ha_load *L) {
  printf(
      "%s: load before the fault %.0f pairs/s (%d threads, replays %d, wrong replays %d); "
      "longest pause in acknowledgements %lld ms, served again %lld ms after the fault; first "
      "pair begun after the fault acknowledged after %lld ms; full throughput (>= 80%%) "
      "after %lld ms (of the lower of that and %.0f pairs/s over the last 2 s); pairs acknowledged "
      "before %d / after %d; "
      "lost acknowledged completes %d; "
      "duplicate PROCEEDs %d; unexpected errors %d; keys with an unknown outcome %d\n",
      scenario, r->rate_before, HA_THREADS, atomic_load(&L->replays), atomic_load(&L->replay_bad),
      (long long)r->pause_ms, (long long)r->served_again_ms, (long long)r->first_served_ms,
      (long long)r->full_rate_ms, r->rate_end, r->acked_before, r->acked_after, r->lost_acked,
      r->dup_proceeds, r->bad_errors, r->unknown);
  printf("%s: acknowledged pairs per second from 3 s before the fault:", scenario);
  for (int64_t t = r->t0 - 3000; t + 1000 <= L->t_stop; t += 1000)
    printf(" %.0f", ha_load_rate(L, t, t + 1000));
  printf("\n");
  fflush(stdout);
}

void ha_assert(const ha_report *r, const ha_load *L) {
  const char *min_env = getenv("IDEM_FAULT_MIN_RATE");
  double min_rate = min_env && *min_env ? atof(min_env) : 200;
  H_EXPECT_TIMING(r->rate_before >= min_rate, "load below %.0f pairs/s: %.0f", min_rate,
                  r->rate_before);
  cr_assert_eq(r->lost_acked, 0, "acknowledged completes lost");
  cr_assert_eq(r->dup_proceeds, 0, "duplicate PROCEEDs");
  cr_assert_eq(r->bad_errors, 0, "callers saw errors other than UNAVAILABLE / unknown outcome");
  cr_assert_eq(atomic_load(&L->replay_bad), 0, "replays that did not return the result");
  cr_assert_gt(r->acked_after, 0, "nothing acknowledged after the fault");
}
