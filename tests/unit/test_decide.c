/* test_decide.c — every row of the BeginStep tables (docs/api.md §3), with retention expiry, on
 * decide_begin. CompleteStep and ExtendLease are in test_decide_complete.c. */
#include <criterion/criterion.h>
#include <string.h>

#include "coord/decide.h"
#include "support_decide.h"

typedef struct fixture {
  step_key key;
  step_pair cur;
  decide_begin_in in;
  decide_begin_out out;
  step_writes w;
  err_t err;
  err_code rc;
} fixture;

static fixture fx(step_phase ph, const char *fp) {
  fixture f;
  memset(&f, 0, sizeof f);
  f.key = sd_key(ph);
  f.cur.now_ms = SD_NOW;
  f.in.fp = (const uint8_t *)fp;
  f.in.fp_len = fp ? strlen(fp) : 0;
  f.in.lease_ms = SD_LEASE;
  f.in.retention = (step_retention){SD_RET_S, SD_RET_S};
  f.w.n = 99; /* must be reset by decide */
  return f;
}

static void run(fixture *f) {
  f->in.key = &f->key;
  f->rc = decide_begin(&f->in, &f->cur, &f->out, &f->w, &f->err);
}

static void assert_proceed(const fixture *f, uint64_t attempt, bool takeover) {
  cr_assert_eq(f->rc, ERR_OK, "rc %d: %s", f->rc, f->err.msg);
  cr_assert_eq(f->out.decision, DECISION_PROCEED);
  cr_assert_eq(f->out.attempt, attempt);
  cr_assert_eq(f->out.takeover, takeover);
  cr_assert_eq(f->out.lease_expires_ms, SD_NOW + SD_LEASE);
  cr_assert_eq(f->out.expires_ms, 0);
  cr_assert_not(f->out.has_result);
}

/* Checks that w->recs[i] is the IN_PROGRESS record handed out by a PROCEED. */
static void assert_in_progress_write(const step_rec *r, step_phase ph, uint64_t attempt) {
  cr_assert(r->present);
  cr_assert_eq(r->key.phase, ph);
  cr_assert_str_eq(r->key.tenant, "acme");
  cr_assert_str_eq(r->key.global_id, "g-1");
  cr_assert_str_eq(r->key.service, "payments");
  cr_assert_str_eq(r->key.operation, "charge");
  cr_assert_eq(r->state, STATE_IN_PROGRESS);
  cr_assert_eq(r->attempt, attempt);
  cr_assert_eq(r->lease_expires_ms, SD_NOW + SD_LEASE);
  cr_assert_eq(r->expires_ms, 0);
  cr_assert_eq(r->updated_ms, SD_NOW);
  cr_assert_eq(r->outcome, OUTCOME_UNSPECIFIED);
  cr_assert_null(r->body);
  cr_assert_eq(r->body_len, 0);
  cr_assert_eq(r->completed_ms, 0);
}

static void assert_replay(const fixture *f, const step_rec *r) {
  cr_assert_eq(f->rc, ERR_OK, "rc %d: %s", f->rc, f->err.msg);
  cr_assert_eq(f->out.decision, DECISION_REPLAY);
  cr_assert(f->out.has_result);
  cr_assert_eq(f->out.outcome, r->outcome);
  cr_assert_eq(f->out.code, r->code);
  cr_assert_eq(f->out.body_len, r->body_len);
  cr_assert(memcmp(f->out.body, r->body, r->body_len) == 0);
  cr_assert_eq(f->out.completed_ms, r->completed_ms);
  cr_assert_eq(f->out.attempt, r->attempt);
  cr_assert_eq(f->out.expires_ms, r->expires_ms);
  cr_assert_eq(f->w.n, 0);
}

static void assert_err(const fixture *f, err_code code, const char *needle) {
  sd_assert_err(f->rc, &f->err, code, needle);
  cr_assert_eq(f->err.code, code);
}

/* ===================== FORWARD ===================== */

