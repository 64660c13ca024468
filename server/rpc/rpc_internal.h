/* rpc_internal.h — shared between the .c files of rpc/ only (never included outside rpc/).
 *
 * Life of a call (one rpc_call object from request to free):
 *   1. the cq thread posts a request (grpc_server_request_registered_call) with the rpc_call as
 *      tag; kind RPC_TAG_REQUEST (or RPC_TAG_GENERIC for unknown methods).
 *   2. the request completes on the cq: the cq thread posts a fresh request for the same method,
 *      computes the call's monotonic deadline and pushes the rpc_call to the worker pool.
 *   3. a worker decodes, runs the handler with its own store, encodes the reply and starts ONE
 *      batch (send initial metadata, message, status; recv close) with the rpc_call as tag;
 *      kind becomes RPC_TAG_BATCH.
 *   4. the batch completes on the cq (success or not): the cq thread frees the rpc_call.
 * A call that may wait (BeginStep with wait_ms) also watches for its client going away: before
 * its handler starts, the cq thread starts a second batch of its own (RECV_CLOSE_ON_SERVER
 * alone, tag close_tag, kind RPC_TAG_CLOSE), and the reply batch then leaves that op out. When
 * it completes with cancelled set, the cq thread cancels the call's wait (coord_waiters_cancel
 * on its cell), which answers a parked call at once. Such a call is freed when the last of its
 * two batches completes (batches counts them down).
 * A method with an async handler (with cfg->submit_steps) skips the worker: in step 2
 * the cq thread checks and decodes the call and starts the handler, which hands the call to
 * the store; whichever thread has the store's answer (the store's own thread, or the cq thread
 * at once) ends it with rpc__async_done, which does step 3's reply.
 * A request that completes with success == 0 (server shutdown) is freed at once. Exactly one
 * thread touches an rpc_call at a time: whoever was handed the tag last.
 */
#ifndef IDEM_RPC_INTERNAL_H
#define IDEM_RPC_INTERNAL_H

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/compression.h>
#include <grpc/grpc.h>
#include <grpc/support/time.h>
#include <protobuf-c/protobuf-c.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "idem/v1/coordinator.pb-c.h"
#include "rpc.h"

/* Requests kept outstanding per registered method; one is re-posted as each one arrives. */
#define RPC_REQUESTS_PER_METHOD 8
#define RPC_GENERIC_REQUESTS 2
/* Calls waiting for a worker beyond this are refused with RESOURCE_EXHAUSTED by the cq thread. */
#define RPC_QUEUE_MAX 4096
/* rpc_server_stop's drain timeout when rpc_config.drain_timeout_ms is 0: after it, calls still
 * in flight are cancelled and the connections closed (--drain-timeout-ms has the same default) */
#define RPC_DRAIN_TIMEOUT_MS 10000
#define RPC_MAX_METHODS 32
#define RPC_GROUPS_MAX 64 /* store groups (SLOTMAP_GROUPS_MAX) */
#define RPC_MOVING_RETRY_MS 50 /* idem-retry-after-ms of a slot in its move's handoff */
/* What the server holds for clients that do not read their replies (docs/api.md §16): every reply
 * is counted from its encoding until its batch completes (sent, or the call died). A bulky
 * reply that would take the total past this is refused with RESOURCE_EXHAUSTED instead (a read:
 * nothing is lost). Other replies are small (a record: at most the body limit) and are always
 * sent, so that no decision already stored goes unanswered. */
#define RPC_REPLY_BUFFER_MAX ((size_t)128 << 20)
#define RPC_TENANT_DEFAULT "default"
#define RPC_TENANT_MD "idem-tenant"
#define RPC_RETRY_AFTER_MD "idem-retry-after-ms"
#define RPC_LEADER_MD "idem-leader" /* a standby's (or fenced) refusal */
#define RPC_GROUP_MD "idem-group"   /* with groups: the group whose leader idem-leader names */
#define RPC_TRACEPARENT_MD "traceparent" /* W3C trace context (docs/api.md §22) */
/* request metadata above this is refused by the server itself (RESOURCE_EXHAUSTED, with a reason);
 * gRPC core's own limit, above it, is rpc_server.c's TRANSPORT_MAX_METADATA_BYTES */
#define RPC_MAX_METADATA_BYTES (8 * 1024)
#define RPC_REASON_MD "idem-reason" /* every non-OK answer: why, in a word (docs/api.md §5) */
/* a non-OK answer whose error has them: more about what happened, and what to do about it
 * (docs/api.md §5), as err_wire_text makes them (printable ASCII, at most ERR_DETAIL_MAX - 1
 * and ERR_HINT_MAX - 1 bytes) */
#define RPC_DETAIL_MD "idem-detail"
#define RPC_HINT_MD "idem-hint"

