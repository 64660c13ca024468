/* test_validate.c — every validation rule of docs/api.md §1 (validate.h), at its boundaries. */
#include <criterion/criterion.h>
#include <string.h>

#include "validate/validate.h"

/* A string of n copies of c (static buffer, one per call site is enough for these tests). */
static char *rep(char *buf, size_t n, char c) {
  memset(buf, c, n);
  buf[n] = '\0';
  return buf;
}

static void ok(err_code rc, const err_t *e) {
  cr_assert_eq(rc, ERR_OK, "unexpected refusal: %s", e->msg);
}

static void bad(err_code rc, const err_t *e, const char *field) {
  cr_assert_eq(rc, ERR_INVALID, "accepted, want refusal naming %s", field);
  cr_assert_eq(e->code, ERR_INVALID);
  cr_assert(strncmp(e->msg, field, strlen(field)) == 0, "message \"%s\" does not start with %s",
            e->msg, field);
  size_t n = strlen(e->msg);
  cr_assert(n > 0 && e->msg[n - 1] != '.', "trailing period: %s", e->msg);
}

/* ---- global_id / tenant ---- */

Test(global_id, accepts_charset_and_lengths) {
  err_t e;
  char buf[300];
  ok(validate_global_id("key.global_id", "a", &e), &e);
  ok(validate_global_id("key.global_id", "AZaz09._:-", &e), &e);
  ok(validate_global_id("key.global_id", "0190a6d2-7b3c-7def-8abc-0123456789ab", &e), &e);
  ok(validate_global_id("key.global_id", rep(buf, 128, 'x'), &e), &e);
}

Test(global_id, refuses_empty_long_and_bad_chars) {
  err_t e;
  char buf[300];
  bad(validate_global_id("key.global_id", "", &e), &e, "key.global_id");
  bad(validate_global_id("key.global_id", NULL, &e), &e, "key.global_id");
  bad(validate_global_id("key.global_id", rep(buf, 129, 'x'), &e), &e, "key.global_id");
  bad(validate_global_id("key.global_id", rep(buf, 299, 'x'), &e), &e, "key.global_id");
  const char *bads[] = {"a b", "a/b", "a@b", "a+b", "ä", "a\tb", "a*", "a\x7f"};
  for (size_t i = 0; i < sizeof bads / sizeof *bads; i++)
    bad(validate_global_id("key.global_id", bads[i], &e), &e, "key.global_id");
  cr_assert(strstr(e.msg, "128"), "%s", e.msg);
}

Test(global_id, field_name_comes_from_caller) {
  err_t e;
  bad(validate_global_id("global_id", "", &e), &e, "global_id");
}

Test(tenant, follows_the_global_id_rule) {
  err_t e;
  char buf[300];
  ok(validate_tenant("default", &e), &e);
  ok(validate_tenant("Acme:eu-1.prod_2", &e), &e);
  ok(validate_tenant(rep(buf, 128, 'T'), &e), &e);
  bad(validate_tenant(rep(buf, 129, 'T'), &e), &e, "tenant");
  bad(validate_tenant("", &e), &e, "tenant");
  bad(validate_tenant(NULL, &e), &e, "tenant");
  bad(validate_tenant("acme corp", &e), &e, "tenant");
}

/* ---- service / operation ---- */

Test(name, accepts_lowercase_charset_and_lengths) {
  err_t e;
  char buf[100];
  ok(validate_name("key.service", "s", &e), &e);
  ok(validate_name("key.service", "az09._-", &e), &e);
  ok(validate_name("key.service", rep(buf, 64, 'q'), &e), &e);
}

Test(name, refuses_empty_long_upper_and_bad_chars) {
  err_t e;
  char buf[100];
  bad(validate_name("key.service", "", &e), &e, "key.service");
  bad(validate_name("key.service", NULL, &e), &e, "key.service");
  bad(validate_name("key.operation", rep(buf, 65, 'q'), &e), &e, "key.operation");
  const char *bads[] = {"Payments", "pay ments", "pay:ments", "pay/ments", "*", "é"};
  for (size_t i = 0; i < sizeof bads / sizeof *bads; i++)
    bad(validate_name("key.operation", bads[i], &e), &e, "key.operation");
}