Test(forward, nothing_stored_creates_attempt_1) {
  fixture f = fx(PHASE_FORWARD, "fp-a");
  run(&f);
  assert_proceed(&f, 1, false);
  cr_assert_eq(f.w.n, 1);
  assert_in_progress_write(&f.w.recs[0], PHASE_FORWARD, 1);
  sd_assert_fp(&f.w.recs[0], "fp-a");
  cr_assert_eq(f.w.recs[0].created_ms, SD_NOW);
}

Test(forward, nothing_stored_without_fingerprint) {
  fixture f = fx(PHASE_FORWARD, NULL);
  run(&f);
  assert_proceed(&f, 1, false);
  cr_assert_eq(f.w.recs[0].fp_len, 0);
}

Test(forward, compensation_present_skips) {
  fixture f = fx(PHASE_FORWARD, "fp-a");
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_IN_PROGRESS, 1, NULL);
  run(&f);
  cr_assert_eq(f.rc, ERR_OK);
  cr_assert_eq(f.out.decision, DECISION_SKIP_ALREADY_COMPENSATED);
  cr_assert_eq(f.out.attempt, 0);
  cr_assert_eq(f.w.n, 0);
}

Test(forward, compensation_check_precedes_fingerprint_and_state) {
  fixture f = fx(PHASE_FORWARD, "fp-b");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 2, "fp-a"); /* mismatch and live lease */
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_SUCCEEDED, 0, NULL);
  run(&f);
  cr_assert_eq(f.rc, ERR_OK, "%s", f.err.msg);
  cr_assert_eq(f.out.decision, DECISION_SKIP_ALREADY_COMPENSATED);
  cr_assert_eq(f.out.attempt, 2);
  cr_assert_eq(f.out.expires_ms, f.cur.comp.expires_ms);
  cr_assert_eq(f.w.n, 0);
}

Test(forward, expired_compensation_counts_as_absent) {
  fixture f = fx(PHASE_FORWARD, "fp-a");
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_SUCCEEDED, 0, NULL);
  f.cur.comp.expires_ms = SD_NOW;
  run(&f);
  assert_proceed(&f, 1, false);
}

Test(forward, fingerprint_mismatch) {
  fixture f = fx(PHASE_FORWARD, "fp-b");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, "fp-a");
  sd_with_result(&f.cur.fwd, OUTCOME_SUCCEEDED, 200);
  run(&f);
  assert_err(&f, ERR_PRECONDITION, "fingerprint mismatch");
  cr_assert_eq(f.w.n, 0);
}

Test(forward, fingerprint_prefix_is_a_mismatch) {
  fixture f = fx(PHASE_FORWARD, "fp-a");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, "fp-ab");
  sd_with_result(&f.cur.fwd, OUTCOME_SUCCEEDED, 200);
  run(&f);
  assert_err(&f, ERR_PRECONDITION, "fingerprint mismatch");
}

Test(forward, fingerprint_check_precedes_in_progress) {
  fixture f = fx(PHASE_FORWARD, "fp-b");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, "fp-a");
  run(&f);
  assert_err(&f, ERR_PRECONDITION, "fingerprint mismatch");
}

Test(forward, empty_fingerprint_on_either_side_matches) {
  fixture f = fx(PHASE_FORWARD, NULL);
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, "fp-a");
  sd_with_result(&f.cur.fwd, OUTCOME_SUCCEEDED, 200);
  run(&f);
  assert_replay(&f, &f.cur.fwd);

  fixture g = fx(PHASE_FORWARD, "fp-b");
  g.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, NULL);
  sd_with_result(&g.cur.fwd, OUTCOME_SUCCEEDED, 200);
  run(&g);
  assert_replay(&g, &g.cur.fwd);
}

Test(forward, in_progress_with_live_lease_is_aborted) {
  fixture f = fx(PHASE_FORWARD, "fp-a");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, "fp-a");
  run(&f);
  assert_err(&f, ERR_ABORTED, "in progress");
  cr_assert_eq(f.err.retry_after_ms, 1234);
  cr_assert_eq(f.w.n, 0);
}

