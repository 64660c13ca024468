/* store.h — the storage interface: a versioned ops table (one backend: PostgreSQL), with thin
 * inline wrappers; and the backend table (store_backend, at the end) through which everything
 * outside store/ opens stores, runs the start-up checks, fences and moves slots. All
 * correctness comes from the database's transactions and constraints, never from an in-process
 * lock: any number of coordinator processes may share one database.
 *
 * A `store` is one connection. It is not thread-safe: each worker thread owns its own. A store
 * connects lazily and reconnects after a lost connection on the next call; while the database
 * cannot be reached every call fails promptly with ERR_UNAVAILABLE (never blocks past its
 * deadline), and the store object stays usable.
 *
 * Deadlines are absolute, on the monotonic clock (clock_mono_ms()). A call whose deadline passes
 * while it waits on the database is cancelled and fails with ERR_UNAVAILABLE ("store timeout");
 * its transaction is rolled back unless the commit was already sent, in which case the outcome
 * is unknown to the caller, as with any database.
 *
 * Serialization failures (40001), deadlocks (40P01) and unique violations from racing inserts
 * are retried inside the store and never reach a caller.
 */
#ifndef IDEM_STORE_H
#define IDEM_STORE_H

#include <stdatomic.h>

#include "../util/err.h"
#include "../domain/record.h"
#include "../domain/record_admin.h"
#include "../domain/policy.h"
#include "../domain/owner.h"

#define STORE_OPS_VERSION 1

typedef struct store store;

/* The body of a step transaction. Called with both records of the step pair read under the
 * pair's lock (held until commit) and the database clock; fills w with the records to write.
 * The store writes w->recs[0..n) (insert or replace) and commits, whatever the return value:
 * a decision may both write (abandon an expired forward) and answer an error. Return ERR_OK or
 * the error to hand back to the caller (with err filled).
 * The store may call fn more than once (after a serialization failure): fn must start from
 * scratch each time and keep nothing from an earlier call. Records in *cur are valid only
 * during the call; anything fn wants to keep it copies into its own arg. */
typedef err_code (*store_step_fn)(void *arg, const step_pair *cur, step_writes *w, err_t *err);

/* The answer of a step transaction submitted without waiting (step_txn_submit,
 * the PostgreSQL backend's batcher): the same rc and err as step_txn would have returned (err is
 * NULL when rc is ERR_OK). Runs on the batcher's answer thread (one per batcher, in commit order),
 * holding none of the batch threads' locks: the next batch runs meanwhile. It must not block for
 * long: the answers after it wait. */
typedef void (*store_step_done_fn)(void *arg, err_code rc, const err_t *err);

/* By default at most this many submitted step transactions wait for a batch (per batcher);
 * more are refused. */
#define STORE_BATCH_QUEUE_MAX 4096

