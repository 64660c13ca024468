/* idem_pg.h — the participant-side barrier: exactly-once effects in a participant's own
 * PostgreSQL database (libidem_pg, built when libpq is present; links libpq and libidem).
 *
 * Why: the coordinator decides who may run a step and replays its result, but it cannot be
 * inside the participant's database transaction. A participant that commits its business write
 * and then crashes before CompleteStep leaves the step IN_PROGRESS; after the lease another
 * attempt takes over and would write again. The barrier closes that gap: the business writes and
 * a dedup row for the step commit in ONE local transaction, so the next attempt finds the row and
 * keeps the earlier attempt's result instead of acting twice.
 *
 * The dedup row, table idem_barrier in the connection's current schema (search_path):
 *   (global_id, service, operation, phase) primary key, fence (the attempt that applied it),
 *   outcome, code, body (the result, replayed to later attempts), applied_at.
 * The row is claimed with
 *   INSERT ... ON CONFLICT (key) DO UPDATE SET fence = $attempt
 *              WHERE idem_barrier.fence < $attempt AND idem_barrier.outcome IS NULL
 * so an attempt can only take a row no attempt has finished, and never from a newer attempt (the
 * attempt number is the fencing token). Concurrent attempts serialize on the row: the second
 * waits for the first transaction and then sees its result.
 *
 * Conventions are those of <idem/idem.h>: functions return an idem_code, *err describes errors,
 * output structs are the caller's and freed with their *_clear(). A PGconn is used by one
 * thread at a time; the functions leave it outside any transaction.
 */
#ifndef IDEM_IDEM_PG_H
#define IDEM_IDEM_PG_H

#include <idem/idem.h>
#include <libpq-fe.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Creates the idem_barrier table in the connection's current schema if it is missing.
 * Safe to call from several processes at once. */
int idem_pg_barrier_init(PGconn *conn, idem_error *err);

/* The business effect. It runs inside the barrier's transaction on conn (no BEGIN/COMMIT of its
 * own) and fills *out like an idem_step_fn: SUCCEEDED / FAILED are committed together with the
 * dedup row (a definite FAILED, e.g. "out of stock", is remembered too, so a later attempt does
 * not re-decide it); RETRYABLE rolls everything back (nothing happened, no dedup row); UNKNOWN
 * is treated as RETRYABLE (the transaction is rolled back, so nothing happened). body must stay
 * valid until the function returns. attempt is the fencing token to write into business rows
 * that more than one attempt may touch. */
typedef void (*idem_pg_effect_fn)(PGconn *conn, void *arg, uint64_t attempt,
                                  idem_step_output *out);

typedef struct idem_pg_report {
  bool applied;         /* fn ran and its writes committed in this call */
  bool applied_earlier; /* the dedup row was there: an earlier attempt's result, fn not called */
  bool rolled_back;     /* fn reported RETRYABLE/UNKNOWN: nothing committed */
  uint64_t fence;       /* the attempt whose writes are in the database (0 if none) */
  idem_result result;   /* what fn reported (applied) or the stored result (applied_earlier);
                           owned, completed_unix_ms = 0 */
} idem_pg_report;
void idem_pg_report_clear(idem_pg_report *r);

/* Runs fn for key under attempt (>= 1) exactly once across attempts:
 *   BEGIN; claim the dedup row (see above); if it was already applied → ROLLBACK and return the
 *   stored result (applied_earlier); else fn; store fn's result in the row; COMMIT.
 * Returns IDEM_OK with *rep filled, or
 *   IDEM_INVALID_ARGUMENT  bad key or attempt 0;
 *   IDEM_UNAVAILABLE       a database error; err->outcome_unknown is set when COMMIT itself failed
 *                          (the effect may have committed: retry, the barrier will tell).
 * The effect's own SQL errors are the effect's business: it reports RETRYABLE to roll back. */
int idem_pg_barrier_run(PGconn *conn, const idem_step_key *key, uint64_t attempt,
                        idem_pg_effect_fn fn, void *arg, idem_pg_report *rep, idem_error *err);

/* The dedup row of key, if any: IDEM_OK (rep->applied_earlier, fence, result), IDEM_NOT_FOUND,
 * or IDEM_UNAVAILABLE. */
int idem_pg_barrier_lookup(PGconn *conn, const idem_step_key *key, idem_pg_report *rep,
                           idem_error *err);

#ifdef __cplusplus
}
#endif
#endif
