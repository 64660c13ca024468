/* support_sec.c — see sec.h. Certificates come from the openssl CLI (Debian's openssl). */
#include "sec.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* Runs argv (argv[0] looked up in PATH) with stdout and stderr into log; asserts exit 0. */
static void run(const char *log, const char *const *argv) {
  int st = spawn_run(argv, &(spawn_opts){.log = log, .append = true}, 60000);
  if (st != 0) {
    FILE *f = fopen(log, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) fputs(line, stderr);
    if (f) fclose(f);
    cr_assert_fail("%s %s failed (status %d; 127 = not installed)", argv[0], argv[1], st);
  }
}

static void path(const sec_pki *p, char *out, const char *name) {
  snprintf(out, SEC_PATH, "%s/%s", p->dir, name);
}

/* A self-signed CA: name.pem, name.key. */
static void make_ca(const sec_pki *p, const char *name, char *pem_out) {
  char key[SEC_PATH], log[SEC_PATH], subj[128];
  snprintf(pem_out, SEC_PATH, "%s/%s.pem", p->dir, name);
  snprintf(key, sizeof key, "%s/%s.key", p->dir, name);
  path(p, log, "openssl.log");
  snprintf(subj, sizeof subj, "/CN=idem test %s", name);
  const char *argv[] = {
      "openssl", "req",     "-x509", "-newkey", "ec",    "-pkeyopt", "ec_paramgen_curve:P-256",
      "-nodes",  "-keyout", key,     "-out",    pem_out, "-days",    "2",
      "-subj",   subj,      NULL};
  run(log, argv);
}

/* A key and a certificate signed by ca_name, subject CN=cn, with san ("" = no extension). */
static void make_leaf(const sec_pki *p, const char *ca_name, const char *name, const char *cn,
                      const char *san, sec_pair *out) {
  char csr[SEC_PATH], ext[SEC_PATH], ca[SEC_PATH], ca_key[SEC_PATH], log[SEC_PATH], subj[128];
  snprintf(out->key, SEC_PATH, "%s/%s.key", p->dir, name);
  snprintf(out->cert, SEC_PATH, "%s/%s.pem", p->dir, name);
  snprintf(csr, sizeof csr, "%s/%s.csr", p->dir, name);
  snprintf(ext, sizeof ext, "%s/%s.ext", p->dir, name);
  snprintf(ca, sizeof ca, "%s/%s.pem", p->dir, ca_name);
  snprintf(ca_key, sizeof ca_key, "%s/%s.key", p->dir, ca_name);
  path(p, log, "openssl.log");
  snprintf(subj, sizeof subj, "/CN=%s", cn);
  const char *req[] = {
      "openssl", "req",     "-newkey", "ec",   "-pkeyopt", "ec_paramgen_curve:P-256",
      "-nodes",  "-keyout", out->key,  "-out", csr,        "-subj",
      subj,      NULL};
  run(log, req);
  FILE *f = fopen(ext, "w");
  cr_assert(f);
  fprintf(f, "basicConstraints=CA:FALSE\n");
  if (*san) fprintf(f, "subjectAltName=%s\n", san);
  fclose(f);
  const char *sign[] = {
      "openssl",         "x509", "-req",    "-in",   csr, "-CA",      ca,  "-CAkey", ca_key,
      "-CAcreateserial", "-out", out->cert, "-days", "2", "-extfile", ext, NULL};
  run(log, sign);
}

void sec_pki_make(sec_pki *p) {
  memset(p, 0, sizeof *p);
  snprintf(p->dir, sizeof p->dir, "/tmp/idem-sec-XXXXXX");
  cr_assert(mkdtemp(p->dir), "mkdtemp: %s", strerror(errno));
  h_unique("sec-san", p->tenant_san, sizeof p->tenant_san);
  h_unique("sec-cn", p->tenant_cn, sizeof p->tenant_cn);
  make_ca(p, "ca", p->ca);
  make_ca(p, "other-ca", p->other_ca);
  make_leaf(p, "ca", "server", "idem test server", "IP:127.0.0.1,DNS:localhost", &p->server);
  char san[128];
  snprintf(san, sizeof san, "DNS:%s", p->tenant_san);
  make_leaf(p, "ca", "client-san", "not-the-tenant", san, &p->client_san);
  make_leaf(p, "ca", "client-cn", p->tenant_cn, "", &p->client_cn);
  make_leaf(p, "other-ca", "client-other", "not-the-tenant", san, &p->client_other);
}

