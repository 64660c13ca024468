/* test_decide_complete.c — the CompleteStep and ExtendLease rules (api.md §4) and retention
 * expiry, on the pure functions of decide.h. The BeginStep tables are in test_decide.c. */
#include <criterion/criterion.h>
#include <string.h>

#include "coord/decide.h"

#define NOW 1000000
#define LEASE 5000u
#define RET_S 60u
#define RET_END (NOW + (int64_t)RET_S * 1000)

static step_key key_of(step_phase ph) {
  step_key k;
  memset(&k, 0, sizeof k);
  strcpy(k.tenant, "acme");
  strcpy(k.global_id, "g-1");
  strcpy(k.service, "payments");
  strcpy(k.operation, "charge");
  k.phase = ph;
  return k;
}

/* A live record with created/updated in the past. */
static step_rec rec(step_phase ph, step_state st, uint64_t attempt, const char *fp) {
  step_rec r;
  memset(&r, 0, sizeof r);
  r.present = true;
  r.key = key_of(ph);
  r.state = st;
  r.attempt = attempt;
  if (fp) {
    r.fp_len = strlen(fp);
    memcpy(r.fp, fp, r.fp_len);
  }
  r.created_ms = NOW - 9000;
  r.updated_ms = NOW - 8000;
  if (st == STATE_IN_PROGRESS) r.lease_expires_ms = NOW + 1234;
  if (st != STATE_IN_PROGRESS) r.expires_ms = NOW + 3600000;
  return r;
}

static uint8_t stored_body[] = "stored-body";

static void with_result(step_rec *r, step_outcome o, int32_t code) {
  r->outcome = o;
  r->code = code;
  r->body = stored_body;
  r->body_len = sizeof stored_body - 1;
  r->completed_ms = NOW - 7000;
}

static void assert_fp(const step_rec *r, const char *fp) {
  cr_assert_eq(r->fp_len, strlen(fp));
  cr_assert(memcmp(r->fp, fp, r->fp_len) == 0);
}

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
  c.key = key_of(ph);
  c.cur.now_ms = NOW;
  c.in.attempt = attempt;
  c.in.outcome = o;
  c.in.code = 201;
  c.in.body = req_body;
  c.in.body_len = sizeof req_body - 1;
  c.in.retention_s = RET_S;
  c.w.n = 7;
  return c;
}

static void crun(cfix *c) {
  c->in.key = &c->key;
  c->rc = decide_complete(&c->in, &c->cur, &c->w, &c->after, &c->err);
}

static void assert_cerr(const cfix *c, err_code code, const char *needle) {
  cr_assert_eq(c->rc, code, "rc %d (want %d): %s", c->rc, code, c->err.msg);
  cr_assert(strstr(c->err.msg, needle), "message \"%s\" lacks \"%s\"", c->err.msg, needle);
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
  c.cur.fwd = rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, NULL);
  c.cur.fwd.expires_ms = NOW;
  crun(&c);
  assert_cerr(&c, ERR_NOT_FOUND, "no such step");
}

Test(complete, other_phase_record_does_not_count) {
  cfix c = cfx(PHASE_COMPENSATION, 1, OUTCOME_SUCCEEDED);
  c.cur.fwd = rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, NULL);
  crun(&c);
  assert_cerr(&c, ERR_NOT_FOUND, "no such step");
}

Test(complete, attempt_never_issued) {
  cfix c = cfx(PHASE_FORWARD, 3, OUTCOME_SUCCEEDED);
  c.cur.fwd = rec(PHASE_FORWARD, STATE_IN_PROGRESS, 2, NULL);
  crun(&c);
  assert_cerr(&c, ERR_PRECONDITION, "attempt 3 was never issued");
}

Test(complete, null_compensation_attempt_was_never_issued) {
  cfix c = cfx(PHASE_COMPENSATION, 1, OUTCOME_SUCCEEDED);
  c.cur.comp = rec(PHASE_COMPENSATION, STATE_SUCCEEDED, 0, NULL);
  crun(&c);
  assert_cerr(&c, ERR_PRECONDITION, "never issued");
}

Test(complete, abandoned_is_lease_lost) {
  cfix c = cfx(PHASE_FORWARD, 2, OUTCOME_SUCCEEDED);
  c.cur.fwd = rec(PHASE_FORWARD, STATE_ABANDONED, 2, NULL);
  crun(&c);
  assert_cerr(&c, ERR_ABORTED, "lease lost: the step was abandoned");
}

Test(complete, abandoned_precedes_superseded) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  c.cur.fwd = rec(PHASE_FORWARD, STATE_ABANDONED, 2, NULL);
  crun(&c);
  assert_cerr(&c, ERR_ABORTED, "abandoned");
}

Test(complete, superseded_attempt_is_lease_lost) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  c.cur.fwd = rec(PHASE_FORWARD, STATE_IN_PROGRESS, 2, NULL);
  crun(&c);
  assert_cerr(&c, ERR_ABORTED, "lease lost: attempt 1 was superseded by attempt 2");
}

Test(complete, superseded_by_a_finished_attempt) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  c.cur.fwd = rec(PHASE_FORWARD, STATE_SUCCEEDED, 2, NULL);
  with_result(&c.cur.fwd, OUTCOME_SUCCEEDED, 201);
  crun(&c);
  assert_cerr(&c, ERR_ABORTED, "superseded");
}