typedef enum rpc_tag_kind {
  RPC_TAG_REQUEST,  /* a registered request is outstanding */
  RPC_TAG_GENERIC,  /* a generic (unknown method) request is outstanding */
  RPC_TAG_BATCH,    /* the reply batch is in flight */
  RPC_TAG_CLOSE,    /* the early RECV_CLOSE_ON_SERVER batch (close_tag) is in flight */
  RPC_TAG_SHUTDOWN, /* grpc_server_shutdown_and_notify */
} rpc_tag_kind;

typedef struct rpc_tag {
  rpc_tag_kind kind;
} rpc_tag;

typedef struct rpc_call rpc_call;

/* What a handler gets besides the decoded request. */
typedef struct rpc_req {
  rpc_server *srv;
  const coord_ctx *coord; /* the call's group's rules */
  size_t group;           /* index into srv->groups */
  store *const *stores;   /* on a worker: its store of every group (NULL for async handlers) */
  store *st;              /* the worker's own store; for an async handler the shared submit store */
  const char *tenant;     /* from the credentials (valid); with authentication off from
                             metadata idem-tenant, else "default", not yet validated */
  int64_t deadline;       /* absolute, monotonic ms */
  bool no_deadline;       /* the client set none: deadline is the server's default */
  const char *trace_id;   /* the trace id of the call's valid traceparent, else "" (§22) */
  bool *kept; /* on a worker: set by a handler that kept the call (rpc__call_keep) */
} rpc_req;

/* A handler answers ERR_OK after setting the reply with rpc__call_reply, or an error code with
 * err filled. It must not keep `in` or anything reachable from it. */
typedef err_code (*rpc_handler_fn)(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c,
                                   err_t *err);

/* a handler started on the completion-queue thread that must never wait (rq->st is
 * a store for store_step_txn_submit, shared): it ends the call exactly once, now or later from
 * another thread, with rpc__async_done (after rpc__call_reply on success). `in` stays valid
 * until then. */
typedef void (*rpc_async_fn)(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c);

typedef struct rpc_method {
  const char *path;                     /* "/idem.v1.Coordinator/BeginStep" */
  const ProtobufCMessageDescriptor *in; /* request message */
  rpc_handler_fn handler;               /* NULL: UNIMPLEMENTED "not implemented yet" */
  rpc_async_fn async;                   /* NULL (or no cfg->submit_steps): handler on a worker */
  bool bulky; /* a read with replies of up to COORD_PAGE_BYTES: refused when the buffer is full */
  /* with groups: the saga the call names (its global id; BeginSaga's request id with
   * new_saga), routing it to its group; NULL, or "" returned without new_saga: not routed
   * (served on groups[0]) */
  const char *(*route)(const ProtobufCMessage *in);
  bool new_saga;
  /* with groups: the call acts on one group's steps, named by its idem-group metadata
   * (required), and is served by that group's leader (ResolveSteps) */
  bool group_md;
} rpc_method;

extern const rpc_method rpc__methods[];
extern const size_t rpc__n_methods;

struct rpc_call {
  rpc_tag tag; /* first member: the cq tag points here */
  rpc_server *srv;
  int method; /* index into rpc__methods; -1 for a generic call */
  grpc_call *call;
  gpr_timespec deadline_ts;
  grpc_metadata_array md;
  grpc_call_details details; /* generic calls only */
  grpc_byte_buffer *payload; /* registered calls: the request message (NULL if none) */
  int64_t deadline;          /* absolute monotonic ms, fixed when the call arrived */
  int64_t arrived_us;        /* monotonic microseconds at arrival (latency metrics); 0 unknown */
  /* a step call handed to the store by an async handler: its stages are measured (metrics.h),
   * the last one from replied_us, when the reply went to gRPC, to its batch's completion */
  bool staged;
  int64_t replied_us;
  /* the reply, alive until the batch completes */
  grpc_byte_buffer *reply;
  size_t reply_bytes;        /* counted in srv->reply_bytes while reply is held */
  /* idem-leader and idem-group, or idem-retry-after-ms; idem-reason, idem-detail, idem-hint */
  grpc_metadata trailing[5];
  int group;                 /* the group the call was routed to (0 when not routed) */
  int led; /* 1 + the group whose leader admitted the call (counted in its admitted), 0: none */
  size_t n_trailing;
  int cancelled;
  /* a call that may wait (see the top of this file): the early close batch's tag, the batches
   * not yet completed (1, or 2 with the close batch), and its link to the wait's cancellation */
  rpc_tag close_tag;
  bool close_early;
  atomic_int batches;
  coord_wait_cell cell;
  char trace_id[33];    /* of the call's traceparent ("" = none): its latency's exemplar */
  /* a worker's call kept by its handler to be answered later (MoveSlots: rpc__call_keep), and
   * what the early close batch does when its client went away meanwhile */
  void (*on_cancel)(rpc_call *c);
  _Atomic uint64_t cancel_id;
  rpc_call *next;       /* worker queue link */
  ProtobufCMessage *in; /* an async handler's request, freed by rpc__async_done */
};