typedef struct store_ops {
  int version; /* STORE_OPS_VERSION */

  /* Closes the connection and frees s. */
  void (*close)(store *s);

  /* A trivial round trip: ERR_OK when the database answers. */
  err_code (*ping)(store *s, int64_t deadline, err_t *err);

  /* One transaction over the step pair of key (tenant, global_id, service, operation; the
   * phase is ignored): lock the pair, read both records, call fn, write, commit. */
  err_code (*step_txn)(store *s, const step_key *key, int64_t deadline, store_step_fn fn, void *arg,
                       err_t *err);

  /* Fills an owned record (out->present == false when there is none). Never ERR_NOT_FOUND. */
  err_code (*lookup_step)(store *s, const step_key *key, int64_t deadline, step_rec *out,
                          err_t *err);

  /* BeginSaga: with a request id still within its retention, answers the saga it created
   * (created = false); otherwise stores in->global_id (created = true). An expired request id
   * is detached from its old saga and reused. */
  err_code (*begin_saga)(store *s, const saga_new *in, int64_t deadline, saga_begun *out,
                         err_t *err);

  /* Fills an owned view: the saga row (if any), its labels, and the page of global_id's steps
   * that pg selects (saga_page), in timeline order; out->more when steps follow. ERR_NOT_FOUND
   * when there is neither a saga row nor a step (first page only: a later one may be empty). */
  err_code (*get_saga)(store *s, const char *tenant, const char *global_id, const saga_page *pg,
                       int64_t deadline, saga_view *out, err_t *err);

  /* --- incident response: listing, resolving with an audit row --- */

  /* ListSteps: fills an owned list of at most f->limit records (see step_filter). */
  err_code (*list_steps)(store *s, const step_filter *f, int64_t deadline, step_list *out,
                         err_t *err);

  /* step_txn that also appends *audit to the audit trail in the same transaction when fn
   * returns ERR_OK (nothing is appended otherwise). fn may fill audit's from/to states (audit
   * usually lives in arg); id and at_ms are set by the database. */
  err_code (*step_txn_audit)(store *s, const step_key *key, int64_t deadline, store_step_fn fn,
                             void *arg, const audit_rec *audit, err_t *err);

  /* ListAudit: newest first, one tenant, optionally one saga (global_id NULL or "" = all),
   * rows with id < before_id when before_id > 0. Fills an owned list of at most limit rows. */
  err_code (*list_audit)(store *s, const char *tenant, const char *global_id, int64_t before_id,
                         uint32_t limit, int64_t deadline, audit_list *out, err_t *err);

  /* The newest audit row of key (its phase included) whose action is action, into *out, and
   * *found; *found false when it has none. A plain read, outside any step transaction. NULL in
   * a backend that keeps no audit trail (store_last_audit then finds none). */
  err_code (*last_audit)(store *s, const step_key *key, const char *action, int64_t deadline,
                         audit_rec *out, bool *found, err_t *err);

  /* ResolveSteps' memory of answers by request id (docs/api.md §12). bulk_get: *found and *out
   * when tenant has an answer under request_id. bulk_put: stores *in unless an answer is there
   * already, in which case *out is that one and *stored false (a concurrent twin won). */
  err_code (*bulk_get)(store *s, const char *tenant, const char *request_id, int64_t deadline,
                       bulk_rec *out, bool *found, err_t *err);
  err_code (*bulk_put)(store *s, const bulk_rec *in, uint32_t keep_s, int64_t deadline,
                       bulk_rec *out, bool *stored, err_t *err);

  /* Live IN_PROGRESS and UNKNOWN steps over all tenants (for the /metrics gauges). */
  err_code (*count_steps)(store *s, int64_t deadline, step_counts *out, err_t *err);

  /* --- policies and retention (the reaper) --- */

  /* Inserts or replaces the policy row (tenant, p->service, p->operation) (values already
   * validated; tenant "*" = every tenant), stamped with the database clock. With
   * only_if_absent an existing row is kept (*written = false). On a write, *out (may be NULL)
   * is the stored row. */
  err_code (*policy_put)(store *s, const char *tenant, const policy *p, bool only_if_absent,
                         int64_t deadline, bool *written, policy *out, err_t *err);

  /* Deletes one row; *deleted says whether there was one. */
  err_code (*policy_delete)(store *s, const char *tenant, const char *service,
                            const char *operation, int64_t deadline, bool *deleted, err_t *err);

  /* Every row of tenant (NULL: of every tenant, "*" included), ordered by (tenant, service,
   * operation). *rows is an owned array (free()), NULL when *n == 0. */
  err_code (*policy_list)(store *s, const char *tenant, int64_t deadline, policy_row **rows,
                          size_t *n, err_t *err);

  /* One short transaction: deletes at most limit finished steps past their retention (never
   * IN_PROGRESS or UNKNOWN; rows locked by a running step transaction are skipped). */
  err_code (*reap_steps)(store *s, uint32_t limit, int64_t deadline, uint64_t *deleted, err_t *err);

  /* One short transaction: deletes at most limit saga rows past their retention (their
   * labels go with them; their steps are reaped on their own retention). */
  err_code (*reap_sagas)(store *s, uint32_t limit, int64_t deadline, uint64_t *deleted, err_t *err);

  /* One short transaction (docs/api.md §12): drops the body of at most limit finished steps whose
   * result retention has passed while their key is kept longer (never IN_PROGRESS or UNKNOWN;
   * locked rows skipped). Reads already treat such a body as gone (step_rec.result_expired);
   * this reclaims the space. NULL in a backend that keeps no bodies apart. */
  err_code (*reap_bodies)(store *s, uint32_t limit, int64_t deadline, uint64_t *dropped,
                          err_t *err);

  /* --- a step transaction that does not block its caller --- */

  /* step_txn without waiting: queues it and returns. ERR_OK: done(done_arg, ...) runs exactly
   * once, later, on another thread, with step_txn's answer; key, and whatever fn and done read,
   * must stay valid until then. Otherwise nothing was queued and done never runs:
   * ERR_UNIMPLEMENTED (this store cannot), ERR_RESOURCE (too many waiting) or
   * ERR_UNAVAILABLE (stopping). Unlike every other call, safe from any thread at any time.
   * NULL in a backend that never can. */
  err_code (*step_txn_submit)(store *s, const step_key *key, int64_t deadline, store_step_fn fn,
                              void *arg, store_step_done_fn done, void *done_arg, err_t *err);
} store_ops;

