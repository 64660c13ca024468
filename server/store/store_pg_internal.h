/* store_pg_internal.h — shared by the store_pg*.c files only (prefix store_pg__ / pg__).
 *
 * A pg_store owns at most one PGconn. Every statement goes through pg__exec: parameterised
 * (PQsendQueryParams), binary results, bounded by an absolute monotonic deadline. On a timeout
 * the statement is cancelled and the connection dropped; on a lost connection it is dropped;
 * either way the next call reconnects (pg__ensure).
 *
 * Failover (docs/api.md §14): conninfo may name several hosts (target_session_attrs=read-write
 * picks the primary). A connection whose server reports itself read-only (in_hot_standby or
 * default_transaction_read_only on: a standby, a demoted primary rejoining as one) is never used:
 * it is dropped at connect and at the start of every call, and a statement refused with SQLSTATE
 * 25006 drops it too (the call re-runs once on a fresh connection: nothing of it committed).
 * Reconnects after failures back off per store (PG_RECONNECT_MIN_MS doubling up to
 * PG_RECONNECT_MAX_MS, jittered): a call waits out the backoff when its deadline allows, else
 * answers UNAVAILABLE with the last failure's reason at once.
 * libpq's asynchronous connect ignores connect_timeout, so a host that does not answer at all
 * (a dead machine: no RST) would hold every connect to its whole deadline and the hosts after it
 * would never be tried. With several hosts (host and port lists in conninfo, no hostaddr) the
 * store gives each host connect_timeout (else PG_HOST_BUDGET_MS), then starts again after the
 * silent one, and tries the host that last worked first.
 */
#ifndef IDEM_STORE_PG_INTERNAL_H
#define IDEM_STORE_PG_INTERNAL_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../domain/record.h"
#include "../util/buf.h"
#include "store_pg.h"
#include "store_pg_sql.h"

#define PG_MAX_PARAMS 72
#define PG_TXN_RETRIES 10 /* serialization failures, deadlocks, racing inserts */
#define PG_APP_NAME "idem-coordinator"
#define PG_RECONNECT_MIN_MS 25
#define PG_RECONNECT_MAX_MS 400
#define PG_MAX_HOSTS 8
#define PG_HOST_BUDGET_MS 1000 /* a silent host of several: the next one after this long */

typedef enum pg_retry {
  PG_RETRY_NONE = 0,
  PG_RETRY_SERIAL, /* 40001, 40P01, 23505 (or a vanished row): re-run the transaction */
  PG_RETRY_STALE,  /* a connection from an earlier call was found dead before this call sent
                      anything that could commit: reconnect and re-run once */
} pg_retry;

typedef struct pg_store {
  store base;
  char *conninfo;
  PGconn *conn;
  bool conn_reused; /* conn was established before the current call */
  int call_stmts;   /* statements sent during the current call */
  pg_retry retry;   /* set by the last failing pg__exec */
  char sqlstate[6]; /* SQLSTATE of the last SQL error, "" if none */
  /* fencing (store_pg_fence.c): the epoch this store writes under, read at the start
   * of every call; NULL = unfenced (tests, tools). epoch_sent is the value the connection's
   * idem.epoch setting holds (set at connect, updated when the source changes). */
  const _Atomic uint64_t *epoch_src;
  uint64_t epoch_sent;
  /* group commit (store_pg_batch.c): when set, step transactions are handed to the
   * shared batcher instead of running on this connection. Borrowed. */
  store_batcher *batcher;
  bool prepared; /* the batcher's named statements exist on conn (reset when it drops) */
  /* failover */
  bool read_only;          /* the server refused a write (25006): drop conn at the next start */
  int connect_failures;    /* consecutive failed connects (0 after a success) */
  int64_t next_connect_ms; /* monotonic: no connect before this (backoff) */
  char last_failure[160];  /* the last failed connect's reason, for answers during backoff */
  /* several hosts: parsed from conninfo once (n_hosts 0: one host, or libpq's own order) */
  int n_hosts;
  char *hosts[PG_MAX_HOSTS];
  char *ports[PG_MAX_HOSTS]; /* all NULL: one port (or the default) for every host */
  int host_first;            /* tried first: the host that last worked */
  int64_t host_budget_ms;    /* how long one host may stay silent */
  int mgroup;                /* the store group its metrics count for (metrics_*_g) */
  const char *app_name;      /* its application_name; NULL: PG_APP_NAME (static string) */
} pg_store;

