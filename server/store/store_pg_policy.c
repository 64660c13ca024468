/* store_pg_policy.c — policies (idem_policies) and the reaper's deletes on PostgreSQL.
 *
 * Every operation here is one statement in its own (implicit) transaction: the reaper's
 * deletes lock at most `limit` rows, skip rows a step transaction holds (SKIP LOCKED), and
 * commit at once, so they never hold a lock a BeginStep waits on for long. A step transaction
 * that read a row the reaper then deletes finds it gone when it writes and re-runs
 * (PG_RETRY_SERIAL), reading the pair afresh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_pg_internal.h"

static const char SQL_POLICY_UPSERT[] =
    "INSERT INTO idem_policies (tenant, service, operation, failure_mode, retention_s, lease_ms,"
    " key_retention_s, updated_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, " PG_NOW_MS
    ") ON CONFLICT (tenant, service, operation) DO UPDATE SET"
    " failure_mode = EXCLUDED.failure_mode, retention_s = EXCLUDED.retention_s,"
    " lease_ms = EXCLUDED.lease_ms, key_retention_s = EXCLUDED.key_retention_s,"
    " updated_ms = EXCLUDED.updated_ms RETURNING updated_ms";

static const char SQL_POLICY_SEED[] =
    "INSERT INTO idem_policies (tenant, service, operation, failure_mode, retention_s, lease_ms,"
    " key_retention_s, updated_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, " PG_NOW_MS
    ") ON CONFLICT (tenant, service, operation) DO NOTHING RETURNING updated_ms";

static const char SQL_POLICY_DELETE[] =
    "DELETE FROM idem_policies WHERE tenant = $1 AND service = $2 AND operation = $3";

#define POLICY_COLS \
  "tenant, service, operation, failure_mode, retention_s, lease_ms, updated_ms, key_retention_s"

static const char SQL_POLICY_LIST_ONE[] = "SELECT " POLICY_COLS
                                          " FROM idem_policies WHERE tenant = $1"
                                          " ORDER BY tenant, service, operation";

static const char SQL_POLICY_LIST_ALL[] =
    "SELECT " POLICY_COLS " FROM idem_policies ORDER BY tenant, service, operation";

/* The reaper's clock: the statement's start on the database clock. A stable expression (unlike
 * PG_NOW_MS, volatile) so that it bounds the index scan instead of filtering every row. */
#define REAP_NOW_MS "(extract(epoch from statement_timestamp()) * 1000)::bigint"

/* Finished steps past retention (the partial index idem_steps_reap_idx), at most $1 of them,
 * locked (FOR UPDATE re-checks the condition on the newest row version; a locked row cannot
 * change before this statement deletes it) and deleted by ctid (a TID scan, no second index
 * scan). */
static const char SQL_REAP_STEPS[] =
    "DELETE FROM idem_steps WHERE ctid = ANY(ARRAY("
    "SELECT ctid FROM idem_steps"
    " WHERE expires_ms > 0 AND expires_ms <= " REAP_NOW_MS " AND state NOT IN " PG_UNREAPABLE_STATES
    " LIMIT $1 FOR UPDATE SKIP LOCKED))";

/* The first stage (docs/api.md §12): finished steps whose result's retention has passed while the
 * row itself is kept longer (the partial index idem_steps_body_reap_idx, whose predicate this
 * repeats) lose their body; the update takes them out of that index. Locked and updated by ctid
 * like the deletes, oldest expiry first. The ORDER BY keeps the plan in that index's order:
 * without it the planner was free to take the rows in table order, and in bench/key-retention
 * (1,000,000 rows) it did: batches came slowly, and the rows written first went first while a
 * backlog of older expiries waited (a few dozen of its bodies in 15 s). */
static const char SQL_REAP_BODIES[] =
    "UPDATE idem_steps SET body = ''::bytea WHERE ctid = ANY(ARRAY("
    "SELECT ctid FROM idem_steps"
    " WHERE result_expires_ms > 0 AND result_expires_ms < expires_ms AND body <> ''::bytea"
    " AND state NOT IN " PG_UNREAPABLE_STATES " AND result_expires_ms <= " REAP_NOW_MS
    " ORDER BY result_expires_ms LIMIT $1 FOR UPDATE SKIP LOCKED))";

/* Sagas past their retention, and with them ResolveSteps' remembered answers past theirs
 * (idem_bulk: a few rows a day, no index needed). The count is the sagas'. */
static const char SQL_REAP_SAGAS[] =
    "WITH bulk AS (DELETE FROM idem_bulk WHERE ctid = ANY(ARRAY("
    "SELECT ctid FROM idem_bulk WHERE expires_ms <= " REAP_NOW_MS
    " LIMIT $1 FOR UPDATE SKIP LOCKED)))"
    " DELETE FROM idem_sagas WHERE ctid = ANY(ARRAY("
    "SELECT ctid FROM idem_sagas WHERE expires_ms <= " REAP_NOW_MS
    " LIMIT $1 FOR UPDATE SKIP LOCKED))";

