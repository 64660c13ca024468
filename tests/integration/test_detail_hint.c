/* test_detail_hint.c — an error's detail and hint on the wire (docs/api.md §5, "Trailers"),
 * from a real coordinator over loopback gRPC: a fingerprint mismatch arrives with the
 * trailers idem-reason, idem-detail and idem-hint, and libidem hands detail and hint over
 * (idem_error_detail, idem_error_hint), also for a copy of the error, and "" for the library's
 * own errors. The store's hint with its database down: test_detail_hint_store.c (a database of
 * its own: it ends the database's sessions). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "idem/v1/coordinator.pb-c.h"

TestSuite(detail_hint, .init = h_setup, .fini = h_teardown);

#define FP_DETAIL "the step keeps the fingerprint of the request that began it"
#define FP_HINT "send the same request again, or use a new key for a different one"

/* One raw BeginStep of (gid, payment, charge) with fingerprint fp: its status, details and
 * every trailer. */
static int raw_begin(const char *gid, const char *fp, char *details, size_t dn, char *trailers,
                     size_t tn) {
  Idem__V1__StepKey key = IDEM__V1__STEP_KEY__INIT;
  key.global_id = (char *)gid;
  key.service = "payment";
  key.operation = "charge";
  key.phase = IDEM__V1__PHASE__PHASE_FORWARD;
  Idem__V1__BeginStepRequest req = IDEM__V1__BEGIN_STEP_REQUEST__INIT;
  req.key = &key;
  req.fingerprint.data = (uint8_t *)fp;
  req.fingerprint.len = strlen(fp);
  req.lease_ms = 60000;
  uint8_t buf[512];
  size_t len = idem__v1__begin_step_request__pack(&req, buf);
  h_raw_opts o = {.trailers = trailers, .trailers_len = tn};
  return h_raw_call_opts(H.s.addr, "/idem.v1.Coordinator/BeginStep", H.t, buf, len, details, dn,
                         &o);
}

Test(detail_hint, a_fingerprint_mismatch_carries_its_detail_and_hint) {
  char gid[96], details[256], trailers[2048], v[256];
  h_unique("dh", gid, sizeof gid);
  cr_assert_eq(raw_begin(gid, "fp-a", details, sizeof details, trailers, sizeof trailers), 0,
               "%s", details);
  cr_expect_eq(strstr(trailers, "idem-detail"), NULL, "no detail on OK: %s", trailers);
  int st = raw_begin(gid, "fp-b", details, sizeof details, trailers, sizeof trailers);
  cr_assert_eq(st, 9 /* FAILED_PRECONDITION */, "%d %s", st, details);
  h_trailer_of(trailers, "idem-reason", v, sizeof v);
  cr_expect_str_eq(v, "fingerprint-mismatch", "trailers:\n%s", trailers);
  h_trailer_of(trailers, "idem-detail", v, sizeof v);
  cr_expect_str_eq(v, FP_DETAIL, "trailers:\n%s", trailers);
  h_trailer_of(trailers, "idem-hint", v, sizeof v);
  cr_expect_str_eq(v, FP_HINT, "trailers:\n%s", trailers);

  /* libidem: the same error through idem_step_begin, its detail and hint beside it */
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  int rc = idem_step_begin(H.c, &k, (const uint8_t *)"fp-c", 4, 0, &b, &e);
  cr_assert_eq(rc, IDEM_FAILED_PRECONDITION, "%d %s", rc, e.message);
  cr_expect_str_eq(e.reason, "fingerprint-mismatch");
  cr_expect_str_eq(idem_error_detail(&e), FP_DETAIL);
  cr_expect_str_eq(idem_error_hint(&e), FP_HINT);
  idem_error copy = e;
  cr_expect_str_eq(idem_error_hint(&copy), FP_HINT, "a copy of the error too");
  /* the library's own error has none, and neither has NULL */
  idem_error mine = {0};
  idem_step_key bad = {"", "payment", "charge", IDEM_FORWARD};
  cr_assert_neq(idem_step_begin(H.c, &bad, NULL, 0, 0, &b, &mine), IDEM_OK);
  cr_expect_str_eq(idem_error_detail(&mine), "", "%s", mine.message);
  cr_expect_str_eq(idem_error_hint(&mine), "");
  cr_expect_str_eq(idem_error_hint(NULL), "");
}