/* --- worker pool (rpc_workers.c) --- */
typedef struct rpc_worker {
  rpc_server *srv;
  store **st; /* one per group */
  pthread_t thread;
  bool started;
} rpc_worker;

typedef struct rpc_pool {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  rpc_call *head, *tail;
  size_t len;
  bool stopping;
  rpc_worker *workers;
  int n;
} rpc_pool;

/* Opens one store per worker (cfg open_store) and starts the threads. On failure everything
 * started is stopped again and err is filled. */
err_code rpc__pool_start(rpc_pool *p, rpc_server *srv, int n, err_t *err);
/* Queues a call for a worker; false when the queue is full or stopping (call not taken). */
bool rpc__pool_push(rpc_pool *p, rpc_call *c);
/* Lets the workers finish every queued call, joins them and closes their stores. */
void rpc__pool_stop(rpc_pool *p);

/* --- the server (rpc_server.c) --- */
typedef struct rpc_group_rt {
  rpc_group g;         /* name owned */
  store *submit_store; /* with cfg->submit_steps */
  /* the store's health as GetTopology reports it (rpc_topology.c): the last ping's answer and
   * when it was asked (monotonic ms, 0: never), one ping at a time */
  _Atomic bool ping_ok;
  _Atomic int64_t ping_ms;
  atomic_flag pinging;
  /* calls admitted as this group's leader and not yet answered (rpc_server_settle) */
  _Atomic long admitted;
} rpc_group_rt;

struct rpc_server {
  char *listen;
  char *node_id;
  char *address; /* host:bound-port, for GetStatus */
  const coord_ctx *coord;
  store *(*open_store)(void *arg);
  void *open_store_arg;
  size_t max_recv_bytes;
  int64_t default_deadline_ms;
  int workers;
  elect *elector;          /* groups[0]'s; NULL = always the leader */
  const auth_config *auth; /* NULL = authentication off */
  rpc_group_rt *groups;    /* at least one */
  size_t n_groups;
  rpc_route_fn route; /* with n_groups > 1 */
  void *route_arg;
  slots_view *(*slots_hold)(void *arg); /* NULL: no map (GetTopology UNAVAILABLE) */
  void *slotmap_arg;
  rpc_move_fn move_slots;
  rpc_move_cancel_fn move_cancel;
  rpc_move_progress_fn move_progress;
  void *move_arg;

  grpc_server *server;
  grpc_completion_queue *cq;
  void *registered[RPC_MAX_METHODS]; /* per rpc__methods entry */
  int port;
  int64_t started_unix_ms;
  int schema_version, schema_newest; /* rpc_config's */

  pthread_t cq_thread;
  bool cq_started;
  atomic_bool shutting_down;
  _Atomic int64_t last_call_ms; /* when the last call arrived (monotonic): rpc_server_quiesce */
  _Atomic int64_t last_unnamed_ms; /* the last not-leader answer naming no leader (monotonic):
                                    its client backs off, then calls again: rpc_server_quiesce */
  atomic_bool quiescing;         /* rpc_server_quiesce waits: an arrival signals arrived */
  pthread_cond_t arrived;        /* with mu */
  _Atomic int settling;          /* rpc_server_settle waits: a group's last admitted call signals */
  pthread_cond_t settled;        /* with mu */
  int64_t drain_timeout_ms;
  bool require_tenant;
  _Atomic size_t reply_bytes; /* encoded replies not yet sent (RPC_REPLY_BUFFER_MAX) */
  rpc_tag shutdown_tag;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool shutdown_notified;
  bool stopped;

  rpc_pool pool;
  /* with cfg->submit_steps: whether the groups have stores async handlers submit to, and how
   * many calls they have not ended yet (under mu; cv is broadcast when it drops to 0) */
  bool submits;
  int async_pending;
};

/* --- per-call state (rpc_call.c) --- */
rpc_call *rpc__call_new(rpc_server *srv, int method);
void rpc__call_free(rpc_call *c);
/* One of c's batches completed (cq thread): frees c after the last one. */
void rpc__call_batch_done(rpc_call *c);
/* The reply batch of c completed (on the cq thread, before rpc__call_batch_done): a staged
 * call's last stage ends. */
void rpc__call_sent(rpc_call *c);
/* The cq thread, before the handler of a call that may wait: starts the close batch that
 * learns of the client going away (see the top of this file). False if it could not start (the
 * call then waits unwatched, as before). */
