/* test_decide_complete.c — the CompleteStep and ExtendLease rules (docs/api.md §4) and retention
 * expiry, on the pure functions of decide.h. The BeginStep tables are in test_decide.c. */
#include <criterion/criterion.h>
#include <string.h>

#include "coord/decide.h"
#include "support_decide.h"

/* ===================== CompleteStep ===================== */

typedef struct cfix {
  step_key key;
  step_pair cur;
  decide_complete_in in;
  step_writes w;
  const step_rec *after;
  err_t err;
  err_code rc;
} cfix;

static uint8_t req_body[] = "request-body";

static cfix cfx(step_phase ph, uint64_t attempt, step_outcome o) {
  cfix c;
  memset(&c, 0, sizeof c);
  c.key = sd_key(ph);
  c.cur.now_ms = SD_NOW;
  c.in.attempt = attempt;
  c.in.outcome = o;
  c.in.code = 201;
  c.in.body = req_body;
  c.in.body_len = sizeof req_body - 1;
  c.in.retention = (step_retention){SD_RET_S, SD_RET_S};
  c.w.n = 7;
  return c;
}

static void crun(cfix *c) {
  c->in.key = &c->key;
  c->rc = decide_complete(&c->in, &c->cur, &c->w, &c->after, &c->err);
}

static void assert_cerr(const cfix *c, err_code code, const char *needle) {
  sd_assert_err(c->rc, &c->err, code, needle);
  cr_assert_eq(c->w.n, 0);
  cr_assert_null(c->after);
}

Test(complete, no_record_is_not_found) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  crun(&c);
  assert_cerr(&c, ERR_NOT_FOUND, "no such step");
}

Test(complete, retention_expired_record_is_not_found) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  c.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, NULL);
  c.cur.fwd.expires_ms = SD_NOW;
  crun(&c);
  assert_cerr(&c, ERR_NOT_FOUND, "no such step");
}

Test(complete, other_phase_record_does_not_count) {
  cfix c = cfx(PHASE_COMPENSATION, 1, OUTCOME_SUCCEEDED);
  c.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, NULL);
  crun(&c);
  assert_cerr(&c, ERR_NOT_FOUND, "no such step");
}

Test(complete, attempt_never_issued) {
  cfix c = cfx(PHASE_FORWARD, 3, OUTCOME_SUCCEEDED);
  c.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 2, NULL);
  crun(&c);
  assert_cerr(&c, ERR_PRECONDITION, "attempt 3 was never issued");
}

Test(complete, null_compensation_attempt_was_never_issued) {
  cfix c = cfx(PHASE_COMPENSATION, 1, OUTCOME_SUCCEEDED);
  c.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_SUCCEEDED, 0, NULL);
  crun(&c);
  assert_cerr(&c, ERR_PRECONDITION, "never issued");
}

Test(complete, abandoned_is_lease_lost) {
  cfix c = cfx(PHASE_FORWARD, 2, OUTCOME_SUCCEEDED);
  c.cur.fwd = sd_rec(PHASE_FORWARD, STATE_ABANDONED, 2, NULL);
  crun(&c);
  assert_cerr(&c, ERR_ABORTED, "lease lost: the step was abandoned");
}

Test(complete, abandoned_precedes_superseded) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  c.cur.fwd = sd_rec(PHASE_FORWARD, STATE_ABANDONED, 2, NULL);
  crun(&c);
  assert_cerr(&c, ERR_ABORTED, "abandoned");
}

Test(complete, superseded_attempt_is_lease_lost) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  c.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 2, NULL);
  crun(&c);
  assert_cerr(&c, ERR_ABORTED, "lease lost: attempt 1 was superseded by attempt 2");
}

Test(complete, superseded_by_a_finished_attempt) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  c.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 2, NULL);
  sd_with_result(&c.cur.fwd, OUTCOME_SUCCEEDED, 201);
  crun(&c);
  assert_cerr(&c, ERR_ABORTED, "superseded");
}

static void check_completion(step_outcome o, step_state want, step_phase ph) {
  cfix c = cfx(ph, 2, o);
  step_rec *r = ph == PHASE_FORWARD ? &c.cur.fwd : &c.cur.comp;
  *r = sd_rec(ph, STATE_IN_PROGRESS, 2, "fp-a");
  crun(&c);
  cr_assert_eq(c.rc, ERR_OK, "rc %d: %s", c.rc, c.err.msg);
  cr_assert_eq(c.w.n, 1);
  const step_rec *n = &c.w.recs[0];
  cr_assert_eq(c.after, n);
  cr_assert_eq(n->key.phase, ph);
  cr_assert_eq(n->state, want);
  cr_assert_eq(n->attempt, 2);
  cr_assert_eq(n->outcome, o);
  cr_assert_eq(n->code, 201);
  cr_assert_eq(n->body, req_body, "the body is borrowed from the request");
  cr_assert_eq(n->body_len, sizeof req_body - 1);
  cr_assert_eq(n->completed_ms, SD_NOW);
  cr_assert_eq(n->updated_ms, SD_NOW);
  cr_assert_eq(n->created_ms, SD_NOW - 9000);
  cr_assert_eq(n->lease_expires_ms, 0);
  cr_assert_eq(n->expires_ms, SD_RET_END);
  sd_assert_fp(n, "fp-a");
}