Test(forward, in_progress_one_ms_left) {
  fixture f = fx(PHASE_FORWARD, "fp-a");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, "fp-a");
  f.cur.fwd.lease_expires_ms = SD_NOW + 1;
  run(&f);
  assert_err(&f, ERR_ABORTED, "in progress");
  cr_assert_eq(f.err.retry_after_ms, 1);
}

Test(forward, in_progress_lease_ending_now_is_taken_over) {
  fixture f = fx(PHASE_FORWARD, "fp-a");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 3, "fp-a");
  f.cur.fwd.lease_expires_ms = SD_NOW;
  run(&f);
  assert_proceed(&f, 4, true);
  cr_assert_eq(f.w.n, 1);
  assert_in_progress_write(&f.w.recs[0], PHASE_FORWARD, 4);
  cr_assert_eq(f.w.recs[0].created_ms, SD_NOW - 9000, "created time is kept");
  sd_assert_fp(&f.w.recs[0], "fp-a");
}

Test(forward, takeover_adopts_fingerprint_when_record_had_none) {
  fixture f = fx(PHASE_FORWARD, "fp-new");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, NULL);
  f.cur.fwd.lease_expires_ms = SD_NOW - 1;
  run(&f);
  assert_proceed(&f, 2, true);
  sd_assert_fp(&f.w.recs[0], "fp-new");
}

Test(forward, released_proceeds_with_next_attempt) {
  fixture f = fx(PHASE_FORWARD, "fp-a");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_RELEASED, 2, "fp-a");
  sd_with_result(&f.cur.fwd, OUTCOME_RETRYABLE, 429);
  run(&f);
  assert_proceed(&f, 3, false);
  cr_assert_eq(f.w.n, 1);
  assert_in_progress_write(&f.w.recs[0], PHASE_FORWARD, 3); /* result cleared */
  cr_assert_eq(f.w.recs[0].code, 0);
  sd_assert_fp(&f.w.recs[0], "fp-a");
}

Test(forward, released_adopts_fingerprint_when_record_had_none) {
  fixture f = fx(PHASE_FORWARD, "fp-new");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_RELEASED, 1, NULL);
  run(&f);
  assert_proceed(&f, 2, false);
  sd_assert_fp(&f.w.recs[0], "fp-new");
}

Test(forward, succeeded_replays) {
  fixture f = fx(PHASE_FORWARD, "fp-a");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 2, "fp-a");
  sd_with_result(&f.cur.fwd, OUTCOME_SUCCEEDED, 201);
  run(&f);
  assert_replay(&f, &f.cur.fwd);
  cr_assert_eq(f.out.outcome, OUTCOME_SUCCEEDED);
  cr_assert_eq(f.out.attempt, 2);
  cr_assert_eq(f.out.body, sd_stored_body, "the body is borrowed from cur");
}

Test(forward, failed_replays) {
  fixture f = fx(PHASE_FORWARD, "fp-a");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_FAILED, 1, "fp-a");
  sd_with_result(&f.cur.fwd, OUTCOME_FAILED, 402);
  run(&f);
  assert_replay(&f, &f.cur.fwd);
  cr_assert_eq(f.out.outcome, OUTCOME_FAILED);
  cr_assert_eq(f.out.code, 402);
}

Test(forward, unknown_replays) {
  fixture f = fx(PHASE_FORWARD, "fp-a");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_UNKNOWN, 1, "fp-a");
  sd_with_result(&f.cur.fwd, OUTCOME_UNKNOWN, 500);
  run(&f);
  assert_replay(&f, &f.cur.fwd);
  cr_assert_eq(f.out.outcome, OUTCOME_UNKNOWN);
}

