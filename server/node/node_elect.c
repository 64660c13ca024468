/* node_elect.c — see node_elect.h. */
#include "node_elect.h"

#include "../util/clock.h"
#include "../util/log.h"

/* The elector won: raise the fence to epoch, then let the stores write under it. */
static bool on_elected(void *arg, uint64_t epoch, bool *superseded) {
  node_fence *f = arg;
  err_t err;
  err_clear(&err);
  err_code rc =
      f->db->fence_raise(f->pg, epoch, clock_mono_ms() + f->raise_budget_ms, superseded, &err);
  if (rc != ERR_OK) {
    log_kv(LOG_WARN, "cannot raise the fence yet", "error", err.msg, (const char *)NULL);
    return false;
  }
  atomic_store(f->epoch, epoch);
  return true;
}

elect *node_elect_new(const node_elect_cfg *c, node_fence *fence, err_t *err) {
  /* the raise must leave time to serve in the term: at most half a TTL per try */
  fence->raise_budget_ms = (int64_t)c->ttl_s * 500;
  if (fence->raise_budget_ms > c->store_timeout_ms) fence->raise_budget_ms = c->store_timeout_ms;
  if (!c->etcd) {
    uint64_t epoch = 0;
    err_t e2;
    err_clear(&e2);
    if (fence->db->fence_read(fence->pg, clock_mono_ms() + c->store_timeout_ms, &epoch, &e2) !=
        ERR_OK)
      log_kv(LOG_WARN, "cannot read the fence, single node writes under epoch 0", "error", e2.msg,
             (const char *)NULL);
    atomic_store(fence->epoch, epoch);
    elect *el = elect_single_new(epoch, c->advertise);
    if (!el) err_oom(err);
    return el;
  }
  atomic_store(fence->epoch, 0); /* nothing may write before the first election's raise */
  elect_etcd_config ec = {.endpoints = c->etcd,
                          .prefix = c->prefix,
                          .node_id = c->node_id,
                          .advertise = c->advertise,
                          .ttl_s = c->ttl_s,
                          .on_elected = on_elected,
                          .on_elected_arg = fence,
                          .on_serving = fence->on_serving,
                          .on_serving_arg = fence->on_serving_arg,
                          .on_stepping_down = fence->on_stepping_down,
                          .on_stepping_down_arg = fence->on_stepping_down_arg};
  elect *el = elect_etcd_new(&ec, err);
  if (!el && err && err->code == ERR_OK) err_oom(err);
  return el;
}
