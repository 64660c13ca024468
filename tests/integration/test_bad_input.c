/* Bad input: each malformed field → INVALID_ARGUMENT with the field named, and nothing stored.
 * A message over the receive limit is refused; undecodable protobuf is INVALID_ARGUMENT. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

TestSuite(bad_input, .init = h_setup, .fini = h_teardown, .timeout = 60);

static long long stored_rows(const char *tenant) {
  const char *p[] = {tenant};
  return pgx_sql(NULL,
                 "select (select count(*) from idem_steps where tenant = $1) + "
                 "(select count(*) from idem_sagas where tenant = $1)",
                 1, p);
}

static char *repeat(char c, size_t n) {
  char *s = malloc(n + 1);
  memset(s, c, n);
  s[n] = '\0';
  return s;
}

typedef struct bad_key {
  const char *what, *global_id, *service, *operation;
  int phase;
  const char *field; /* must appear in the message */
} bad_key;

Test(bad_input, every_malformed_key_field_is_invalid_argument_and_nothing_is_stored) {
  char *gid129 = repeat('g', 129), *name65 = repeat('s', 65);
  bad_key cases[] = {
      {"empty global_id", "", "svc", "op", 1, "global_id"},
      {"global_id too long", gid129, "svc", "op", 1, "global_id"},
      {"global_id bad char", "order 1", "svc", "op", 1, "global_id"},
      {"global_id slash", "a/b", "svc", "op", 1, "global_id"},
      {"global_id non-ascii", "caf\xc3\xa9", "svc", "op", 1, "global_id"},
      {"global_id invalid utf-8", "a\xff", "svc", "op", 1, "global_id"},
      {"empty service", "g1", "", "op", 1, "service"},
      {"service upper case", "g1", "Payment", "op", 1, "service"},
      {"service too long", "g1", name65, "op", 1, "service"},
      {"service colon", "g1", "pay:ment", "op", 1, "service"},
      {"empty operation", "g1", "svc", "", 1, "operation"},
      {"operation space", "g1", "svc", "op x", 1, "operation"},
      {"operation too long", "g1", "svc", name65, 1, "operation"},
      {"phase unspecified", "g1", "svc", "op", 0, "phase"},
      {"phase out of range", "g1", "svc", "op", 7, "phase"},
  };
  int n = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < n; i++) {
    idem_step_key k = {cases[i].global_id, cases[i].service, cases[i].operation,
                       (idem_phase)cases[i].phase};
    idem_begin b = {0};
    idem_error e = {0};
    int rc = idem_step_begin(H.c, &k, NULL, 0, 0, &b, &e);
    cr_expect_eq(rc, IDEM_INVALID_ARGUMENT, "%s: got %s", cases[i].what, idem_strerror(rc));
    cr_expect(strstr(e.message, cases[i].field), "%s: message '%s' does not name %s",
              cases[i].what, e.message, cases[i].field);
    /* the same key through every other step RPC */
    cr_expect_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_SUCCEEDED, 0, NULL, 0, NULL, &e),
                 IDEM_INVALID_ARGUMENT, "%s (complete)", cases[i].what);
    cr_expect_eq(idem_step_extend(H.c, &k, 1, 1000, NULL, &e), IDEM_INVALID_ARGUMENT, "%s (extend)",
                 cases[i].what);
    idem_record r = {0};
    cr_expect_eq(idem_step_lookup(H.c, &k, &r, &e), IDEM_INVALID_ARGUMENT, "%s (lookup)",
                 cases[i].what);
    idem_begin_clear(&b);
  }
  printf("bad keys tried: %d, each through 4 RPCs\n", n);
  cr_assert_eq(stored_rows(H.t), 0);
  free(gid129);
  free(name65);
}

Test(bad_input, out_of_range_fields_name_the_field) {
  char gid[96];
  h_unique("g", gid, sizeof gid);
  idem_step_key k = {gid, "svc", "op", IDEM_FORWARD};
  idem_error e = {0};
  idem_begin b = {0};
  uint8_t fp65[65] = {1};
  cr_assert_eq(idem_step_begin(H.c, &k, fp65, sizeof fp65, 0, &b, &e), IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "fingerprint"), "%s", e.message);
  cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 3600001, &b, &e), IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "lease_ms"), "%s", e.message);
  cr_assert_eq(stored_rows(H.t), 0);

  /* now a real step, to complete with bad fields */
  cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 0, &b, &e), IDEM_OK);
  idem_begin_clear(&b);
  size_t big = 64 * 1024 + 1;
  char *body = repeat('b', big);
  cr_assert_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_SUCCEEDED, 0, body, big, NULL, &e),
               IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "body"), "%s", e.message);
  cr_assert_eq(idem_step_complete(H.c, &k, 0, IDEM_OUTCOME_SUCCEEDED, 0, NULL, 0, NULL, &e),
               IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "attempt"), "%s", e.message);
  cr_assert_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_UNSPECIFIED, 0, NULL, 0, NULL, &e),
               IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "outcome"), "%s", e.message);
  cr_assert_eq(idem_step_complete(H.c, &k, 1, (idem_outcome)9, 0, NULL, 0, NULL, &e),
               IDEM_INVALID_ARGUMENT);
  cr_assert_eq(idem_step_extend(H.c, &k, 1, 3600001, NULL, &e), IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "lease_ms"), "%s", e.message);
  /* the step is untouched: still in progress with attempt 1 */
  idem_record r = {0};
  cr_assert_eq(idem_step_lookup(H.c, &k, &r, &e), IDEM_OK);
  cr_assert_eq(r.state, IDEM_STATE_IN_PROGRESS);
  cr_assert_eq(r.attempt, 1);
  idem_record_clear(&r);
  /* exactly 64 KiB is fine */
  cr_assert_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_SUCCEEDED, 0, body, big - 1, NULL, &e),
               IDEM_OK, "%s", e.message);
  free(body);
}

