/* tls_files.c — reading and checking the server's TLS files with OpenSSL (tls_files.h). */
#include "tls_files.h"

#include <errno.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PEM_FILE_MAX (1024 * 1024)

static int fail(char *msg, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *msg, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, n, fmt, ap);
  va_end(ap);
  ERR_clear_error();
  return -1;
}

/* The whole file as a NUL-terminated string, or NULL with msg filled. */
static char *read_file(const char *path, char *msg, size_t n) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fail(msg, n, "cannot open: %s", strerror(errno));
    return NULL;
  }
  char *buf = malloc(PEM_FILE_MAX + 1);
  size_t len = buf ? fread(buf, 1, PEM_FILE_MAX + 1, f) : 0;
  bool bad = !buf || ferror(f);
  fclose(f);
  if (bad || len > PEM_FILE_MAX || len == 0 || memchr(buf, '\0', len)) {
    fail(msg, n,
         !buf                 ? "out of memory"
         : bad                ? "cannot read"
         : len == 0           ? "the file is empty"
         : len > PEM_FILE_MAX ? "larger than 1 MiB"
                              : "not a PEM file (contains a NUL byte)");
    if (buf) OPENSSL_cleanse(buf, len);
    free(buf);
    return NULL;
  }
  buf[len] = '\0';
  return buf;
}

/* Number of PEM certificates in pem (0 when none parse). */
static int count_certs(const char *pem, X509 **first) {
  BIO *b = BIO_new_mem_buf(pem, -1);
  if (!b) return 0;
  int n = 0;
  X509 *x;
  while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
    if (n == 0 && first)
      *first = x;
    else
      X509_free(x);
    n++;
  }
  BIO_free(b);
  ERR_clear_error(); /* the end of the data reads as an error */
  return n;
}

/* An encrypted key is refused instead of prompting on the terminal for its passphrase. */
static int no_passphrase(char *buf, int size, int rwflag, void *u) {
  (void)buf, (void)size, (void)rwflag, (void)u;
  return -1;
}

static EVP_PKEY *parse_key(const char *pem) {
  BIO *b = BIO_new_mem_buf(pem, -1);
  if (!b) return NULL;
  EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL);
  BIO_free(b);
  return k;
}

int tls_files_load(const char *cert_path, const char *key_path, const char *client_ca_path,
                   tls_files *out, tls_file_which *which, char *msg, size_t msg_len) {
  memset(out, 0, sizeof *out);
  X509 *cert = NULL;
  EVP_PKEY *key = NULL;
  int rc = -1;
  *which = TLS_FILE_CERT;
  if (!(out->cert_pem = read_file(cert_path, msg, msg_len))) goto done;
  if (count_certs(out->cert_pem, &cert) == 0) {
    fail(msg, msg_len, "no PEM certificate in the file");
    goto done;
  }
  *which = TLS_FILE_KEY;
  if (!(out->key_pem = read_file(key_path, msg, msg_len))) goto done;
  if (!(key = parse_key(out->key_pem))) {
    fail(msg, msg_len, "no unencrypted PEM private key in the file");
    goto done;
  }
  if (X509_check_private_key(cert, key) != 1) {
    fail(msg, msg_len, "the key does not belong to the --tls-cert certificate");
    goto done;
  }
  if (client_ca_path) {
    *which = TLS_FILE_CLIENT_CA;
    if (!(out->client_ca_pem = read_file(client_ca_path, msg, msg_len))) goto done;
    if (count_certs(out->client_ca_pem, NULL) == 0) {
      fail(msg, msg_len, "no PEM certificate in the file");
      goto done;
    }
  }
  rc = 0;
done:
  X509_free(cert);
  EVP_PKEY_free(key);
  if (rc != 0) tls_files_clear(out);
  return rc;
}

void tls_files_clear(tls_files *f) {
  if (!f) return;
  free(f->cert_pem);
  if (f->key_pem) OPENSSL_cleanse(f->key_pem, strlen(f->key_pem));
  free(f->key_pem);
  free(f->client_ca_pem);
  memset(f, 0, sizeof *f);
}
