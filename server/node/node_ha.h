/* node_ha.h — the node's high-availability wiring: the elector (single node or etcd),
 * the shared epoch every worker's store writes under, and the fence raise a new leader does
 * before it serves. The only place that knows both elect/ and the PostgreSQL store. */
#ifndef IDEM_NODE_HA_H
#define IDEM_NODE_HA_H

#include <stdbool.h>
#include <stdint.h>

#include "../cache/replay_cache.h"
#include "../elect/elect.h"
#include "../store/store_pg.h"

typedef struct node_ha_config {
  const char *pg;          /* conninfo (borrowed for the life of the ha) */
  const char *etcd;        /* NULL or "": single node, always the leader */
  const char *node_id;     /* for logs */
  const char *advertise;   /* host:port clients are sent to (idem-leader) */
  const char *prefix;      /* election prefix; NULL = "/idem/leader" */
  int ttl_s;               /* 0 = 5 */
  int64_t store_timeout_ms;
  /* throughput: group commit and the replay cache, both under the epoch */
  int batch_conns;          /* 0 = 2 */
  int batch_max;            /* 0 = 64 */
  size_t cache_entries;     /* 0 = 100000 */
} node_ha_config;

typedef struct node_ha node_ha;

/* Creates the elector (not started). Single node: reads the fence's epoch first (0 when the
 * database cannot be read). NULL with err filled on a bad configuration. */
node_ha *node_ha_new(const node_ha_config *c, err_t *err);
/* Starts campaigning (etcd) — call once the server listens. */
err_code node_ha_start(node_ha *h, err_t *err);
elect *node_ha_elector(node_ha *h);
/* open_store callback: a PostgreSQL store that writes under the current epoch (fenced), its
 * step transactions group-committed by the ha's batcher. */
store *node_ha_open_store(void *h);
/* The leader's replay cache, filled by the batcher's commits; for coord_ctx. */
replay_cache *node_ha_replay_cache(node_ha *h);
/* is_leader callback (the reaper). */
bool node_ha_is_leader(void *h);
/* SIGTERM: stop serving and hand leadership over at once. */
void node_ha_resign(node_ha *h);
/* Resigns if needed, stops the elector's and the batcher's threads, frees. Stores opened with
 * node_ha_open_store must be closed first. NULL is fine. */
void node_ha_free(node_ha *h);

#endif
