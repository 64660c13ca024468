/* etcd_kv.c — see etcd_kv.h. */
#include "etcd_kv.h"

#include <stdlib.h>
#include <string.h>

#include "elect_etcd_codec.h"
#include "elect_etcd_http.h"

/* POSTs body to path on a fresh connection; ERR_OK with *out, else ERR_UNAVAILABLE. */
static err_code call(const char *endpoints, const char *path, cJSON *body, int64_t timeout_ms,
                     cJSON **out, err_t *err) {
  *out = NULL;
  etcd_conn *c = body ? etcd__conn_new(endpoints) : NULL;
  if (!c) {
    cJSON_Delete(body);
    return err_oom(err);
  }
  err_t e;
  err_clear(&e);
  etcd_fail f = etcd__post(c, path, body, timeout_ms, NULL, out, &e);
  etcd__conn_free(c);
  cJSON_Delete(body);
  if (f == ETCD_OK) return ERR_OK;
  return err_fail(err, ERR_UNAVAILABLE, ERR_R_NONE, "etcd %s: %s", path,
                  e.msg[0] ? e.msg : "no answer");
}

err_code etcd_kv_get(const char *endpoints, const char *key, int64_t timeout_ms, char **value,
                     size_t *len, int64_t *mod_rev, err_t *err) {
  *value = NULL;
  *len = 0;
  *mod_rev = 0;
  cJSON *b = cJSON_CreateObject(), *r = NULL;
  if (b && !etcd__add_b64(b, "key", key)) {
    cJSON_Delete(b);
    return err_oom(err);
  }
  err_code rc = call(endpoints, "/v3/kv/range", b, timeout_ms, &r, err);
  if (rc != ERR_OK) return rc;
  const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(r, "kvs");
  const cJSON *kv = cJSON_IsArray(kvs) ? cJSON_GetArrayItem(kvs, 0) : NULL;
  if (kv) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(kv, "value");
    *value = etcd__unb64(cJSON_IsString(v) ? v->valuestring : "", len);
    *mod_rev = etcd__i64(kv, "mod_revision");
    if (!*value) rc = err_fail(err, ERR_UNAVAILABLE, ERR_R_NONE, "etcd: %s holds bad base64", key);
  }
  cJSON_Delete(r);
  return rc;
}

/* A transaction: compare the key's field (create_revision or mod_revision) with rev, put on
 * success. */
static err_code put_if(const char *endpoints, const char *key, const char *value,
                       const char *target, int64_t rev, int64_t timeout_ms, bool *done,
                       err_t *err) {
  *done = false;
  cJSON *b = cJSON_CreateObject(), *cmp = cJSON_CreateObject(), *put = cJSON_CreateObject(),
        *op = cJSON_CreateObject(), *r = NULL;
  bool ok =
      b && cmp && put && op && etcd__add_b64(cmp, "key", key) &&
      cJSON_AddStringToObject(cmp, "target", target) &&
      cJSON_AddStringToObject(cmp, "result", "EQUAL") &&
      etcd__add_i64(cmp, strcmp(target, "CREATE") == 0 ? "create_revision" : "mod_revision", rev) &&
      etcd__add_b64(put, "key", key) && etcd__add_b64(put, "value", value);
  cJSON *cmps = ok ? cJSON_AddArrayToObject(b, "compare") : NULL;
  cJSON *succ = cmps ? cJSON_AddArrayToObject(b, "success") : NULL;
  if (succ) {
    cJSON_AddItemToArray(cmps, cmp);
    cJSON_AddItemToObject(op, "request_put", put);
    cJSON_AddItemToArray(succ, op);
    cmp = put = op = NULL;
  }
  cJSON_Delete(cmp);
  cJSON_Delete(put);
  cJSON_Delete(op);
  if (!succ) {
    cJSON_Delete(b);
    return err_oom(err);
  }
  err_code rc = call(endpoints, "/v3/kv/txn", b, timeout_ms, &r, err);
  if (rc == ERR_OK) *done = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "succeeded"));
  cJSON_Delete(r);
  return rc;
}

err_code etcd_kv_create(const char *endpoints, const char *key, const char *value,
                        int64_t timeout_ms, bool *created, err_t *err) {
  return put_if(endpoints, key, value, "CREATE", 0, timeout_ms, created, err);
}

err_code etcd_kv_swap(const char *endpoints, const char *key, const char *value, int64_t mod_rev,
                      int64_t timeout_ms, bool *swapped, err_t *err) {
  return put_if(endpoints, key, value, "MOD", mod_rev, timeout_ms, swapped, err);
}

err_code etcd_kv_count(const char *endpoints, const char *prefix, int64_t timeout_ms,
                       int64_t *count, err_t *err) {
  *count = 0;
  char *end = etcd__prefix_end(prefix);
  cJSON *b = end ? cJSON_CreateObject() : NULL, *r = NULL;
  bool ok = b && etcd__add_b64(b, "key", prefix) && etcd__add_b64(b, "range_end", end) &&
            cJSON_AddTrueToObject(b, "count_only");
  free(end);
  if (!ok) {
    cJSON_Delete(b);
    return err_oom(err);
  }
  err_code rc = call(endpoints, "/v3/kv/range", b, timeout_ms, &r, err);
  if (rc == ERR_OK) *count = etcd__i64(r, "count");
  cJSON_Delete(r);
  return rc;
}

err_code etcd_kv_put(const char *endpoints, const char *key, const char *value, int64_t timeout_ms,
                     err_t *err) {
  cJSON *b = cJSON_CreateObject(), *r = NULL;
  if (!b || !etcd__add_b64(b, "key", key) || !etcd__add_b64(b, "value", value)) {
    cJSON_Delete(b);
    return err_oom(err);
  }
  err_code rc = call(endpoints, "/v3/kv/put", b, timeout_ms, &r, err);
  cJSON_Delete(r);
  return rc;
}
