/* store_pg_internal.h — shared by the store_pg*.c files only (prefix store_pg__ / pg__).
 *
 * A pg_store owns at most one PGconn. Every statement goes through pg__exec: parameterised
 * (PQsendQueryParams), binary results, bounded by an absolute monotonic deadline. On a timeout
 * the statement is cancelled and the connection dropped; on a lost connection it is dropped;
 * either way the next call reconnects (pg__ensure).
 */
#ifndef IDEM_STORE_PG_INTERNAL_H
#define IDEM_STORE_PG_INTERNAL_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"
#include "store.h"

#define PG_MAX_PARAMS 72
#define PG_TXN_RETRIES 10 /* serialization failures, deadlocks, racing inserts */
#define PG_APP_NAME "idem-coordinator"
/* The database clock in Unix milliseconds (all nodes agree on it). */
#define PG_NOW_MS "(extract(epoch from clock_timestamp()) * 1000)::bigint"

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
  /* fencing (issue 4, store_pg_fence.c): the epoch this store writes under, read at the start
   * of every call; NULL = unfenced (tests, tools). epoch_sent is the value the connection's
   * idem.epoch setting holds (set at connect, updated when the source changes). */
  const _Atomic uint64_t *epoch_src;
  uint64_t epoch_sent;
} pg_store;

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

/* Runs one statement. On ERR_OK, *out (if out != NULL) holds the PGresult (TUPLES_OK or
 * COMMAND_OK; the caller PQclears it), else it is cleared. On failure s->retry and
 * s->sqlstate say whether the caller may re-run; an SQL error leaves the connection up
 * (possibly in an aborted transaction: see pg__rollback). */
err_code pg__exec(pg_store *s, const char *sql, const pg_params *p, int64_t deadline,
                  PGresult **out, err_t *err);

/* Rolls back an open transaction (if any); drops the connection when that fails. */
void pg__rollback(pg_store *s, int64_t deadline);

/* Waits a little before re-running a transaction (bounded by deadline). */
void pg__backoff(int attempt, int64_t deadline);

/* Decoding of binary result columns. */
bool pg__isnull(const PGresult *r, int row, int col);
int64_t pg__int(const PGresult *r, int row, int col);     /* int2, int4 or int8; NULL → 0 */
const char *pg__str(const PGresult *r, int row, int col); /* NULL → "" */

/* Fills rec from the 12 columns PG_STEP_COLS starting at col. With own, the body is copied
 * (an owned record); otherwise it points into r. Returns false on allocation failure. */
#define PG_STEP_COLS                                                                    \
  "phase, state, attempt, fingerprint, outcome, code, body, completed_ms, created_ms, " \
  "updated_ms, lease_expires_ms, expires_ms"
bool pg__row_step(const PGresult *r, int row, int col, bool own, step_rec *rec);

/* fencing (issue 4): store_pg_fence.c. The SQLSTATE the fence trigger raises when a write
 * runs under an epoch older than idem_fence's (mapped to ERR_UNAVAILABLE "not the leader
 * (fenced)"). */
#define PG_FENCED_SQLSTATE "IF001"
/* Brings the connection's idem.epoch setting up to *s->epoch_src (no-op when unfenced or
 * already there). Called by pg__call_start once connected. */
err_code pg__fence_sync(pg_store *s, int64_t deadline, err_t *err);

/* Test hook: the server process id of the store's connection, 0 when not connected. */
int store_pg__backend_pid(store *s);

/* store_pg_saga.c */
err_code pg__begin_saga(store *st, const saga_new *in, int64_t deadline, saga_begun *out,
                        err_t *err);
err_code pg__get_saga(store *st, const char *tenant, const char *global_id, int64_t deadline,
                      saga_view *out, err_t *err);

/* incident response (issue 6) */
/* store_pg.c: the step transaction; with audit != NULL the audit row is inserted before the
 * commit when fn returns ERR_OK (the step_txn_audit op). */
err_code pg__step_txn(store *st, const step_key *key, int64_t deadline, store_step_fn fn,
                      void *arg, const audit_rec *audit, err_t *err);
/* store_pg_admin.c */
err_code pg__audit_insert(pg_store *s, const audit_rec *a, int64_t deadline, err_t *err);
err_code pg__list_steps(store *st, const step_filter *f, int64_t deadline, step_list *out,
                        err_t *err);
err_code pg__list_audit(store *st, const char *tenant, const char *global_id, int64_t before_id,
                        uint32_t limit, int64_t deadline, audit_list *out, err_t *err);
err_code pg__count_steps(store *st, int64_t deadline, step_counts *out, err_t *err);
/* Test hook: the SELECT that list_steps runs for f, with its parameters in p (strings borrowed
 * from f). Returns false when sql_cap is too small. */
bool store_pg__list_steps_sql(const step_filter *f, char *sql, size_t sql_cap, pg_params *p);

/* policies and reaping (issue 5): store_pg_policy.c */
err_code pg__policy_put(store *st, const char *tenant, const policy *p, bool only_if_absent,
                        int64_t deadline, bool *written, policy *out, err_t *err);
err_code pg__policy_delete(store *st, const char *tenant, const char *service,
                           const char *operation, int64_t deadline, bool *deleted, err_t *err);
err_code pg__policy_list(store *st, const char *tenant, int64_t deadline, policy_row **rows,
                         size_t *n, err_t *err);
err_code pg__reap_steps(store *st, uint32_t limit, int64_t deadline, uint64_t *deleted,
                        err_t *err);
err_code pg__reap_sagas(store *st, uint32_t limit, int64_t deadline, uint64_t *deleted,
                        err_t *err);

#endif
