/* idem_step_run: begin → action → complete; replays instead of re-running; waits out a step in
 * progress; reports takeovers; RETRYABLE runs again. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "harness.h"

TestSuite(step_run, .init = h_setup, .fini = h_teardown, .timeout = 60);

typedef struct action {
  atomic_int calls;
  idem_outcome outcome;
  uint64_t last_attempt;
  bool last_takeover;
} action;

static void charge(void *arg, const idem_step_ctx *ctx, idem_step_output *out) {
  action *a = arg;
  atomic_fetch_add(&a->calls, 1);
  a->last_attempt = ctx->attempt;
  a->last_takeover = ctx->takeover;
  out->outcome = a->outcome;
  out->code = 200;
  out->body = "charged";
  out->body_len = 7;
}

Test(step_run, runs_once_then_replays) {
  char gid[96];
  h_unique("run", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  uint8_t fp[IDEM_FINGERPRINT_LEN];
  idem_fingerprint("amount=100", 10, fp);
  action a = {.outcome = IDEM_OUTCOME_SUCCEEDED};
  idem_run_report rep = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_run(H.c, &k, fp, sizeof fp, charge, &a, NULL, &rep, &e), IDEM_OK, "%s",
               e.message);
  cr_assert(rep.ran);
  cr_assert_not(rep.replayed);
  cr_assert_eq(rep.attempt, 1);
  idem_run_report_clear(&rep);
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(idem_step_run(H.c, &k, fp, sizeof fp, charge, &a, NULL, &rep, &e), IDEM_OK);
    cr_assert_not(rep.ran);
    cr_assert(rep.replayed);
    cr_assert_eq(rep.result.code, 200);
    cr_assert_eq(rep.result.body_len, 7);
    cr_assert_eq(memcmp(rep.result.body, "charged", 7), 0);
    idem_run_report_clear(&rep);
  }
  cr_assert_eq(atomic_load(&a.calls), 1, "the action ran more than once");
}

Test(step_run, fingerprint_mismatch_is_reported) {
  char gid[96];
  h_unique("run", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  uint8_t f1[IDEM_FINGERPRINT_LEN], f2[IDEM_FINGERPRINT_LEN];
  idem_fingerprint("amount=100", 10, f1);
  idem_fingerprint("amount=999", 10, f2);
  cr_assert_neq(memcmp(f1, f2, sizeof f1), 0);
  action a = {.outcome = IDEM_OUTCOME_SUCCEEDED};
  idem_error e = {0};
  cr_assert_eq(idem_step_run(H.c, &k, f1, sizeof f1, charge, &a, NULL, NULL, &e), IDEM_OK);
  cr_assert_eq(idem_step_run(H.c, &k, f2, sizeof f2, charge, &a, NULL, NULL, &e),
               IDEM_FAILED_PRECONDITION);
  cr_assert_eq(atomic_load(&a.calls), 1);
}

Test(step_run, retryable_outcome_lets_the_next_run_proceed) {
  char gid[96];
  h_unique("run", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  action a = {.outcome = IDEM_OUTCOME_RETRYABLE};
  idem_run_report rep = {0};
  idem_error e = {0};
  /* the action failed before any side effect: not settled, the key is released */
  cr_assert_eq(idem_step_run(H.c, &k, NULL, 0, charge, &a, NULL, &rep, &e), IDEM_STEP_FAILED);
  cr_assert(rep.ran);
  cr_assert_eq(rep.result.outcome, IDEM_OUTCOME_RETRYABLE);
  idem_run_report_clear(&rep);
  a.outcome = IDEM_OUTCOME_SUCCEEDED;
  cr_assert_eq(idem_step_run(H.c, &k, NULL, 0, charge, &a, NULL, &rep, &e), IDEM_OK);
  cr_assert(rep.ran);
  cr_assert_eq(rep.attempt, 2);
  cr_assert_eq(atomic_load(&a.calls), 2);
  idem_run_report_clear(&rep);
}

/* A crashed caller: began k with a 300 ms lease and never completed. */
static void crashed_caller(const idem_step_key *k) {
  idem_begin b = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(H.c, k, NULL, 0, 300, &b, &e), IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);
}

