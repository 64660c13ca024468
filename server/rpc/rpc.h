/* rpc.h — the gRPC front: the only module that includes <grpc/grpc.h>.
 *
 * One completion-queue thread accepts calls and sends replies; it never waits on the store.
 * Each call's request is decoded and handed to a pool of worker threads, each owning one store
 * connection (opened with cfg->open_store); the worker runs the coord_* operation, encodes the
 * reply and starts the send batch. With cfg->submit_steps, BeginStep and CompleteStep skip the
 * workers: the store's own thread answers them after its commit. Status codes come from one
 * table (rpc_status.c).
 */
#ifndef IDEM_RPC_H
#define IDEM_RPC_H

#include <stddef.h>
#include <stdint.h>

#include "../auth/auth.h"
#include "../coord/coord.h"
#include "../elect/elect.h"
#include "../slots/slot_service.h"
#include "../slots/slotmove.h"
#include "../store/store.h"
#include "../store/store_pool.h"
#include "../util/err.h"

typedef struct rpc_server rpc_server;

/* One store group (docs/api.md §17) as the server sees it: the rules over its store, its
 * elector and where its workers' stores come from. All borrowed; they must outlive the server. */
typedef struct rpc_group {
  const char *name;
  const coord_ctx *coord;
  elect *elector; /* NULL: always the leader */
  store *(*open_store)(void *arg);
  void *open_store_arg;
  /* unfenced stores on the group's database, kept open (store_pool.h), for what any node may
   * write there: policies (docs/api.md §17: written to every group). NULL: policies go to
   * groups[0] only */
  store_pool *plain;
} rpc_group;

/* Which group serves a call: the index into rpc_config.groups of the slot of (tenant, id), or
 * -1 when no group does (no map yet). id is a global id, or with new_saga BeginSaga's request id
 * ("" when none: any group this node leads). */
typedef int (*rpc_route_fn)(void *arg, const char *tenant, const char *id, bool new_saga);
/* route's answer while the slot is handed to another group (docs/api.md §18): UNAVAILABLE
 * slot-moving with idem-retry-after-ms */
#define RPC_ROUTE_MOVING (-2)

/* Admin.MoveSlots (docs/api.md §18): runs the move's request until deadline (absolute,
 * monotonic ms); with w, when the move goes on, the call is kept (ERR_OK, *parked) and answered
 * later through w->done, holding no worker; move_cancel answers the kept call w->id whose
 * client went away (its move goes on). And the progress of the move under way (false when none
 * is known). */
typedef err_code (*rpc_move_fn)(void *arg, const slot_move_req *rq, int64_t deadline,
                                slot_move_res *out, err_t *err, slot_move_wait *w, bool *parked);
typedef void (*rpc_move_cancel_fn)(void *arg, uint64_t id);
typedef bool (*rpc_move_progress_fn)(void *arg, uint64_t *rows, int64_t *lag);