static void check_completion(step_outcome o, step_state want, step_phase ph) {
  cfix c = cfx(ph, 2, o);
  step_rec *r = ph == PHASE_FORWARD ? &c.cur.fwd : &c.cur.comp;
  *r = rec(ph, STATE_IN_PROGRESS, 2, "fp-a");
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
  cr_assert_eq(n->completed_ms, NOW);
  cr_assert_eq(n->updated_ms, NOW);
  cr_assert_eq(n->created_ms, NOW - 9000);
  cr_assert_eq(n->lease_expires_ms, 0);
  cr_assert_eq(n->expires_ms, RET_END);
  assert_fp(n, "fp-a");
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
  c.cur.fwd = rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, NULL);
  c.cur.fwd.lease_expires_ms = NOW - 60000;
  crun(&c);
  cr_assert_eq(c.rc, ERR_OK, "%s", c.err.msg);
  cr_assert_eq(c.w.n, 1);
  cr_assert_eq(c.w.recs[0].state, STATE_SUCCEEDED);
}

Test(complete, empty_body_is_stored_as_null) {
  cfix c = cfx(PHASE_FORWARD, 1, OUTCOME_SUCCEEDED);
  c.in.body = NULL;
  c.in.body_len = 0;
  c.cur.fwd = rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, NULL);
  crun(&c);
  cr_assert_eq(c.rc, ERR_OK);
  cr_assert_null(c.w.recs[0].body);
  cr_assert_eq(c.w.recs[0].body_len, 0);
}

/* The record as a completion of attempt 1 with cfx's defaults left it. */
static step_rec finished(step_state st, step_outcome o) {
  step_rec r = rec(PHASE_FORWARD, st, 1, NULL);
  r.outcome = o;
  r.code = 201;
  r.body = req_body;
  r.body_len = sizeof req_body - 1;
  r.completed_ms = NOW - 100;
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
  e.key = key_of(ph);
  e.cur.now_ms = NOW;
  e.w.n = 5;
  e.lease = -1;
  return e;
}

static void erun(efix *e, uint64_t attempt, uint32_t lease_ms) {
  e->rc = decide_extend(&e->key, attempt, lease_ms, &e->cur, &e->w, &e->lease, &e->err);
}

static void assert_eerr(const efix *e, err_code code, const char *needle) {
  cr_assert_eq(e->rc, code, "rc %d (want %d): %s", e->rc, code, e->err.msg);
  cr_assert(strstr(e->err.msg, needle), "message \"%s\" lacks \"%s\"", e->err.msg, needle);
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
  e.cur.fwd = rec(PHASE_FORWARD, STATE_RELEASED, 1, NULL);
  e.cur.fwd.expires_ms = NOW - 1;
  erun(&e, 1, 9000);
  assert_eerr(&e, ERR_NOT_FOUND, "no such step");
}

Test(extend, finished_step_is_lease_lost) {
  efix e = efx(PHASE_FORWARD);
  e.cur.fwd = rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, NULL);
  erun(&e, 1, 9000);
  assert_eerr(&e, ERR_ABORTED, "lease lost");
}

Test(extend, abandoned_step_is_lease_lost) {
  efix e = efx(PHASE_FORWARD);
  e.cur.fwd = rec(PHASE_FORWARD, STATE_ABANDONED, 1, NULL);
  erun(&e, 1, 9000);
  assert_eerr(&e, ERR_ABORTED, "lease lost");
}

Test(extend, other_attempt_is_lease_lost) {
  efix e = efx(PHASE_FORWARD);
  e.cur.fwd = rec(PHASE_FORWARD, STATE_IN_PROGRESS, 2, NULL);
  erun(&e, 1, 9000);
  assert_eerr(&e, ERR_ABORTED, "lease lost");
  efix g = efx(PHASE_FORWARD);
  g.cur.fwd = rec(PHASE_FORWARD, STATE_IN_PROGRESS, 2, NULL);
  erun(&g, 3, 9000);
  assert_eerr(&g, ERR_ABORTED, "lease lost");
}

Test(extend, own_attempt_gets_new_lease) {
  efix e = efx(PHASE_COMPENSATION);
  e.cur.comp = rec(PHASE_COMPENSATION, STATE_IN_PROGRESS, 2, "fp");
  erun(&e, 2, 9000);
  cr_assert_eq(e.rc, ERR_OK, "%s", e.err.msg);
  cr_assert_eq(e.lease, NOW + 9000);
  cr_assert_eq(e.w.n, 1);
  cr_assert_eq(e.w.recs[0].key.phase, PHASE_COMPENSATION);
  cr_assert_eq(e.w.recs[0].state, STATE_IN_PROGRESS);
  cr_assert_eq(e.w.recs[0].attempt, 2);
  cr_assert_eq(e.w.recs[0].lease_expires_ms, NOW + 9000);
  cr_assert_eq(e.w.recs[0].updated_ms, NOW);
  cr_assert_eq(e.w.recs[0].created_ms, NOW - 9000);
}

Test(extend, expired_lease_without_takeover_is_extended) {
  efix e = efx(PHASE_FORWARD);
  e.cur.fwd = rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, NULL);
  e.cur.fwd.lease_expires_ms = NOW - 100;
  erun(&e, 1, 10);
  cr_assert_eq(e.rc, ERR_OK);
  cr_assert_eq(e.lease, NOW + 10);
}
