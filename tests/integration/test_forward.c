/* End to end through the real server and libidem: every FORWARD row of the decision table
 * (docs/api.md §3) and the CompleteStep / ExtendLease rules (§4). */
#include <criterion/criterion.h>
#include <string.h>

#include "harness.h"

TestSuite(forward, .init = h_setup, .fini = h_teardown, .timeout = 60);

static idem_step_key key_fwd(char *gid, size_t n) {
  h_unique("g", gid, n);
  return (idem_step_key){.global_id = gid, .service = "payment", .operation = "charge",
                         .phase = IDEM_FORWARD};
}

static idem_begin begin_ok(const idem_step_key *k, const char *fp, uint32_t lease_ms) {
  idem_begin b = {0};
  idem_error e = {0};
  int rc = idem_step_begin(H.c, k, (const uint8_t *)fp, fp ? strlen(fp) : 0, lease_ms, &b, &e);
  cr_assert_eq(rc, IDEM_OK, "BeginStep: %s (%s)", idem_strerror(rc), e.message);
  return b;
}

static int begin_err(const idem_step_key *k, const char *fp, idem_error *e) {
  idem_begin b = {0};
  int rc = idem_step_begin(H.c, k, (const uint8_t *)fp, fp ? strlen(fp) : 0, 0, &b, e);
  idem_begin_clear(&b);
  return rc;
}

static void complete_ok(const idem_step_key *k, uint64_t attempt, idem_outcome o, int32_t code,
                        const char *body) {
  idem_error e = {0};
  int rc = idem_step_complete(H.c, k, attempt, o, code, body, body ? strlen(body) : 0, NULL, &e);
  cr_assert_eq(rc, IDEM_OK, "CompleteStep: %s (%s)", idem_strerror(rc), e.message);
}