typedef struct rpc_config {
  const char *listen;     /* "127.0.0.1:50051" */
  int workers;            /* worker threads = store connections; 0 = 8 */
  const coord_ctx *coord; /* borrowed, must outlive the server */
  /* Opens one store for one worker (called once per worker at start). */
  store *(*open_store)(void *arg);
  void *open_store_arg;
  /* slot groups (docs/api.md §17): with n_groups > 1, every call that names a saga is routed
   * by route to its group, served only by that group's leader (else UNAVAILABLE with
   * idem-leader and idem-group, nothing done), on that group's coord and stores; the other
   * calls use groups[0]. n_groups 0: one group made of coord, elector and open_store above
   * (which are then ignored otherwise). Copied; the members are borrowed. */
  const rpc_group *groups;
  size_t n_groups;
  rpc_route_fn route;
  void *route_arg;
  /* the slot map now, for GetTopology and GetStatus (NULL: none; borrowed until the next call) */
  slots_view *(*slots_hold)(void *arg); /* the map now, held (slots_view_release) */
  void *slotmap_arg;
  rpc_move_fn move_slots; /* NULL: MoveSlots answers FAILED_PRECONDITION (no slot groups) */
  rpc_move_cancel_fn move_cancel;
  rpc_move_progress_fn move_progress;
  void *move_arg;
  /* throughput: BeginStep and CompleteStep do not take a worker. The
   * completion-queue thread checks and decodes them and hands them to one more store (from
   * open_store) with store_step_txn_submit; the store's thread sends the reply after the
   * commit. The stores open_store gives must then support it (a PostgreSQL store with a
   * batcher). false: every call runs on a worker. */
  bool submit_steps;
  const char *node_id;         /* for GetStatus */
  /* for GetStatus (docs/upgrading.md): the schema version this node runs on (the lowest of its
   * groups', read at start) and the newest its migrations know */
  int schema_version, schema_newest;
  size_t max_recv_bytes;       /* default 256 KiB */
  int64_t default_deadline_ms; /* applied to calls without a deadline; default 2000 */
  /* rpc_server_stop: how long the drain waits for the calls in flight to be answered and every
   * client to close its connection (docs/internals.md, "The drain"); 0: RPC_DRAIN_TIMEOUT_MS */
  int64_t drain_timeout_ms;
  /* high availability: borrowed, must outlive the server; NULL = always the leader.
   * Not the leader: every call but Admin.GetStatus and health answers UNAVAILABLE "not the
   * leader" with trailing metadata idem-leader: host:port (empty when no leader is known), as
   * does a call the store refused as fenced. Health is SERVING only while the leader with a
   * healthy store. */
  elect *elector;
  /* security: PEM text, copied by grpc at start. tls_cert_pem NULL = plaintext; with
   * tls_client_ca_pem every client must present a certificate that CA signed (verified). */
  const char *tls_cert_pem, *tls_key_pem, *tls_client_ca_pem;
  /* borrowed, must outlive the server; NULL or nothing enabled = authentication off (tenant
   * from idem-tenant). Otherwise each call is identified with auth_decide before anything
   * else: idem-tenant is ignored, UNAUTHENTICATED / PERMISSION_DENIED refuse the call. */
  const auth_config *auth;
  /* with authentication off: a call without idem-tenant metadata is refused (INVALID_ARGUMENT)
   * instead of running as tenant "default" (health and GetStatus excepted) */
  bool require_tenant;
} rpc_config;

/* The gRPC library's process-wide state: rpc_init before the first rpc_server_start (it starts
 * threads: block signals first), rpc_shutdown after the last rpc_server_free. Counted: pairs
 * may nest. */
void rpc_init(void);
void rpc_shutdown(void);

/* Binds, starts the threads and begins serving. NULL with err filled when the port cannot be
 * bound or threads cannot start. The config is copied (strings too); coord is borrowed. */
rpc_server *rpc_server_start(const rpc_config *cfg, err_t *err);

/* The port actually bound (useful with port 0). */
int rpc_server_port(const rpc_server *s);

/* Before the drain of a node that handed its leadership over: keeps serving (a node that leads
 * nothing refuses every step call with not-leader and the leader's address: nothing done, go
 * there) until no call has arrived for quiet_ms, and no not-leader answer that named no leader
 * (no-leader: an election under way) was sent for backoff_ms, at most max_ms, so that clients
 * have moved to another node when the drain begins. A client told no-leader does not hop: it
 * backs off (up to the clients' longest backoff) and calls again, maybe this node: backoff_ms
 * covers that. gRPC core kills every call that reaches a server after its shutdown began
 * (CANCELLED, never given to the server): the quieter the node, the fewer.
 * A wait on an event: each call's arrival signals it, and it sleeps until the quiet period would
 * end (no polling). Returns how long it waited (ms). */
int64_t rpc_server_quiesce(rpc_server *s, int64_t quiet_ms, int64_t backoff_ms, int64_t max_ms);

/* After this node stopped serving group (its elector's serving flag is down: no call is
 * admitted as its leader any more): waits until every call admitted as the group's leader
 * before that has been answered (its store work done: a step's transaction committed or rolled
 * back), at most max_ms. A call is counted before its leadership check and uncounted when its
 * answer is sent, so none admitted is missed. A wait on an event (the last answer signals it).
 * True when none is left. Thread-safe; s may be NULL (true). */
bool rpc_server_settle(rpc_server *s, size_t group, int64_t max_ms);

/* Drains: GOAWAY to every client and no new connection (gRPC core's graceful shutdown), then
 * waits until every call in flight has been answered and every connection is closed, at most
 * the drain timeout (rpc_config.drain_timeout_ms); after it, cancels what is left, closes the
 * connections and logs it. Joins all threads. Safe to call from any thread but the server's own,
 * once. */
void rpc_server_stop(rpc_server *s);

/* Frees a stopped server. */
void rpc_server_free(rpc_server *s);

#endif
