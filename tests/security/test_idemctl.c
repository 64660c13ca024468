/* idemctl against a coordinator with mTLS and tokens (IDEMCTL_BIN, set by tests/CMakeLists.txt):
 * the --tls-* flags and their environment variables, --token, and the exit codes of refusals. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sec.h"

#ifndef IDEMCTL_BIN
#error "IDEMCTL_BIN must name the idemctl binary"
#endif

static sec_pki P;
static srv S;
static char ADM[64], T_ADM[64], TOKENS[SEC_PATH + 16];

static void setup(void) {
  sec_pki_make(&P);
  sec_token("adm", ADM);
  h_tenant(T_ADM);
  char line[160];
  snprintf(line, sizeof line, "%s %s admin", ADM, T_ADM);
  const char *lines[] = {line, NULL};
  snprintf(TOKENS, sizeof TOKENS, "%s/tokens", P.dir);
  sec_write_file(TOKENS, lines);
  const char *args[] = {"--tls-cert", P.server.cert, "--tls-key", P.server.key, "--tls-client-ca",
                        P.ca,         "--tokens",    TOKENS,      NULL};
  idem_options probe = sec_opts(&S, P.ca, &P.client_san, NULL, NULL);
  h_srv_start_probe(&S, NULL, args, &probe);
}
static void teardown(void) {
  if (S.pid > 0) cr_expect_eq(h_srv_stop(&S), 0);
  sec_pki_free(&P);
}

TestSuite(idemctl, .init = setup, .fini = teardown, .timeout = 90);

/* Runs idemctl --addr S argv... (NULL-terminated) with the environment env (NAME=VALUE strings,
 * NULL-terminated, may be NULL) added; returns the exit status, stderr into err. */
static int ctl(const char *const *env, const char *const *args, char *err, size_t err_len) {
  const char *argv[32];
  int argc = 0;
  argv[argc++] = IDEMCTL_BIN;
  argv[argc++] = "--addr";
  argv[argc++] = S.addr;
  argv[argc++] = "--deadline-ms";
  argv[argc++] = "2000";
  for (int i = 0; args[i] && argc < 31; i++) argv[argc++] = args[i];
  argv[argc] = NULL;
  char errf[SEC_PATH + 16];
  snprintf(errf, sizeof errf, "%s/idemctl.err", P.dir);
  int st = spawn_run(argv, &(spawn_opts){.out_log = "/dev/null", .err_log = errf, .env = env},
                     60000);
  FILE *f = fopen(errf, "r");
  size_t n = f ? fread(err, 1, err_len - 1, f) : 0;
  err[n] = '\0';
  if (f) fclose(f);
  return st;
}

/* ctl, expecting exit status want; a failure names what, the status and idemctl's stderr. */
static void expect_exit(const char *const *env, const char *const *args, int want,
                        const char *what, char *err, size_t err_len) {
  int st = ctl(env, args, err, err_len);
  cr_expect_eq(st, want, "%s (exit %d: %s)", what, st, err);
}

Test(idemctl, tls_flags_certificates_and_tokens) {
  char err[4096];
  const char *status[] = {"--tls-ca",       P.ca,     "--tls-cert", P.client_san.cert, "--tls-key",
                          P.client_san.key, "status", NULL};
  cr_expect_eq(ctl(NULL, status, err, sizeof err), 0, "%s", err);

  const char *svc_admin[] = {"--tls-ca",        P.ca,        "--tls-cert",
                             P.client_san.cert, "--tls-key", P.client_san.key,
                             "policy",          "list",      NULL};
  expect_exit(NULL, svc_admin, 1, "a certificate is not admin", err, sizeof err);
  cr_expect(strstr(err, "permission denied"), "%s", err);

  const char *adm[] = {"--tls-ca",   P.ca,
                       "--tls-cert", P.client_san.cert,
                       "--tls-key",  P.client_san.key,
                       "--token",    ADM,
                       "policy",     "list",
                       NULL};
  cr_expect_eq(ctl(NULL, adm, err, sizeof err), 0, "%s", err);

  const char *no_cert[] = {"--tls-ca", P.ca, "status", NULL};
  expect_exit(NULL, no_cert, 3, "no client certificate: unavailable", err, sizeof err);

  const char *half[] = {"--tls-ca", P.ca, "--tls-cert", P.client_san.cert, "status", NULL};
  expect_exit(NULL, half, 2, "--tls-cert without --tls-key is usage", err, sizeof err);
}

Test(idemctl, tls_environment_variables) {
  static char ca[SEC_PATH + 16], cert[SEC_PATH + 32], key[SEC_PATH + 32], tok[96];
  snprintf(ca, sizeof ca, "IDEM_TLS_CA=%s", P.ca);
  snprintf(cert, sizeof cert, "IDEM_TLS_CLIENT_CERT=%s", P.client_san.cert);
  snprintf(key, sizeof key, "IDEM_TLS_CLIENT_KEY=%s", P.client_san.key);
  snprintf(tok, sizeof tok, "IDEM_TOKEN=%s", ADM);
  const char *env[] = {ca, cert, key, tok, NULL};
  const char *list[] = {"policy", "list", NULL};
  char err[4096];
  cr_expect_eq(ctl(env, list, err, sizeof err), 0, "%s", err);
  const char *wrong[] = {"--token", "wrong-token-0123456789abcdef", "policy", "list", NULL};
  expect_exit(env, wrong, 1, "the flag wins over IDEM_TOKEN", err, sizeof err);
  cr_expect(strstr(err, "unauthenticated: invalid token"), "%s", err);
  cr_expect(!strstr(err, "wrong-token"), "the error repeats the token: %s", err);
}