/* Serializes schema changes across nodes starting at once (store_pg_migrate.c, the slot count
 * of store_pg_slots.c). */
#define PG_SQL_MIGRATE_LOCK "SELECT pg_advisory_xact_lock(1768187245, 1)"

/* Parameters of one statement: text format except bytea (binary). Values are borrowed. */
typedef struct pg_params {
  int n;
  const char *values[PG_MAX_PARAMS];
  int lengths[PG_MAX_PARAMS];
  int formats[PG_MAX_PARAMS];
  char num[PG_MAX_PARAMS][24];
} pg_params;

void pg__p_reset(pg_params *p);
void pg__p_text(pg_params *p, const char *v); /* NULL → SQL NULL */
void pg__p_i64(pg_params *p, int64_t v);
void pg__p_bytes(pg_params *p, const void *v, size_t len); /* never NULL: empty is '' */

/* Initialises s (no connection yet). Returns false on allocation failure. */
bool pg__init(pg_store *s, const char *conninfo);
/* Closes the connection (if any) and frees what pg__init allocated. */
void pg__fini(pg_store *s);
/* Drops the connection; the next statement reconnects. */
void pg__drop(pg_store *s);

/* Marks the start of a store call (for PG_RETRY_STALE) and connects if needed. */
err_code pg__call_start(pg_store *s, int64_t deadline, err_t *err);

/* A whole store call of one statement outside a transaction: pg__call_start and pg__exec,
 * again once when the connection, reused from an earlier call, was found dead before anything
 * was sent (PG_RETRY_STALE). err is cleared on ERR_OK. */
err_code pg__exec_call(pg_store *s, const char *sql, const pg_params *p, int64_t deadline,
                       PGresult **res, err_t *err);

/* Runs one statement. On ERR_OK, *out (if out != NULL) holds the PGresult (TUPLES_OK or
 * COMMAND_OK; the caller PQclears it), else it is cleared. On failure s->retry and
 * s->sqlstate say whether the caller may re-run; an SQL error leaves the connection up
 * (possibly in an aborted transaction: see pg__rollback). */
err_code pg__exec(pg_store *s, const char *sql, const pg_params *p, int64_t deadline,
                  PGresult **out, err_t *err);

/* Connection internals shared with the pipeline (store_pg_pipe.c). pg__connect opens s->conn
 * (non-blocking); pg__wait_fd waits for fd readable (wr: writable): 1 ready, 0 deadline
 * passed, -1 error; pg__timeout (cancelling the statement when cancel) and pg__lost drop the
 * connection and fill err; pg__sql_error maps an error result (sets s->retry, s->sqlstate). */
err_code pg__connect(pg_store *s, int64_t deadline, err_t *err);
int pg__wait_fd(int fd, bool wr, int64_t deadline);
err_code pg__timeout(pg_store *s, bool cancel, err_t *err);
err_code pg__lost(pg_store *s, err_t *err);
err_code pg__sql_error(pg_store *s, const PGresult *r, err_t *err);
/* The start of every round trip (pg__exec, pg__pipeline): clears s->retry and s->sqlstate,
 * reconnects a connection dropped earlier in the call, refuses a passed deadline (dropping the
 * connection when a transaction is open) and counts the statement. Then pg__flush sends what
 * libpq buffered and pg__await waits until a result can be read without blocking. */
err_code pg__round_trip_start(pg_store *s, int64_t deadline, err_t *err);
err_code pg__flush(pg_store *s, int64_t deadline, err_t *err);
err_code pg__await(pg_store *s, int64_t deadline, err_t *err);

/* One statement of a pipeline: sql and params in; res out (TUPLES_OK or COMMAND_OK). With
 * name set: prepare sql under name (when prepare) or run the statement prepared as name. */
