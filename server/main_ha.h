/* main_ha.h — main's high-availability wiring (issue 4): the elector (single node or etcd),
 * the shared epoch every worker's store writes under, and the fence raise a new leader does
 * before it serves. The only place that knows both elect/ and the PostgreSQL store. */
#ifndef IDEM_MAIN_HA_H
#define IDEM_MAIN_HA_H

#include <stdbool.h>
#include <stdint.h>

#include "elect/elect.h"
#include "store/store.h"

typedef struct ha_config {
  const char *pg;          /* conninfo (borrowed for the life of the ha) */
  const char *etcd;        /* NULL or "": single node, always the leader */
  const char *node_id;     /* for logs */
  const char *advertise;   /* host:port clients are sent to (idem-leader) */
  const char *prefix;      /* election prefix; NULL = "/idem/leader" */
  int ttl_s;               /* 0 = 5 */
  int64_t store_timeout_ms;
} ha_config;

typedef struct ha ha;

/* Creates the elector (not started). Single node: reads the fence's epoch first (0 when the
 * database cannot be read). NULL with err filled on a bad configuration. */
ha *ha_new(const ha_config *c, err_t *err);
/* Starts campaigning (etcd) — call once the server listens. */
err_code ha_start(ha *h, err_t *err);
elect *ha_elector(ha *h);
/* open_store callback: a PostgreSQL store that writes under the current epoch (fenced). */
store *ha_open_store(void *h);
/* is_leader callback (the reaper). */
bool ha_is_leader(void *h);
/* SIGTERM: stop serving and hand leadership over at once. */
void ha_resign(ha *h);
/* Resigns if needed, stops the elector's threads, frees. NULL is fine. */
void ha_free(ha *h);

#endif
