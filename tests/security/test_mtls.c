/* Mutual TLS (--tls-client-ca): client certificates are required and verified, the tenant is
 * the certificate's SAN (else its CN), idem-tenant is ignored, certificates get the service
 * role, and a bearer token on top of a certificate brings its own tenant and role. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sec.h"

static sec_pki P;
static srv S;
static char ADMIN_TOKEN[64], ADMIN_TENANT[64], TOKENS[SEC_PATH + 16];

static void setup(void) {
  sec_pki_make(&P);
}
static void teardown(void) {
  if (S.pid > 0) cr_expect_eq(h_srv_stop(&S), 0);
  sec_pki_free(&P);
}

TestSuite(mtls, .init = setup, .fini = teardown, .timeout = 90);

/* with_tokens: also --tokens with one admin token for ADMIN_TENANT */
static void start_mtls(bool with_tokens) {
  const char *args[8] = {"--tls-cert",      P.server.cert, "--tls-key", P.server.key,
                         "--tls-client-ca", P.ca,          NULL};
  if (with_tokens) {
    sec_token("adm", ADMIN_TOKEN);
    h_tenant(ADMIN_TENANT);
    char line[160];
    snprintf(line, sizeof line, "%s %s admin", ADMIN_TOKEN, ADMIN_TENANT);
    const char *lines[] = {"# mtls test", line, NULL};
    snprintf(TOKENS, sizeof TOKENS, "%s/tokens", P.dir);
    sec_write_file(TOKENS, lines);
    args[6] = "--tokens";
    args[7] = TOKENS;
  }
  const char *all[10];
  memcpy(all, args, sizeof args);
  all[8] = NULL;
  idem_options probe = sec_opts(&S, P.ca, &P.client_san, NULL, NULL);
  h_srv_start_probe(&S, NULL, all, &probe);
}

static void expect_refused(idem_options o, const char *what) {
  o.deadline_ms = 1500;
  idem_client *c = sec_connect(&o);
  idem_status st;
  idem_error e = {0};
  int rc = idem_get_status(c, &st, &e);
  cr_expect_eq(rc, IDEM_UNAVAILABLE, "%s: expected UNAVAILABLE, got %d (%s)", what, rc, e.message);
  idem_close(c);
}

Test(mtls, a_client_without_a_certificate_is_refused) {
  start_mtls(false);
  expect_refused(sec_opts(&S, P.ca, NULL, NULL, NULL), "no client certificate");
}

Test(mtls, a_certificate_from_another_ca_is_refused) {
  start_mtls(false);
  expect_refused(sec_opts(&S, P.ca, &P.client_other, NULL, NULL), "other CA's client cert");
}

Test(mtls, the_tenant_is_the_san_or_else_the_cn) {
  start_mtls(false);
  char g_san[96], g_cn[96], got[IDEM_GLOBAL_ID_MAX + 1];
  h_unique("g", g_san, sizeof g_san);
  h_unique("g", g_cn, sizeof g_cn);
  idem_options oa = sec_opts(&S, P.ca, &P.client_san, NULL, NULL);
  idem_options ob = sec_opts(&S, P.ca, &P.client_cn, NULL, NULL);
  idem_client *a = sec_connect(&oa), *b = sec_connect(&ob);
  idem_error e = {0};

  sec_step_done(a, g_san);
  cr_assert_eq(sec_lookup(a, g_san, got, &e), IDEM_OK, "%s", e.message);
  cr_expect_str_eq(got, P.tenant_san, "tenant from the SAN (the CN says not-the-tenant)");
  cr_expect_eq(sec_lookup(b, g_san, got, &e), IDEM_NOT_FOUND, "another tenant's step");

  sec_step_done(b, g_cn);
  cr_assert_eq(sec_lookup(b, g_cn, got, &e), IDEM_OK, "%s", e.message);
  cr_expect_str_eq(got, P.tenant_cn, "tenant from the CN when there is no SAN");
  cr_expect_eq(sec_lookup(a, g_cn, got, &e), IDEM_NOT_FOUND, "another tenant's step");

  /* the rows are stored under those tenants */
  const char *params[] = {P.tenant_san, g_san};
  cr_expect_eq(pgx_sql(NULL, "select count(*) from idem_steps where tenant = $1 and global_id = $2",
                       2, params),
               1);
  idem_close(a);
  idem_close(b);
}