Test(step_run, waits_for_a_step_in_progress_and_reports_takeover) {
  char gid[96];
  h_unique("run", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  idem_error e = {0};
  crashed_caller(&k);
  action a = {.outcome = IDEM_OUTCOME_SUCCEEDED};
  idem_run_report rep = {0};
  idem_run_options ro = {.deadline_ms = 10000};
  cr_assert_eq(idem_step_run(H.c, &k, NULL, 0, charge, &a, &ro, &rep, &e), IDEM_OK, "%s",
               e.message);
  cr_assert(rep.ran);
  cr_assert(rep.takeover);
  cr_assert_eq(rep.attempt, 2);
  cr_assert_eq(rep.begin_retries, 0, "it waited on the coordinator for the lease to expire");
  cr_assert(a.last_takeover);
  idem_run_report_clear(&rep);
}

Test(step_run, without_waiting_retries_until_the_lease_expired) {
  char gid[96];
  h_unique("run", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  idem_error e = {0};
  crashed_caller(&k);
  action a = {.outcome = IDEM_OUTCOME_SUCCEEDED};
  idem_run_report rep = {0};
  idem_run_options ro = {.deadline_ms = 10000, .no_wait = true};
  cr_assert_eq(idem_step_run(H.c, &k, NULL, 0, charge, &a, &ro, &rep, &e), IDEM_OK, "%s",
               e.message);
  cr_assert(rep.takeover);
  cr_assert_eq(rep.attempt, 2);
  cr_assert_gt(rep.begin_retries, 0, "it slept and retried until the lease expired");
  idem_run_report_clear(&rep);
}

Test(step_run, compensation_without_forward_does_not_run) {
  char gid[96];
  h_unique("run", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_COMPENSATION};
  action a = {.outcome = IDEM_OUTCOME_SUCCEEDED};
  idem_run_report rep = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_run(H.c, &k, NULL, 0, charge, &a, NULL, &rep, &e), IDEM_OK);
  cr_assert_eq(rep.decision, IDEM_DECISION_SKIP_NULL_COMPENSATION);
  cr_assert_not(rep.ran);
  cr_assert_eq(atomic_load(&a.calls), 0);
  idem_run_report_clear(&rep);
}

/* the step helper keeps the lease alive while its action runs, as every SDK's does:
 * another caller's BeginStep three leases into the action meets the step in progress, never a
 * takeover, and the run completes as attempt 1. */
typedef struct slow_action {
  const idem_step_key *key;
  int begin_rc;          /* the other caller's BeginStep inside the action */
  idem_decision decided; /* its decision when it answered */
} slow_action;

static void slow_charge(void *arg, const idem_step_ctx *ctx, idem_step_output *out) {
  (void)ctx;
  slow_action *a = arg;
  /* three leases of 300 ms: without a keeper the lease has long expired (not a wait: the action
   * outlasting its lease is the test's subject) */
  struct timespec ts = {.tv_sec = 0, .tv_nsec = 900 * 1000000L};
  nanosleep(&ts, NULL);
  idem_begin b;
  idem_error e = {0};
  a->begin_rc = idem_step_begin(H.c, a->key, NULL, 0, 300, &b, &e);
  if (a->begin_rc == IDEM_OK) a->decided = b.decision;
  idem_begin_clear(&b);
  out->outcome = IDEM_OUTCOME_SUCCEEDED;
  out->code = 200;
}

Test(step_run, keeps_the_lease_while_the_action_runs) {
  char gid[96];
  h_unique("run", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  slow_action a = {.key = &k};
  idem_run_report rep = {0};
  idem_error e = {0};
  idem_run_options ro = {.deadline_ms = 10000, .lease_ms = 300};
  cr_assert_eq(idem_step_run(H.c, &k, NULL, 0, slow_charge, &a, &ro, &rep, &e), IDEM_OK, "%s",
               e.message);
  cr_assert_eq(a.begin_rc, IDEM_ABORTED,
               "the other caller's BeginStep answered %s (decision %d): the lease was not kept",
               idem_strerror(a.begin_rc), (int)a.decided);
  cr_assert_eq(rep.attempt, 1);
  cr_assert_not(rep.takeover);
  idem_run_report_clear(&rep);
}