/* Every backend's handle starts with this. */
struct store {
  const store_ops *ops;
};

static inline void store_close(store *s) {
  if (s) s->ops->close(s);
}
static inline err_code store_ping(store *s, int64_t deadline, err_t *err) {
  return s->ops->ping(s, deadline, err);
}
static inline err_code store_step_txn(store *s, const step_key *key, int64_t deadline,
                                      store_step_fn fn, void *arg, err_t *err) {
  return s->ops->step_txn(s, key, deadline, fn, arg, err);
}
static inline err_code store_step_txn_submit(store *s, const step_key *key, int64_t deadline,
                                             store_step_fn fn, void *arg, store_step_done_fn done,
                                             void *done_arg, err_t *err) {
  if (!s->ops->step_txn_submit)
    return err_set(err, ERR_UNIMPLEMENTED, "store: cannot run a step transaction unwaited");
  return s->ops->step_txn_submit(s, key, deadline, fn, arg, done, done_arg, err);
}
static inline err_code store_lookup_step(store *s, const step_key *key, int64_t deadline,
                                         step_rec *out, err_t *err) {
  return s->ops->lookup_step(s, key, deadline, out, err);
}
static inline err_code store_begin_saga(store *s, const saga_new *in, int64_t deadline,
                                        saga_begun *out, err_t *err) {
  return s->ops->begin_saga(s, in, deadline, out, err);
}
static inline err_code store_get_saga(store *s, const char *tenant, const char *global_id,
                                      const saga_page *pg, int64_t deadline, saga_view *out,
                                      err_t *err) {
  return s->ops->get_saga(s, tenant, global_id, pg, deadline, out, err);
}

/* --- incident response --- */
static inline err_code store_list_steps(store *s, const step_filter *f, int64_t deadline,
                                        step_list *out, err_t *err) {
  return s->ops->list_steps(s, f, deadline, out, err);
}
static inline err_code store_step_txn_audit(store *s, const step_key *key, int64_t deadline,
                                            store_step_fn fn, void *arg, const audit_rec *audit,
                                            err_t *err) {
  return s->ops->step_txn_audit(s, key, deadline, fn, arg, audit, err);
}
static inline err_code store_list_audit(store *s, const char *tenant, const char *global_id,
                                        int64_t before_id, uint32_t limit, int64_t deadline,
                                        audit_list *out, err_t *err) {
  return s->ops->list_audit(s, tenant, global_id, before_id, limit, deadline, out, err);
}
static inline err_code store_last_audit(store *s, const step_key *key, const char *action,
                                        int64_t deadline, audit_rec *out, bool *found,
                                        err_t *err) {
  *found = false;
  if (!s->ops->last_audit) return ERR_OK;
  return s->ops->last_audit(s, key, action, deadline, out, found, err);
}
static inline err_code store_bulk_get(store *s, const char *tenant, const char *request_id,
                                      int64_t deadline, bulk_rec *out, bool *found, err_t *err) {
  return s->ops->bulk_get(s, tenant, request_id, deadline, out, found, err);
}
static inline err_code store_bulk_put(store *s, const bulk_rec *in, uint32_t keep_s,
                                      int64_t deadline, bulk_rec *out, bool *stored, err_t *err) {
  return s->ops->bulk_put(s, in, keep_s, deadline, out, stored, err);
}
static inline err_code store_count_steps(store *s, int64_t deadline, step_counts *out, err_t *err) {
  return s->ops->count_steps(s, deadline, out, err);
}

