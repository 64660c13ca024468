/* store_pg.c — the PostgreSQL store's step rows: the pair's SQL, the step transaction without
 * group commit, and lookup (the ops table: store_pg_ops.c).
 * Connections and deadlines: store_pg_conn.c; sagas: store_pg_saga.c; schema:
 * store_pg_migrate.c. All SQL is parameterised; values never enter the statement text. */
#include <stdlib.h>
#include <string.h>

#include "../metrics/metrics.h"
#include "../util/clock.h"
#include "../util/log.h"
#include "store_pg_internal.h"

/* The pair lock: one advisory transaction lock per (tenant, global_id, service, operation),
 * its own statement so that the reads after it (READ COMMITTED: a snapshot per statement) see
 * everything committed by the holder we waited for. 0x1f separates the parts (none of them
 * may contain it). */
const char pg__sql_pair_lock[] =
    "SELECT pg_advisory_xact_lock(hashtextextended("
    "$1::text || E'\\x1f' || $2::text || E'\\x1f' || $3::text || E'\\x1f' || $4::text, 0))";

/* Both phases of the pair and the database clock; one row with NULL columns when there is
 * no record. */
const char pg__sql_pair_read[] = "SELECT n.now_ms, " PG_STEP_COLS_AT(
    "n.now_ms") " FROM (SELECT " PG_NOW_MS
                " AS now_ms) n"
                " LEFT JOIN idem_steps s ON s.tenant = $1 AND s.global_id = $2 AND s.service = $3"
                " AND s.operation = $4";

const char pg__sql_step_insert[] =
    "INSERT INTO idem_steps (tenant, global_id, service, operation, phase, state, attempt,"
    " fingerprint, outcome, code, body, completed_ms, created_ms, updated_ms,"
    " lease_expires_ms, expires_ms, result_expires_ms, begin_trace_id, complete_trace_id, slot)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8::bytea, $9, $10, $11::bytea, $12, $13, $14, $15,"
    " $16, $17, $18, $19, $20)";

const char pg__sql_step_update[] =
    "UPDATE idem_steps SET state = $6, attempt = $7, fingerprint = $8::bytea, outcome = $9,"
    " code = $10, body = $11::bytea, completed_ms = $12, created_ms = $13, updated_ms = $14,"
    " lease_expires_ms = $15, expires_ms = $16, result_expires_ms = $17,"
    " begin_trace_id = $18, complete_trace_id = $19"
    " WHERE tenant = $1 AND global_id = $2 AND service = $3 AND operation = $4 AND phase = $5";

/* A record past its retention is treated as absent (as decide.h does). */
static const char SQL_STEP_LOOKUP[] =
    "SELECT " PG_STEP_COLS
    " FROM idem_steps"
    " WHERE tenant = $1 AND global_id = $2 AND service = $3 AND operation = $4 AND phase = $5"
    " AND " PG_LIVE;

void pg__key_params(pg_params *p, const step_key *k) {
  pg__p_reset(p);
  pg__p_text(p, k->tenant);
  pg__p_text(p, k->global_id);
  pg__p_text(p, k->service);
  pg__p_text(p, k->operation);
}

void pg__write_params(pg_params *p, const step_key *key, const step_rec *r) {
  pg__key_params(p, key);
  pg__p_i64(p, r->key.phase);
  pg__p_i64(p, r->state);
  pg__p_i64(p, (int64_t)r->attempt);
  pg__p_bytes(p, r->fp, r->fp_len > REC_FP_MAX ? REC_FP_MAX : r->fp_len);
  pg__p_i64(p, r->outcome);
  pg__p_i64(p, r->code);
  pg__p_bytes(p, r->body, r->body_len);
  pg__p_i64(p, r->completed_ms);
  pg__p_i64(p, r->created_ms);
  pg__p_i64(p, r->updated_ms);
  pg__p_i64(p, r->lease_expires_ms);
  pg__p_i64(p, r->expires_ms);
  pg__p_i64(p, r->result_expires_ms);
  pg__p_text(p, r->begin_trace_id);
  pg__p_text(p, r->complete_trace_id);
}

void pg__read_pair(const PGresult *res, int row0, int row1, int col, const step_key *key,
                   step_pair *pair, bool exists[3]) {
  memset(pair, 0, sizeof *pair);
  exists[0] = exists[1] = exists[2] = false;
  for (int i = row0; i < row1; i++) {
    if (i == row0) pair->now_ms = pg__int(res, i, col);
    if (pg__isnull(res, i, col + 1)) continue; /* no record: the LEFT JOIN's empty row */
    step_rec rec;
    memset(&rec, 0, sizeof rec);
    pg__row_step(res, i, col + 1, false, &rec);
    rec.key = *key;
    rec.key.phase = (step_phase)pg__int(res, i, col + 1);
    if (rec.key.phase == PHASE_FORWARD) {
      pair->fwd = rec;
      exists[PHASE_FORWARD] = true;
    } else if (rec.key.phase == PHASE_COMPENSATION) {
      pair->comp = rec;
      exists[PHASE_COMPENSATION] = true;
    }
  }
  pair->fwd.key = *key;
  pair->fwd.key.phase = PHASE_FORWARD;
  pair->comp.key = *key;
  pair->comp.key.phase = PHASE_COMPENSATION;
}

/* Writes one record of the pair: UPDATE when the row was read (or written) in this
 * transaction, else INSERT. The key's tenant, global_id, service and operation are the
 * transaction's (the pair the lock covers); the phase is the record's. */