void sec_pki_free(sec_pki *p) {
  if (!p->dir[0]) return;
  const char *argv[] = {"rm", "-rf", p->dir, NULL};
  spawn_run(argv, NULL, 30000);
  p->dir[0] = '\0';
}

void sec_token(const char *prefix, char out[64]) {
  unsigned char r[20];
  cr_assert(getrandom(r, sizeof r, 0) == sizeof r);
  int n = snprintf(out, 64, "%s-", prefix);
  for (size_t i = 0; i < sizeof r && n < 62; i++) n += snprintf(out + n, 64 - n, "%02x", r[i]);
}

void sec_write_file(const char *p, const char *const *lines) {
  char tmp[SEC_PATH + 8];
  snprintf(tmp, sizeof tmp, "%s.tmp", p);
  FILE *f = fopen(tmp, "w");
  cr_assert(f, "%s: %s", tmp, strerror(errno));
  for (int i = 0; lines[i]; i++) fprintf(f, "%s\n", lines[i]);
  cr_assert_eq(fclose(f), 0);
  cr_assert_eq(rename(tmp, p), 0, "rename: %s", strerror(errno));
}

idem_options sec_opts(const srv *s, const char *ca, const sec_pair *client, const char *token,
                      const char *tenant) {
  idem_options o = {.address = s->addr, .tenant = tenant, .token = token, .deadline_ms = 3000};
  o.tls_ca_file = ca;
  if (client) {
    o.tls_cert_file = client->cert;
    o.tls_key_file = client->key;
  }
  return o;
}

idem_client *sec_connect(const idem_options *o) {
  idem_client *c = NULL;
  idem_error e = {0};
  int rc = idem_connect(o, &c, &e);
  cr_assert_eq(rc, IDEM_OK, "idem_connect: %s", e.message);
  return c;
}

pid_t sec_spawn(const char *const *args, const char *log) {
  const char *argv[32];
  int argc = 0;
  argv[argc++] = h_env("IDEM_COORDINATOR_BIN");
  argv[argc++] = "--pg";
  argv[argc++] = h_env("IDEM_TEST_PG_URL");
  for (int i = 0; args[i] && argc < 31; i++) argv[argc++] = args[i];
  argv[argc] = NULL;
  return spawn_start(argv, &(spawn_opts){.log = log});
}

int sec_run_to_exit(const char *const *args, char *out, size_t out_len) {
  char log[64];
  snprintf(log, sizeof log, "/tmp/idem-sec-run-%d.log", (int)getpid());
  int rc = spawn_wait(sec_spawn(args, log), 20000);
  cr_assert_neq(rc, -1, "idem-coordinator did not exit within 20 s");
  out[0] = '\0';
  FILE *f = fopen(log, "r");
  if (f) {
    size_t n = fread(out, 1, out_len - 1, f);
    out[n] = '\0';
    fclose(f);
  }
  unlink(log);
  return rc;
}

bool sec_file_contains(const char *p, const char *needle) {
  FILE *f = fopen(p, "r");
  if (!f) return false;
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return strstr(buf, needle) != NULL;
}

bool sec_wait_file_contains(const char *p, const char *needle, int64_t timeout_ms) {
  bool found;
  H_WAITED_EVERY(20, found, sec_file_contains(p, needle), timeout_ms);
  return found;
}

void sec_step_done(idem_client *c, const char *global_id) {
  idem_step_key k = {global_id, "pay", "charge", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  int rc = idem_step_begin(c, &k, NULL, 0, 0, &b, &e);
  cr_assert_eq(rc, IDEM_OK, "begin: %s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
  rc = idem_step_complete(c, &k, b.attempt, IDEM_OUTCOME_SUCCEEDED, 200, "ok", 2, NULL, &e);
  cr_assert_eq(rc, IDEM_OK, "complete: %s", e.message);
  idem_begin_clear(&b);
}

int sec_lookup(idem_client *c, const char *global_id, char *tenant, idem_error *e) {
  idem_step_key k = {global_id, "pay", "charge", IDEM_FORWARD};
  idem_record r = {0};
  int rc = idem_step_lookup(c, &k, &r, e);
  if (rc == IDEM_OK) snprintf(tenant, IDEM_GLOBAL_ID_MAX + 1, "%s", r.tenant);
  idem_record_clear(&r);
  return rc;
}
