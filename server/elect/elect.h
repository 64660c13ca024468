/* elect.h — leader election (docs/api.md §7): who may serve, under which epoch.
 *
 * An elector is a small ops table with thin inline wrappers (like store.h). Two backends:
 *  - single-node (elect_single_new): always the leader, with a fixed epoch (the fencing table's
 *    value at start-up, or 0). For development and tests; no background thread.
 *  - etcd (elect_etcd_new): an etcd v3 election over the JSON gateway (libcurl + cJSON). The
 *    election revision of this node's key is the epoch. Three threads of its own, each with its
 *    own curl handle: the campaign loop, the lease keep-alive (every TTL/3, also while a
 *    campaign blocks) and an observer (who leads, and whether it is still us).
 *
 * Serving rule (the etcd elector): a node serves only while
 *   elected && fenced (on_elected returned true for this epoch) &&
 *   clock_mono_ms() < last acknowledged keep-alive (time the request was SENT) + TTL − margin.
 * The check is made on every elect_status/elect_is_leader call, so a node that was paused
 * (SIGSTOP), partitioned from etcd, or whose etcd died stops serving by itself, before its lease
 * can expire at etcd, even if no thread of it has run since.
 *
 * Naming rule (the etcd elector): leader_addr is this node's own address while it serves; else
 * the leader it last read from etcd, but only while etcd answered this node within the last TTL
 * (election_ok); "" otherwise. A leader it read before etcd fell silent may have lost its lease
 * since (and stopped serving within one TTL), so it is not named. Every reader (GetStatus, the
 * idem-leader of a refusal, the console, idemctl through GetStatus) takes the leader from
 * elect_status: what a node says of the leader and where its refusals send a caller never differ.
 *
 * An etcd write that times out has an unknown outcome: the elector re-reads (the leader key,
 * the lease) and never repeats a write blindly. After losing leadership it abandons the lease
 * (revoked when etcd answers; it expires by itself otherwise) and campaigns afresh with a new
 * one, so every term has a new, higher epoch.
 *
 * All functions are thread-safe unless noted.
 */
#ifndef IDEM_ELECT_H
#define IDEM_ELECT_H

#include <stdbool.h>
#include <stdint.h>

#include "../util/err.h"

#define ELECT_OPS_VERSION 2 /* 2: yield, candidates */
#define ELECT_ADDR_MAX 256

typedef struct elect elect;

/* A snapshot of this node's view. */
typedef struct elect_status {
  bool leader;                      /* may serve right now (see the serving rule) */
  uint64_t epoch;                   /* this node's epoch while leader, else 0 */
  char leader_addr[ELECT_ADDR_MAX]; /* the current leader's advertised host:port, "" unknown
                                     * (the naming rule) */
  bool election_ok;                 /* the election backend answered within the last TTL */
  int candidates;                   /* nodes campaigning in this election (0: not known) */
} elect_status;

/* Called by the elector (from its own thread) when this node has just won the election,
 * before it serves: raise the fence to epoch (store.h fence_raise). Return true once the
 * fence is at epoch; false to be called again a little later (the store is unreachable);
 * set *superseded when the fence is already above epoch (a newer leader exists: the elector
 * gives up this term). Must return within about one TTL. */
typedef bool (*elect_elected_fn)(void *arg, uint64_t epoch, bool *superseded);

typedef struct elect_ops {
  int version; /* ELECT_OPS_VERSION */
  /* Starts the background work (campaigning). ERR_OK or an error with err filled. */
  err_code (*start)(elect *e, err_t *err);
  /* Fills *out; never blocks on the network. */
  void (*status)(elect *e, elect_status *out);
  /* Steps down at once and stops campaigning: serving stops first, then the calls admitted in
   * the term are let finish (on_stepping_down, the etcd elector), then the leader key is
   * resigned and the lease revoked (each bounded by about one second). For SIGTERM.
   * Idempotent. */
  void (*resign)(elect *e);
  /* Ends the term this node serves now (stops serving at once, lets the calls admitted in the
   * term finish as resign does, then its key goes) and campaigns again behind the other
   * candidates: hands the election to the next node. Nothing when not serving. For balancing
   * groups among nodes (docs/api.md §17). */
  void (*yield)(elect *e);
  /* Stops the threads (resigning first if needed) and frees e. NULL is fine. */
  void (*free)(elect *e);
} elect_ops;

/* Every backend's handle starts with this. */
struct elect {
  const elect_ops *ops;
};

static inline err_code elect_start(elect *e, err_t *err) {
  return e->ops->start(e, err);
}
static inline void elect_status_get(elect *e, elect_status *out) {
  e->ops->status(e, out);
}
/* Whether this node may serve now; *epoch (may be NULL) gets its epoch when it may. */
static inline bool elect_is_leader(elect *e, uint64_t *epoch) {
  elect_status st;
  e->ops->status(e, &st);
  if (epoch) *epoch = st.leader ? st.epoch : 0;
  return st.leader;
}
static inline void elect_resign(elect *e) {
  e->ops->resign(e);
}
static inline void elect_yield(elect *e) {
  if (e->ops->yield) e->ops->yield(e);
}
static inline void elect_free(elect *e) {
  if (e) e->ops->free(e);
}

/* --- single node (elect_single.c) --- */

/* Always the leader with this epoch; leader_addr is advertise (copied; may be NULL). NULL only
 * on allocation failure. */
elect *elect_single_new(uint64_t epoch, const char *advertise);

/* --- etcd (elect_etcd.c) --- */

typedef struct elect_etcd_config {
  const char *endpoints;       /* "http://127.0.0.1:2379[,http://…]" (copied) */
  const char *prefix;          /* election name, e.g. "/idem/leader" (copied) */
  const char *node_id;         /* for logs (copied) */
  const char *advertise;       /* host:port stored as the candidate's value (copied) */
  int ttl_s;                   /* lease TTL in seconds, 2..60 (default 5) */
  int64_t margin_ms;           /* stop serving this long before the lease can expire; 0 = TTL/5,
                                  at least 200 ms */
  elect_elected_fn on_elected; /* may be NULL: fenced at once */
  void *on_elected_arg;
  /* may be NULL: called (from the elector's thread) once a term is served, after the serving
   * flag is up (elect_is_leader true), so that work waiting for the leadership starts now */
  void (*on_serving)(void *arg);
  void *on_serving_arg;
  /* may be NULL: called when this node ends a term it served on purpose (resign, yield), after
   * serving stopped (no new call is admitted) and before its key and lease go (no other node
   * can be elected yet), on the thread that ends it. It waits, bounded by itself (about a
   * second at most), for the calls admitted in the term to be answered, so that their store
   * transactions have committed before the next leader fences the store: a fence of a release
   * that ends a former leader's open transactions at once (0.1.0's) then finds none. Not called
   * when the term ends otherwise (lease lost, another leader, no keep-alive in time). */
  void (*on_stepping_down)(void *arg);
  void *on_stepping_down_arg;
} elect_etcd_config;

/* Creates the etcd elector (no network yet: elect_start begins). NULL with err filled on a bad
 * configuration or allocation failure. */
elect *elect_etcd_new(const elect_etcd_config *cfg, err_t *err);

/* Test hooks (etcd elector only). The lease ID of the current term (0 when none) and how many
 * keep-alives etcd acknowledged so far. */
int64_t elect_etcd__lease(elect *e);
uint64_t elect_etcd__keepalives(elect *e);

#endif