Test(forward, replay_of_empty_body) {
  fixture f = fx(PHASE_FORWARD, "fp-a");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, "fp-a");
  f.cur.fwd.outcome = OUTCOME_SUCCEEDED;
  run(&f);
  cr_assert_eq(f.out.decision, DECISION_REPLAY);
  cr_assert_eq(f.out.body_len, 0);
  cr_assert_null(f.out.body);
}

Test(forward, abandoned_skips) {
  fixture f = fx(PHASE_FORWARD, "fp-a");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_ABANDONED, 3, "fp-a");
  run(&f);
  cr_assert_eq(f.rc, ERR_OK);
  cr_assert_eq(f.out.decision, DECISION_SKIP_ALREADY_COMPENSATED);
  cr_assert_eq(f.out.attempt, 3);
  cr_assert_eq(f.w.n, 0);
}

Test(forward, retention_expired_record_is_new_again) {
  fixture f = fx(PHASE_FORWARD, "fp-b");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 5, "fp-a"); /* would be a mismatch */
  sd_with_result(&f.cur.fwd, OUTCOME_SUCCEEDED, 200);
  f.cur.fwd.expires_ms = SD_NOW; /* expires_ms <= now: gone */
  run(&f);
  assert_proceed(&f, 1, false);
  assert_in_progress_write(&f.w.recs[0], PHASE_FORWARD, 1);
  cr_assert_eq(f.w.recs[0].created_ms, SD_NOW);
  sd_assert_fp(&f.w.recs[0], "fp-b");
}

Test(forward, record_one_ms_before_expiry_still_replays) {
  fixture f = fx(PHASE_FORWARD, "fp-a");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, "fp-a");
  sd_with_result(&f.cur.fwd, OUTCOME_SUCCEEDED, 200);
  f.cur.fwd.expires_ms = SD_NOW + 1;
  run(&f);
  assert_replay(&f, &f.cur.fwd);
}

Test(forward, invalid_phase_is_refused) {
  fixture f = fx(PHASE_UNSPECIFIED, "fp-a");
  run(&f);
  assert_err(&f, ERR_INVALID, "key.phase");
  cr_assert_eq(f.w.n, 0);
}

/* ===================== COMPENSATION ===================== */

static void assert_null_comp_write(const step_rec *c, const char *fp) {
  cr_assert(c->present);
  cr_assert_eq(c->key.phase, PHASE_COMPENSATION);
  cr_assert_eq(c->state, STATE_SUCCEEDED);
  cr_assert_eq(c->attempt, 0);
  cr_assert_eq(c->outcome, OUTCOME_SUCCEEDED);
  cr_assert_eq(c->code, 0);
  cr_assert_eq(c->body_len, 0);
  cr_assert_eq(c->completed_ms, SD_NOW);
  cr_assert_eq(c->created_ms, SD_NOW);
  cr_assert_eq(c->updated_ms, SD_NOW);
  cr_assert_eq(c->lease_expires_ms, 0);
  cr_assert_eq(c->expires_ms, SD_RET_END);
  sd_assert_fp(c, fp);
}

static void assert_abandoned_write(const step_rec *r, uint64_t attempt) {
  cr_assert(r->present);
  cr_assert_eq(r->key.phase, PHASE_FORWARD);
  cr_assert_str_eq(r->key.global_id, "g-1");
  cr_assert_eq(r->state, STATE_ABANDONED);
  cr_assert_eq(r->attempt, attempt);
  cr_assert_eq(r->outcome, OUTCOME_UNSPECIFIED);
  cr_assert_eq(r->body_len, 0);
  cr_assert_eq(r->lease_expires_ms, 0);
  cr_assert_eq(r->expires_ms, SD_RET_END);
  cr_assert_eq(r->updated_ms, SD_NOW);
}

static void assert_skip_null(const fixture *f, int64_t expires) {
  cr_assert_eq(f->rc, ERR_OK, "rc %d: %s", f->rc, f->err.msg);
  cr_assert_eq(f->out.decision, DECISION_SKIP_NULL_COMPENSATION);
  cr_assert_eq(f->out.attempt, 0);
  cr_assert_eq(f->out.expires_ms, expires);
}

