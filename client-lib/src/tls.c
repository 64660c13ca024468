/* tls.c — the channel credentials of a client: plaintext, or TLS that
 * verifies the coordinator's certificate, optionally presenting a client certificate. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "idem_internal.h"

#define PEM_MAX (1024 * 1024)

/* The whole file as a string into *out (owned); IDEM_INVALID_ARGUMENT naming field. */
static int read_pem(const char *path, const char *field, char **out, idem_error *err) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f)
    return idem__fail(err, IDEM_INVALID_ARGUMENT, "%s: cannot open %s: %s", field, path,
                      strerror(errno));
  char *buf = malloc(PEM_MAX + 1);
  size_t n = buf ? fread(buf, 1, PEM_MAX + 1, f) : 0;
  int bad = !buf ? IDEM_NOMEM : ferror(f) || n == 0 || n > PEM_MAX ? IDEM_INVALID_ARGUMENT : 0;
  fclose(f);
  if (bad) {
    if (buf) memset(buf, 0, n < PEM_MAX ? n : PEM_MAX);
    free(buf);
    return bad == IDEM_NOMEM ? idem__fail(err, IDEM_NOMEM, "out of memory")
                             : idem__fail(err, IDEM_INVALID_ARGUMENT,
                                          "%s: %s is empty, unreadable or over 1 MiB", field, path);
  }
  buf[n] = '\0';
  *out = buf;
  return IDEM_OK;
}

static void free_secret(char *s) {
  if (s) memset(s, 0, strlen(s));
  free(s);
}

bool idem__tls_wanted(const idem_options *opt) {
  return opt->tls || (opt->tls_ca_file && *opt->tls_ca_file) ||
         (opt->tls_cert_file && *opt->tls_cert_file) || (opt->tls_key_file && *opt->tls_key_file);
}

int idem__credentials(const idem_options *opt, grpc_channel_credentials **out, idem_error *err) {
  *out = NULL;
  if (!idem__tls_wanted(opt)) {
    *out = grpc_insecure_credentials_create();
    return *out ? IDEM_OK : idem__fail(err, IDEM_INTERNAL, "cannot create channel credentials");
  }
  bool has_cert = opt->tls_cert_file && *opt->tls_cert_file;
  bool has_key = opt->tls_key_file && *opt->tls_key_file;
  if (has_cert != has_key)
    return idem__fail(err, IDEM_INVALID_ARGUMENT,
                      "tls_cert_file and tls_key_file: give both or neither");
  char *ca = NULL, *cert = NULL, *key = NULL;
  int rc = IDEM_OK;
  if (opt->tls_ca_file && *opt->tls_ca_file)
    rc = read_pem(opt->tls_ca_file, "tls_ca_file", &ca, err);
  if (rc == IDEM_OK && has_cert) rc = read_pem(opt->tls_cert_file, "tls_cert_file", &cert, err);
  if (rc == IDEM_OK && has_cert) rc = read_pem(opt->tls_key_file, "tls_key_file", &key, err);
  if (rc == IDEM_OK) {
    grpc_ssl_pem_key_cert_pair pair = {.private_key = key, .cert_chain = cert};
    /* no verify_options: gRPC checks the chain and the host name, with no way to skip it */
    *out = grpc_ssl_credentials_create(ca, has_cert ? &pair : NULL, NULL, NULL);
    if (!*out) rc = idem__fail(err, IDEM_INVALID_ARGUMENT, "cannot set up TLS");
  }
  free(ca);
  free(cert);
  free_secret(key);
  return rc;
}
