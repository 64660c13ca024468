/* cmd_http.c — idemctl http-key: the step an HTTP Idempotency-Key names (docs/api.md §19;
 * docs/http-middleware.md "The key-to-step rule"), for incident response. Computed
 * here, without a coordinator: global id = "k-" + the lower-case hex SHA-256 of the scope's
 * bytes, one 0x1F byte and the key's bytes — the rule every middleware (Go, Node, Python)
 * follows, checked against client-lib/conformance/idempotency-key.json by the tests. */
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "idemctl.h"

/* "k-" + 64 hex digits + NUL */
#define HTTP_GLOBAL_ID_LEN (2 + 64 + 1)

/* Writes the global id of (scope, key) into out; false when OpenSSL fails. */
static bool http_global_id(const char *scope, const char *key, char out[HTTP_GLOBAL_ID_LEN]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  const unsigned char sep = 0x1f;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
            EVP_DigestUpdate(ctx, scope, strlen(scope)) == 1 &&
            EVP_DigestUpdate(ctx, &sep, 1) == 1 && EVP_DigestUpdate(ctx, key, strlen(key)) == 1 &&
            EVP_DigestFinal_ex(ctx, md, &n) == 1 && n == 32;
  EVP_MD_CTX_free(ctx);
  if (!ok) return false;
  static const char hex[] = "0123456789abcdef";
  out[0] = 'k';
  out[1] = '-';
  for (unsigned i = 0; i < 32; i++) {
    out[2 + 2 * i] = hex[md[i] >> 4];
    out[3 + 2 * i] = hex[md[i] & 15];
  }
  out[HTTP_GLOBAL_ID_LEN - 1] = '\0';
  return true;
}

int cmd_http_key(ctl *c) {
  const char *key = c->pos[0];
  const char *scope = ctl_flag_value(c, "scope");
  if (!scope) scope = "";
  size_t len = strlen(key);
  if (len == 0 || len > 255)
    return ctl_usage_error(c, "the key is 1 to 255 characters (the middleware refuses others)");
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)key[i] < 0x20 || (unsigned char)key[i] > 0x7e)
      return ctl_usage_error(c, "the key has a character outside printable ASCII");
  char id[HTTP_GLOBAL_ID_LEN];
  if (!http_global_id(scope, key, id)) {
    fprintf(stderr, "idemctl: http-key: SHA-256 failed (OpenSSL)\n");
    return EXIT_UNAVAILABLE;
  }
  if (c->json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "key", key);
    cJSON_AddStringToObject(o, "scope", scope);
    cJSON_AddStringToObject(o, "global_id", id);
    json_print(o);
  } else {
    printf("%s\n", id);
  }
  return 0;
}
