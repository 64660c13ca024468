/* node_ha.c — see node_ha.h. */
#include "node_ha.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/clock.h"
#include "../util/log.h"

struct node_ha {
  elect *el;
  char *pg;
  int64_t store_timeout_ms;
  int64_t raise_budget_ms;
  _Atomic uint64_t epoch; /* every fenced store reads this at the start of each call */
  store_batcher *batcher; /* group commit of every worker's step transactions */
  replay_cache *cache;    /* filled by the batcher's commits */
};

/* Group commit and the replay cache, both keyed to the epoch. */
static bool start_throughput(node_ha *h, const node_ha_config *c, err_t *err) {
  replay_cache_cfg rc = {.max_entries = c->cache_entries, .epoch = &h->epoch};
  h->cache = replay_cache_new(&rc);
  if (!h->cache) return err_oom(err), false;
  store_batcher_cfg bc = {.conninfo = h->pg,
                          .conns = c->batch_conns,
                          .max_batch = c->batch_max,
                          .epoch = &h->epoch,
                          .on_commit = replay_cache_committed,
                          .on_commit_arg = h->cache};
  h->batcher = store_batcher_start(&bc, err);
  return h->batcher != NULL;
}

/* The elector won: raise the fence to epoch, then let the stores write under it. */
static bool on_elected(void *arg, uint64_t epoch, bool *superseded) {
  node_ha *h = arg;
  err_t err;
  err_clear(&err);
  err_code rc = store_pg_fence_raise(h->pg, epoch, clock_mono_ms() + h->raise_budget_ms,
                                     superseded, &err);
  if (rc != ERR_OK) {
    log_kv(LOG_WARN, "cannot raise the fence yet", "error", err.msg, (const char *)NULL);
    return false;
  }
  atomic_store(&h->epoch, epoch);
  return true;
}

node_ha *node_ha_new(const node_ha_config *c, err_t *err) {
  node_ha *h = calloc(1, sizeof *h);
  if (!h || !(h->pg = strdup(c->pg))) {
    free(h);
    err_oom(err);
    return NULL;
  }
  h->store_timeout_ms = c->store_timeout_ms > 0 ? c->store_timeout_ms : 2000;
  int ttl = c->ttl_s > 0 ? c->ttl_s : 5;
  /* the raise must leave time to serve in the term: at most half a TTL per try */
  h->raise_budget_ms = (int64_t)ttl * 500;
  if (h->raise_budget_ms > h->store_timeout_ms) h->raise_budget_ms = h->store_timeout_ms;
  if (!c->etcd || !*c->etcd) {
    uint64_t epoch = 0;
    err_t e2;
    err_clear(&e2);
    if (store_pg_fence_read(h->pg, clock_mono_ms() + h->store_timeout_ms, &epoch, &e2) != ERR_OK)
      log_kv(LOG_WARN, "cannot read the fence, single node writes under epoch 0", "error",
             e2.msg, (const char *)NULL);
    atomic_store(&h->epoch, epoch);
    h->el = elect_single_new(epoch, c->advertise);
  } else {
    elect_etcd_config ec = {.endpoints = c->etcd,
                            .prefix = c->prefix,
                            .node_id = c->node_id,
                            .advertise = c->advertise,
                            .ttl_s = ttl,
                            .on_elected = on_elected,
                            .on_elected_arg = h};
    h->el = elect_etcd_new(&ec, err);
    atomic_store(&h->epoch, 0); /* nothing may write before the first election's raise */
  }
  if (!h->el || !start_throughput(h, c, err)) {
    if (err->code == ERR_OK) err_oom(err);
    node_ha_free(h);
    return NULL;
  }
  return h;
}

err_code node_ha_start(node_ha *h, err_t *err) {
  return elect_start(h->el, err);
}

elect *node_ha_elector(node_ha *h) {
  return h->el;
}

store *node_ha_open_store(void *arg) {
  node_ha *h = arg;
  store *st = store_pg_open(h->pg);
  if (st) {
    store_pg_set_epoch_source(st, &h->epoch);
    store_pg_set_batcher(st, h->batcher);
  }
  return st;
}

replay_cache *node_ha_replay_cache(node_ha *h) {
  return h->cache;
}

bool node_ha_is_leader(void *arg) {
  return elect_is_leader(((node_ha *)arg)->el, NULL);
}

void node_ha_resign(node_ha *h) {
  if (h) elect_resign(h->el);
}

void node_ha_free(node_ha *h) {
  if (!h) return;
  elect_free(h->el);
  store_batcher_stop(h->batcher);
  replay_cache_free(h->cache);
  free(h->pg);
  free(h);
}
