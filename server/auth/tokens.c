/* tokens.c — the tokens file: parsing, the digest table, constant-time lookup (auth.h). */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../validate/validate.h"
#include "auth.h"

#define DIGEST_LEN 32 /* SHA-256 */
#define FILE_MAX (1024 * 1024)

typedef struct entry {
  unsigned char digest[DIGEST_LEN];
  char tenant[REC_GLOBAL_ID_MAX + 1];
  auth_role role;
  int line;
  bool cert; /* a "cert NAME ROLE" line: tenant holds the certificate's name, no digest */
} entry;

struct auth_tokens {
  atomic_int refs;
  size_t n, n_certs;
  entry *e;
};

const char *auth_role_name(auth_role r) {
  switch (r) {
    case AUTH_ROLE_SERVICE:
      return "service";
    case AUTH_ROLE_ADMIN:
      return "admin";
    case AUTH_ROLE_OPERATOR:
      return "operator";
    default:
      return "none";
  }
}

static bool digest(const char *s, size_t len, unsigned char out[DIGEST_LEN]) {
  unsigned int n = 0;
  return EVP_Digest(s, len, out, &n, EVP_sha256(), NULL) == 1 && n == DIGEST_LEN;
}

static bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

static bool token_chars_ok(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e) return false;
  return true;
}

/* Splits line[0..n) (comment already cut) into at most max fields; returns the count (max + 1
 * when there are more). */
static int split(const char *line, size_t n, const char **f, size_t *flen, int max) {
  int k = 0;
  size_t i = 0;
  while (i < n) {
    while (i < n && is_space(line[i])) i++;
    if (i >= n) break;
    size_t start = i;
    while (i < n && !is_space(line[i])) i++;
    if (k == max) return max + 1;
    f[k] = line + start;
    flen[k] = i - start;
    k++;
  }
  return k;
}

/* One non-comment line into e. Messages name the line, never its token. */
static err_code parse_line(const char *name, int lineno, const char *line, size_t n, entry *e,
                           bool *blank, err_t *err) {
  const char *hash = memchr(line, '#', n);
  if (hash) n = (size_t)(hash - line);
  const char *f[3];
  size_t fl[3];
  int k = split(line, n, f, fl, 3);
  *blank = k == 0;
  if (k == 0) return ERR_OK;
  if (k > 3)
    return err_set(err, ERR_INVALID, "%s:%d: expected TOKEN TENANT ROLE, got more fields", name,
                   lineno);
  if (k != 3)
    return err_set(err, ERR_INVALID, "%s:%d: expected TOKEN TENANT ROLE, got %d field%s", name,
                   lineno, k, k == 1 ? "" : "s");
  /* "cert NAME ROLE": the role of the client certificate named NAME (no token is 4 long) */
  e->cert = fl[0] == 4 && memcmp(f[0], "cert", 4) == 0;
  if (e->cert) {
    /* fall through to the tenant and role rules: a certificate's name is its tenant */
  } else if (fl[0] < AUTH_TOKEN_MIN || fl[0] > AUTH_TOKEN_MAX || !token_chars_ok(f[0], fl[0]))
    return err_set(err, ERR_INVALID,
                   "%s:%d: token must be %d to %d printable characters without spaces or #", name,
                   lineno, AUTH_TOKEN_MIN, AUTH_TOKEN_MAX);
  err_t terr;
  err_clear(&terr);
  if (fl[1] > REC_GLOBAL_ID_MAX) {
    validate_tenant("", &terr); /* the rule's own message */
  } else {
    memcpy(e->tenant, f[1], fl[1]);
    e->tenant[fl[1]] = '\0';
    validate_tenant(e->tenant, &terr);
  }
  if (terr.code != ERR_OK) return err_set(err, ERR_INVALID, "%s:%d: %s", name, lineno, terr.msg);
  if (fl[2] == 7 && memcmp(f[2], "service", 7) == 0)
    e->role = AUTH_ROLE_SERVICE;
  else if (fl[2] == 5 && memcmp(f[2], "admin", 5) == 0)
    e->role = AUTH_ROLE_ADMIN;
  else if (fl[2] == 8 && memcmp(f[2], "operator", 8) == 0)
    e->role = AUTH_ROLE_OPERATOR;
  else
    return err_set(err, ERR_INVALID, "%s:%d: role must be service, admin or operator", name,
                   lineno);
  if (e->cert)
    memset(e->digest, 0, sizeof e->digest);
  else if (!digest(f[0], fl[0], e->digest))
    return err_set(err, ERR_INTERNAL, "%s:%d: cannot hash the token", name, lineno);
  e->line = lineno;
  return ERR_OK;
}

static void free_table(auth_tokens *t) {
  if (!t) return;
  if (t->e) OPENSSL_cleanse(t->e, t->n * sizeof *t->e);
  free(t->e);
  free(t);
}