Test(forward, nothing_stored_proceeds_with_attempt_1) {
  char gid[96];
  idem_step_key k = key_fwd(gid, sizeof gid);
  idem_begin b = begin_ok(&k, "fp-1", 0);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(b.attempt, 1);
  cr_assert_not(b.takeover);
  cr_assert_gt(b.lease_expires_unix_ms, 0);
  idem_record r = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_lookup(H.c, &k, &r, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(r.state, IDEM_STATE_IN_PROGRESS);
  cr_assert_eq(r.attempt, 1);
  cr_assert_str_eq(r.tenant, H.t);
  cr_assert_eq(r.fingerprint_len, 4);
  cr_assert_eq(memcmp(r.fingerprint, "fp-1", 4), 0);
  /* default policy lease: 30 s */
  int64_t lease = r.lease_expires_unix_ms - r.created_unix_ms;
  cr_assert(lease >= 29000 && lease <= 31000, "lease %lld ms", (long long)lease);
  idem_record_clear(&r);
  idem_begin_clear(&b);
}

Test(forward, in_progress_is_aborted_with_retry_after) {
  char gid[96];
  idem_step_key k = key_fwd(gid, sizeof gid);
  idem_begin b = begin_ok(&k, NULL, 5000);
  idem_error e = {0};
  cr_assert_eq(begin_err(&k, NULL, &e), IDEM_ABORTED);
  cr_assert(e.retry_after_ms > 0 && e.retry_after_ms <= 5000, "retry after %lld",
            (long long)e.retry_after_ms);
  cr_assert(strstr(e.message, "in progress"), "message: %s", e.message);
  idem_begin_clear(&b);
}

Test(forward, expired_lease_is_taken_over_with_attempt_2) {
  char gid[96];
  idem_step_key k = key_fwd(gid, sizeof gid);
  idem_begin b1 = begin_ok(&k, NULL, 200);
  cr_assert_eq(b1.attempt, 1);
  /* poll until the lease has expired and the takeover is granted */
  idem_begin b2 = {0};
  int64_t deadline = h_now_ms() + 5000;
  for (;;) {
    idem_error e = {0};
    int rc = idem_step_begin(H.c, &k, NULL, 0, 0, &b2, &e);
    if (rc == IDEM_OK) break;
    cr_assert_eq(rc, IDEM_ABORTED, "%s", e.message);
    cr_assert_lt(h_now_ms(), deadline, "no takeover within 5 s of a 200 ms lease");
    /* a poll paced as a client's retry: the server's retry-after, when it names one */
    h_sleep_ms(e.retry_after_ms > 0 && e.retry_after_ms < 100 ? e.retry_after_ms : 20);
  }
  cr_assert_eq(b2.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(b2.attempt, 2);
  cr_assert(b2.takeover);

  /* the first attempt's late Complete is refused: lease lost */
  idem_error e = {0};
  int rc = idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_SUCCEEDED, 0, "late", 4, NULL, &e);
  cr_assert_eq(rc, IDEM_ABORTED, "late complete: %s", idem_strerror(rc));
  cr_assert(strstr(e.message, "lease lost"), "message: %s", e.message);

  complete_ok(&k, 2, IDEM_OUTCOME_SUCCEEDED, 200, "second");
  idem_begin b3 = begin_ok(&k, NULL, 0);
  cr_assert_eq(b3.decision, IDEM_DECISION_REPLAY);
  cr_assert_eq(b3.result.body_len, 6);
  cr_assert_eq(memcmp(b3.result.body, "second", 6), 0);
  idem_begin_clear(&b1);
  idem_begin_clear(&b2);
  idem_begin_clear(&b3);
}

Test(forward, succeeded_is_replayed_with_the_stored_result) {
  char gid[96];
  idem_step_key k = key_fwd(gid, sizeof gid);
  idem_begin b = begin_ok(&k, "same", 0);
  complete_ok(&k, b.attempt, IDEM_OUTCOME_SUCCEEDED, 201, "{\"charge\":\"ch_1\"}");
  idem_begin r = begin_ok(&k, "same", 0);
  cr_assert_eq(r.decision, IDEM_DECISION_REPLAY);
  cr_assert(r.has_result);
  cr_assert_eq(r.attempt, 1);
  cr_assert_eq(r.result.outcome, IDEM_OUTCOME_SUCCEEDED);
  cr_assert_eq(r.result.code, 201);
  cr_assert_eq(r.result.body_len, strlen("{\"charge\":\"ch_1\"}"));
  cr_assert_eq(memcmp(r.result.body, "{\"charge\":\"ch_1\"}", r.result.body_len), 0);
  cr_assert_gt(r.expires_unix_ms, r.result.completed_unix_ms);
  idem_begin_clear(&b);
  idem_begin_clear(&r);
}

Test(forward, failed_is_replayed_too) {
  char gid[96];
  idem_step_key k = key_fwd(gid, sizeof gid);
  idem_begin b = begin_ok(&k, NULL, 0);
  complete_ok(&k, b.attempt, IDEM_OUTCOME_FAILED, 402, "card declined");
  idem_begin r = begin_ok(&k, NULL, 0);
  cr_assert_eq(r.decision, IDEM_DECISION_REPLAY);
  cr_assert_eq(r.result.outcome, IDEM_OUTCOME_FAILED);
  cr_assert_eq(r.result.code, 402);
  idem_begin_clear(&b);
  idem_begin_clear(&r);
}

Test(forward, unknown_is_replayed_until_resolved) {
  char gid[96];
  idem_step_key k = key_fwd(gid, sizeof gid);
  idem_begin b = begin_ok(&k, NULL, 0);
  complete_ok(&k, b.attempt, IDEM_OUTCOME_UNKNOWN, 500, "gateway timeout");
  for (int i = 0; i < 3; i++) {
    idem_begin r = begin_ok(&k, NULL, 0);
    cr_assert_eq(r.decision, IDEM_DECISION_REPLAY);
    cr_assert_eq(r.result.outcome, IDEM_OUTCOME_UNKNOWN);
    cr_assert_eq(r.attempt, 1);
    idem_begin_clear(&r);
  }
  idem_begin_clear(&b);
}

Test(forward, retryable_releases_the_key) {
  char gid[96];
  idem_step_key k = key_fwd(gid, sizeof gid);
  idem_begin b = begin_ok(&k, NULL, 0);
  complete_ok(&k, 1, IDEM_OUTCOME_RETRYABLE, 429, "rate limited");
  idem_record r = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_lookup(H.c, &k, &r, &e), IDEM_OK);
  cr_assert_eq(r.state, IDEM_STATE_RELEASED);
  cr_assert_eq(r.result.code, 429, "the released attempt's result is kept for inspection");
  idem_record_clear(&r);

  idem_begin b2 = begin_ok(&k, NULL, 0);
  cr_assert_eq(b2.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(b2.attempt, 2);
  cr_assert_not(b2.takeover);
  /* a late Complete of the released attempt is refused */
  cr_assert_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_SUCCEEDED, 0, NULL, 0, NULL, &e),
               IDEM_ABORTED);
  idem_begin_clear(&b);
  idem_begin_clear(&b2);
}

Test(forward, fingerprint_mismatch_is_failed_precondition) {
  char gid[96];
  idem_step_key k = key_fwd(gid, sizeof gid);
  idem_begin b = begin_ok(&k, "amount=100", 0);
  complete_ok(&k, 1, IDEM_OUTCOME_SUCCEEDED, 0, NULL);
  idem_error e = {0};
  cr_assert_eq(begin_err(&k, "amount=200", &e), IDEM_FAILED_PRECONDITION);
  cr_assert(strstr(e.message, "fingerprint mismatch"), "message: %s", e.message);
  /* an empty fingerprint is not compared */
  idem_begin r = begin_ok(&k, NULL, 0);
  cr_assert_eq(r.decision, IDEM_DECISION_REPLAY);
  idem_begin_clear(&b);
  idem_begin_clear(&r);
}

