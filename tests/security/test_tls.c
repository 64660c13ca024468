/* Server TLS (--tls-cert/--tls-key) without client certificates: the handshake with the right
 * CA, refusals for a wrong CA, a wrong name and plaintext, and start-up errors naming the flag. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sec.h"

static sec_pki P;
static srv S;

static void setup(void) {
  sec_pki_make(&P);
}
static void teardown(void) {
  if (S.pid > 0) cr_expect_eq(h_srv_stop(&S), 0);
  sec_pki_free(&P);
}

TestSuite(tls, .init = setup, .fini = teardown, .timeout = 90);

static void start_tls(void) {
  const char *args[] = {"--tls-cert", P.server.cert, "--tls-key", P.server.key, NULL};
  idem_options probe = sec_opts(&S, P.ca, NULL, NULL, "default");
  h_srv_start_probe(&S, NULL, args, &probe);
}

Test(tls, handshake_with_the_right_ca_serves_calls) {
  start_tls();
  char t[64], g[96], got[IDEM_GLOBAL_ID_MAX + 1];
  h_tenant(t);
  h_unique("g", g, sizeof g);
  idem_options o = sec_opts(&S, P.ca, NULL, NULL, t);
  idem_client *c = sec_connect(&o);
  sec_step_done(c, g);
  idem_error e = {0};
  cr_assert_eq(sec_lookup(c, g, got, &e), IDEM_OK, "%s", e.message);
  cr_expect_str_eq(got, t, "without authentication the tenant is idem-tenant");
  idem_close(c);
  /* (the DNS name in the certificate is checked with tls_server_name below: resolving
   * "localhost" through gRPC's c-ares resolver leaks a few bytes LSan reports) */
}

/* A refusal at the handshake: UNAVAILABLE, nothing done. */
static void expect_refused(idem_options o, const char *what) {
  o.deadline_ms = 1500;
  idem_client *c = sec_connect(&o);
  idem_status st;
  idem_error e = {0};
  int rc = idem_get_status(c, &st, &e);
  cr_expect_eq(rc, IDEM_UNAVAILABLE, "%s: expected UNAVAILABLE, got %d (%s)", what, rc, e.message);
  idem_close(c);
}

Test(tls, a_client_trusting_another_ca_is_refused) {
  start_tls();
  expect_refused(sec_opts(&S, P.other_ca, NULL, NULL, NULL), "other CA");
  /* and the right CA still works (the refusal was the CA, not the server) */
  idem_options o = sec_opts(&S, P.ca, NULL, NULL, NULL);
  idem_client *c = sec_connect(&o);
  idem_status st;
  idem_error e = {0};
  cr_expect_eq(idem_get_status(c, &st, &e), IDEM_OK, "%s", e.message);
  idem_close(c);
}

Test(tls, a_name_not_in_the_certificate_is_refused) {
  start_tls();
  idem_options o = sec_opts(&S, P.ca, NULL, NULL, NULL);
  o.tls_server_name = "coordinator.example.org";
  expect_refused(o, "wrong server name");
  o.tls_server_name = "localhost"; /* in the SAN: accepted */
  idem_client *c = sec_connect(&o);
  idem_status st;
  idem_error e = {0};
  cr_expect_eq(idem_get_status(c, &st, &e), IDEM_OK, "%s", e.message);
  idem_close(c);
}

Test(tls, a_plaintext_client_is_refused) {
  start_tls();
  expect_refused(sec_opts(&S, NULL, NULL, NULL, NULL), "plaintext");
}

Test(tls, bad_files_stop_the_start_with_the_flag_named) {
  char out[4096], missing[SEC_PATH + 16];
  snprintf(missing, sizeof missing, "%s/missing.pem", P.dir);
  const char *no_cert[] = {"--tls-cert", missing, "--tls-key", P.server.key, NULL};
  cr_expect_eq(sec_run_to_exit(no_cert, out, sizeof out), 2);
  cr_expect(strstr(out, "--tls-cert") && strstr(out, "missing.pem"), "%s", out);

  const char *wrong_key[] = {"--tls-cert", P.server.cert, "--tls-key", P.client_san.key, NULL};
  cr_expect_eq(sec_run_to_exit(wrong_key, out, sizeof out), 2);
  cr_expect(strstr(out, "--tls-key") && strstr(out, "does not belong"), "%s", out);

  const char *bad_ca[] = {"--tls-cert",      P.server.cert, "--tls-key", P.server.key,
                          "--tls-client-ca", P.server.key,  NULL};
  cr_expect_eq(sec_run_to_exit(bad_ca, out, sizeof out), 2);
  cr_expect(strstr(out, "--tls-client-ca"), "%s", out);

  const char *half[] = {"--tls-cert", P.server.cert, NULL};
  cr_expect_eq(sec_run_to_exit(half, out, sizeof out), 2);
  cr_expect(strstr(out, "--tls-key"), "%s", out);
}

Test(tls, off_loopback_needs_tls_or_insecure) {
  char out[4096];
  const char *plain[] = {"--listen", "0.0.0.0:0", NULL};
  cr_expect_eq(sec_run_to_exit(plain, out, sizeof out), 2);
  cr_expect(strstr(out, "--insecure"), "%s", out);
  /* with TLS the same address is accepted without --insecure: it gets as far as listening */
  const char *args[] = {"--listen",  "0.0.0.0:0",  "--tls-cert", P.server.cert,
                        "--tls-key", P.server.key, NULL};
  char log[SEC_PATH + 16];
  snprintf(log, sizeof log, "%s/offloop.log", P.dir);
  pid_t pid = sec_spawn(args, log);
  bool listening = sec_wait_file_contains(log, "listening", 30000);
  int rc = spawn_stop(pid, 20000);
  cr_expect(listening, "no 'listening' line in %s", log);
  cr_expect_eq(rc, 0);
  cr_expect(!sec_file_contains(log, "plaintext"), "no plaintext warning with TLS");
}

Test(tls, the_config_file_takes_the_tls_keys) {
  char cfg[SEC_PATH + 16];
  snprintf(cfg, sizeof cfg, "%s/idem.ini", P.dir);
  char l1[SEC_PATH + 16], l2[SEC_PATH + 16];
  snprintf(l1, sizeof l1, "tls-cert = %s", P.server.cert);
  snprintf(l2, sizeof l2, "tls_key = %s", P.server.key);
  const char *lines[] = {"[server]", l1, l2, NULL};
  sec_write_file(cfg, lines);
  const char *args[] = {"--config", cfg, NULL};
  idem_options probe = sec_opts(&S, P.ca, NULL, NULL, NULL);
  h_srv_start_probe(&S, NULL, args, &probe); /* the probe only passes over TLS */
  expect_refused(sec_opts(&S, NULL, NULL, NULL, NULL), "plaintext to a TLS server");
}
