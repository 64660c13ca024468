/* etcd_kv.c — see etcd_kv.h. */
#include "etcd_kv.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "elect_etcd_codec.h"
#include "elect_etcd_http.h"

struct etcd_kv {
  pthread_mutex_t mu; /* the calls take turns on c */
  etcd_conn *c;       /* the calls' connection */
  etcd_conn *w;       /* the watch's */
};

etcd_kv *etcd_kv_open(const char *endpoints) {
  etcd_kv *kv = calloc(1, sizeof *kv);
  if (!kv) return NULL;
  kv->c = etcd__conn_new(endpoints);
  kv->w = etcd__conn_new(endpoints);
  if (!kv->c || !kv->w) {
    etcd_kv_close(kv);
    return NULL;
  }
  pthread_mutex_init(&kv->mu, NULL);
  return kv;
}

void etcd_kv_wake(etcd_kv *kv) {
  if (!kv) return;
  etcd__conn_wake(kv->w);
  etcd__conn_wake(kv->c);
}

void etcd_kv_close(etcd_kv *kv) {
  if (!kv) return;
  if (kv->c && kv->w) pthread_mutex_destroy(&kv->mu);
  etcd__conn_free(kv->c);
  etcd__conn_free(kv->w);
  free(kv);
}

/* POSTs body to path on the calls' connection; ERR_OK with *out, else ERR_UNAVAILABLE. */
static err_code call(etcd_kv *kv, const char *path, cJSON *body, int64_t timeout_ms, cJSON **out,
                     err_t *err) {
  *out = NULL;
  if (!body) return err_oom(err);
  err_t e;
  err_clear(&e);
  pthread_mutex_lock(&kv->mu);
  etcd_fail f = etcd__post(kv->c, path, body, timeout_ms, NULL, out, &e);
  pthread_mutex_unlock(&kv->mu);
  cJSON_Delete(body);
  if (f == ETCD_OK) return ERR_OK;
  return err_fail(err, ERR_UNAVAILABLE, ERR_R_NONE, "etcd %s: %s", path,
                  e.msg[0] ? e.msg : "no answer");
}

err_code etcd_kv_get(etcd_kv *kv, const char *key, int64_t timeout_ms, char **value,
                     size_t *len, int64_t *mod_rev, err_t *err) {
  *value = NULL;
  *len = 0;
  *mod_rev = 0;
  cJSON *b = cJSON_CreateObject(), *r = NULL;
  if (b && !etcd__add_b64(b, "key", key)) {
    cJSON_Delete(b);
    return err_oom(err);
  }
  err_code rc = call(kv, "/v3/kv/range", b, timeout_ms, &r, err);
  if (rc != ERR_OK) return rc;
  const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(r, "kvs");
  const cJSON *item = cJSON_IsArray(kvs) ? cJSON_GetArrayItem(kvs, 0) : NULL;
  if (item) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(item, "value");
    *value = etcd__unb64(cJSON_IsString(v) ? v->valuestring : "", len);
    *mod_rev = etcd__i64(item, "mod_revision");
    if (!*value) rc = err_fail(err, ERR_UNAVAILABLE, ERR_R_NONE, "etcd: %s holds bad base64", key);
  }
  cJSON_Delete(r);
  return rc;
}

/* A transaction: compare the key's field (create_revision or mod_revision) with rev, put on
 * success. */
static err_code put_if(etcd_kv *kv, const char *key, const char *value,
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
  err_code rc = call(kv, "/v3/kv/txn", b, timeout_ms, &r, err);
  if (rc == ERR_OK) *done = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "succeeded"));
  cJSON_Delete(r);
  return rc;
}

err_code etcd_kv_create(etcd_kv *kv, const char *key, const char *value,
                        int64_t timeout_ms, bool *created, err_t *err) {
  return put_if(kv, key, value, "CREATE", 0, timeout_ms, created, err);
}

err_code etcd_kv_swap(etcd_kv *kv, const char *key, const char *value, int64_t mod_rev,
                      int64_t timeout_ms, bool *swapped, err_t *err) {
  return put_if(kv, key, value, "MOD", mod_rev, timeout_ms, swapped, err);
}

err_code etcd_kv_count(etcd_kv *kv, const char *prefix, int64_t timeout_ms,
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
  err_code rc = call(kv, "/v3/kv/range", b, timeout_ms, &r, err);
  if (rc == ERR_OK) *count = etcd__i64(r, "count");
  cJSON_Delete(r);
  return rc;
}