Test(compensation, fingerprint_mismatch_comes_first) {
  fixture f = fx(PHASE_COMPENSATION, "fp-b");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, "x"); /* would be ABORTED */
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_IN_PROGRESS, 1, "fp-a");
  run(&f);
  assert_err(&f, ERR_PRECONDITION, "fingerprint mismatch");
  cr_assert_eq(f.w.n, 0);
}

Test(compensation, forward_fingerprint_is_not_compared) {
  fixture f = fx(PHASE_COMPENSATION, "fp-comp");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, "fp-fwd");
  sd_with_result(&f.cur.fwd, OUTCOME_SUCCEEDED, 200);
  run(&f);
  assert_proceed(&f, 1, false);
}

Test(compensation, no_forward_writes_tombstone_and_null_compensation) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  run(&f);
  assert_skip_null(&f, SD_RET_END);
  cr_assert_eq(f.w.n, 2);
  assert_abandoned_write(&f.w.recs[0], 0);
  cr_assert_eq(f.w.recs[0].created_ms, SD_NOW);
  cr_assert_eq(f.w.recs[0].fp_len, 0);
  assert_null_comp_write(&f.w.recs[1], "fp-c");
}

Test(compensation, released_forward_is_treated_as_none) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_RELEASED, 2, "fp-f");
  sd_with_result(&f.cur.fwd, OUTCOME_RETRYABLE, 429);
  run(&f);
  assert_skip_null(&f, SD_RET_END);
  cr_assert_eq(f.w.n, 2);
  assert_abandoned_write(&f.w.recs[0], 2);
  sd_assert_fp(&f.w.recs[0], "fp-f");
  cr_assert_eq(f.w.recs[0].created_ms, SD_NOW - 9000);
  assert_null_comp_write(&f.w.recs[1], "fp-c");
}

Test(compensation, retention_expired_forward_is_none) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 4, "fp-f");
  f.cur.fwd.expires_ms = SD_NOW - 1;
  run(&f);
  assert_skip_null(&f, SD_RET_END);
  cr_assert_eq(f.w.n, 2);
  assert_abandoned_write(&f.w.recs[0], 0);
  cr_assert_eq(f.w.recs[0].created_ms, SD_NOW);
}

Test(compensation, no_forward_but_compensation_in_progress_decides) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_IN_PROGRESS, 1, "fp-c");
  run(&f);
  assert_err(&f, ERR_ABORTED, "in progress");
  cr_assert_eq(f.err.retry_after_ms, 1234);
  cr_assert_eq(f.w.n, 0);
}

Test(compensation, no_forward_but_compensation_finished_replays) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_SUCCEEDED, 1, "fp-c");
  sd_with_result(&f.cur.comp, OUTCOME_SUCCEEDED, 200);
  run(&f);
  assert_replay(&f, &f.cur.comp);
}

Test(compensation, released_forward_with_null_compensation_skips_again) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_RELEASED, 1, NULL);
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_SUCCEEDED, 0, "fp-c");
  f.cur.comp.outcome = OUTCOME_SUCCEEDED;
  run(&f);
  assert_skip_null(&f, f.cur.comp.expires_ms);
  cr_assert_eq(f.w.n, 0);
}

Test(compensation, failed_forward_writes_null_compensation_only) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_FAILED, 1, "fp-f");
  sd_with_result(&f.cur.fwd, OUTCOME_FAILED, 402);
  run(&f);
  assert_skip_null(&f, SD_RET_END);
  cr_assert_eq(f.w.n, 1);
  assert_null_comp_write(&f.w.recs[0], "fp-c");
}

Test(compensation, failed_forward_with_null_compensation_skips_again) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_FAILED, 1, "fp-f");
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_SUCCEEDED, 0, "fp-c");
  run(&f);
  assert_skip_null(&f, f.cur.comp.expires_ms);
  cr_assert_eq(f.w.n, 0);
}