/* --- policies and retention --- */
static inline err_code store_policy_put(store *s, const char *tenant, const policy *p,
                                        bool only_if_absent, int64_t deadline, bool *written,
                                        policy *out, err_t *err) {
  return s->ops->policy_put(s, tenant, p, only_if_absent, deadline, written, out, err);
}
static inline err_code store_policy_delete(store *s, const char *tenant, const char *service,
                                           const char *operation, int64_t deadline, bool *deleted,
                                           err_t *err) {
  return s->ops->policy_delete(s, tenant, service, operation, deadline, deleted, err);
}
static inline err_code store_policy_list(store *s, const char *tenant, int64_t deadline,
                                         policy_row **rows, size_t *n, err_t *err) {
  return s->ops->policy_list(s, tenant, deadline, rows, n, err);
}
static inline err_code store_reap_steps(store *s, uint32_t limit, int64_t deadline,
                                        uint64_t *deleted, err_t *err) {
  return s->ops->reap_steps(s, limit, deadline, deleted, err);
}
static inline err_code store_reap_bodies(store *s, uint32_t limit, int64_t deadline,
                                         uint64_t *dropped, err_t *err) {
  *dropped = 0;
  if (!s->ops->reap_bodies) return ERR_OK;
  return s->ops->reap_bodies(s, limit, deadline, dropped, err);
}
static inline err_code store_reap_sagas(store *s, uint32_t limit, int64_t deadline,
                                        uint64_t *deleted, err_t *err) {
  return s->ops->reap_sagas(s, limit, deadline, deleted, err);
}

/* --- a backend as a node starts and runs it (the backend table) ---
 * Everything outside store/ reaches a backend through a store_backend: opening stores, the
 * start-up checks (schema, slot count, owner), fencing, group commit and moving slots. The one
 * backend is PostgreSQL (store_postgres; its specifics in store_pg.h and store_pg_move.h). */

typedef struct store_batcher store_batcher;

/* Called on a batcher thread after a batch committed, once per step transaction in it, with
 * the pair as it now is in the database (records borrowed: copy what you keep) and the epoch
 * it was written under. For one pair, calls come in commit order. Must not block. */
typedef void (*store_commit_fn)(void *arg, uint64_t epoch, const step_pair *after);

/* Called on a batcher thread after a batch committed, once per step transaction in it that
 * wrote to its pair (after on_commit), with the pair's key (the phase means nothing). Must not
 * block. */
typedef void (*store_change_fn)(void *arg, const step_key *key);

/* Group commit (store_pg.h describes the PostgreSQL batcher). */
typedef struct store_batcher_cfg {
  const char *conninfo;          /* copied */
  int conns;                     /* connections and threads; 0 = 2 */
  int64_t help_after_us;         /* thread i > 0 takes work only once threads 0..i-1 have each
                                  * been busy with one batch this long; 0 = 2,000 */
  int max_batch;                 /* step transactions per batch; 0 = 64 */
  int queue_max;                 /* submitted ones waiting; 0 = STORE_BATCH_QUEUE_MAX */
  const _Atomic uint64_t *epoch; /* fencing source (borrowed), NULL = unfenced */
  store_commit_fn on_commit;     /* may be NULL */
  void *on_commit_arg;
  store_change_fn on_change; /* may be NULL */
  void *on_change_arg;
  int metrics_group; /* the store group its metrics count for (docs/api.md §17; 0 = the one) */
} store_batcher_cfg;