err_code etcd_kv_put(etcd_kv *kv, const char *key, const char *value, int64_t timeout_ms,
                     err_t *err) {
  cJSON *b = cJSON_CreateObject(), *r = NULL;
  if (!b || !etcd__add_b64(b, "key", key) || !etcd__add_b64(b, "value", value)) {
    cJSON_Delete(b);
    return err_oom(err);
  }
  err_code rc = call(kv, "/v3/kv/put", b, timeout_ms, &r, err);
  cJSON_Delete(r);
  return rc;
}

/* The watch's state while its stream runs. */
typedef struct watching {
  etcd_kv_event_fn fn;
  void *arg;
  int64_t next_rev, compacted;
  bool canceled, ended_by_fn;
  err_t err;
} watching;

static bool on_watch_message(void *arg, const cJSON *m) {
  watching *w = arg;
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "result");
  if (!cJSON_IsObject(r)) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(m, "error");
    const cJSON *msg = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "message") : NULL;
    err_set(&w->err, ERR_UNAVAILABLE, "etcd watch: %.160s",
            cJSON_IsString(msg) ? msg->valuestring : "an answer without a result");
    return false;
  }
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "canceled"))) {
    w->canceled = true;
    w->compacted = etcd__i64(r, "compact_revision");
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(r, "cancel_reason");
    if (!w->compacted)
      err_set(&w->err, ERR_UNAVAILABLE, "etcd watch canceled: %.160s",
              cJSON_IsString(why) ? why->valuestring : "no reason given");
    return false;
  }
  const cJSON *events = cJSON_GetObjectItemCaseSensitive(r, "events"), *ev;
  cJSON_ArrayForEach(ev, events) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(ev, "kv");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(ev, "type");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(item, "key");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(item, "value");
    bool deleted = cJSON_IsString(type) && strcmp(type->valuestring, "DELETE") == 0;
    int64_t rev = etcd__i64(item, "mod_revision");
    size_t klen = 0, vlen = 0;
    char *key = etcd__unb64(cJSON_IsString(k) ? k->valuestring : "", &klen);
    char *value = deleted ? NULL : etcd__unb64(cJSON_IsString(v) ? v->valuestring : "", &vlen);
    bool go = key && (deleted || value);
    if (!go) err_set(&w->err, ERR_UNAVAILABLE, "etcd watch: an event with bad base64");
    if (go) go = w->fn(w->arg, key, value, vlen, rev);
    if (!go && !w->err.msg[0]) w->ended_by_fn = true;
    free(key);
    free(value);
    if (rev >= w->next_rev) w->next_rev = rev + 1;
    if (!go) return false;
  }
  return true;
}

err_code etcd_kv_watch(etcd_kv *kv, const char *prefix, int64_t start_rev, etcd_kv_event_fn fn,
                       void *arg, const atomic_bool *stop, int64_t *next_rev, int64_t *compacted,
                       err_t *err) {
  *compacted = 0;
  *next_rev = start_rev;
  char *end = etcd__prefix_end(prefix);
  cJSON *b = cJSON_CreateObject(), *cr = cJSON_CreateObject();
  bool ok = end && b && cr && etcd__add_b64(cr, "key", prefix) &&
            etcd__add_b64(cr, "range_end", end) && etcd__add_i64(cr, "start_revision", start_rev);
  free(end);
  if (ok) {
    cJSON_AddItemToObject(b, "create_request", cr);
    cr = NULL;
  }
  cJSON_Delete(cr);
  if (!ok) {
    cJSON_Delete(b);
    return err_oom(err);
  }
  watching w = {.fn = fn, .arg = arg, .next_rev = start_rev};
  err_clear(&w.err);
  err_t e;
  err_clear(&e);
  etcd_fail f = etcd__stream(kv->w, "/v3/watch", b, -1, stop, on_watch_message, &w, &e);
  cJSON_Delete(b);
  *next_rev = w.next_rev;
  if (w.canceled && w.compacted) {
    *compacted = w.compacted;
    return ERR_OK;
  }
  if (w.err.msg[0]) return err_fail(err, ERR_UNAVAILABLE, ERR_R_NONE, "%s", w.err.msg);
  if (f != ETCD_OK)
    return err_fail(err, ERR_UNAVAILABLE, ERR_R_NONE, "etcd watch: %s",
                    e.msg[0] ? e.msg : "the stream ended");
  return ERR_OK;
}