static err_code write_step(pg_store *s, const step_key *key, const step_rec *r, bool exists,
                           int64_t deadline, err_t *err) {
  pg_params p;
  pg__write_params(&p, key, r);
  if (!exists) pg__p_i64(&p, pg__slot(key->tenant, key->global_id)); /* $20 */
  PGresult *res = NULL;
  err_code rc =
      pg__exec(s, exists ? pg__sql_step_update : pg__sql_step_insert, &p, deadline, &res, err);
  if (rc != ERR_OK) return rc;
  bool one = strcmp(PQcmdTuples(res), "1") == 0;
  PQclear(res);
  if (!one) { /* the row vanished under us (it should not: writers hold the pair lock) */
    s->retry = PG_RETRY_SERIAL;
    return err_fail(err, ERR_UNAVAILABLE, ERR_R_STORE_CONFLICT, "store conflict: too many retries");
  }
  return ERR_OK;
}

/* One run of the step transaction. On ERR_OK the transaction committed and *fn_rc / fn_err
 * hold the callback's answer. */
static err_code step_txn_once(pg_store *s, const step_key *key, int64_t deadline, store_step_fn fn,
                              void *arg, const audit_rec *audit, err_code *fn_rc, err_t *fn_err,
                              err_t *err) {
  pg_params p;
  PGresult *res = NULL;
  err_code rc = pg__exec(s, "BEGIN ISOLATION LEVEL READ COMMITTED", NULL, deadline, NULL, err);
  if (rc != ERR_OK) return rc;
  pg__key_params(&p, key);
  rc = pg__exec(s, pg__sql_pair_lock, &p, deadline, NULL, err);
  if (rc != ERR_OK) return rc;
  rc = pg__exec(s, pg__sql_pair_read, &p, deadline, &res, err);
  if (rc != ERR_OK) return rc;

  step_pair pair;
  bool exists[3];
  pg__read_pair(res, 0, PQntuples(res), 0, key, &pair, exists);

  step_writes w;
  memset(&w, 0, sizeof w);
  err_clear(fn_err);
  *fn_rc = fn(arg, &pair, &w, fn_err);
  if (*fn_rc == ERR_OK) err_clear(fn_err);
  if (w.n < 0 || w.n > 2) {
    PQclear(res);
    pg__rollback(s, deadline);
    return err_set(err, ERR_INTERNAL, "step transaction: bad write count %d", w.n);
  }
  for (int i = 0; i < w.n && rc == ERR_OK; i++) {
    step_phase ph = w.recs[i].key.phase;
    if (ph != PHASE_FORWARD && ph != PHASE_COMPENSATION) {
      rc = err_set(err, ERR_INTERNAL, "step transaction: bad phase %d", (int)ph);
      break;
    }
    rc = write_step(s, key, &w.recs[i], exists[ph], deadline, err);
    if (rc == ERR_OK) exists[ph] = true;
  }
  PQclear(res); /* the writes may have borrowed bodies from it */
  if (rc != ERR_OK) return rc;
  if (audit && *fn_rc == ERR_OK) { /* incident response: the audit row, same transaction */
    rc = pg__audit_insert(s, audit, deadline, err);
    if (rc != ERR_OK) return rc;
  }
  return pg__exec(s, "COMMIT", NULL, deadline, NULL, err);
}

err_code pg__step_txn(store *st, const step_key *key, int64_t deadline, store_step_fn fn, void *arg,
                      const audit_rec *audit, err_t *err) {
  pg_store *s = (pg_store *)st;
  err_code rc = ERR_OK, fn_rc = ERR_OK;
  err_t fn_err;
  err_clear(&fn_err);
  bool stale_retried = false;
  for (int tries = 0;; tries++) {
    rc = pg__call_start(s, deadline, err);
    if (rc != ERR_OK) return rc;
    rc = step_txn_once(s, key, deadline, fn, arg, audit, &fn_rc, &fn_err, err);
    if (rc == ERR_OK) break;
    pg_retry why = s->retry;
    pg__rollback(s, deadline);
    if (why == PG_RETRY_STALE && !stale_retried) {
      stale_retried = true;
      continue;
    }
    if (why != PG_RETRY_SERIAL) return rc;
    if (tries + 1 >= PG_TXN_RETRIES) {
      metrics_store_error_g(s->mgroup, "conflict");
      log_kv(LOG_WARN, "store conflict: giving up", "sqlstate", s->sqlstate, NULL);
      return err_fail(err, ERR_UNAVAILABLE, ERR_R_STORE_CONFLICT,
                      "store conflict: too many retries");
    }
    pg__backoff(tries + 1, deadline);
  }
  if (fn_rc != ERR_OK) {
    if (err) *err = fn_err;
    return fn_rc;
  }
  err_clear(err);
  return ERR_OK;
}

err_code pg__lookup_step(store *st, const step_key *key, int64_t deadline, step_rec *out,
                         err_t *err) {
  pg_store *s = (pg_store *)st;
  memset(out, 0, sizeof *out);
  pg_params p;
  pg__key_params(&p, key);
  pg__p_i64(&p, key->phase);
  PGresult *res = NULL;
  err_code rc = pg__exec_call(s, SQL_STEP_LOOKUP, &p, deadline, &res, err);
  if (rc != ERR_OK) return rc;
  if (PQntuples(res) > 0) {
    if (!pg__row_step(res, 0, 0, true, out)) {
      PQclear(res);
      memset(out, 0, sizeof *out);
      return err_oom(err);
    }
    out->key = *key;
  }
  PQclear(res);
  err_clear(err);
  return ERR_OK;
}