static void key3(pg_params *p, const char *tenant, const char *service, const char *operation) {
  pg__p_reset(p);
  pg__p_text(p, tenant);
  pg__p_text(p, service);
  pg__p_text(p, operation);
}

err_code pg__policy_put(store *st, const char *tenant, const policy *pol, bool only_if_absent,
                        int64_t deadline, bool *written, policy *out, err_t *err) {
  pg_store *s = (pg_store *)st;
  if (written) *written = false;
  pg_params p;
  key3(&p, tenant, pol->service, pol->operation);
  pg__p_i64(&p, pol->mode);
  pg__p_i64(&p, pol->retention_s);
  pg__p_i64(&p, pol->lease_ms);
  pg__p_i64(&p, pol->key_retention_s);
  PGresult *res = NULL;
  err_code rc = pg__exec_call(s, only_if_absent ? SQL_POLICY_SEED : SQL_POLICY_UPSERT, &p, deadline,
                              &res, err);
  if (rc != ERR_OK) return rc;
  bool w = PQntuples(res) == 1;
  if (w && out) {
    *out = *pol;
    out->updated_ms = pg__int(res, 0, 0);
  }
  if (written) *written = w;
  PQclear(res);
  return ERR_OK;
}

err_code pg__policy_delete(store *st, const char *tenant, const char *service,
                           const char *operation, int64_t deadline, bool *deleted, err_t *err) {
  pg_store *s = (pg_store *)st;
  *deleted = false;
  pg_params p;
  key3(&p, tenant, service, operation);
  PGresult *res = NULL;
  err_code rc = pg__exec_call(s, SQL_POLICY_DELETE, &p, deadline, &res, err);
  if (rc != ERR_OK) return rc;
  *deleted = strcmp(PQcmdTuples(res), "0") != 0;
  PQclear(res);
  return ERR_OK;
}

err_code pg__policy_list(store *st, const char *tenant, int64_t deadline, policy_row **rows,
                         size_t *n, err_t *err) {
  pg_store *s = (pg_store *)st;
  *rows = NULL;
  *n = 0;
  pg_params p;
  pg__p_reset(&p);
  if (tenant) pg__p_text(&p, tenant);
  PGresult *res = NULL;
  err_code rc =
      pg__exec_call(s, tenant ? SQL_POLICY_LIST_ONE : SQL_POLICY_LIST_ALL, &p, deadline, &res, err);
  if (rc != ERR_OK) return rc;
  int nt = PQntuples(res);
  if (nt > 0) {
    policy_row *r = calloc((size_t)nt, sizeof *r);
    if (!r) {
      PQclear(res);
      return err_oom(err);
    }
    for (int i = 0; i < nt; i++) {
      snprintf(r[i].tenant, sizeof r[i].tenant, "%s", pg__str(res, i, 0));
      snprintf(r[i].p.service, sizeof r[i].p.service, "%s", pg__str(res, i, 1));
      snprintf(r[i].p.operation, sizeof r[i].p.operation, "%s", pg__str(res, i, 2));
      r[i].p.mode = (failure_mode)pg__int(res, i, 3);
      r[i].p.retention_s = (uint32_t)pg__int(res, i, 4);
      r[i].p.lease_ms = (uint32_t)pg__int(res, i, 5);
      r[i].p.updated_ms = pg__int(res, i, 6);
      r[i].p.key_retention_s = (uint32_t)pg__int(res, i, 7);
    }
    *rows = r;
    *n = (size_t)nt;
  }
  PQclear(res);
  return ERR_OK;
}

static err_code reap(store *st, const char *sql, uint32_t limit, int64_t deadline,
                     uint64_t *deleted, err_t *err) {
  pg_store *s = (pg_store *)st;
  *deleted = 0;
  pg_params p;
  pg__p_reset(&p);
  pg__p_i64(&p, limit);
  PGresult *res = NULL;
  /* Reaping needs no durable commit (a delete lost in a crash is redone next round): its
   * commits must not add WAL flushes that BeginStep/CompleteStep wait behind. The reaper owns
   * this connection, and the setting is repeated because a reconnect forgets it. */
  err_code rc = pg__exec_call(s, "SET synchronous_commit TO off", NULL, deadline, NULL, err);
  if (rc == ERR_OK) rc = pg__exec_call(s, sql, &p, deadline, &res, err);
  if (rc != ERR_OK) return rc;
  *deleted = strtoull(PQcmdTuples(res), NULL, 10);
  PQclear(res);
  return ERR_OK;
}

err_code pg__reap_steps(store *st, uint32_t limit, int64_t deadline, uint64_t *deleted,
                        err_t *err) {
  return reap(st, SQL_REAP_STEPS, limit, deadline, deleted, err);
}

err_code pg__reap_sagas(store *st, uint32_t limit, int64_t deadline, uint64_t *deleted,
                        err_t *err) {
  return reap(st, SQL_REAP_SAGAS, limit, deadline, deleted, err);
}

err_code pg__reap_bodies(store *st, uint32_t limit, int64_t deadline, uint64_t *dropped,
                         err_t *err) {
  return reap(st, SQL_REAP_BODIES, limit, deadline, dropped, err);
}