/* ---- key ---- */

Test(key, fills_out_when_valid) {
  err_t e;
  step_key k;
  memset(&k, 0x7f, sizeof k);
  ok(validate_key("acme", "g-1", "payments", "charge", PHASE_COMPENSATION, &k, &e), &e);
  cr_assert_str_eq(k.tenant, "acme");
  cr_assert_str_eq(k.global_id, "g-1");
  cr_assert_str_eq(k.service, "payments");
  cr_assert_str_eq(k.operation, "charge");
  cr_assert_eq(k.phase, PHASE_COMPENSATION);
}

Test(key, max_lengths_fit) {
  err_t e;
  step_key k;
  char t[200], g[200], s[100], o[100];
  ok(validate_key(rep(t, 128, 't'), rep(g, 128, 'g'), rep(s, 64, 's'), rep(o, 64, 'o'),
                  PHASE_FORWARD, &k, &e),
     &e);
  cr_assert_eq(strlen(k.tenant), 128);
  cr_assert_eq(strlen(k.global_id), 128);
  cr_assert_eq(strlen(k.service), 64);
  cr_assert_eq(strlen(k.operation), 64);
}

Test(key, names_each_field) {
  err_t e;
  step_key k;
  bad(validate_key("", "g", "s", "o", PHASE_FORWARD, &k, &e), &e, "tenant");
  bad(validate_key("t", "", "s", "o", PHASE_FORWARD, &k, &e), &e, "key.global_id");
  bad(validate_key("t", "g", "S", "o", PHASE_FORWARD, &k, &e), &e, "key.service");
  bad(validate_key("t", "g", "s", NULL, PHASE_FORWARD, &k, &e), &e, "key.operation");
}

Test(key, phase_must_be_forward_or_compensation) {
  err_t e;
  step_key k;
  ok(validate_key("t", "g", "s", "o", PHASE_FORWARD, &k, &e), &e);
  ok(validate_key("t", "g", "s", "o", PHASE_COMPENSATION, &k, &e), &e);
  bad(validate_key("t", "g", "s", "o", PHASE_UNSPECIFIED, &k, &e), &e, "key.phase");
  bad(validate_key("t", "g", "s", "o", 3, &k, &e), &e, "key.phase");
  bad(validate_key("t", "g", "s", "o", -1, &k, &e), &e, "key.phase");
}

/* ---- sizes ---- */

Test(fingerprint, zero_to_64_bytes) {
  err_t e;
  ok(validate_fingerprint(0, &e), &e);
  ok(validate_fingerprint(64, &e), &e);
  bad(validate_fingerprint(65, &e), &e, "fingerprint");
  bad(validate_fingerprint((size_t)-1, &e), &e, "fingerprint");
}

Test(body, up_to_the_configured_max) {
  err_t e;
  ok(validate_body(0, 65536, &e), &e);
  ok(validate_body(65536, 65536, &e), &e);
  bad(validate_body(65537, 65536, &e), &e, "body");
  cr_assert(strstr(e.msg, "65536"), "%s", e.msg);
  ok(validate_body(10, 10, &e), &e);
  bad(validate_body(11, 10, &e), &e, "body");
}

/* ---- request_id ---- */

Test(request_id, empty_means_none) {
  err_t e;
  ok(validate_request_id("", &e), &e);
  ok(validate_request_id(NULL, &e), &e);
}

Test(request_id, printable_ascii_up_to_255) {
  err_t e;
  char buf[300];
  ok(validate_request_id("x", &e), &e);
  ok(validate_request_id(" order #42: {retry} ~", &e), &e);
  ok(validate_request_id(rep(buf, 255, '~'), &e), &e);
  bad(validate_request_id(rep(buf, 256, 'a'), &e), &e, "request_id");
  bad(validate_request_id("tab\there", &e), &e, "request_id");
  bad(validate_request_id("del\x7f", &e), &e, "request_id");
  bad(validate_request_id("caf\xc3\xa9", &e), &e, "request_id");
  bad(validate_request_id("nl\n", &e), &e, "request_id");
}