err_code auth_tokens_parse(const char *text, size_t len, const char *name, auth_tokens **out,
                           err_t *err) {
  *out = NULL;
  if (!name) name = "tokens";
  if (memchr(text, '\0', len)) return err_set(err, ERR_INVALID, "%s: contains a NUL byte", name);
  auth_tokens *t = calloc(1, sizeof *t);
  if (!t) return err_oom(err);
  atomic_init(&t->refs, 1);
  size_t cap = 0;
  int lineno = 0;
  err_code rc = ERR_OK;
  for (size_t pos = 0; pos < len && rc == ERR_OK;) {
    const char *nl = memchr(text + pos, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
    const char *line = text + pos;
    pos += n + (nl ? 1 : 0);
    lineno++;
    if (n > AUTH_LINE_MAX) {
      rc = err_set(err, ERR_INVALID, "%s:%d: line longer than %d characters", name, lineno,
                   AUTH_LINE_MAX);
      break;
    }
    if (t->n == cap) {
      size_t ncap = cap ? cap * 2 : 16;
      entry *g = calloc(ncap, sizeof *g);
      if (!g) {
        rc = err_oom(err);
        break;
      }
      if (t->e) {
        memcpy(g, t->e, t->n * sizeof *g);
        OPENSSL_cleanse(t->e, t->n * sizeof *g);
        free(t->e);
      }
      t->e = g;
      cap = ncap;
    }
    bool blank;
    entry *e = &t->e[t->n];
    if ((rc = parse_line(name, lineno, line, n, e, &blank, err)) != ERR_OK || blank) continue;
    for (size_t i = 0; i < t->n; i++)
      if (t->e[i].cert == e->cert &&
          (e->cert ? strcmp(t->e[i].tenant, e->tenant) == 0
                   : CRYPTO_memcmp(t->e[i].digest, e->digest, DIGEST_LEN) == 0)) {
        rc = err_set(err, ERR_INVALID, "%s:%d: the same %s as line %d", name, lineno,
                     e->cert ? "certificate name" : "token", t->e[i].line);
        break;
      }
    if (rc == ERR_OK) {
      t->n_certs += e->cert;
      t->n++;
    }
  }
  if (rc != ERR_OK) {
    t->n = cap; /* wipe every slot written */
    free_table(t);
    return rc;
  }
  *out = t;
  return ERR_OK;
}

err_code auth_tokens_load(const char *path, auth_tokens **out, err_t *err) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return err_set(err, ERR_INVALID, "%s: cannot open: %s", path, strerror(errno));
  char *buf = malloc(FILE_MAX + 1);
  if (!buf) {
    fclose(f);
    return err_oom(err);
  }
  size_t n = fread(buf, 1, FILE_MAX + 1, f);
  bool bad = ferror(f);
  fclose(f);
  err_code rc;
  if (bad)
    rc = err_set(err, ERR_INVALID, "%s: cannot read", path);
  else if (n > FILE_MAX)
    rc = err_set(err, ERR_INVALID, "%s: larger than %d bytes", path, FILE_MAX);
  else
    rc = auth_tokens_parse(buf, n, path, out, err);
  OPENSSL_cleanse(buf, n);
  free(buf);
  return rc;
}

size_t auth_tokens_count(const auth_tokens *t) {
  return t ? t->n - t->n_certs : 0;
}

bool auth_tokens_cert_role(const auth_tokens *t, const char *name, size_t len, auth_role *role) {
  for (size_t i = 0; t && i < t->n; i++)
    if (t->e[i].cert && strlen(t->e[i].tenant) == len && memcmp(t->e[i].tenant, name, len) == 0) {
      *role = t->e[i].role;
      return true;
    }
  return false;
}

bool auth_tokens_lookup(const auth_tokens *t, const char *token, size_t len,
                        char tenant[REC_GLOBAL_ID_MAX + 1], auth_role *role) {
  unsigned char d[DIGEST_LEN];
  if (!t || !token || !digest(token, len, d)) return false;
  /* every entry is compared; the match is selected with masks, not branches */
  size_t found = 0;
  unsigned int any = 0;
  for (size_t i = 0; i < t->n; i++) {
    unsigned int eq = (unsigned int)(CRYPTO_memcmp(t->e[i].digest, d, DIGEST_LEN) == 0) &
                      (unsigned int)!t->e[i].cert; /* a certificate line is no token */
    size_t mask = (size_t)0 - (size_t)eq;
    found = (found & ~mask) | (i & mask);
    any |= eq;
  }
  OPENSSL_cleanse(d, sizeof d);
  if (!any) return false;
  memcpy(tenant, t->e[found].tenant, sizeof t->e[found].tenant);
  *role = t->e[found].role;
  return true;
}

auth_tokens *auth_tokens_ref(auth_tokens *t) {
  if (t) atomic_fetch_add(&t->refs, 1);
  return t;
}

void auth_tokens_release(auth_tokens *t) {
  if (t && atomic_fetch_sub(&t->refs, 1) == 1) free_table(t);
}