Test(compensation, failed_forward_with_released_compensation_proceeds) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_FAILED, 1, "fp-f");
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_RELEASED, 1, "fp-c");
  run(&f);
  assert_proceed(&f, 2, false);
  cr_assert_eq(f.w.n, 1);
  assert_in_progress_write(&f.w.recs[0], PHASE_COMPENSATION, 2);
}

Test(compensation, forward_in_progress_is_aborted) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, "fp-f");
  f.cur.fwd.lease_expires_ms = SD_NOW + 777;
  run(&f);
  assert_err(&f, ERR_ABORTED, "in progress");
  cr_assert_eq(f.err.retry_after_ms, 777);
  cr_assert_eq(f.w.n, 0);
}

Test(compensation, abandoned_forward_with_null_compensation_skips) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_ABANDONED, 0, NULL);
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_SUCCEEDED, 0, "fp-c");
  f.cur.comp.outcome = OUTCOME_SUCCEEDED;
  run(&f);
  assert_skip_null(&f, f.cur.comp.expires_ms);
  cr_assert_eq(f.w.n, 0);
}

Test(compensation, abandoned_forward_without_compensation_proceeds) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_ABANDONED, 2, "fp-f");
  run(&f);
  assert_proceed(&f, 1, false);
  cr_assert_eq(f.w.n, 1);
  assert_in_progress_write(&f.w.recs[0], PHASE_COMPENSATION, 1);
  sd_assert_fp(&f.w.recs[0], "fp-c");
}

Test(compensation, abandoned_forward_with_running_compensation_is_aborted) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_ABANDONED, 2, "fp-f");
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_IN_PROGRESS, 1, "fp-c");
  run(&f);
  assert_err(&f, ERR_ABORTED, "in progress");
}

Test(compensation, expired_forward_is_abandoned_then_compensation_proceeds) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 3, "fp-f");
  f.cur.fwd.lease_expires_ms = SD_NOW;
  run(&f);
  assert_proceed(&f, 1, false);
  cr_assert_eq(f.w.n, 2);
  assert_abandoned_write(&f.w.recs[0], 3);
  sd_assert_fp(&f.w.recs[0], "fp-f");
  cr_assert_eq(f.w.recs[0].created_ms, SD_NOW - 9000);
  assert_in_progress_write(&f.w.recs[1], PHASE_COMPENSATION, 1);
}

Test(compensation, expired_forward_abandon_is_kept_when_compensation_conflicts) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 3, "fp-f");
  f.cur.fwd.lease_expires_ms = SD_NOW - 10;
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_IN_PROGRESS, 1, "fp-c");
  f.cur.comp.lease_expires_ms = SD_NOW + 50;
  run(&f);
  assert_err(&f, ERR_ABORTED, "in progress");
  cr_assert_eq(f.err.retry_after_ms, 50);
  cr_assert_eq(f.w.n, 1);
  assert_abandoned_write(&f.w.recs[0], 3);
}

Test(compensation, succeeded_forward_without_compensation_proceeds) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, "fp-f");
  sd_with_result(&f.cur.fwd, OUTCOME_SUCCEEDED, 200);
  run(&f);
  assert_proceed(&f, 1, false);
  cr_assert_eq(f.w.n, 1);
  assert_in_progress_write(&f.w.recs[0], PHASE_COMPENSATION, 1);
  cr_assert_eq(f.w.recs[0].created_ms, SD_NOW);
  sd_assert_fp(&f.w.recs[0], "fp-c");
}

Test(compensation, unknown_forward_without_compensation_proceeds) {
  fixture f = fx(PHASE_COMPENSATION, NULL);
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_UNKNOWN, 2, "fp-f");
  sd_with_result(&f.cur.fwd, OUTCOME_UNKNOWN, 500);
  run(&f);
  assert_proceed(&f, 1, false);
  cr_assert_eq(f.w.n, 1);
  assert_in_progress_write(&f.w.recs[0], PHASE_COMPENSATION, 1);
}