/* The schema's versions as a node reads them at start (docs/upgrading.md, the promise). */
typedef struct store_schema {
  int version; /* the newest migration recorded in the store */
  int needs;   /* the oldest schema version whose code runs on it (0: any) */
} store_schema;

/* The rule owner_settle applies (owner_decide with the node's own owner and --take-over):
 * recorded is NULL when nothing is recorded. */
typedef owner_verdict (*store_owner_decide_fn)(void *arg, const owner_rec *recorded);

typedef struct store_owner_settled {
  owner_verdict verdict;
  bool found;           /* an owner was recorded before */
  owner_rec recorded;   /* which (when found) */
  int64_t former_epoch; /* OWNER_TAKE_OVER: the fence's epoch it reset to 0 */
} store_owner_settled;

/* --- moving slots between groups (docs/api.md §18): the move sub-table ---
 * A move session holds one connection to each side, the source's and the target's, for the
 * life of a move's drive; a connection lost is made again by the next call on that side. Every
 * call is bounded by deadline and is idempotent: a call repeated after a crash, or on an object
 * already made or already gone, does nothing more. A session is used by one thread at a time.
 * The PostgreSQL backend moves on logical replication (store_pg_move.h). */
typedef struct store_move store_move;

typedef enum store_move_side { MOVE_SIDE_SOURCE = 0, MOVE_SIDE_TARGET = 1 } store_move_side;

typedef struct store_move_ops {
  /* A session for the move id of slots from..to from the store src to the store dst (conninfo
   * strings, copied). id NULL: checks and counts only (a request's, before the move exists).
   * ERR_INVALID naming id when it is not "m" and 16 lowercase hex digits. No connection is
   * made before the first call. */
  err_code (*open)(const char *src, const char *dst, const char *id, uint32_t from, uint32_t to,
                   store_move **out, err_t *err);
  /* Closes both connections (NULL: nothing). */
  void (*close)(store_move *s);
  /* ERR_PRECONDITION naming what side lacks to take part; what names the side in the message
   * ("group g2"). */
  err_code (*check)(store_move *s, store_move_side side, const char *what, int64_t deadline,
                    err_t *err);
  /* The side's server identity: another value later means a failover (the copy cannot go on). */
  err_code (*identity)(store_move *s, store_move_side side, char *out, size_t cap, int64_t deadline,
                       err_t *err);
  /* Source: makes the slots' rows available to copy. */
  err_code (*publish)(store_move *s, int64_t deadline, err_t *err);
  /* Target: blocks from..to (moving in) and starts copying them. */
  err_code (*subscribe)(store_move *s, int64_t deadline, err_t *err);
  /* How far the copy is: *synced once the initial copy is done, *lag bytes the target has not
   * confirmed, *rows the target holds in from..to. ERR_PRECONDITION when the copy cannot go on
   * (the message says why). */
  err_code (*progress)(store_move *s, bool *synced, int64_t *lag, uint64_t *rows, int64_t deadline,
                       err_t *err);
  /* Source: blocks from..to (moving out) and writes the move's mark after every write to them,
   * fenced by epoch (ERR_UNAVAILABLE fenced when a newer leader raised the fence). */
  err_code (*block)(store_move *s, uint64_t epoch, int64_t deadline, err_t *err);
  /* Target: waits until the mark has arrived (then everything written before the block has)
   * or until (monotonic ms) passes; *arrived says which. */
  err_code (*wait_marked)(store_move *s, int64_t until, bool *arrived, err_t *err);
  /* The steps and sagas side holds in from..to. */
  err_code (*count)(store_move *s, store_move_side side, uint64_t *steps, uint64_t *sagas,
                    int64_t deadline, err_t *err);
  /* Target: stops copying; source (when reachable): lets go of what the copy kept. */
  err_code (*unsubscribe)(store_move *s, int64_t deadline, err_t *err);
  /* side serves from..to again. all: every block there is removed; else only the blocks this
   * move (its id) put there. */
  err_code (*unblock)(store_move *s, store_move_side side, bool all, int64_t deadline, err_t *err);
  /* Deletes side's rows of from..to (with rows false only the move's mark); *deleted counts
   * rows. */
  err_code (*delete_rows)(store_move *s, store_move_side side, bool rows, int64_t *deleted,
                          int64_t deadline, err_t *err);
  /* Source: undoes publish. */
  err_code (*unpublish)(store_move *s, int64_t deadline, err_t *err);
  /* Target: pauses the copy (pause) or runs it again. */
  err_code (*pause)(store_move *s, bool pause, int64_t deadline, err_t *err);
} store_move_ops;