typedef struct pg_stmt {
  const char *sql;
  const pg_params *p;
  const char *name;
  bool prepare;
  bool flush;    /* ask the server to send the results so far right after this statement */
  PGresult *res;
  int64_t at_us; /* set by pg__pipeline: when its result came (clock_mono_us) */
} pg_stmt;

/* Sends n statements in libpq pipeline mode with one sync, so they cost one round trip, and
 * collects their results. On ERR_OK every st[i].res is set (the caller PQclears them). On
 * failure none is kept, err describes the first failing statement (s->retry as pg__exec), and
 * an open transaction is left for pg__rollback. Counts as one statement of the call. */
err_code pg__pipeline(pg_store *s, pg_stmt *st, int n, int64_t deadline, err_t *err);

/* Rolls back an open transaction (if any); drops the connection when that fails. */
void pg__rollback(pg_store *s, int64_t deadline);

/* Waits a little before re-running a transaction (bounded by deadline). */
void pg__backoff(int attempt, int64_t deadline);

/* Decoding of binary result columns. */
bool pg__isnull(const PGresult *r, int row, int col);
int64_t pg__int(const PGresult *r, int row, int col);     /* int2, int4 or int8; NULL → 0 */
const char *pg__str(const PGresult *r, int row, int col); /* NULL → "" */

/* Fills rec from the 16 columns PG_STEP_COLS starting at col. With own, the body is copied
 * (an owned record); otherwise it points into r. A result past its retention at the statement's
 * now (the last column, PG_RESULT_EXPIRED_AT) is read without its body, result_expired set, even
 * before the reaper drops it. Returns false on allocation failure. */
#define PG_STEP_COLS_AT(now)                                                            \
  "phase, state, attempt, fingerprint, outcome, code, body, completed_ms, created_ms, " \
  "updated_ms, lease_expires_ms, expires_ms, result_expires_ms, " PG_RESULT_EXPIRED_AT( \
      now) " AS result_expired, begin_trace_id, complete_trace_id"
#define PG_STEP_COLS PG_STEP_COLS_AT(PG_NOW_MS)
bool pg__row_step(const PGresult *r, int row, int col, bool own, step_rec *rec);

/* fencing: store_pg_fence.c. The SQLSTATE the fence trigger raises when a write
 * runs under an epoch older than idem_fence's (mapped to ERR_UNAVAILABLE "not the leader
 * (fenced)"). */
#define PG_FENCED_SQLSTATE "IF001"
/* docs/api.md §18: a write to a slot this store does not serve (moved away, or moving in or out:
 * idem_slot_blocks, store_pg_move.c) */
#define PG_SLOT_BLOCKED_SQLSTATE "IF002"
#define PG_SLOT_BLOCKED_RETRY_MS 50

/* group commit: store_pg_batch.c. Runs the step transaction through s->batcher. */
err_code pg__batch_step_txn(pg_store *s, const step_key *key, int64_t deadline, store_step_fn fn,
                            void *arg, const audit_rec *audit, err_t *err);

/* The batcher's multi-row pair read ($1..$4: tenant, global id, service, operation arrays)
 * and the planner settings its connections run first (store_pg_batch.c; a test checks the
 * read's generic plan). */
extern const char pg__sql_batch_read[];
extern const char pg__sql_batch_plan_settings[];

/* The statements of one step transaction (store_pg.c), shared with the batcher. */
extern const char pg__sql_pair_lock[];
extern const char pg__sql_pair_read[];
extern const char pg__sql_step_insert[];
extern const char pg__sql_step_update[];
extern const char pg__sql_audit_insert[];
/* key_params for the lock and the read ($1..$4), write_params for an insert or update. */
void pg__key_params(pg_params *p, const step_key *k);
void pg__write_params(pg_params *p, const step_key *key, const step_rec *r);
/* The slot of a saga under the process's slot count (store_pg_set_slots). */
int64_t pg__slot(const char *tenant, const char *global_id);
/* Fills pair (records borrow from res) and exists[phase] from rows [row0, row1) of a pair
 * read: the database clock in column col, PG_STEP_COLS from col + 1 (NULL: no record). */
void pg__read_pair(const PGresult *res, int row0, int row1, int col, const step_key *key,
                   step_pair *pair, bool exists[3]);