Test(mtls, idem_tenant_metadata_is_ignored) {
  start_mtls(false);
  char g[96], got[IDEM_GLOBAL_ID_MAX + 1];
  h_unique("g", g, sizeof g);
  /* cert A claims tenant B in idem-tenant: the step lands in A */
  idem_options o = sec_opts(&S, P.ca, &P.client_san, NULL, P.tenant_cn);
  idem_client *a_claims_b = sec_connect(&o);
  sec_step_done(a_claims_b, g);
  idem_error e = {0};
  cr_assert_eq(sec_lookup(a_claims_b, g, got, &e), IDEM_OK, "%s", e.message);
  cr_expect_str_eq(got, P.tenant_san);
  /* and B (its own cert) does not see it, while B's name was claimed */
  idem_options ob = sec_opts(&S, P.ca, &P.client_cn, NULL, NULL);
  idem_client *b = sec_connect(&ob);
  cr_expect_eq(sec_lookup(b, g, got, &e), IDEM_NOT_FOUND);
  idem_close(b);
  idem_close(a_claims_b);
}

Test(mtls, certificates_have_the_service_role) {
  start_mtls(false);
  idem_options o = sec_opts(&S, P.ca, &P.client_san, NULL, NULL);
  idem_client *c = sec_connect(&o);
  idem_error e = {0};
  idem_policies l = {0};
  cr_expect_eq(idem_policy_list(c, &l, &e), IDEM_PERMISSION_DENIED, "%s", e.message);
  idem_status st;
  cr_expect_eq(idem_get_status(c, &st, &e), IDEM_OK, "GetStatus needs any role: %s", e.message);
  idem_close(c);
}

Test(mtls, a_token_over_a_certificate_brings_its_tenant_and_role) {
  start_mtls(true);
  idem_options o = sec_opts(&S, P.ca, &P.client_san, ADMIN_TOKEN, NULL);
  idem_client *adm = sec_connect(&o);
  idem_error e = {0};
  idem_policies l = {0};
  cr_expect_eq(idem_policy_list(adm, &l, &e), IDEM_OK, "admin token: %s", e.message);
  idem_policies_clear(&l);
  char g[96], got[IDEM_GLOBAL_ID_MAX + 1];
  h_unique("g", g, sizeof g);
  sec_step_done(adm, g);
  cr_assert_eq(sec_lookup(adm, g, got, &e), IDEM_OK, "%s", e.message);
  cr_expect_str_eq(got, ADMIN_TENANT, "the token's tenant, not the certificate's");
  idem_close(adm);

  /* a wrong token is refused, not replaced by the certificate */
  o.token = "wrong-token-0123456789abcdef";
  idem_client *bad = sec_connect(&o);
  cr_expect_eq(sec_lookup(bad, g, got, &e), IDEM_UNAUTHENTICATED);
  idem_close(bad);
  /* the certificate alone still works, as the service role */
  o.token = NULL;
  idem_client *svc = sec_connect(&o);
  cr_expect_eq(sec_lookup(svc, g, got, &e), IDEM_NOT_FOUND, "the cert's tenant is not ADMIN's");
  cr_expect_eq(idem_policy_list(svc, &l, &e), IDEM_PERMISSION_DENIED);
  idem_close(svc);
  S.keep_log = true;
  cr_expect_eq(h_srv_stop(&S), 0);
  cr_expect(!sec_file_contains(S.log_path, ADMIN_TOKEN), "the log holds the admin token");
  cr_expect(!sec_file_contains(S.log_path, "wrong-token"), "the log holds a presented token");
  unlink(S.log_path);
}