/* ---- saga_type ---- */

Test(saga_type, zero_to_128_printable) {
  err_t e;
  char buf[300];
  ok(validate_saga_type("", &e), &e);
  ok(validate_saga_type(NULL, &e), &e);
  ok(validate_saga_type("Order Checkout v2", &e), &e);
  ok(validate_saga_type(rep(buf, 128, 'a'), &e), &e);
  bad(validate_saga_type(rep(buf, 129, 'a'), &e), &e, "saga_type");
  bad(validate_saga_type("a\x01", &e), &e, "saga_type");
  bad(validate_saga_type("\xe2\x82\xac", &e), &e, "saga_type");
}

/* ---- labels ---- */

Test(label, key_rule) {
  err_t e;
  char buf[100];
  ok(validate_label("k", "v", &e), &e);
  ok(validate_label("app.kubernetes.io/Name_1-x", "v", &e), &e);
  ok(validate_label(rep(buf, 63, 'k'), "v", &e), &e);
  bad(validate_label(rep(buf, 64, 'k'), "v", &e), &e, "labels");
  bad(validate_label("", "v", &e), &e, "labels");
  bad(validate_label(NULL, "v", &e), &e, "labels");
  bad(validate_label("a b", "v", &e), &e, "labels");
  bad(validate_label("a:b", "v", &e), &e, "labels");
}

