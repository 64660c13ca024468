/* elect_etcd_codec.c — the gateway's encodings (see elect_etcd_codec.h): base64 through
 * util/b64 (OpenSSL), int64s as strings. */
#include "elect_etcd_codec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/b64.h"

char *etcd__b64(const void *data, size_t len) {
  if (len > (size_t)INT32_MAX / 2) return NULL;
  size_t cap = b64_encoded_len(B64_STD, len) + 1;
  char *out = malloc(cap);
  if (!out) return NULL;
  b64_encode(B64_STD, data, len, out, cap);
  return out;
}

char *etcd__unb64(const char *s, size_t *len) {
  size_t n = strlen(s);
  if (n > (size_t)INT32_MAX / 2) return NULL;
  size_t cap = b64_decoded_max(n);
  char *out = malloc(cap + 1);
  if (!out) return NULL;
  long got = b64_decode(B64_STD, s, out, cap);
  if (got < 0) {
    free(out);
    return NULL;
  }
  out[got] = '\0';
  if (len) *len = (size_t)got;
  return out;
}

int64_t etcd__i64(const cJSON *obj, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (cJSON_IsNumber(v)) { /* outside int64 the cast is undefined: malformed */
    double d = v->valuedouble;
    return d >= -9223372036854775808.0 && d < 9223372036854775808.0 ? (int64_t)d : 0;
  }
  if (!cJSON_IsString(v)) return 0;
  char *end;
  errno = 0;
  long long n = strtoll(v->valuestring, &end, 10);
  if (errno || end == v->valuestring || *end) return 0;
  return (int64_t)n;
}

bool etcd__add_i64(cJSON *obj, const char *name, int64_t v) {
  char num[24];
  snprintf(num, sizeof num, "%" PRId64, v);
  return cJSON_AddStringToObject(obj, name, num) != NULL;
}

bool etcd__add_b64(cJSON *obj, const char *name, const char *s) {
  char *b = etcd__b64(s, strlen(s));
  if (!b) return false;
  bool ok = cJSON_AddStringToObject(obj, name, b) != NULL;
  free(b);
  return ok;
}

char *etcd__prefix_end(const char *prefix) {
  size_t n = strlen(prefix);
  char *end = malloc(n + 1);
  if (!end) return NULL;
  memcpy(end, prefix, n + 1);
  while (n > 0) {
    if ((unsigned char)end[n - 1] < 0xff) {
      end[n - 1]++;
      end[n] = '\0';
      return end;
    }
    n--;
  }
  end[0] = '\0'; /* every key */
  return end;
}
