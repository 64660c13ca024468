/* elect_etcd_parse.c — reading etcd gateway replies (see elect_etcd_parse.h). */
#include "elect_etcd_parse.h"

/* Streaming methods answer {"result": {...}} (one JSON object a line); unary ones the object. */
static cJSON *parse_reply(const char *text) {
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithOpts(text, &end, 0);
  if (!j) return NULL;
  cJSON *result = cJSON_DetachItemFromObjectCaseSensitive(j, "result");
  if (result) {
    cJSON_Delete(j);
    return result;
  }
  return j;
}

/* The gateway's error body: {"error": "...", "message": "...", "code": N}. */
static bool error_of(const cJSON *j, err_t *err) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
  if (!cJSON_IsString(m)) m = cJSON_GetObjectItemCaseSensitive(j, "error");
  if (!cJSON_IsString(m)) return false;
  err_set(err, ERR_UNAVAILABLE, "etcd: %.160s", m->valuestring);
  return true;
}

etcd_fail etcd__reply(const char *text, size_t len, long status, cJSON **out, err_t *err) {
  *out = NULL;
  cJSON *j = len ? parse_reply(text) : NULL;
  if (!j) {
    err_set(err, ERR_UNAVAILABLE, "etcd: malformed reply (http %ld)", status);
    return status >= 400 ? ETCD_REFUSED : ETCD_UNKNOWN;
  }
  if (status != 200 || cJSON_GetObjectItemCaseSensitive(j, "error")) {
    if (!error_of(j, err)) err_set(err, ERR_UNAVAILABLE, "etcd: http status %ld", status);
    cJSON_Delete(j);
    /* a 5xx from the gateway that is not etcd's own answer may hide a timeout: unknown */
    return ETCD_REFUSED;
  }
  *out = j;
  return ETCD_OK;
}

int64_t etcd__grant_id(const cJSON *r) {
  return etcd__i64(r, "ID");
}

bool etcd__campaign_key(const cJSON *r, const char **key, int64_t *rev) {
  const cJSON *ld = r ? cJSON_GetObjectItemCaseSensitive(r, "leader") : NULL;
  const cJSON *k = ld ? cJSON_GetObjectItemCaseSensitive(ld, "key") : NULL;
  *rev = ld ? etcd__i64(ld, "rev") : 0;
  *key = cJSON_IsString(k) ? k->valuestring : NULL;
  return *key && *rev > 0;
}

int64_t etcd__keepalive_ttl(const cJSON *r) {
  return etcd__i64(r, "TTL");
}

void etcd__leader(const cJSON *r, etcd_leader *out) {
  const cJSON *kv = cJSON_GetObjectItemCaseSensitive(r, "kv");
  const cJSON *key = kv ? cJSON_GetObjectItemCaseSensitive(kv, "key") : NULL;
  const cJSON *val = kv ? cJSON_GetObjectItemCaseSensitive(kv, "value") : NULL;
  const cJSON *hdr = cJSON_GetObjectItemCaseSensitive(r, "header");
  out->key = cJSON_IsString(key) ? key->valuestring : NULL;
  out->addr = cJSON_IsString(val) ? etcd__unb64(val->valuestring, NULL) : NULL;
  out->at_rev = hdr ? etcd__i64(hdr, "revision") : 0;
}
