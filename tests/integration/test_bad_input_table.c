/* Bad input, as a table over every RPC: hand-encoded requests (pbenc.h) sent as raw bytes.
 * Each must be INVALID_ARGUMENT naming the field (undecodable bytes: "request: cannot
 * decode"), and nothing may be stored: the tenant's rows in every table hash the same after
 * the table as before it, with a live IN_PROGRESS step among them that every Complete, Extend
 * and Resolve case aims at. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "pbenc.h"

static char LIVE[96]; /* the live step's global id: svc/op FORWARD, attempt 1 */
static int n_tried;

TestSuite(bad_input_table, .init = h_setup, .fini = h_teardown, .timeout = 120);

/* Sends req to /idem.v1.<method> as tenant (NULL = H.t), expects INVALID_ARGUMENT naming field. */
static void bad_as(const char *tenant, const char *method, const char *what, pbuf *req,
                   const char *field) {
  char path[96], d[400];
  snprintf(path, sizeof path, "/idem.v1.%s", method);
  char reason[64];
  int st = h_raw_call_reason(H.s.addr, path, tenant ? tenant : H.t, req->b, req->n, d, sizeof d,
                             reason, sizeof reason);
  cr_expect_eq(st, IDEM_INVALID_ARGUMENT, "%s, %s: status %d (%s)", method, what, st, d);
  cr_expect(strstr(d, field), "%s, %s: '%s' does not name %s", method, what, d, field);
  /* docs/api.md §5: the reason on the wire, beside the code */
  cr_expect_str_eq(reason, "invalid-argument", "%s, %s: idem-reason", method, what);
  n_tried++;
  pb_free(req);
}
#define bad(method, what, req, field) bad_as(NULL, method, what, req, field)

static char *rep(char c, size_t n) {
  char *s = malloc(n + 1);
  memset(s, c, n);
  s[n] = '\0';
  return s;
}

/* {key = 1} (BeginStep, LookupStep) */
static pbuf *with_key(pbuf *k) {
  return pb_sub(pb_new(), 1, k);
}
static pbuf *live_key(void) {
  return pb_key(LIVE, "svc", "op", 1);
}
/* CompleteStepRequest {key, attempt, outcome} */
static pbuf *complete(pbuf *k, uint64_t attempt, int64_t outcome) {
  return pb_varint(pb_varint(pb_sub(pb_new(), 1, k), 2, attempt), 3, (uint64_t)outcome);
}
/* ResolveStepRequest {key, outcome, reason} */
static pbuf *resolve(int64_t outcome, const char *reason) {
  return pb_str(pb_varint(pb_sub(pb_new(), 1, live_key()), 2, (uint64_t)outcome), 5, reason);
}
/* a map<string,string> entry of BeginSagaRequest.labels */
static pbuf *label(pbuf *p, const char *k, const void *v, size_t vn) {
  return pb_sub(p, 3, pb_len(pb_str(pb_new(), 1, k), 2, v, vn));
}
/* Policy {service, operation, failure_mode, retention_s, lease_ms} */
static pbuf *policy(const char *s, const char *o, uint64_t mode, uint64_t ret, uint64_t lease) {
  pbuf *p = pb_str(pb_str(pb_new(), 1, s), 2, o);
  return pb_varint(pb_varint(pb_varint(p, 3, mode), 4, ret), 5, lease);
}