Test(label, value_rule) {
  err_t e;
  char buf[300];
  ok(validate_label("k", "", &e), &e);
  ok(validate_label("k", NULL, &e), &e);
  ok(validate_label("k", rep(buf, 256, 'v'), &e), &e);
  ok(validate_label("k", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf", &e), &e);
  bad(validate_label("k", rep(buf, 257, 'v'), &e), &e, "labels");
}

Test(label, value_must_be_valid_utf8) {
  err_t e;
  const char *bads[] = {
      "\x80",             /* lone continuation */
      "\xc3",             /* truncated */
      "\xc0\xaf",         /* overlong '/' */
      "\xc1\xbf",         /* overlong */
      "\xe0\x80\xaf",     /* overlong 3-byte */
      "\xed\xa0\x80",     /* surrogate U+D800 */
      "\xf0\x80\x80\xaf", /* overlong 4-byte */
      "\xf4\x90\x80\x80", /* above U+10FFFF */
      "\xf5\x80\x80\x80", /* invalid lead */
      "\xff",             /* invalid byte */
      "ok\xe2\x82",       /* truncated at the end */
      "\xe2\x28\xa1",     /* bad continuation */
  };
  for (size_t i = 0; i < sizeof bads / sizeof *bads; i++)
    bad(validate_label("k", bads[i], &e), &e, "labels");
}

Test(label, utf8_multibyte_at_the_256_byte_limit) {
  err_t e;
  char buf[300];
  /* 128 two-byte characters = 256 bytes: fine; one more byte: too long */
  for (int i = 0; i < 128; i++) memcpy(buf + 2 * i, "\xc3\xa9", 2);
  buf[256] = '\0';
  ok(validate_label("k", buf, &e), &e);
  buf[256] = 'x';
  buf[257] = '\0';
  bad(validate_label("k", buf, &e), &e, "labels");
}

/* ---- lease_ms ---- */

Test(lease_ms, zero_means_policy_when_allowed) {
  err_t e;
  ok(validate_lease_ms("lease_ms", 0, 1, &e), &e);
  bad(validate_lease_ms("lease_ms", 0, 0, &e), &e, "lease_ms");
}

Test(lease_ms, one_ms_to_one_hour) {
  err_t e;
  ok(validate_lease_ms("lease_ms", 1, 1, &e), &e);
  ok(validate_lease_ms("lease_ms", REC_LEASE_MS_MAX, 1, &e), &e);
  ok(validate_lease_ms("lease_ms", REC_LEASE_MS_MAX, 0, &e), &e);
  bad(validate_lease_ms("lease_ms", REC_LEASE_MS_MAX + 1, 1, &e), &e, "lease_ms");
  bad(validate_lease_ms("lease_ms", UINT32_MAX, 0, &e), &e, "lease_ms");
  cr_assert(strstr(e.msg, "3600000"), "%s", e.msg);
}

/* ---- outcome, attempt ---- */

Test(outcome, the_four_outcomes) {
  err_t e;
  ok(validate_outcome(OUTCOME_SUCCEEDED, &e), &e);
  ok(validate_outcome(OUTCOME_FAILED, &e), &e);
  ok(validate_outcome(OUTCOME_RETRYABLE, &e), &e);
  ok(validate_outcome(OUTCOME_UNKNOWN, &e), &e);
  bad(validate_outcome(OUTCOME_UNSPECIFIED, &e), &e, "outcome");
  bad(validate_outcome(5, &e), &e, "outcome");
  bad(validate_outcome(-1, &e), &e, "outcome");
}

Test(attempt, at_least_one) {
  err_t e;
  ok(validate_attempt(1, &e), &e);
  ok(validate_attempt(UINT64_MAX, &e), &e);
  bad(validate_attempt(0, &e), &e, "attempt");
}

Test(messages, are_lower_case_style) {
  err_t e;
  validate_attempt(0, &e);
  cr_assert_str_eq(e.msg, "attempt: must be at least 1");
  validate_global_id("key.global_id", "", &e);
  cr_assert_str_eq(e.msg, "key.global_id: must be 1 to 128 characters of [A-Za-z0-9._:-]");
  validate_fingerprint(65, &e);
  cr_assert_str_eq(e.msg, "fingerprint: must be at most 64 bytes");
  validate_body(65537, 65536, &e);
  cr_assert_str_eq(e.msg, "body: must be at most 65536 bytes");
}

/* ---- free text (resolve reason, actor) ---- */

Test(text, strict_utf8_without_control_characters) {
  err_t e;
  ok(validate_text("reason", "", 10, &e), &e);
  ok(validate_text("reason", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 64, &e), &e);
  ok(validate_text("reason", "\xc2\xa0 no-break space", 64, &e), &e);
  bad(validate_text("reason", "0123456789x", 10, &e), &e, "reason");
  bad(validate_text("reason", "bell \x07", 64, &e), &e, "reason");
  bad(validate_text("reason", "del \x7f", 64, &e), &e, "reason");
  bad(validate_text("reason", "c1 \xc2\x85", 64, &e), &e, "reason");
  bad(validate_text("actor", "\xed\xa0\x80", 64, &e), &e, "actor");     /* surrogate */
  bad(validate_text("actor", "\xe0\x80\xaf", 64, &e), &e, "actor");     /* overlong */
  bad(validate_text("actor", "\xf4\x90\x80\x80", 64, &e), &e, "actor"); /* > U+10FFFF */
  bad(validate_text("actor", "\xf5\x80\x80\x80", 64, &e), &e, "actor");
  bad(validate_text("actor", "cut \xe2\x82", 64, &e), &e, "actor");
}

/* A reason may span lines (LF), as typed into the console's textarea; nothing else of C0. */
Test(text, reason_lines_are_lf_only) {
  err_t e;
  ok(validate_reason("reason", "line one\nline two\n", 64, &e), &e);
  bad(validate_text("reason", "line one\nline two", 64, &e), &e, "reason");
  bad(validate_reason("reason", "line one\r\nline two", 64, &e), &e, "reason");
  cr_assert(strstr(e.msg, "only control character is the line feed"), "says what: %s", e.msg);
  bad(validate_reason("reason", "tab\there", 64, &e), &e, "reason");
  bad(validate_reason("reason", "bell \x07", 64, &e), &e, "reason");
  bad(validate_reason("reason", "c1 \xc2\x85", 64, &e), &e, "reason");
  bad(validate_reason("reason", "0123456789\n", 10, &e), &e, "reason");
}
