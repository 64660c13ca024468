/* node_elect.h — the node's elector and the fence between it and the store.
 *
 * The epoch is the election revision. Every fenced store (node_open_store) reads the node's
 * epoch at the start of each call and writes under it; the database refuses writes under an
 * epoch older than its fence (store.h, fencing). A node that wins an election raises the fence to
 * its new epoch before it lets its stores write under it (node_fence_on_elected).
 */
#ifndef IDEM_NODE_ELECT_H
#define IDEM_NODE_ELECT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../elect/elect.h"
#include "../store/store.h"

/* What the elector's callback needs to raise the fence. Borrowed by the elector: must outlive
 * it. */
typedef struct node_fence {
  const store_backend *db; /* where the fence is */
  const char *pg;          /* conninfo */
  int64_t raise_budget_ms; /* per try: at most half a TTL, at most the store timeout */
  _Atomic uint64_t *epoch; /* what the node's stores write under */
  void (*on_serving)(void *arg); /* NULL: none; the elector's on_serving (elect.h) */
  void *on_serving_arg;
  void (*on_stepping_down)(void *arg); /* NULL: none; the elector's on_stepping_down (elect.h) */
  void *on_stepping_down_arg;
} node_fence;

typedef struct node_elect_cfg {
  const char *etcd;      /* NULL: single node, always the leader */
  const char *node_id;   /* for logs */
  const char *advertise; /* host:port clients are sent to (idem-leader) */
  const char *prefix;    /* election prefix */
  int ttl_s;
  int64_t store_timeout_ms;
} node_elect_cfg;

/* Creates the elector (not started) and fills *fence (its epoch pointer must already be set).
 * Single node: reads the fence's epoch first and writes under it (0 when the database cannot be
 * read). etcd: the epoch stays 0 — nothing writes — until the first election raised the fence.
 * NULL with err filled on a bad configuration. Free with elect_free. */
elect *node_elect_new(const node_elect_cfg *c, node_fence *fence, err_t *err);

#endif