bool rpc__call_watch_close(rpc_call *c);
/* The close batch completed (cq thread): cancels the call's wait if the client went away. */
void rpc__call_closed(rpc_call *c);
/* Absolute monotonic ms deadline of a call from its gRPC deadline (default when none). */
int64_t rpc__deadline_mono(gpr_timespec dl, int64_t default_ms);
/* Worker side: decode, run the handler (on its group's store of st, one per group), send the
 * reply. */
void rpc__call_handle(rpc_call *c, store **st);
/* Completion-queue side: when the method has an async handler and the server
 * submits steps, runs every check, decodes and starts the handler; true when the call is
 * taken (the cq thread must not touch c again). */
bool rpc__call_try_async(rpc_call *c);

/* Ends a call an async handler took: its answer code (err filled unless ERR_OK), then the
 * reply as a worker would send it. Any thread. */
void rpc__async_done(rpc_call *c, err_code code, err_t *err);

/* A worker's handler keeps c to answer it later from another thread: it sets *rq->kept and
 * returns ERR_OK without a reply; the call ends with rpc__async_done (c is not the handler's
 * once it may be answered). rpc__call_keep is called before the call can be answered (it counts
 * it as pending: rpc_server_stop waits for it); rpc__call_unkeep undoes it when the call was not
 * kept after all. */
void rpc__call_keep(rpc_call *c);
void rpc__call_unkeep(rpc_call *c);

/* Encodes msg as the reply message. ERR_INTERNAL (err filled) on allocation failure. */
err_code rpc__call_reply(rpc_call *c, const ProtobufCMessage *msg, err_t *err);
/* Starts the single reply batch with e's status; frees c if the batch cannot start. Any
 * thread. */
void rpc__call_finish(rpc_call *c, const err_t *e);

/* Decodes c's payload as desc. NULL with err filled (INVALID_ARGUMENT) when the payload is
 * missing, malformed, a string field holds a NUL byte, or a singular message field comes twice
 * (rpc_decode.c). Free with
 * protobuf_c_message_free_unpacked(msg, NULL). */
ProtobufCMessage *rpc__decode(grpc_byte_buffer *payload, const ProtobufCMessageDescriptor *desc,
                              err_t *err);

/* --- security (rpc_auth.c) --- */
/* Insecure credentials, or TLS from cfg's PEM text (client certificates required and verified
 * when a client CA is given). Release with grpc_server_credentials_release. */
grpc_server_credentials *rpc__server_credentials(const rpc_config *cfg);
/* What a method path needs: health is open, Admin.MoveSlots needs the operator role, the other
 * Admin methods (but GetStatus) the admin role. */
auth_access rpc__access(const char *path);
/* With authentication on: the caller's tenant (into tenant, cap > REC_GLOBAL_ID_MAX) from its
 * token or client certificate, or UNAUTHENTICATED / PERMISSION_DENIED with err filled. */
err_code rpc__authenticate(rpc_call *c, char *tenant, size_t cap, err_t *err);

/* --- status mapping (rpc_status.c) --- */
grpc_status_code rpc__status(err_code code);

/* --- handlers (rpc_handlers.c, rpc_admin.c) --- */
err_code rpc__begin_saga(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);
err_code rpc__begin_step(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);
err_code rpc__complete_step(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);
void rpc__begin_step_async(const rpc_req *, const ProtobufCMessage *, rpc_call *);
void rpc__complete_step_async(const rpc_req *, const ProtobufCMessage *, rpc_call *);
err_code rpc__extend_lease(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);
err_code rpc__lookup_step(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);
err_code rpc__get_saga(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);
err_code rpc__get_policy(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);
err_code rpc__get_status(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);
err_code rpc__health_check(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);

/* incident response: rpc_admin_steps.c */
err_code rpc__list_steps(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);
err_code rpc__resolve_step(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);
err_code rpc__list_audit(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);
err_code rpc__resolve_steps(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);
err_code rpc__move_slots(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);
/* Monotonic clock in microseconds (rpc_call.c). */
int64_t rpc__mono_us(void);

/* slot groups: rpc_topology.c. Each group's status as this node sees it (its store pinged
 * through rq->stores, at most half a second each). */
typedef struct rpc_groups_view {
  Idem__V1__GroupStatus *gs;
  Idem__V1__GroupStatus **ptrs; /* for a repeated field */
  char (*addrs)[ELECT_ADDR_MAX];
  size_t n;
} rpc_groups_view;
err_code rpc__groups_view(const rpc_req *rq, rpc_groups_view *v, err_t *err);
void rpc__groups_view_free(rpc_groups_view *v);
err_code rpc__get_topology(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);

/* policies: rpc_admin_policy.c */
err_code rpc__set_policy(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);
err_code rpc__delete_policy(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);
err_code rpc__list_policies(const rpc_req *, const ProtobufCMessage *, rpc_call *, err_t *);

#endif
