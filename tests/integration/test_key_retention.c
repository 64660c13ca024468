/* Keys remembered longer than results (docs/api.md §12) over gRPC, with the reaper running every
 * second: a policy keeps bodies 2 s and keys an hour. Past retention_s a duplicate with the
 * same fingerprint gets REPLAY with outcome and code, no body and result_expired; one with a
 * different fingerprint is refused; Lookup and ListSteps say result_expired; the reaper drops
 * the body and keeps the row, and the answers stay the same. With a key retention of 3 s the
 * key is new again after it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "testutil.h"

static void reaper_every_second(void) {
  static const char *const args[] = {"--reaper-interval", "1", NULL};
  h_fixture_start(&H, &(h_fixture_conf){.args = args});
}

TestSuite(key_retention, .init = reaper_every_second, .fini = h_teardown, .timeout = 120);

static void set_policy(const char *op, uint32_t retention_s, uint32_t key_retention_s) {
  idem_policy p = {.failure_mode = IDEM_FAIL_CLOSED,
                   .retention_s = retention_s,
                   .key_retention_s = key_retention_s,
                   .lease_ms = 1000}; /* shorter than every key retention here (docs/limits.md) */
  strcpy(p.service, "pay");
  snprintf(p.operation, sizeof p.operation, "%s", op);
  idem_policy got = {0};
  idem_error e = {0};
  cr_assert_eq(idem_policy_set(H.c, &p, &got, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(got.key_retention_s, key_retention_s);
}

static const uint8_t FP[] = "order-1", OTHER_FP[] = "order-2";

static void proceed_and_complete(const idem_step_key *k) {
  idem_begin b = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(H.c, k, FP, sizeof FP - 1, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(idem_step_complete(H.c, k, b.attempt, IDEM_OUTCOME_SUCCEEDED, 201, "paid", 4, NULL,
                                  &e),
               IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);
}

static long long body_bytes(const char *gid) {
  const char *p[] = {H.t, gid};
  return pgx_sql(
      NULL,
      "SELECT coalesce(max(octet_length(body)), -1) FROM idem_steps WHERE tenant = $1 AND"
      " global_id = $2",
      2, p);
}

Test(key_retention, past_retention_a_duplicate_gets_outcome_and_code_without_the_body) {
  set_policy("charge", 2, 3600);
  char gid[96];
  h_unique("kr", gid, sizeof gid);
  idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD};
  int64_t t0 = h_now_ms();
  proceed_and_complete(&k);

  idem_begin b = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(H.c, &k, FP, sizeof FP - 1, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_REPLAY);
  if (h_now_ms() - t0 < 1500) { /* within retention_s: the whole result */
    cr_assert_not(b.result_expired);
    cr_assert_eq(b.result.body_len, 4);
    cr_assert(memcmp(b.result.body, "paid", 4) == 0);
  }
  cr_assert_geq(b.expires_unix_ms - b.result_expires_unix_ms, 3590000,
                "the key outlives the body by key_retention_s - retention_s");
  idem_begin_clear(&b);

  /* past retention_s (the database clock decides: wait for it, with a deadline) */
  for (;;) {
    cr_assert_eq(idem_step_begin(H.c, &k, FP, sizeof FP - 1, 0, &b, &e), IDEM_OK, "%s",
                 e.message);
    if (b.result_expired) break;
    idem_begin_clear(&b);
    cr_assert_lt(h_now_ms() - t0, 15000, "the result did not expire within 15 s");
    h_sleep_ms(100); /* the next poll: each turn's answer is checked too */
  }
  cr_assert_eq(b.decision, IDEM_DECISION_REPLAY, "the key is remembered: no second PROCEED");
  cr_assert_eq(b.attempt, 1);
  cr_assert(b.has_result);
  cr_assert_eq(b.result.outcome, IDEM_OUTCOME_SUCCEEDED);
  cr_assert_eq(b.result.code, 201);
  cr_assert_eq(b.result.body_len, 0);
  cr_assert_leq(b.result_expires_unix_ms, h_wall_ms() + 1000);
  cr_assert_gt(b.expires_unix_ms, h_wall_ms() + 3500000);
  idem_begin_clear(&b);

  cr_assert_eq(idem_step_begin(H.c, &k, OTHER_FP, sizeof OTHER_FP - 1, 0, &b, &e),
               IDEM_FAILED_PRECONDITION, "a different request under the key is still refused");
  cr_assert(strstr(e.message, "fingerprint"), "%s", e.message);

  idem_record r = {0};
  cr_assert_eq(idem_step_lookup(H.c, &k, &r, &e), IDEM_OK, "%s", e.message);
  cr_assert(r.result_expired);
  cr_assert_eq(r.state, IDEM_STATE_SUCCEEDED);
  cr_assert_eq(r.result.code, 201);
  cr_assert_eq(r.result.body_len, 0);
  idem_record_clear(&r);
  idem_step_page page = {0};
  idem_steps_filter f = {.global_id = gid};
  cr_assert_eq(idem_steps_list(H.c, &f, &page, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(page.n_steps, 1);
  cr_assert(page.steps[0].result_expired);
  cr_assert_eq(page.steps[0].result.body_len, 0);
  idem_step_page_clear(&page);

  /* the reaper's first stage drops the body and keeps the row */
  for (long long n; (n = body_bytes(gid)) != 0;) { /* one read per turn: the reaper races it */
    cr_assert_eq(n, 4, "the row must stay");
    cr_assert_lt(h_now_ms() - t0, 30000, "the reaper did not drop the body within 30 s");
    h_sleep_ms(100); /* the next poll: each turn checks the row stays */
  }
  cr_assert_eq(idem_step_begin(H.c, &k, FP, sizeof FP - 1, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_REPLAY);
  cr_assert(b.result_expired);
  cr_assert_eq(b.result.code, 201);
  idem_begin_clear(&b);
  cr_assert_eq(idem_step_begin(H.c, &k, OTHER_FP, sizeof OTHER_FP - 1, 0, &b, &e),
               IDEM_FAILED_PRECONDITION);
  /* a retried Complete with the same outcome and code is still harmless */
  cr_assert_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_SUCCEEDED, 201, "paid", 4, NULL, &e),
               IDEM_OK, "%s", e.message);
}

Test(key_retention, after_key_retention_the_key_is_new_again) {
  set_policy("refund", 1, 3);
  char gid[96];
  h_unique("kr-new", gid, sizeof gid);
  idem_step_key k = {gid, "pay", "refund", IDEM_FORWARD};
  int64_t t0 = h_now_ms();
  proceed_and_complete(&k);
  idem_begin b = {0};
  idem_error e = {0};
  bool saw_expired_replay = false;
  for (;;) {
    int rc = idem_step_begin(H.c, &k, OTHER_FP, sizeof OTHER_FP - 1, 0, &b, &e);
    if (rc == IDEM_OK) {
      cr_assert_eq(b.decision, IDEM_DECISION_PROCEED, "decision %d", (int)b.decision);
      break;
    }
    cr_assert_eq(rc, IDEM_FAILED_PRECONDITION, "%s", e.message);
    saw_expired_replay = true; /* still remembered: another fingerprint is refused */
    idem_begin_clear(&b);
    cr_assert_lt(h_now_ms() - t0, 20000, "the key was not forgotten within 20 s");
    h_sleep_ms(100); /* the next poll: each turn checks the refusal until then */
  }
  cr_assert(saw_expired_replay, "the key was refused at first");
  cr_assert_geq(h_now_ms() - t0, 2500, "forgotten before key_retention_s");
  cr_assert_eq(b.attempt, 1, "a new key starts at attempt 1");
  idem_begin_clear(&b);
}

/* Attempt numbers start again at 1 once a key is forgotten (docs/limits.md "Attempt numbers"):
 * no lease may last as long as the key it is for, or its holder could outlive the key and
 * complete the next incarnation's attempt 1. SetPolicy, BeginStep and ExtendLease refuse such a
 * lease, naming the field, and store nothing. */
Test(key_retention, a_lease_as_long_as_the_key_is_refused_everywhere) {
  idem_policy p = {.failure_mode = IDEM_FAIL_CLOSED, .retention_s = 2, .lease_ms = 2000};
  strcpy(p.service, "pay");
  strcpy(p.operation, "hold");
  idem_error e = {0};
  long long before = h_tenant_hash(H.t);
  cr_assert_eq(idem_policy_set(H.c, &p, NULL, &e), IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "key_retention_s:") == e.message, "%s", e.message);
  p.key_retention_s = 60; /* a key kept longer than the lease: fine */
  p.lease_ms = 59999;
  cr_assert_eq(idem_policy_set(H.c, &p, NULL, &e), IDEM_OK, "%s", e.message);
  p.lease_ms = 60000;
  cr_assert_eq(idem_policy_set(H.c, &p, NULL, &e), IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "key_retention_s:") == e.message, "%s", e.message);
  long long with_policy = h_tenant_hash(H.t);
  cr_assert_neq(with_policy, before);

  /* a call asking for a lease as long as the key retention (60 s) */
  char gid[96];
  h_unique("kr-lease", gid, sizeof gid);
  idem_step_key k = {gid, "pay", "hold", IDEM_FORWARD};
  idem_begin b = {0};
  cr_assert_eq(idem_step_begin(H.c, &k, FP, sizeof FP - 1, 60000, &b, &e), IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "lease_ms:") == e.message, "%s", e.message);
  cr_assert_eq(h_tenant_hash(H.t), with_policy, "nothing stored");
  cr_assert_eq(idem_step_begin(H.c, &k, FP, sizeof FP - 1, 59999, &b, &e), IDEM_OK, "%s",
               e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
  idem_begin_clear(&b);
  long long begun = h_tenant_hash(H.t);
  cr_assert_eq(idem_step_extend(H.c, &k, 1, 60000, NULL, &e), IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "lease_ms:") == e.message, "%s", e.message);
  cr_assert_eq(h_tenant_hash(H.t), begun, "nothing stored");
  cr_assert_eq(idem_step_extend(H.c, &k, 1, 59999, NULL, &e), IDEM_OK, "%s", e.message);
}
