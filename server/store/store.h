/* store.h — the storage interface: a versioned ops table (one backend: PostgreSQL), with thin
 * inline wrappers. All correctness comes from the database's transactions and constraints,
 * never from an in-process lock: any number of coordinator processes may share one database.
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

#include "../util/err.h"
#include "record.h"

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

typedef struct store_ops {
  int version; /* STORE_OPS_VERSION */

  /* Closes the connection and frees s. */
  void (*close)(store *s);

  /* A trivial round trip: ERR_OK when the database answers. */
  err_code (*ping)(store *s, int64_t deadline, err_t *err);

  /* One transaction over the step pair of key (tenant, global_id, service, operation; the
   * phase is ignored): lock the pair, read both records, call fn, write, commit. */
  err_code (*step_txn)(store *s, const step_key *key, int64_t deadline, store_step_fn fn,
                       void *arg, err_t *err);

  /* Fills an owned record (out->present == false when there is none). Never ERR_NOT_FOUND. */
  err_code (*lookup_step)(store *s, const step_key *key, int64_t deadline, step_rec *out,
                          err_t *err);

  /* BeginSaga: with a request id still within its retention, answers the saga it created
   * (created = false); otherwise stores in->global_id (created = true). An expired request id
   * is detached from its old saga and reused. */
  err_code (*begin_saga)(store *s, const saga_new *in, int64_t deadline, saga_begun *out,
                         err_t *err);

  /* Fills an owned view: the saga row (if any) and every step of global_id in tenant, ordered
   * by created time. ERR_NOT_FOUND when there is neither a saga row nor a step. */
  err_code (*get_saga)(store *s, const char *tenant, const char *global_id, int64_t deadline,
                       saga_view *out, err_t *err);
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
static inline err_code store_lookup_step(store *s, const step_key *key, int64_t deadline,
                                         step_rec *out, err_t *err) {
  return s->ops->lookup_step(s, key, deadline, out, err);
}
static inline err_code store_begin_saga(store *s, const saga_new *in, int64_t deadline,
                                        saga_begun *out, err_t *err) {
  return s->ops->begin_saga(s, in, deadline, out, err);
}
static inline err_code store_get_saga(store *s, const char *tenant, const char *global_id,
                                      int64_t deadline, saga_view *out, err_t *err) {
  return s->ops->get_saga(s, tenant, global_id, deadline, out, err);
}

/* --- the PostgreSQL backend (store_pg.c) --- */

/* Opens a store on conninfo (a libpq URI or key=value string; copied). Does not connect yet:
 * the first call does. Returns NULL only on allocation failure. Free with store_close. */
store *store_pg_open(const char *conninfo);

/* Creates or migrates the schema (versioned, idempotent, safe when several nodes start at
 * once: serialized with an advisory lock). ERR_UNAVAILABLE when the database cannot be
 * reached before deadline. */
err_code store_pg_migrate(const char *conninfo, int64_t deadline, err_t *err);

#endif
