/* Bearer tokens (--tokens): missing and wrong tokens, roles, idem-tenant ignored, health open,
 * SIGHUP reload (good and bad files), and no token ever in the server's log. Plaintext on
 * loopback: the tokens file does not need TLS to be checked. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sec.h"

static char DIR_[SEC_PATH] = "";
static char FILE_[SEC_PATH + 16];
static char SVC[64], ADM[64], NEW[64], T_SVC[64], T_ADM[64];
static srv S;

static void setup(void) {
  snprintf(DIR_, sizeof DIR_, "/tmp/idem-sec-tok-XXXXXX");
  cr_assert(mkdtemp(DIR_));
  snprintf(FILE_, sizeof FILE_, "%s/tokens", DIR_);
  sec_token("svc", SVC);
  sec_token("adm", ADM);
  sec_token("new", NEW);
  h_tenant(T_SVC);
  h_tenant(T_ADM);
  char l1[160], l2[160];
  snprintf(l1, sizeof l1, "%s %s service", SVC, T_SVC);
  snprintf(l2, sizeof l2, "%s\t%s  admin   # the operators", ADM, T_ADM);
  const char *lines[] = {"# idem tokens", "", l1, l2, NULL};
  sec_write_file(FILE_, lines);
  cr_assert_eq(chmod(FILE_, 0644), 0); /* readable by others: the server warns */
  const char *args[] = {"--tokens", FILE_, NULL};
  idem_options probe = {.token = SVC};
  h_srv_start_probe(&S, NULL, args, &probe);
  S.keep_log = true;
}

/* Stops the server; its log must hold none of the tokens, then it is removed. */
static void teardown(void) {
  if (S.pid > 0) cr_expect_eq(h_srv_stop(&S), 0);
  const char *secrets[] = {SVC, ADM, NEW, "wrong-token"};
  for (size_t i = 0; i < sizeof secrets / sizeof secrets[0]; i++)
    cr_expect(!sec_file_contains(S.log_path, secrets[i]), "the server log holds a token (%zu)", i);
  unlink(S.log_path);
  unlink(FILE_);
  rmdir(DIR_);
}

TestSuite(tokens, .init = setup, .fini = teardown, .timeout = 90);

static idem_client *client(const char *token, const char *tenant) {
  idem_options o = sec_opts(&S, NULL, NULL, token, tenant);
  return sec_connect(&o);
}

static int lookup_code(const char *token, idem_error *e) {
  idem_client *c = client(token, NULL);
  char got[IDEM_GLOBAL_ID_MAX + 1];
  int rc = sec_lookup(c, "no-such-saga", got, e);
  idem_close(c);
  return rc;
}

Test(tokens, a_missing_or_wrong_token_is_unauthenticated) {
  idem_error e = {0};
  cr_expect_eq(lookup_code(NULL, &e), IDEM_UNAUTHENTICATED);
  cr_expect_str_eq(e.message, "missing credentials");
  cr_expect_eq(lookup_code("wrong-token-0123456789abcdef", &e), IDEM_UNAUTHENTICATED);
  cr_expect_str_eq(e.message, "invalid token");
  char prefix[64]; /* a prefix of a real token is no token */
  snprintf(prefix, sizeof prefix, "%.*s", (int)strlen(SVC) - 1, SVC);
  cr_expect_eq(lookup_code(prefix, &e), IDEM_UNAUTHENTICATED);
  cr_expect_eq(lookup_code(SVC, &e), IDEM_NOT_FOUND, "the real token: %s", e.message);
  /* GetStatus needs credentials too (any role) */
  idem_client *c = client(NULL, NULL);
  idem_status st;
  cr_expect_eq(idem_get_status(c, &st, &e), IDEM_UNAUTHENTICATED);
  idem_close(c);
}

Test(tokens, a_service_token_is_refused_admin_methods) {
  idem_client *svc = client(SVC, NULL);
  idem_error e = {0};
  idem_policies l = {0};
  cr_expect_eq(idem_policy_list(svc, &l, &e), IDEM_PERMISSION_DENIED, "%s", e.message);
  cr_expect(strstr(e.message, "admin"), "%s", e.message);
  idem_policy p = {.failure_mode = 2, .retention_s = 60, .lease_ms = 1000};
  snprintf(p.service, sizeof p.service, "pay");
  snprintf(p.operation, sizeof p.operation, "charge");
  cr_expect_eq(idem_policy_set(svc, &p, NULL, &e), IDEM_PERMISSION_DENIED);
  idem_status st;
  cr_expect_eq(idem_get_status(svc, &st, &e), IDEM_OK, "GetStatus: %s", e.message);
  idem_close(svc);
}

