/* End to end: every COMPENSATION row of the decision table (docs/api.md §3). */
#include <criterion/criterion.h>
#include <string.h>

#include "harness.h"

TestSuite(compensation, .init = h_setup, .fini = h_teardown, .timeout = 60);

typedef struct pair {
  char gid[96];
  idem_step_key fwd, comp;
} pair;

static void mkpair(pair *p) {
  h_unique("g", p->gid, sizeof p->gid);
  p->fwd = (idem_step_key){p->gid, "inventory", "reserve", IDEM_FORWARD};
  p->comp = p->fwd;
  p->comp.phase = IDEM_COMPENSATION;
}

static int begin(const idem_step_key *k, const char *fp, uint32_t lease, idem_begin *b,
                 idem_error *e) {
  memset(b, 0, sizeof *b);
  return idem_step_begin(H.c, k, (const uint8_t *)fp, fp ? strlen(fp) : 0, lease, b, e);
}

static idem_state state_of(const idem_step_key *k) {
  idem_record r = {0};
  idem_error e = {0};
  int rc = idem_step_lookup(H.c, k, &r, &e);
  cr_assert_eq(rc, IDEM_OK, "lookup: %s", e.message);
  idem_state s = r.state;
  idem_record_clear(&r);
  return s;
}

static void complete(const idem_step_key *k, uint64_t attempt, idem_outcome o) {
  idem_error e = {0};
  cr_assert_eq(idem_step_complete(H.c, k, attempt, o, 0, NULL, 0, NULL, &e), IDEM_OK, "%s",
               e.message);
}