/* A PostgreSQL array literal in text format, built up element by element (store_pg_arr.c):
 * the parameters of the batcher's multi-row statements. */
typedef struct pg_arr {
  buf_t b; /* the literal; b.oom: an append failed and the literal is unusable */
  int n;   /* elements */
} pg_arr;
void pg__arr_reset(pg_arr *a);
void pg__arr_text(pg_arr *a, const char *v);
void pg__arr_i64(pg_arr *a, int64_t v);
void pg__arr_bytes(pg_arr *a, const void *v, size_t len); /* bytea, hex format */
/* Closes the literal; NULL when an append ran out of memory. Valid until the next reset. */
const char *pg__arr_end(pg_arr *a);
void pg__arr_free(pg_arr *a);
/* The audit insert's parameters (store_pg_admin.c). */
void pg__audit_params(pg_params *p, const audit_rec *a);

/* Test hook: the server process id of the store's connection, 0 when not connected. */
int store_pg__backend_pid(store *s);

/* store_pg_bulk.c: ResolveSteps' answers by request id */
err_code pg__bulk_get(store *st, const char *tenant, const char *request_id, int64_t deadline,
                      bulk_rec *out, bool *found, err_t *err);
err_code pg__bulk_put(store *st, const bulk_rec *in, uint32_t keep_s, int64_t deadline,
                      bulk_rec *out, bool *stored, err_t *err);

/* store_pg_saga.c */
err_code pg__begin_saga(store *st, const saga_new *in, int64_t deadline, saga_begun *out,
                        err_t *err);
err_code pg__get_saga(store *st, const char *tenant, const char *global_id, const saga_page *pg,
                      int64_t deadline, saga_view *out, err_t *err);

/* incident response */
/* store_pg.c: the step transaction on the store's own connection (no group commit); with
 * audit != NULL the audit row is inserted before the commit when fn returns ERR_OK.
 * store_pg_ops.c sends it through the batcher instead when the store has one. */
err_code pg__step_txn(store *st, const step_key *key, int64_t deadline, store_step_fn fn, void *arg,
                      const audit_rec *audit, err_t *err);
/* store_pg.c: LookupStep. */
err_code pg__lookup_step(store *st, const step_key *key, int64_t deadline, step_rec *out,
                         err_t *err);
/* store_pg_admin.c */
err_code pg__audit_insert(pg_store *s, const audit_rec *a, int64_t deadline, err_t *err);
err_code pg__list_steps(store *st, const step_filter *f, int64_t deadline, step_list *out,
                        err_t *err);
err_code pg__list_audit(store *st, const char *tenant, const char *global_id, int64_t before_id,
                        uint32_t limit, int64_t deadline, audit_list *out, err_t *err);
err_code pg__last_audit(store *st, const step_key *key, const char *action, int64_t deadline,
                        audit_rec *out, bool *found, err_t *err);
err_code pg__count_steps(store *st, int64_t deadline, step_counts *out, err_t *err);
/* Test hook: the SELECT that list_steps runs for f, with its parameters in p (strings borrowed
 * from f). Returns false when sql_cap is too small. */
bool store_pg__list_steps_sql(const step_filter *f, char *sql, size_t sql_cap, pg_params *p);

/* policies and reaping: store_pg_policy.c */
err_code pg__policy_put(store *st, const char *tenant, const policy *p, bool only_if_absent,
                        int64_t deadline, bool *written, policy *out, err_t *err);
err_code pg__policy_delete(store *st, const char *tenant, const char *service,
                           const char *operation, int64_t deadline, bool *deleted, err_t *err);
err_code pg__policy_list(store *st, const char *tenant, int64_t deadline, policy_row **rows,
                         size_t *n, err_t *err);
err_code pg__reap_steps(store *st, uint32_t limit, int64_t deadline, uint64_t *deleted, err_t *err);
err_code pg__reap_bodies(store *st, uint32_t limit, int64_t deadline, uint64_t *dropped,
                         err_t *err);
err_code pg__reap_sagas(store *st, uint32_t limit, int64_t deadline, uint64_t *deleted, err_t *err);

#endif