typedef struct store_backend {
  /* Opens a store on conninfo (copied). Does not connect yet: the first call does. NULL only
   * on allocation failure. Free with store_close. */
  store *(*open)(const char *conninfo);

  /* --- at start --- */
  /* "host H port P database D user U" for conninfo (never the password). ERR_INVALID when it
   * cannot be parsed. */
  err_code (*target)(const char *conninfo, char *buf, size_t cap, err_t *err);
  /* Creates or migrates the schema (idempotent, safe when several nodes start at once). */
  err_code (*migrate)(const char *conninfo, int64_t deadline, err_t *err);
  /* The newest schema version this build's migrations reach. */
  int (*schema_newest)(void);
  /* The store's schema versions; ERR_INVALID (naming both) when it needs a newer node. */
  err_code (*schema_check)(const char *conninfo, int64_t deadline, store_schema *out, err_t *err);
  /* The cluster's slot count S, recorded at its first start with slots: ERR_INVALID when the
   * store holds another. */
  err_code (*slots_check)(const char *conninfo, uint32_t slots, int64_t deadline, err_t *err);
  /* Gives up to limit rows written before slot groups their slot; *filled counts them (0: none
   * left). */
  err_code (*slots_fill)(const char *conninfo, uint32_t slots, int limit, int64_t deadline,
                         long *filled, err_t *err);
  /* The slot count every store of this process writes under; set once, before any store opens. */
  void (*set_slots)(uint32_t slots);
  /* The owner the database records (*found false when none); reads only. */
  err_code (*owner_read)(const char *conninfo, int64_t deadline, owner_rec *out, bool *found,
                         err_t *err);
  /* In one transaction: reads the recorded owner, asks decide, writes what it answered
   * (claim, take-over with the fence reset) with an audit row; ERR_PRECONDITION when a
   * takeover is refused while another coordinator is connected. */
  err_code (*owner_settle)(const char *conninfo, const owner_rec *mine, const char *actor,
                           int64_t deadline, store_owner_decide_fn decide, void *arg,
                           store_owner_settled *out, err_t *err);

  /* --- fencing (docs/api.md §7) --- */
  /* Raises the fence to epoch (never lowers it); *superseded (with ERR_UNAVAILABLE) when it is
   * already above. */
  err_code (*fence_raise)(const char *conninfo, uint64_t epoch, int64_t deadline, bool *superseded,
                          err_t *err);
  /* Reads the fence's epoch (0 when none). */
  err_code (*fence_read)(const char *conninfo, int64_t deadline, uint64_t *epoch, err_t *err);
  /* Makes s write under *epoch (borrowed: must outlive s) from its next call on. */
  void (*set_epoch_source)(store *s, const _Atomic uint64_t *epoch);
  /* The store group s's metrics count for. */
  void (*set_metrics_group)(store *s, int group);

  /* --- group commit --- */
  /* Starts a batcher (NULL with err on failure); stop fails what is queued, joins, frees. */
  store_batcher *(*batcher_start)(const store_batcher_cfg *cfg, err_t *err);
  void (*batcher_stop)(store_batcher *b);
  /* Makes s run its step transactions through b. Set before use. */
  void (*set_batcher)(store *s, store_batcher *b);

  /* Moving slots between groups. */
  const store_move_ops *move;
} store_backend;

/* The PostgreSQL backend (store_pg_backend.c). */
extern const store_backend store_postgres;

#endif
