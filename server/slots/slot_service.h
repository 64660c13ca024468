/* slot_service.h — the slot map of a running node (docs/api.md §17, §18): which of its store
 * groups serves each slot, the route of a call to its group, and what waits for the map and the
 * moves.
 *
 * With etcd the map lives at <prefix>/slotmap: read at start, created there (equal ranges, in the
 * order the groups are named) when the cluster is new. A node whose slot count differs from the
 * map's, or whose groups do not include every group the map names, refuses to start (USAGE) and
 * writes nothing. While it runs one thread watches <prefix>/ (etcd's watch: a stream, no polling)
 * and follows each newer map it can serve (the same slot count, only its groups); a map it cannot
 * serve is logged and not followed. A watch cancelled by a compaction, or lost with etcd, is
 * started again from where it stood after the map is read again. Moves' results
 * (<prefix>/moves/<request_id>) and progress (<prefix>/slotmove.progress) come the same way.
 * Every change seen bumps a counter that waiters block on (slot_service_wait: a condition
 * variable). Without etcd (or with one --pg group) the map is the equal split, in memory.
 *
 * The map is handed out held (slot_service_hold): a reader keeps the version it holds valid
 * until it releases it, and a version replaced is freed when its last holder lets go.
 *
 * Plain C and threads: etcd is reached through the calls in slots_etcd (node/ wires elect/'s).
 */
#ifndef IDEM_SLOTS_SLOT_SERVICE_H
#define IDEM_SLOTS_SLOT_SERVICE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "slotmap.h"

/* A change a watch saw (value NULL: deleted); false ends the watch. */
typedef bool (*slots_watch_fn)(void *arg, const char *key, const char *value, size_t len,
                               int64_t mod_rev);

/* The etcd calls the service makes (elect/etcd_kv.h's contract): one client per process. */
typedef struct slots_etcd {
  void *arg;
  err_code (*get)(void *arg, const char *key, int64_t timeout_ms, char **value, size_t *len,
                  int64_t *mod_rev, err_t *err);
  err_code (*create)(void *arg, const char *key, const char *value, int64_t timeout_ms,
                     bool *created, err_t *err);
  err_code (*swap)(void *arg, const char *key, const char *value, int64_t mod_rev,
                   int64_t timeout_ms, bool *swapped, err_t *err);
  err_code (*put)(void *arg, const char *key, const char *value, int64_t timeout_ms, err_t *err);
  err_code (*watch)(void *arg, const char *prefix, int64_t start_rev, slots_watch_fn fn,
                    void *fn_arg, const atomic_bool *stop, int64_t *next_rev, int64_t *compacted,
                    err_t *err);
  /* wakes a watch so that it sees its stop flag now (may be NULL: none waits long) */
  void (*wake)(void *arg);
} slots_etcd;

typedef struct slots_config {
  uint32_t slots;
  const char *const *groups; /* the node's groups, in order (their index is a route's answer) */
  size_t n_groups;
  const char *prefix;     /* the election prefix: the map is at <prefix>/slotmap */
  const slots_etcd *etcd; /* NULL: the equal split, in memory; else copied */
} slots_config;

typedef enum slots_result {
  SLOTS_OK = 0,
  SLOTS_FAILED = 1, /* logged: etcd did not answer in time, out of memory */
  SLOTS_USAGE = 2,  /* msg says why: another slot count, a group this node lacks */
} slots_result;

typedef struct slot_service slot_service;

/* Reads (or creates) the map and starts the watch. *out on SLOTS_OK. */
slots_result slot_service_start(const slots_config *c, slot_service **out, char *msg, size_t cap);
/* Ends the watch and frees the service (every view must have been released). NULL is fine. */
void slot_service_stop(slot_service *s);

/* One version of the map, held. */
typedef struct slots_view slots_view;
slots_view *slot_service_hold(slot_service *s);
void slots_view_release(slots_view *v); /* NULL is fine */
const slotmap *slots_view_map(const slots_view *v);

/* Whether this node leads group (the route's choice for a saga without a request id). */
typedef bool (*slots_leads_fn)(void *arg, size_t group);

/* The group (index into the config's groups) of the slot of (tenant, id); with new_saga and id
 * "", a group leads says this node leads (else the first group). SLOTS_ROUTE_MOVING while the
 * slot's move is in its handoff (docs/api.md §18: refused until the target serves it). */
#define SLOTS_ROUTE_MOVING (-2)
int slot_service_route(slot_service *s, const char *tenant, const char *id, bool new_saga,
                       slots_leads_fn leads, void *leads_arg);

/* Whether slot belongs to group now. */
bool slot_service_owns(slot_service *s, size_t group, uint32_t slot);

/* --- the moves' side (docs/api.md §18), through the service's etcd client --- */

/* The map in etcd now and its revision (*out NULL when there is none). */
err_code slot_service_read(slot_service *s, slotmap **out, int64_t *rev, err_t *err);
/* Writes next if the map is still at rev; on success it is followed at once (not waiting for the
 * watch). */
err_code slot_service_swap(slot_service *s, const slotmap *next, int64_t rev, bool *swapped,
                           err_t *err);
/* Keeps a move's result (JSON) for request_id rid, unless one is kept already. */
err_code slot_service_keep_result(slot_service *s, const char *rid, const char *json, err_t *err);
/* The result kept for rid: ERR_OK with *json (owned; NULL when none yet). Seen by the watch, or
 * read from etcd. */
err_code slot_service_result(slot_service *s, const char *rid, char **json, size_t *len,
                             err_t *err);
/* The progress of the move under way: written by its driver, seen by every node's watch. */
void slot_service_put_progress(slot_service *s, uint64_t rows, int64_t lag);
bool slot_service_progress(slot_service *s, uint64_t *rows, int64_t *lag);

/* The count of changes seen (maps, results, kicks). */
uint64_t slot_service_changes(slot_service *s);
/* Blocks until the count passes seen, or until deadline (monotonic ms); the count then. */
uint64_t slot_service_wait(slot_service *s, uint64_t seen, int64_t deadline);
/* Counts a change that is not etcd's (a leadership won, a waiter stopping): wakes the waiters. */
void slot_service_kick(slot_service *s);

#endif
