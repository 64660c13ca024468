/* Reasons on the wire (docs/api.md, "Error reasons"): every non-OK answer of a real coordinator
 * carries idem-reason, and libidem hands it over in idem_error.reason. Each case provokes one
 * answer of the decision table and checks code and reason together (never the message text). */
#include <criterion/criterion.h>
#include <string.h>

#include "harness.h"

TestSuite(reasons, .init = h_setup, .fini = h_teardown);

#define expect_reason(rc, e, want_code, want_reason)                                          \
  do {                                                                                        \
    cr_expect_eq((rc), (want_code), "code %d, want %d (%s)", (rc), (want_code), (e).message); \
    cr_expect_str_eq((e).reason, (want_reason), "reason for: %s", (e).message);               \
  } while (0)

Test(reasons, each_refusal_of_the_decision_table_names_its_reason) {
  char gid[96];
  h_unique("why", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  idem_record r = {0};

  int rc = idem_step_lookup(H.c, &k, &r, &e);
  expect_reason(rc, e, IDEM_NOT_FOUND, "not-found");

  cr_assert_eq(idem_step_begin(H.c, &k, (const uint8_t *)"fp-a", 4, 60000, &b, &e), IDEM_OK, "%s",
               e.message);
  uint64_t attempt = b.attempt;
  idem_begin_clear(&b);
  cr_expect_str_eq(e.reason, "", "no reason on success");

  rc = idem_step_begin(H.c, &k, (const uint8_t *)"fp-a", 4, 0, &b, &e);
  expect_reason(rc, e, IDEM_ABORTED, "in-progress");
  cr_expect_gt(e.retry_after_ms, 0, "with a retry-after hint");

  rc = idem_step_begin(H.c, &k, (const uint8_t *)"fp-b", 4, 0, &b, &e);
  expect_reason(rc, e, IDEM_FAILED_PRECONDITION, "fingerprint-mismatch");

  rc = idem_step_complete(H.c, &k, attempt + 1, IDEM_OUTCOME_SUCCEEDED, 200, NULL, 0, &r, &e);
  expect_reason(rc, e, IDEM_FAILED_PRECONDITION, "never-issued");

  cr_assert_eq(idem_step_complete(H.c, &k, attempt, IDEM_OUTCOME_SUCCEEDED, 200, "ok", 2, &r, &e),
               IDEM_OK, "%s", e.message);
  idem_record_clear(&r);
  rc = idem_step_complete(H.c, &k, attempt, IDEM_OUTCOME_FAILED, 500, NULL, 0, &r, &e);
  expect_reason(rc, e, IDEM_FAILED_PRECONDITION, "finished-differently");

  idem_resolution res = {.outcome = IDEM_OUTCOME_FAILED, .reason = "why not"};
  rc = idem_step_resolve(H.c, &k, &res, NULL, &e);
  expect_reason(rc, e, IDEM_FAILED_PRECONDITION, "not-resolvable");

  idem_step_key bad = {gid, "", "charge", IDEM_FORWARD};
  rc = idem_step_begin(H.c, &bad, NULL, 0, 0, &b, &e);
  expect_reason(rc, e, IDEM_INVALID_ARGUMENT, "invalid-argument");
}

Test(reasons, a_lost_lease_and_an_unknown_method) {
  char gid[96];
  h_unique("lease", gid, sizeof gid);
  idem_step_key k = {gid, "stock", "reserve", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  idem_record r = {0};
  cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 1, &b, &e), IDEM_OK, "%s", e.message);
  uint64_t first = b.attempt;
  idem_begin_clear(&b);
  /* the 1 ms lease runs out: a second caller takes over, the first one's completion is stale */
  int rc;
  H_WAIT((rc = idem_step_begin(H.c, &k, NULL, 0, 0, &b, &e)) != IDEM_ABORTED, 5000,
         "the 1 ms lease runs out: BeginStep no longer ABORTED");
  cr_assert_eq(rc, IDEM_OK, "takeover: %s", e.message);
  cr_assert_gt(b.attempt, first);
  idem_begin_clear(&b);
  rc = idem_step_complete(H.c, &k, first, IDEM_OUTCOME_SUCCEEDED, 200, NULL, 0, &r, &e);
  expect_reason(rc, e, IDEM_ABORTED, "lease-lost");

  char d[256], reason[64];
  int st = h_raw_call_reason(H.s.addr, "/idem.v1.Coordinator/NoSuchMethod", H.t, "", 0, d,
                             sizeof d, reason, sizeof reason);
  cr_expect_eq(st, IDEM_UNIMPLEMENTED, "%s", d);
  cr_expect_str_eq(reason, "unimplemented");
}