Test(tokens, an_admin_token_may_call_admin_methods) {
  idem_client *adm = client(ADM, NULL);
  idem_error e = {0};
  idem_policy p = {.failure_mode = 2, .retention_s = 60, .lease_ms = 1000};
  snprintf(p.service, sizeof p.service, "pay");
  snprintf(p.operation, sizeof p.operation, "charge");
  cr_expect_eq(idem_policy_set(adm, &p, NULL, &e), IDEM_OK, "%s", e.message);
  idem_policies l = {0};
  cr_assert_eq(idem_policy_list(adm, &l, &e), IDEM_OK, "%s", e.message);
  cr_expect_eq(l.n, 1, "the admin's tenant has its one row");
  idem_policies_clear(&l);
  idem_close(adm);
  const char *params[] = {T_ADM};
  cr_expect_eq(pgx_sql(NULL, "select count(*) from idem_policies where tenant = $1", 1, params), 1);
}

Test(tokens, the_token_decides_the_tenant_not_idem_tenant) {
  char g[96], got[IDEM_GLOBAL_ID_MAX + 1];
  h_unique("g", g, sizeof g);
  idem_client *svc_claims_adm = client(SVC, T_ADM);
  sec_step_done(svc_claims_adm, g);
  idem_error e = {0};
  cr_assert_eq(sec_lookup(svc_claims_adm, g, got, &e), IDEM_OK, "%s", e.message);
  cr_expect_str_eq(got, T_SVC);
  idem_client *adm = client(ADM, NULL);
  cr_expect_eq(sec_lookup(adm, g, got, &e), IDEM_NOT_FOUND, "the claimed tenant has nothing");
  idem_close(adm);
  idem_close(svc_claims_adm);
}

Test(tokens, health_needs_no_credentials) {
  char details[128];
  /* HealthCheckRequest{} is zero bytes */
  int rc = h_raw_call(S.addr, "/grpc.health.v1.Health/Check", NULL, "", 0, details, sizeof details);
  cr_expect_eq(rc, 0, "health: %d %s", rc, details);
  rc = h_raw_call(S.addr, "/idem.v1.Admin/GetStatus", NULL, "", 0, details, sizeof details);
  cr_expect_eq(rc, IDEM_UNAUTHENTICATED, "GetStatus without a token: %d %s", rc, details);
}

/* Polls until a call with token answers want (or 10 s pass). */
static bool eventually(const char *token, int want) {
  idem_error e = {0};
  bool answered;
  H_WAITED_EVERY(50, answered, lookup_code(token, &e) == want, 10000);
  return answered;
}

Test(tokens, sighup_reloads_the_file) {
  idem_error e = {0};
  cr_assert_eq(lookup_code(NEW, &e), IDEM_UNAUTHENTICATED, "not in the file yet");
  /* NEW added, SVC removed */
  char l1[160], l2[160];
  snprintf(l1, sizeof l1, "%s %s service", NEW, T_SVC);
  snprintf(l2, sizeof l2, "%s %s admin", ADM, T_ADM);
  const char *lines[] = {l1, l2, NULL};
  sec_write_file(FILE_, lines);
  cr_assert_eq(kill(S.pid, SIGHUP), 0);
  cr_expect(eventually(NEW, IDEM_NOT_FOUND), "the new token works after SIGHUP");
  cr_expect(eventually(SVC, IDEM_UNAUTHENTICATED), "the removed token fails after SIGHUP");
  cr_expect(sec_wait_file_contains(S.log_path, "tokens reloaded", 5000));
  cr_expect(sec_file_contains(S.log_path, "the tokens file is open to other users"));

  /* a bad file: the reload fails, the tokens in force stay, the error names the line */
  char bad[160];
  snprintf(bad, sizeof bad, "%s %s superuser", SVC, T_SVC);
  const char *bad_lines[] = {l1, bad, NULL};
  sec_write_file(FILE_, bad_lines);
  cr_assert_eq(kill(S.pid, SIGHUP), 0);
  cr_expect(sec_wait_file_contains(S.log_path, "tokens:2: role must be service, admin or operator", 5000),
            "the reload error names the line");
  cr_expect_eq(lookup_code(NEW, &e), IDEM_NOT_FOUND, "still in force: %s", e.message);
  cr_expect_eq(lookup_code(SVC, &e), IDEM_UNAUTHENTICATED, "the bad file's token is not loaded");
}
