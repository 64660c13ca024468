/* store_pg.h — the PostgreSQL backend of store.h: opening a store, migrating the schema,
 * fencing (the epoch every write is checked against) and group commit (the batcher).
 *
 * Only store/ itself and the store's own tests include this header: every other folder sees
 * the backend through store.h (store_postgres, the backend table, is these functions).
 */
#ifndef IDEM_STORE_PG_H
#define IDEM_STORE_PG_H

#include <stdatomic.h>

#include "../domain/owner.h"
#include "store.h"

/* --- the PostgreSQL backend (store_pg.c) --- */

/* Opens a store on conninfo (a libpq URI or key=value string; copied). Does not connect yet:
 * the first call does. Returns NULL only on allocation failure. Free with store_close. */
store *store_pg_open(const char *conninfo);

/* Creates or migrates the schema (versioned, idempotent, safe when several nodes start at
 * once: serialized with an advisory lock). ERR_UNAVAILABLE when the database cannot be
 * reached before deadline. */
err_code store_pg_migrate(const char *conninfo, int64_t deadline, err_t *err);

/* The schema's versions (store.h store_schema). */
typedef store_schema store_pg_schema;

/* The newest schema version this build's migrations reach. */
int store_pg_schema_newest(void);

/* Reads the store's schema versions into *out. ERR_INVALID (naming both versions) when the
 * schema needs a newer node than this one (out->needs > store_pg_schema_newest()): the node
 * must not run on it. Call after store_pg_migrate. */
err_code store_pg_schema_check(const char *conninfo, int64_t deadline, store_pg_schema *out,
                               err_t *err);

/* Slot groups (docs/api.md §17): the cluster's slot count S, recorded in the store at its first
 * start with slots. ERR_INVALID ("the store was created with 256 slots, not 64") when the store
 * holds another S. Call after store_pg_migrate. */
err_code store_pg_slots_check(const char *conninfo, uint32_t slots, int64_t deadline, err_t *err);

/* Gives up to limit rows of each table keyed by saga that have no slot (written before version
 * 8) their slot by the rule (idem_slot in SQL); *filled counts them (0: none left). Each table
 * in a statement of its own; rows locked by a writer are skipped. */
err_code store_pg_slots_fill(const char *conninfo, uint32_t slots, int limit, int64_t deadline,
                             long *filled, err_t *err);

/* The slot count every store of this process writes slots under (default SLOTS_DEFAULT); set
 * once at start, before any store is opened. */
void store_pg_set_slots(uint32_t slots);

/* --- the cluster that owns the database (store_pg_owner.c; domain/owner.h) --- */

/* Reads the owner the database records: *found false when none is (or the schema predates
 * version 13). Reads only: safe before store_pg_migrate, on a database another cluster owns. */
err_code store_pg_owner_read(const char *conninfo, int64_t deadline, owner_rec *out, bool *found,
                             err_t *err);

/* In one transaction under the migration lock: reads the recorded owner, asks decide, and
 * writes what it answered: OWNER_CLAIM records mine, OWNER_TAKE_OVER replaces the former owner
 * with mine and resets the fence to 0 (the former owner's epochs are another etcd's); each
 * with a row in idem_owner_audit (action "claim" or "take-over", actor, mine, the former owner,
 * the fence it held). Any other verdict writes nothing. A takeover is refused (ERR_PRECONDITION,
 * nothing written) while another coordinator process has a session on the database. Call after
 * store_pg_migrate. */
err_code store_pg_owner_settle(const char *conninfo, const owner_rec *mine, const char *actor,
                               int64_t deadline, store_owner_decide_fn decide, void *arg,
                               store_owner_settled *out, err_t *err);

/* --- at start: where, and whether to retry (store_pg_target.c) --- */

/* "host H port P database D user U" for conninfo, with libpq's defaults filled in (never the
 * password). ERR_INVALID naming --pg when libpq cannot parse it. */
err_code store_pg_target(const char *conninfo, char *buf, size_t cap, err_t *err);