Test(compensation, compensation_in_progress_is_aborted) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, "fp-f");
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_IN_PROGRESS, 2, "fp-c");
  f.cur.comp.lease_expires_ms = SD_NOW + 42;
  run(&f);
  assert_err(&f, ERR_ABORTED, "in progress");
  cr_assert_eq(f.err.retry_after_ms, 42);
  cr_assert_eq(f.w.n, 0);
}

Test(compensation, expired_compensation_is_taken_over) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, "fp-f");
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_IN_PROGRESS, 2, "fp-c");
  f.cur.comp.lease_expires_ms = SD_NOW - 1;
  run(&f);
  assert_proceed(&f, 3, true);
  cr_assert_eq(f.w.n, 1);
  assert_in_progress_write(&f.w.recs[0], PHASE_COMPENSATION, 3);
}

Test(compensation, released_compensation_next_attempt) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_UNKNOWN, 1, "fp-f");
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_RELEASED, 1, "fp-c");
  sd_with_result(&f.cur.comp, OUTCOME_RETRYABLE, 503);
  run(&f);
  assert_proceed(&f, 2, false);
  cr_assert_eq(f.w.n, 1);
  assert_in_progress_write(&f.w.recs[0], PHASE_COMPENSATION, 2);
}

Test(compensation, finished_compensation_replays) {
  static const step_state states[] = {STATE_SUCCEEDED, STATE_FAILED, STATE_UNKNOWN};
  static const step_outcome outcomes[] = {OUTCOME_SUCCEEDED, OUTCOME_FAILED, OUTCOME_UNKNOWN};
  for (int i = 0; i < 3; i++) {
    fixture f = fx(PHASE_COMPENSATION, "fp-c");
    f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, "fp-f");
    f.cur.comp = sd_rec(PHASE_COMPENSATION, states[i], 1, "fp-c");
    sd_with_result(&f.cur.comp, outcomes[i], 300 + i);
    run(&f);
    assert_replay(&f, &f.cur.comp);
    cr_assert_eq(f.out.outcome, outcomes[i]);
    cr_assert_eq(f.out.code, 300 + i);
  }
}

Test(compensation, abandoned_compensation_skips_already_compensated) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, "fp-f");
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_ABANDONED, 1, "fp-c");
  run(&f);
  cr_assert_eq(f.rc, ERR_OK);
  cr_assert_eq(f.out.decision, DECISION_SKIP_ALREADY_COMPENSATED);
  cr_assert_eq(f.w.n, 0);
}

Test(compensation, executed_compensation_with_attempt_1_is_not_null) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_ABANDONED, 1, "fp-f");
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_SUCCEEDED, 1, "fp-c");
  sd_with_result(&f.cur.comp, OUTCOME_SUCCEEDED, 200);
  run(&f);
  assert_replay(&f, &f.cur.comp);
}

Test(compensation, retention_expired_compensation_is_new_again) {
  fixture f = fx(PHASE_COMPENSATION, "fp-new");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, "fp-f");
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_SUCCEEDED, 1, "fp-old"); /* would mismatch */
  f.cur.comp.expires_ms = SD_NOW;
  run(&f);
  assert_proceed(&f, 1, false);
  sd_assert_fp(&f.w.recs[0], "fp-new");
}

Test(compensation, expired_pair_gets_new_tombstone) {
  fixture f = fx(PHASE_COMPENSATION, "fp-c");
  f.cur.fwd = sd_rec(PHASE_FORWARD, STATE_ABANDONED, 0, NULL);
  f.cur.fwd.expires_ms = SD_NOW - 5;
  f.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_SUCCEEDED, 0, "fp-c");
  f.cur.comp.expires_ms = SD_NOW - 5;
  run(&f);
  assert_skip_null(&f, SD_RET_END);
  cr_assert_eq(f.w.n, 2);
}