Test(complete, succeeded_stores_result) {
  check_completion(OUTCOME_SUCCEEDED, STATE_SUCCEEDED, PHASE_FORWARD);
}
Test(complete, failed_stores_result) {
  check_completion(OUTCOME_FAILED, STATE_FAILED, PHASE_FORWARD);
}
Test(complete, unknown_stores_result) {
  check_completion(OUTCOME_UNKNOWN, STATE_UNKNOWN, PHASE_FORWARD);
}
Test(complete, retryable_releases) {
  check_completion(OUTCOME_RETRYABLE, STATE_RELEASED, PHASE_FORWARD);
}
Test(complete, compensation_record) {
  check_completion(OUTCOME_SUCCEEDED, STATE_SUCCEEDED, PHASE_COMPENSATION);
}

Test(complete, expired_lease_without_takeover_is_accepted) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  c.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, NULL);
  c.cur.fwd.lease_expires_ms = SD_NOW - 60000;
  crun(&c);
  cr_assert_eq(c.rc, ERR_OK, "%s", c.err.msg);
  cr_assert_eq(c.w.n, 1);
  cr_assert_eq(c.w.recs[0].state, STATE_SUCCEEDED);
}

Test(complete, empty_body_is_stored_as_null) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  c.in.body = NULL;
  c.in.body_len = 0;
  c.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, NULL);
  crun(&c);
  cr_assert_eq(c.rc, ERR_OK);
  cr_assert_null(c.w.recs[0].body);
  cr_assert_eq(c.w.recs[0].body_len, 0);
}

/* The record as a completion of attempt 1 with cfx's defaults left it. */
static step_rec finished(step_state st, step_outcome o) {
  step_rec r = sd_rec(PHASE_FORWARD, st, 1, NULL);
  r.outcome = o;
  r.code = 201;
  r.body = req_body;
  r.body_len = sizeof req_body - 1;
  r.completed_ms = SD_NOW - 100;
  return r;
}

Test(complete, identical_repeat_is_ok_without_write) {
  static const step_state states[] = {STATE_SUCCEEDED, STATE_FAILED, STATE_UNKNOWN, STATE_RELEASED};
  static const step_outcome outcomes[] = {OUTCOME_SUCCEEDED, OUTCOME_FAILED, OUTCOME_UNKNOWN,
                                          OUTCOME_RETRYABLE};
  for (int i = 0; i < 4; i++) {
    cfix c = cfx(PHASE_FORWARD, 1, outcomes[i]);
    c.cur.fwd = finished(states[i], outcomes[i]);
    uint8_t copy[sizeof req_body];
    memcpy(copy, req_body, sizeof copy);
    c.in.body = copy; /* equal bytes, different pointer */
    crun(&c);
    cr_assert_eq(c.rc, ERR_OK, "state %d: %s", states[i], c.err.msg);
    cr_assert_eq(c.w.n, 0);
    cr_assert_eq(c.after, &c.cur.fwd);
  }
}

Test(complete, identical_repeat_with_empty_body) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  c.in.body = NULL;
  c.in.body_len = 0;
  c.cur.fwd = finished(STATE_SUCCEEDED, OUTCOME_SUCCEEDED);
  c.cur.fwd.body = NULL;
  c.cur.fwd.body_len = 0;
  crun(&c);
  cr_assert_eq(c.rc, ERR_OK, "%s", c.err.msg);
  cr_assert_eq(c.after, &c.cur.fwd);
}

Test(complete, different_outcome_is_refused) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_FAILED);
  c.cur.fwd = finished(STATE_SUCCEEDED, OUTCOME_SUCCEEDED);
  crun(&c);
  assert_cerr(&c, ERR_PRECONDITION, "already finished with a different result");
}

Test(complete, different_code_is_refused) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  c.in.code = 200;
  c.cur.fwd = finished(STATE_SUCCEEDED, OUTCOME_SUCCEEDED);
  crun(&c);
  assert_cerr(&c, ERR_PRECONDITION, "different result");
}