/* A connection error no retry fixes is marked err->permanent (err.h): the server refused the
 * connection with a SQLSTATE no retry changes (authentication, pg_hba.conf, a database that does
 * not exist, no CONNECT privilege, a bad option) or asked for a password none was given for; its
 * detail names the SQLSTATE (or "no password supplied") for people. A host name that does not
 * resolve is refused earlier, by store_pg_target. */

/* --- fencing (store_pg_fence.c; docs/api.md §7) ---
 * The epoch is the election revision. A store given an epoch source writes under the value it
 * reads from it at the start of each call; the database (migration 4's trigger on every table
 * the coordinator writes) refuses any INSERT/UPDATE/DELETE under an epoch older than the one
 * in idem_fence, and the call fails with ERR_UNAVAILABLE, reason ERR_R_FENCED (nothing of
 * its transaction is committed). Stores without a source are not fenced (tools, tests). */

/* Makes s (a PostgreSQL store) write under *epoch from its next call on. The source is
 * borrowed: it must outlive s. Not thread-safe with calls on s (set it before use). */
void store_pg_set_epoch_source(store *s, const _Atomic uint64_t *epoch);

/* The store group this store's metrics count for (metrics.h metrics_store_error_g). */
void store_pg_set_metrics_group(store *s, int group);

/* Raises idem_fence to epoch (never lowers it), first ending every transaction other
 * coordinator processes still have open on the database (a paused former leader's). ERR_OK
 * once the fence is at epoch; *superseded (with ERR_UNAVAILABLE) when it is already above
 * (a newer leader exists); ERR_UNAVAILABLE when the database cannot be reached by deadline.
 * Uses a connection of its own. */
err_code store_pg_fence_raise(const char *conninfo, uint64_t epoch, int64_t deadline,
                              bool *superseded, err_t *err);

/* Reads idem_fence's epoch (0 when the row is missing). */
err_code store_pg_fence_read(const char *conninfo, int64_t deadline, uint64_t *epoch, err_t *err);

/* --- group commit (store_pg_batch.c) ---
 * A batcher owns a few connections of its own (one thread each). Step transactions of every
 * store it is attached to are queued and run together: one transaction for a batch of up to
 * max_batch of them — BEGIN, every pair lock and read in one round trip (pipeline mode), the
 * callbacks, every write and the COMMIT in a second — so many callers share one commit and one
 * WAL flush. Each caller returns only after the commit of its own batch (synchronous_commit
 * stays on). A pair is never in two batches at once, so per pair, transactions commit one at a
 * time and in queue order. Locks are taken in key order; a serialization failure or deadlock
 * re-runs the whole batch (the callbacks start from scratch, as store_step_fn allows). The
 * batch runs until the earliest deadline among its transactions. The first connection runs
 * every batch while it keeps up; the others take queued work only while every connection
 * before them has been busy with one batch for help_after_us (a stalled batch does not hold
 * up the queue behind it). */

/* Starts the threads (connections open lazily). NULL with err on failure. */
store_batcher *store_batcher_start(const store_batcher_cfg *cfg, err_t *err);

/* Fails what is still queued with ERR_UNAVAILABLE "store stopping", joins the threads, closes
 * the connections and frees b. Stores attached to b must not be used afterwards. */
void store_batcher_stop(store_batcher *b);

/* step_txn_submit on b (a PostgreSQL store's step_txn_submit when b is its batcher): done
 * runs on b's answer thread after the batch that carried the transaction committed or failed,
 * or when b stops ("store stopping"); ERR_RESOURCE when queue_max are waiting. */
err_code store_batcher_submit(store_batcher *b, const step_key *key, int64_t deadline,
                              store_step_fn fn, void *arg, store_step_done_fn done, void *done_arg,
                              err_t *err);

/* Makes a PostgreSQL store run its step transactions (step_txn, step_txn_audit,
 * step_txn_submit) through b; its other calls keep using its own connection. Set before use.
 * Without a batcher, step_txn_submit answers ERR_UNIMPLEMENTED. */
void store_pg_set_batcher(store *s, store_batcher *b);

typedef struct store_batch_stats {
  uint64_t batches; /* committed batches */
  uint64_t txns;    /* step transactions in them */
  uint64_t largest; /* the largest batch */
} store_batch_stats;

void store_batcher_stats(store_batcher *b, store_batch_stats *out);

#endif
