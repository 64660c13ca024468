/* node_slots.c — see node_slots.h: elect/'s etcd client behind the service's slots_etcd. */
#include "node_slots.h"

static err_code kv_get(void *arg, const char *key, int64_t timeout_ms, char **value, size_t *len,
                       int64_t *mod_rev, err_t *err) {
  return etcd_kv_get(arg, key, timeout_ms, value, len, mod_rev, err);
}

static err_code kv_create(void *arg, const char *key, const char *value, int64_t timeout_ms,
                          bool *created, err_t *err) {
  return etcd_kv_create(arg, key, value, timeout_ms, created, err);
}

static err_code kv_swap(void *arg, const char *key, const char *value, int64_t mod_rev,
                        int64_t timeout_ms, bool *swapped, err_t *err) {
  return etcd_kv_swap(arg, key, value, mod_rev, timeout_ms, swapped, err);
}

static err_code kv_put(void *arg, const char *key, const char *value, int64_t timeout_ms,
                       err_t *err) {
  return etcd_kv_put(arg, key, value, timeout_ms, err);
}

static err_code kv_watch(void *arg, const char *prefix, int64_t start_rev, slots_watch_fn fn,
                         void *fn_arg, const atomic_bool *stop, int64_t *next_rev,
                         int64_t *compacted, err_t *err) {
  return etcd_kv_watch(arg, prefix, start_rev, fn, fn_arg, stop, next_rev, compacted, err);
}

static void kv_wake(void *arg) {
  etcd_kv_wake(arg);
}

slots_result node_slots_start(const idem_options *o, etcd_kv *kv, slot_service **out, char *msg,
                              size_t cap) {
  const char *names[OPT_LIST_MAX];
  for (size_t i = 0; i < o->n_groups; i++) names[i] = o->groups[i].name;
  slots_etcd ops = {.arg = kv,
                    .get = kv_get,
                    .create = kv_create,
                    .swap = kv_swap,
                    .put = kv_put,
                    .watch = kv_watch,
                    .wake = kv_wake};
  slots_config c = {.slots = (uint32_t)o->slots,
                    .groups = names,
                    .n_groups = o->n_groups,
                    .prefix = o->election_prefix,
                    .etcd = kv && !o->groups_from_pg ? &ops : NULL};
  return slot_service_start(&c, out, msg, cap);
}