Test(bad_input, saga_fields_and_tenant) {
  idem_error e = {0};
  char gid[IDEM_GLOBAL_ID_MAX + 1];
  char *rid256 = repeat('r', 256);
  cr_assert_eq(idem_saga_begin(H.c, rid256, "order", NULL, 0, gid, NULL, NULL, &e),
               IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "request_id"), "%s", e.message);
  cr_assert_eq(idem_saga_begin(H.c, "tab\there", "order", NULL, 0, gid, NULL, NULL, &e),
               IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "request_id"), "%s", e.message);
  idem_label bad_label[] = {{"", "v"}};
  cr_assert_eq(idem_saga_begin(H.c, "r1", "order", bad_label, 1, gid, NULL, NULL, &e),
               IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "labels"), "%s", e.message);
  idem_saga sg = {0};
  cr_assert_eq(idem_saga_get(H.c, "not a valid id", &sg, &e), IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "global_id"), "%s", e.message);
  idem_policy p;
  cr_assert_eq(idem_policy_get(H.c, "Bad", "op", &p, &e), IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "service"), "%s", e.message);
  cr_assert_eq(stored_rows(H.t), 0);
  free(rid256);

  /* a tenant that breaks the rule */
  idem_client *bad = h_client(&H.s, "bad tenant!", 0);
  char g[96];
  h_unique("g", g, sizeof g);
  idem_step_key k = {g, "svc", "op", IDEM_FORWARD};
  idem_begin b = {0};
  cr_assert_eq(idem_step_begin(bad, &k, NULL, 0, 0, &b, &e), IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "tenant"), "%s", e.message);
  idem_close(bad);
  cr_assert_eq(stored_rows("bad tenant!"), 0);
}

Test(bad_input, oversized_message_is_refused) {
  char gid[96];
  h_unique("g", gid, sizeof gid);
  idem_step_key k = {gid, "svc", "op", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 0, &b, &e), IDEM_OK);
  idem_begin_clear(&b);
  size_t huge = 300 * 1024; /* over the 256 KiB receive limit */
  char *body = repeat('h', huge);
  int rc = idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_SUCCEEDED, 0, body, huge, NULL, &e);
  cr_assert_eq(rc, IDEM_INVALID_ARGUMENT, "a 300 KiB message: %s", idem_strerror(rc));
  cr_assert(strstr(e.message, "message too large"), "%s", e.message);
  idem_record r = {0};
  cr_assert_eq(idem_step_lookup(H.c, &k, &r, &e), IDEM_OK, "the server still serves");
  cr_assert_eq(r.state, IDEM_STATE_IN_PROGRESS);
  idem_record_clear(&r);
  free(body);
}

Test(bad_input, undecodable_protobuf_and_embedded_nul) {
  char details[256];
  const unsigned char garbage[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
  int st = h_raw_call(H.s.addr, "/idem.v1.Coordinator/BeginStep", H.t, garbage, sizeof garbage,
                      details, sizeof details);
  cr_assert_eq(st, IDEM_INVALID_ARGUMENT, "garbage: status %d (%s)", st, details);
  /* BeginStepRequest{key: StepKey{global_id: "a\0b", service: "svc", operation: "op",
   * phase: FORWARD}} — the NUL must not silently truncate the id to "a" */
  const unsigned char nul[] = {0x0a, 0x10, 0x0a, 0x03, 'a', 0x00, 'b', 0x12, 0x03, 's',
                               'v', 'c', 0x1a, 0x02, 'o', 'p', 0x20, 0x01};
  st = h_raw_call(H.s.addr, "/idem.v1.Coordinator/BeginStep", H.t, nul, sizeof nul, details,
                  sizeof details);
  cr_assert_eq(st, IDEM_INVALID_ARGUMENT, "embedded NUL: status %d (%s)", st, details);
  /* unknown method */
  st = h_raw_call(H.s.addr, "/idem.v1.Coordinator/Nope", H.t, "", 0, details, sizeof details);
  cr_assert_eq(st, IDEM_UNIMPLEMENTED);
  cr_assert_eq(stored_rows(H.t), 0);
}
