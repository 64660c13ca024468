/* node_sec.c — the node's security wiring: see node_sec.h. */
#include "node_sec.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../util/log.h"

int node_sec_setup(const node_sec_paths *p, tls_files *tls, auth_keyring **tokens, char *msg,
                   size_t n) {
  memset(tls, 0, sizeof *tls);
  *tokens = NULL;
  if (p->tls_cert) {
    static const char *const flag[] = {[TLS_FILE_CERT] = "--tls-cert",
                                       [TLS_FILE_KEY] = "--tls-key",
                                       [TLS_FILE_CLIENT_CA] = "--tls-client-ca"};
    tls_file_which which;
    char why[200];
    if (tls_files_load(p->tls_cert, p->tls_key, p->tls_client_ca, tls, &which, why, sizeof why)) {
      const char *path = which == TLS_FILE_CERT  ? p->tls_cert
                         : which == TLS_FILE_KEY ? p->tls_key
                                                 : p->tls_client_ca;
      snprintf(msg, n, "%s %s: %s", flag[which], path, why);
      return -1;
    }
  }
  if (p->tokens) {
    err_t err;
    err_clear(&err);
    if (!(*tokens = auth_keyring_open(p->tokens, &err))) { /* the message names the line */
      snprintf(msg, n, "--tokens %s", err.msg);
      tls_files_clear(tls);
      return -1;
    }
  }
  return 0;
}

static void count(auth_keyring *k, char *buf, size_t n) {
  auth_tokens *t = auth_keyring_acquire(k);
  snprintf(buf, n, "%zu", auth_tokens_count(t));
  auth_tokens_release(t);
}

void node_sec_log(const node_sec_paths *p, auth_keyring *tokens, bool local_listen) {
  if (p->tls_cert)
    log_kv(LOG_INFO, p->tls_client_ca ? "tls on, client certificates required" : "tls on", "cert",
           p->tls_cert, (const char *)NULL);
  if (tokens) {
    char n[24];
    count(tokens, n, sizeof n);
    log_kv(LOG_INFO, "bearer tokens loaded", "file", p->tokens, "tokens", n, (const char *)NULL);
    struct stat st;
    if (stat(p->tokens, &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)))
      log_kv(LOG_WARN, "the tokens file is open to other users: chmod 600 it", "file", p->tokens,
             (const char *)NULL);
    if (!p->tls_cert && !local_listen)
      log_kv(LOG_WARN, "bearer tokens travel in plaintext: use --tls-cert", (const char *)NULL);
  }
  if (!p->tls_client_ca && !tokens)
    log_kv(LOG_INFO, "authentication off: the tenant is the idem-tenant metadata",
           (const char *)NULL);
}

void node_sec_reload(auth_keyring *tokens) {
  if (!tokens) {
    log_kv(LOG_INFO, "SIGHUP ignored: no --tokens file", (const char *)NULL);
    return;
  }
  err_t err;
  err_clear(&err);
  if (auth_keyring_reload(tokens, &err) != ERR_OK) {
    log_kv(LOG_ERROR, "cannot reload the tokens file, keeping the tokens in force", "error",
           err.msg, (const char *)NULL);
    return;
  }
  char n[24];
  count(tokens, n, sizeof n);
  log_kv(LOG_INFO, "tokens reloaded", "file", auth_keyring_path(tokens), "tokens", n,
         (const char *)NULL);
}