static void step_rpcs(void) {
  char *g129 = rep('g', 129), *n65 = rep('n', 65);
  const char *B = "Coordinator/BeginStep";
  bad(B, "no key", pb_new(), "key");
  bad(B, "empty global_id", with_key(pb_key("", "svc", "op", 1)), "global_id");
  bad(B, "global_id 129 chars", with_key(pb_key(g129, "svc", "op", 1)), "global_id");
  bad(B, "global_id space", with_key(pb_key("a b", "svc", "op", 1)), "global_id");
  bad(B, "global_id invalid utf-8", with_key(pb_key("a\xc3\x28", "svc", "op", 1)), "global_id");
  pbuf *k = pb_varint(pb_str(pb_str(pb_len(pb_new(), 1, "a\0b", 3), 2, "svc"), 3, "op"), 4, 1);
  bad(B, "global_id NUL", with_key(k), "global_id");
  k = pb_varint(pb_str(pb_len(pb_str(pb_new(), 1, "g1"), 2, "\0svc", 4), 3, "op"), 4, 1);
  bad(B, "service leading NUL", with_key(k), "service");
  bad(B, "service upper case", with_key(pb_key("g1", "Svc", "op", 1)), "service");
  bad(B, "service 65 chars", with_key(pb_key("g1", n65, "op", 1)), "service");
  bad(B, "service non-ascii", with_key(pb_key("g1", "s\xc3\xa9rvice", "op", 1)), "service");
  bad(B, "empty operation", with_key(pb_key("g1", "svc", "", 1)), "operation");
  bad(B, "operation colon", with_key(pb_key("g1", "svc", "o:p", 1)), "operation");
  bad(B, "phase 0", with_key(pb_key("g1", "svc", "op", 0)), "phase");
  bad(B, "phase 7", with_key(pb_key("g1", "svc", "op", 7)), "phase");
  bad(B, "phase -1", with_key(pb_key("g1", "svc", "op", -1)), "phase");
  uint8_t fp[65] = {0};
  bad(B, "fingerprint 65 bytes", pb_len(with_key(pb_key("g1", "svc", "op", 1)), 2, fp, 65),
      "fingerprint");
  bad(B, "lease_ms over 1 h", pb_varint(with_key(pb_key("g1", "svc", "op", 1)), 3, 3600001),
      "lease_ms");
  bad(B, "lease_ms max uint32", pb_varint(with_key(pb_key("g1", "svc", "op", 1)), 3, UINT32_MAX),
      "lease_ms");
  /* undecodable */
  pbuf *whole = with_key(pb_key("g1", "svc", "op", 1));
  bad(B, "cut inside service", pb_cut(whole, 8), "request: cannot decode");
  bad(B, "key as a varint", pb_varint(pb_new(), 1, 1), "request: cannot decode");
  bad(B, "lease_ms length-delimited", pb_str(with_key(pb_key("g1", "svc", "op", 1)), 3, "x"),
      "request: cannot decode");
  bad(B, "fingerprint as a varint", pb_varint(with_key(pb_key("g1", "svc", "op", 1)), 2, 5),
      "request: cannot decode");
  bad(B, "length past the end", pb_raw(pb_new(), "\x0a\x7f\x0a\x01g", 5), "request: cannot decode");
  bad(B, "field number 0", pb_raw(pb_new(), "\x00\x01", 2), "request: cannot decode");
  k = pb_raw(pb_str(pb_new(), 1, "g1"), "\x12\x40svc", 5); /* service runs past the key */
  bad(B, "key with a string past its end", pb_str(with_key(k), 2, "tail-bytes"),
      "request: cannot decode");
  bad(B, "varint of 11 bytes",
      pb_raw(pb_new(), "\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12),
      "request: cannot decode");

  const char *M = "Coordinator/CompleteStep";
  bad(M, "attempt 0", complete(live_key(), 0, 1), "attempt");
  bad(M, "outcome unspecified", complete(live_key(), 1, 0), "outcome");
  bad(M, "outcome 9", complete(live_key(), 1, 9), "outcome");
  bad(M, "outcome -1", complete(live_key(), 1, -1), "outcome");
  bad(M, "phase 3", complete(pb_key(LIVE, "svc", "op", 3), 1, 1), "phase");
  bad(M, "no key", pb_varint(pb_varint(pb_new(), 2, 1), 3, 1), "key");
  char *body = rep('b', 64 * 1024 + 1);
  bad(M, "body 64 KiB + 1", pb_str(complete(live_key(), 1, 1), 5, body), "body");
  pbuf *cut = complete(live_key(), 1, 1);
  size_t head = cut->n;
  bad(M, "body cut short", pb_cut(pb_str(cut, 5, "0123456789"), head + 5),
      "request: cannot decode");

  const char *E = "Coordinator/ExtendLease";
  bad(E, "attempt 0", pb_varint(pb_sub(pb_new(), 1, live_key()), 3, 1000), "attempt");
  bad(E, "lease_ms over 1 h",
      pb_varint(pb_varint(pb_sub(pb_new(), 1, live_key()), 2, 1), 3, 3600001), "lease_ms");
  bad(E, "global_id slash", pb_varint(pb_sub(pb_new(), 1, pb_key("a/b", "svc", "op", 1)), 2, 1),
      "global_id");

  const char *L = "Coordinator/LookupStep";
  bad(L, "global_id 129 chars", with_key(pb_key(g129, "svc", "op", 1)), "global_id");
  bad(L, "operation NUL",
      with_key(pb_varint(pb_len(pb_str(pb_str(pb_new(), 1, "g"), 2, "s"), 3, "o\0p", 3), 4, 1)),
      "operation");

  const char *R = "Admin/ResolveStep";
  bad(R, "reason empty", resolve(1, ""), "reason");
  bad(R, "reason invalid utf-8", resolve(1, "bad \xff byte"), "reason");
  bad(R, "reason overlong utf-8", resolve(1, "slash \xc0\xaf"), "reason");
  bad(R, "reason control character", resolve(1, "bell \x07"), "reason");
  bad(R, "reason CR line break", resolve(1, "one\r\ntwo"), "line feed");
  char *r1025 = rep('r', 1025);
  bad(R, "reason 1025 bytes", resolve(1, r1025), "reason");
  bad(R, "reason NUL", pb_len(pb_varint(pb_sub(pb_new(), 1, live_key()), 2, 1), 5, "a\0b", 3),
      "reason");
  bad(R, "actor invalid utf-8", pb_str(resolve(1, "why"), 6, "\xed\xa0\x80"), "actor");
  bad(R, "outcome unknown", resolve(4, "why"), "outcome");
  bad(R, "outcome 9", resolve(9, "why"), "outcome");
  bad(R, "body 64 KiB + 1", pb_str(resolve(1, "why"), 4, body), "body");
  bad(R, "empty service",
      pb_str(pb_varint(pb_sub(pb_new(), 1, pb_key(LIVE, "", "op", 1)), 2, 1), 5, "why"), "service");
  free(g129);
  free(n65);
  free(body);
  free(r1025);
}

static void saga_and_admin_rpcs(void) {
  char *r256 = rep('r', 256), *t129 = rep('t', 129), *k64 = rep('k', 64), *v257 = rep('v', 257);
  char *n65 = rep('n', 65);
  const char *S_ = "Coordinator/BeginSaga";
  bad(S_, "request_id 256 chars", pb_str(pb_new(), 1, r256), "request_id");
  bad(S_, "request_id tab", pb_str(pb_new(), 1, "a\tb"), "request_id");
  bad(S_, "request_id NUL", pb_len(pb_new(), 1, "a\0b", 3), "request_id");
  bad(S_, "request_id non-ascii", pb_str(pb_new(), 1, "r\xc3\xa9q"), "request_id");
  bad(S_, "saga_type newline", pb_str(pb_new(), 2, "order\n"), "saga_type");
  bad(S_, "saga_type 129 chars", pb_str(pb_new(), 2, t129), "saga_type");
  bad(S_, "label key empty", label(pb_new(), "", "v", 1), "labels");
  bad(S_, "label key space", label(pb_new(), "a b", "v", 1), "labels");
  bad(S_, "label key 64 chars", label(pb_new(), k64, "v", 1), "labels");
  bad(S_, "label value invalid utf-8", label(pb_new(), "k", "\xff", 1), "labels");
  bad(S_, "label value overlong utf-8", label(pb_new(), "k", "\xc0\x80", 2), "labels");
  bad(S_, "label value surrogate", label(pb_new(), "k", "\xed\xa0\x80", 3), "labels");
  bad(S_, "label value cut utf-8", label(pb_new(), "k", "caf\xc3", 4), "labels");
  bad(S_, "label value 257 bytes", label(pb_new(), "k", v257, 257), "labels");
  bad(S_, "label value NUL", label(pb_new(), "k", "a\0b", 3), "labels");
  bad(S_, "label key twice", label(label(pb_new(), "k", "1", 1), "k", "2", 1), "labels");
  pbuf *many = pb_new();
  for (int i = 0; i < 33; i++) {
    char key[16];
    snprintf(key, sizeof key, "k%d", i);
    label(many, key, "v", 1);
  }
  bad(S_, "33 labels", many, "labels");
  bad(S_, "labels as a varint", pb_varint(pb_new(), 3, 1), "request: cannot decode");

  const char *G = "Coordinator/GetSaga";
  bad(G, "empty global_id", pb_new(), "global_id");
  bad(G, "global_id 129 chars", pb_str(pb_new(), 1, t129), "global_id");
  bad(G, "global_id as a varint", pb_varint(pb_new(), 1, 7), "request: cannot decode");
  const char *P = "Coordinator/GetPolicy";
  bad(P, "service *", pb_str(pb_str(pb_new(), 1, "*"), 2, "op"), "service");
  bad(P, "empty operation", pb_str(pb_new(), 1, "svc"), "operation");

  const char *LS = "Admin/ListSteps";
  bad(LS, "state 7", pb_varint(pb_new(), 1, 7), "state");
  bad(LS, "state -1", pb_varint(pb_new(), 1, (uint64_t)-1), "state");
  bad(LS, "lease_expired_only with SUCCEEDED", pb_varint(pb_varint(pb_new(), 1, 2), 6, 1),
      "lease_expired_only");
  bad(LS, "service upper case", pb_str(pb_new(), 2, "Svc"), "service");
  bad(LS, "global_id bad char", pb_str(pb_new(), 4, "a*b"), "global_id");
  bad(LS, "updated_before negative", pb_varint(pb_new(), 5, (uint64_t)-5),
      "updated_before_unix_ms");
  bad(LS, "page_token garbage", pb_str(pb_new(), 8, "not-a-token"), "page_token");

  const char *SP = "Admin/SetPolicy";
  bad(SP, "failure_mode 5", policy("svc", "op", 5, 60, 1000), "failure_mode");
  bad(SP, "failure_mode unspecified", policy("svc", "op", 0, 60, 1000), "failure_mode");
  bad(SP, "retention_s 0", policy("svc", "op", 1, 0, 1000), "retention_s");
  bad(SP, "retention_s 90 days + 1", policy("svc", "op", 1, 90u * 86400 + 1, 1000), "retention_s");
  bad(SP, "lease_ms 0", policy("svc", "op", 1, 60, 0), "lease_ms");
  bad(SP, "lease_ms over 1 h", policy("svc", "op", 1, 60, 3600001), "lease_ms");
  bad(SP, "service * with an operation", policy("*", "op", 1, 60, 1000), "service");
  bad(SP, "service 65 chars", policy(n65, "op", 1, 60, 1000), "service");
  bad(SP, "operation upper case", policy("svc", "Op", 1, 60, 1000), "operation");
  const char *DP = "Admin/DeletePolicy";
  bad(DP, "empty service", pb_str(pb_new(), 2, "op"), "service");
  bad(DP, "operation space", pb_str(pb_str(pb_new(), 1, "svc"), 2, "o p"), "operation");
  const char *LA = "Admin/ListAudit";
  bad(LA, "global_id bad char", pb_str(pb_new(), 1, "a b"), "global_id");
  bad(LA, "page_token garbage", pb_str(pb_new(), 3, "zzz"), "page_token");
  bad(LA, "page_token of another listing",
      pb_str(pb_str(pb_new(), 1, "g2"), 3, "a0000000000000000123"), "page_token");

  /* the tenant (idem-tenant metadata) follows the global_id rule */
  const char *B = "Coordinator/BeginStep";
  bad_as(t129, B, "tenant 129 chars", with_key(pb_key("g1", "svc", "op", 1)), "tenant");
  /* (gRPC itself refuses to send a non-ASCII header value, so that case cannot arrive) */
  bad_as("", B, "tenant empty", with_key(pb_key("g1", "svc", "op", 1)), "tenant");
  bad_as("a b", B, "tenant space", with_key(pb_key("g1", "svc", "op", 1)), "tenant");
  bad_as("a/b", "Admin/ListPolicies", "tenant slash", pb_new(), "tenant");
  free(r256);
  free(t129);
  free(k64);
  free(v257);
  free(n65);
}

Test(bad_input_table, every_bad_input_is_invalid_argument_naming_the_field_nothing_stored) {
  h_unique("live", LIVE, sizeof LIVE);
  idem_step_key k = {LIVE, "svc", "op", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);
  long long before = h_tenant_hash(H.t);

  step_rpcs();
  saga_and_admin_rpcs();

  printf("bad inputs tried: %d\n", n_tried);
  cr_assert_geq(n_tried, 40);
  cr_assert_eq(h_tenant_hash(H.t), before, "something was stored");
  const char *p[] = {"a/b", "a b"};
  cr_assert_eq(pgx_sql(NULL, "select count(*) from idem_steps where tenant in ($1, $2)", 2, p), 0);
  /* the live step is as it was, and a good request still works */
  idem_record r = {0};
  cr_assert_eq(idem_step_lookup(H.c, &k, &r, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(r.state, IDEM_STATE_IN_PROGRESS);
  cr_assert_eq(r.attempt, 1);
  idem_record_clear(&r);
  cr_assert_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_SUCCEEDED, 0, NULL, 0, NULL, &e),
               IDEM_OK, "%s", e.message);
}