Test(forward, retried_identical_complete_is_ok_different_is_refused) {
  char gid[96];
  idem_step_key k = key_fwd(gid, sizeof gid);
  idem_begin b = begin_ok(&k, NULL, 0);
  complete_ok(&k, 1, IDEM_OUTCOME_SUCCEEDED, 200, "ok");
  idem_record rec = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_SUCCEEDED, 200, "ok", 2, &rec, &e),
               IDEM_OK, "%s", e.message);
  cr_assert_eq(rec.state, IDEM_STATE_SUCCEEDED);
  cr_assert_eq(rec.result.code, 200);
  idem_record_clear(&rec);
  cr_assert_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_FAILED, 500, "no", 2, NULL, &e),
               IDEM_FAILED_PRECONDITION);
  cr_assert_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_SUCCEEDED, 200, "ok!", 3, NULL, &e),
               IDEM_FAILED_PRECONDITION);
  idem_begin_clear(&b);
}

Test(forward, complete_of_an_attempt_never_issued_is_failed_precondition) {
  char gid[96];
  idem_step_key k = key_fwd(gid, sizeof gid);
  idem_begin b = begin_ok(&k, NULL, 0);
  idem_error e = {0};
  cr_assert_eq(idem_step_complete(H.c, &k, 7, IDEM_OUTCOME_SUCCEEDED, 0, NULL, 0, NULL, &e),
               IDEM_FAILED_PRECONDITION);
  cr_assert(strstr(e.message, "never issued"), "message: %s", e.message);
  idem_begin_clear(&b);
}

Test(forward, complete_without_a_record_is_not_found) {
  char gid[96];
  idem_step_key k = key_fwd(gid, sizeof gid);
  idem_error e = {0};
  cr_assert_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_SUCCEEDED, 0, NULL, 0, NULL, &e),
               IDEM_NOT_FOUND);
  idem_record r = {0};
  cr_assert_eq(idem_step_lookup(H.c, &k, &r, &e), IDEM_NOT_FOUND);
}

Test(forward, extend_lease_pushes_the_lease_of_the_own_attempt) {
  char gid[96];
  idem_step_key k = key_fwd(gid, sizeof gid);
  idem_begin b = begin_ok(&k, NULL, 1000);
  int64_t until = 0;
  idem_error e = {0};
  cr_assert_eq(idem_step_extend(H.c, &k, 1, 60000, &until, &e), IDEM_OK, "%s", e.message);
  cr_assert_gt(until, b.lease_expires_unix_ms + 50000);
  /* a wrong attempt is refused; no record is not found */
  cr_assert_eq(idem_step_extend(H.c, &k, 2, 60000, &until, &e), IDEM_ABORTED);
  idem_step_key other = k;
  other.operation = "refund";
  cr_assert_eq(idem_step_extend(H.c, &other, 1, 60000, &until, &e), IDEM_NOT_FOUND);
  complete_ok(&k, 1, IDEM_OUTCOME_SUCCEEDED, 0, NULL);
  cr_assert_eq(idem_step_extend(H.c, &k, 1, 60000, &until, &e), IDEM_ABORTED,
               "a finished step has no lease to extend");
  idem_begin_clear(&b);
}

Test(forward, abandoned_forward_is_skipped) {
  /* a compensation that arrives first leaves an ABANDONED tombstone */
  char gid[96];
  idem_step_key k = key_fwd(gid, sizeof gid);
  idem_step_key comp = k;
  comp.phase = IDEM_COMPENSATION;
  idem_begin c = begin_ok(&comp, NULL, 0);
  cr_assert_eq(c.decision, IDEM_DECISION_SKIP_NULL_COMPENSATION);
  idem_record r = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_lookup(H.c, &k, &r, &e), IDEM_OK);
  cr_assert_eq(r.state, IDEM_STATE_ABANDONED);
  cr_assert_eq(r.attempt, 0);
  idem_record_clear(&r);
  idem_begin f = begin_ok(&k, NULL, 0);
  cr_assert_eq(f.decision, IDEM_DECISION_SKIP_ALREADY_COMPENSATED);
  idem_begin_clear(&c);
  idem_begin_clear(&f);
}

Test(forward, tenants_do_not_see_each_other) {
  char gid[96];
  idem_step_key k = key_fwd(gid, sizeof gid);
  idem_begin b = begin_ok(&k, NULL, 0);
  char t2[64];
  h_tenant(t2);
  idem_client *c2 = h_client(&H.s, t2, 0);
  idem_record r = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_lookup(c2, &k, &r, &e), IDEM_NOT_FOUND);
  idem_begin b2 = {0};
  cr_assert_eq(idem_step_begin(c2, &k, NULL, 0, 0, &b2, &e), IDEM_OK);
  cr_assert_eq(b2.decision, IDEM_DECISION_PROCEED, "same key in another tenant is a new key");
  idem_close(c2);
  idem_begin_clear(&b);
  idem_begin_clear(&b2);
}