Test(compensation, no_forward_is_a_null_compensation_and_leaves_a_tombstone) {
  pair p;
  mkpair(&p);
  idem_begin b;
  idem_error e = {0};
  cr_assert_eq(begin(&p.comp, NULL, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_SKIP_NULL_COMPENSATION);
  cr_assert_eq(state_of(&p.fwd), IDEM_STATE_ABANDONED);
  cr_assert_eq(state_of(&p.comp), IDEM_STATE_SUCCEEDED);
  idem_record r = {0};
  cr_assert_eq(idem_step_lookup(H.c, &p.comp, &r, &e), IDEM_OK);
  cr_assert_eq(r.attempt, 0, "no caller executed the null compensation");
  idem_record_clear(&r);
  /* asked again: the ABANDONED row, the compensation record decides: null again */
  idem_begin b2;
  cr_assert_eq(begin(&p.comp, NULL, 0, &b2, &e), IDEM_OK);
  cr_assert_eq(b2.decision, IDEM_DECISION_SKIP_NULL_COMPENSATION);
  /* hanging protection: the forward action that arrives late must not run */
  idem_begin f;
  cr_assert_eq(begin(&p.fwd, NULL, 0, &f, &e), IDEM_OK);
  cr_assert_eq(f.decision, IDEM_DECISION_SKIP_ALREADY_COMPENSATED);
  idem_begin_clear(&b);
  idem_begin_clear(&b2);
  idem_begin_clear(&f);
}

Test(compensation, failed_forward_needs_no_compensation) {
  pair p;
  mkpair(&p);
  idem_begin f, c;
  idem_error e = {0};
  cr_assert_eq(begin(&p.fwd, NULL, 0, &f, &e), IDEM_OK);
  complete(&p.fwd, f.attempt, IDEM_OUTCOME_FAILED);
  cr_assert_eq(begin(&p.comp, NULL, 0, &c, &e), IDEM_OK);
  cr_assert_eq(c.decision, IDEM_DECISION_SKIP_NULL_COMPENSATION);
  cr_assert_eq(state_of(&p.comp), IDEM_STATE_SUCCEEDED);
  cr_assert_eq(state_of(&p.fwd), IDEM_STATE_FAILED);
  idem_begin_clear(&f);
  idem_begin_clear(&c);
}

Test(compensation, forward_in_progress_is_aborted) {
  pair p;
  mkpair(&p);
  idem_begin f, c;
  idem_error e = {0};
  cr_assert_eq(begin(&p.fwd, NULL, 10000, &f, &e), IDEM_OK);
  cr_assert_eq(begin(&p.comp, NULL, 0, &c, &e), IDEM_ABORTED);
  cr_assert_gt(e.retry_after_ms, 0);
  cr_assert_eq(state_of(&p.fwd), IDEM_STATE_IN_PROGRESS);
  idem_record r = {0};
  cr_assert_eq(idem_step_lookup(H.c, &p.comp, &r, &e), IDEM_NOT_FOUND, "nothing stored");
  idem_begin_clear(&f);
}

Test(compensation, expired_forward_is_abandoned_and_compensation_proceeds) {
  pair p;
  mkpair(&p);
  idem_begin f, c;
  idem_error e = {0};
  cr_assert_eq(begin(&p.fwd, NULL, 150, &f, &e), IDEM_OK);
  int rc;
  H_WAIT((rc = begin(&p.comp, NULL, 0, &c, &e)) != IDEM_ABORTED, 5000,
         "the forward's 150 ms lease expires: the compensation is no longer ABORTED");
  cr_assert_eq(rc, IDEM_OK, "%s", e.message);
  cr_assert_eq(c.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(c.attempt, 1);
  cr_assert_eq(state_of(&p.fwd), IDEM_STATE_ABANDONED);
  /* the forward's late Complete is refused */
  cr_assert_eq(idem_step_complete(H.c, &p.fwd, 1, IDEM_OUTCOME_SUCCEEDED, 0, NULL, 0, NULL, &e),
               IDEM_ABORTED);
  idem_begin_clear(&f);
  idem_begin_clear(&c);
}

Test(compensation, succeeded_forward_is_compensated_once) {
  pair p;
  mkpair(&p);
  idem_begin f, c, c2, f2;
  idem_error e = {0};
  cr_assert_eq(begin(&p.fwd, NULL, 0, &f, &e), IDEM_OK);
  complete(&p.fwd, 1, IDEM_OUTCOME_SUCCEEDED);
  cr_assert_eq(begin(&p.comp, "refund-1", 0, &c, &e), IDEM_OK);
  cr_assert_eq(c.decision, IDEM_DECISION_PROCEED);
  /* while the compensation runs, a second one waits */
  cr_assert_eq(begin(&p.comp, "refund-1", 0, &c2, &e), IDEM_ABORTED);
  /* a different compensation request for the same key is a mismatch, checked first */
  cr_assert_eq(begin(&p.comp, "refund-2", 0, &c2, &e), IDEM_FAILED_PRECONDITION);
  cr_assert(strstr(e.message, "fingerprint mismatch"), "%s", e.message);
  complete(&p.comp, 1, IDEM_OUTCOME_SUCCEEDED);
  cr_assert_eq(begin(&p.comp, "refund-1", 0, &c2, &e), IDEM_OK);
  cr_assert_eq(c2.decision, IDEM_DECISION_REPLAY);
  /* the forward retried after its compensation: must not run again */
  cr_assert_eq(begin(&p.fwd, NULL, 0, &f2, &e), IDEM_OK);
  cr_assert_eq(f2.decision, IDEM_DECISION_SKIP_ALREADY_COMPENSATED);
  idem_begin_clear(&f);
  idem_begin_clear(&c);
  idem_begin_clear(&c2);
  idem_begin_clear(&f2);
}

Test(compensation, unknown_forward_is_compensated) {
  pair p;
  mkpair(&p);
  idem_begin f, c;
  idem_error e = {0};
  cr_assert_eq(begin(&p.fwd, NULL, 0, &f, &e), IDEM_OK);
  complete(&p.fwd, 1, IDEM_OUTCOME_UNKNOWN);
  cr_assert_eq(begin(&p.comp, NULL, 0, &c, &e), IDEM_OK);
  cr_assert_eq(c.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(state_of(&p.fwd), IDEM_STATE_UNKNOWN, "an UNKNOWN forward is kept as is");
  idem_begin_clear(&f);
  idem_begin_clear(&c);
}

Test(compensation, compensation_lease_expiry_is_taken_over_and_retryable_releases) {
  pair p;
  mkpair(&p);
  idem_begin f, c, c2, c3;
  idem_error e = {0};
  cr_assert_eq(begin(&p.fwd, NULL, 0, &f, &e), IDEM_OK);
  complete(&p.fwd, 1, IDEM_OUTCOME_SUCCEEDED);
  cr_assert_eq(begin(&p.comp, NULL, 150, &c, &e), IDEM_OK);
  int rc;
  H_WAIT((rc = begin(&p.comp, NULL, 0, &c2, &e)) != IDEM_ABORTED, 5000,
         "the compensation's 150 ms lease expires: a new BeginStep is no longer ABORTED");
  cr_assert_eq(rc, IDEM_OK);
  cr_assert_eq(c2.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(c2.attempt, 2);
  cr_assert(c2.takeover);
  complete(&p.comp, 2, IDEM_OUTCOME_RETRYABLE);
  cr_assert_eq(begin(&p.comp, NULL, 0, &c3, &e), IDEM_OK);
  cr_assert_eq(c3.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(c3.attempt, 3);
  cr_assert_not(c3.takeover);
  idem_begin_clear(&f);
  idem_begin_clear(&c);
  idem_begin_clear(&c2);
  idem_begin_clear(&c3);
}