Test(complete, different_body_is_refused) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  c.cur.fwd = finished(STATE_SUCCEEDED, OUTCOME_SUCCEEDED);
  static uint8_t other[] = "request-bodx"; /* same length, one byte differs */
  c.in.body = other;
  crun(&c);
  assert_cerr(&c, ERR_PRECONDITION, "different result");

  cfix d = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  d.cur.fwd = finished(STATE_SUCCEEDED, OUTCOME_SUCCEEDED);
  d.in.body_len -= 1; /* prefix */
  crun(&d);
  assert_cerr(&d, ERR_PRECONDITION, "different result");
}

Test(complete, released_then_different_outcome_is_refused) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  c.cur.fwd = finished(STATE_RELEASED, OUTCOME_RETRYABLE);
  crun(&c);
  assert_cerr(&c, ERR_PRECONDITION, "different result");
}

/* ===================== ExtendLease ===================== */

typedef struct efix {
  step_key key;
  step_pair cur;
  step_writes w;
  int64_t lease;
  err_t err;
  err_code rc;
} efix;

static efix efx(step_phase ph) {
  efix e;
  memset(&e, 0, sizeof e);
  e.key = sd_key(ph);
  e.cur.now_ms = SD_NOW;
  e.w.n = 5;
  e.lease = -1;
  return e;
}

static void erun(efix *e, uint64_t attempt, uint32_t lease_ms) {
  e->rc = decide_extend(&e->key, attempt, lease_ms, &e->cur, &e->w, &e->lease, &e->err);
}

static void assert_eerr(const efix *e, err_code code, const char *needle) {
  sd_assert_err(e->rc, &e->err, code, needle);
  cr_assert_eq(e->w.n, 0);
  cr_assert_eq(e->lease, 0);
}

Test(extend, no_record_is_not_found) {
  efix e = efx(PHASE_FORWARD);
  erun(&e, 1, 9000);
  assert_eerr(&e, ERR_NOT_FOUND, "no such step");
}

Test(extend, retention_expired_is_not_found) {
  efix e = efx(PHASE_FORWARD);
  e.cur.fwd = sd_rec(PHASE_FORWARD, STATE_RELEASED, 1, NULL);
  e.cur.fwd.expires_ms = SD_NOW - 1;
  erun(&e, 1, 9000);
  assert_eerr(&e, ERR_NOT_FOUND, "no such step");
}

Test(extend, finished_step_is_lease_lost) {
  efix e = efx(PHASE_FORWARD);
  e.cur.fwd = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, NULL);
  erun(&e, 1, 9000);
  assert_eerr(&e, ERR_ABORTED, "lease lost");
}

Test(extend, abandoned_step_is_lease_lost) {
  efix e = efx(PHASE_FORWARD);
  e.cur.fwd = sd_rec(PHASE_FORWARD, STATE_ABANDONED, 1, NULL);
  erun(&e, 1, 9000);
  assert_eerr(&e, ERR_ABORTED, "lease lost");
}

Test(extend, other_attempt_is_lease_lost) {
  efix e = efx(PHASE_FORWARD);
  e.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 2, NULL);
  erun(&e, 1, 9000);
  assert_eerr(&e, ERR_ABORTED, "lease lost");
  efix g = efx(PHASE_FORWARD);
  g.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 2, NULL);
  erun(&g, 3, 9000);
  assert_eerr(&g, ERR_ABORTED, "lease lost");
}

Test(extend, own_attempt_gets_new_lease) {
  efix e = efx(PHASE_COMPENSATION);
  e.cur.comp = sd_rec(PHASE_COMPENSATION, STATE_IN_PROGRESS, 2, "fp");
  erun(&e, 2, 9000);
  cr_assert_eq(e.rc, ERR_OK, "%s", e.err.msg);
  cr_assert_eq(e.lease, SD_NOW + 9000);
  cr_assert_eq(e.w.n, 1);
  cr_assert_eq(e.w.recs[0].key.phase, PHASE_COMPENSATION);
  cr_assert_eq(e.w.recs[0].state, STATE_IN_PROGRESS);
  cr_assert_eq(e.w.recs[0].attempt, 2);
  cr_assert_eq(e.w.recs[0].lease_expires_ms, SD_NOW + 9000);
  cr_assert_eq(e.w.recs[0].updated_ms, SD_NOW);
  cr_assert_eq(e.w.recs[0].created_ms, SD_NOW - 9000);
}

Test(extend, expired_lease_without_takeover_is_extended) {
  efix e = efx(PHASE_FORWARD);
  e.cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, NULL);
  e.cur.fwd.lease_expires_ms = SD_NOW - 100;
  erun(&e, 1, 10);
  cr_assert_eq(e.rc, ERR_OK);
  cr_assert_eq(e.lease, SD_NOW + 10);
}
