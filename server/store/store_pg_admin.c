/* store_pg_admin.c — incident response on PostgreSQL: ListSteps (keyset pagination over the
 * step key), the audit trail (insert inside the step transaction, ListAudit) and the step
 * counts behind the /metrics gauges. Indexes: schema version 3 (store_pg_migrate.c).
 * All SQL is parameterised; the statement text holds only placeholders. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_pg_internal.h"

/* A record past its retention is never listed (decide.h treats it as absent); an UNKNOWN
 * record is never forgotten. */
#define LIVE PG_LIVE
#define LIST_ORDER "global_id, service, operation, phase"

const char pg__sql_audit_insert[] =
    "INSERT INTO idem_audit (tenant, at_ms, actor, action, global_id, service, operation, phase,"
    " reason, from_state, to_state, batch_id, slot)"
    " VALUES ($1, " PG_NOW_MS ", $2, $3, $4, $5, $6, $7, $8, $9, $10, NULLIF($11, ''), $12)";

#define AUDIT_COLS                                                                                \
  "id, at_ms, actor, action, global_id, service, operation, phase, reason, from_state, to_state," \
  " coalesce(batch_id, '')"

/* Live IN_PROGRESS (1) and UNKNOWN (4) steps: the partial index idem_steps_open_idx. */
static const char SQL_COUNT_OPEN[] =
    "SELECT state, count(*), count(*) FILTER (WHERE lease_expires_ms <= " PG_NOW_MS ")"
    " FROM idem_steps WHERE state IN " PG_OPEN_STATES " AND " LIVE " GROUP BY state";

static void add(char *sql, size_t cap, size_t *len, const char *fmt, int a) {
  if (*len >= cap) return;
  int n = snprintf(sql + *len, cap - *len, fmt, a);
  *len += n > 0 ? (size_t)n : 0;
}

static void add_lit(char *sql, size_t cap, size_t *len, const char *text) {
  if (*len >= cap) return;
  int n = snprintf(sql + *len, cap - *len, "%s", text);
  *len += n > 0 ? (size_t)n : 0;
}

static bool set(const char *s) {
  return s && *s;
}

bool store_pg__list_steps_sql(const step_filter *f, char *sql, size_t cap, pg_params *p) {
  pg__p_reset(p);
  size_t len = 0;
  pg__p_text(p, f->tenant);
  if (f->max_body_bytes > 0) /* the page below, cut where its bodies pass the bound */
    add_lit(sql, cap, &len,
            "SELECT global_id, service, operation, " PG_STEP_COLS
            ", n__ FROM ("
            "SELECT t.*, count(*) OVER () AS n__, coalesce(octet_length(body), 0) AS len__,"
            " sum(coalesce(octet_length(body), 0)) OVER (ORDER BY " LIST_ORDER
            " ROWS UNBOUNDED PRECEDING) AS run__ FROM (");
  add(sql, cap, &len,
      "SELECT global_id, service, operation, " PG_STEP_COLS
      " FROM idem_steps WHERE tenant = $%d AND " LIVE,
      p->n);
  step_state state = f->lease_expired_only ? STATE_IN_PROGRESS : f->state;
  if (state != STATE_NONE) {
    pg__p_i64(p, state);
    add(sql, cap, &len, " AND state = $%d", p->n);
  }
  if (f->lease_expired_only) add_lit(sql, cap, &len, " AND lease_expires_ms <= " PG_NOW_MS);
  if (set(f->service)) {
    pg__p_text(p, f->service);
    add(sql, cap, &len, " AND service = $%d", p->n);
  }
  if (set(f->operation)) {
    pg__p_text(p, f->operation);
    add(sql, cap, &len, " AND operation = $%d", p->n);
  }
  if (set(f->global_id)) {
    pg__p_text(p, f->global_id);
    add(sql, cap, &len, " AND global_id = $%d", p->n);
  }
  if (set(f->trace_id)) { /* the partial indexes of version 11, one per column */
    pg__p_text(p, f->trace_id);
    add(sql, cap, &len, " AND (begin_trace_id = $%d", p->n);
    add(sql, cap, &len, " OR complete_trace_id = $%d)", p->n);
  }
  if (f->updated_before_ms > 0) {
    pg__p_i64(p, f->updated_before_ms);
    add(sql, cap, &len, " AND updated_ms < $%d", p->n);
  }
  if (f->has_after) {
    pg__p_text(p, f->after.global_id);
    pg__p_text(p, f->after.service);
    pg__p_text(p, f->after.operation);
    pg__p_i64(p, f->after.phase);
    add(sql, cap, &len, " AND (global_id, service, operation, phase) > ($%d", p->n - 3);
    add(sql, cap, &len, ", $%d", p->n - 2);
    add(sql, cap, &len, ", $%d", p->n - 1);
    add(sql, cap, &len, ", $%d::smallint)", p->n);
  }
  pg__p_i64(p, (int64_t)f->limit + 1); /* one more: is there a next page? */
  add(sql, cap, &len, " ORDER BY " LIST_ORDER " LIMIT $%d", p->n);
  if (f->max_body_bytes > 0) { /* the row that crosses the bound is read, the next ones not */
    pg__p_i64(p, f->max_body_bytes > INT64_MAX ? INT64_MAX : (int64_t)f->max_body_bytes);
    add(sql, cap, &len, ") t) u WHERE run__ - len__ <= $%d ORDER BY " LIST_ORDER, p->n);
  }
  return len < cap;
}

err_code pg__list_steps(store *st, const step_filter *f, int64_t deadline, step_list *out,
                        err_t *err) {
  pg_store *s = (pg_store *)st;
  memset(out, 0, sizeof *out);
  char sql[2048];
  pg_params p;
  if (!store_pg__list_steps_sql(f, sql, sizeof sql, &p))
    return err_set(err, ERR_INTERNAL, "list steps: statement too long");
  PGresult *res = NULL;
  err_code rc = pg__exec_call(s, sql, &p, deadline, &res, err);
  if (rc != ERR_OK) return rc;
  int n = PQntuples(res);
  /* with a byte bound, n__ counts the rows before the cut: fewer returned means more follow */
  int all_col = f->max_body_bytes > 0 ? PQfnumber(res, "n__") : -1;
  if (n > 0 && all_col >= 0 && pg__int(res, 0, all_col) > n) out->more = true;
  if ((uint32_t)n > f->limit) {
    out->more = true;
    n = (int)f->limit;
  }
  if (n > 0 && !(out->recs = calloc((size_t)n, sizeof *out->recs))) {
    PQclear(res);
    return err_oom(err);
  }
  for (int i = 0; i < n; i++) {
    step_rec *r = &out->recs[i];
    out->n = (size_t)i + 1;
    if (!pg__row_step(res, i, 3, true, r)) {
      PQclear(res);
      step_list_clear(out);
      return err_oom(err);
    }
    step_phase ph = r->key.phase;
    snprintf(r->key.tenant, sizeof r->key.tenant, "%s", f->tenant);
    snprintf(r->key.global_id, sizeof r->key.global_id, "%s", pg__str(res, i, 0));
    snprintf(r->key.service, sizeof r->key.service, "%s", pg__str(res, i, 1));
    snprintf(r->key.operation, sizeof r->key.operation, "%s", pg__str(res, i, 2));
    r->key.phase = ph;
  }
  PQclear(res);
  err_clear(err);
  return ERR_OK;
}

void pg__audit_params(pg_params *p, const audit_rec *a) {
  pg__p_reset(p);
  pg__p_text(p, a->key.tenant);
  pg__p_text(p, a->actor);
  pg__p_text(p, a->action);
  pg__p_text(p, a->key.global_id);
  pg__p_text(p, a->key.service);
  pg__p_text(p, a->key.operation);
  pg__p_i64(p, a->key.phase);
  pg__p_text(p, a->reason);
  pg__p_i64(p, a->from_state);
  pg__p_i64(p, a->to_state);
  pg__p_text(p, a->batch_id);
  pg__p_i64(p, pg__slot(a->key.tenant, a->key.global_id));
}

err_code pg__audit_insert(pg_store *s, const audit_rec *a, int64_t deadline, err_t *err) {
  pg_params p;
  pg__audit_params(&p, a);
  return pg__exec(s, pg__sql_audit_insert, &p, deadline, NULL, err);
}

err_code pg__list_audit(store *st, const char *tenant, const char *global_id, int64_t before_id,
                        uint32_t limit, int64_t deadline, audit_list *out, err_t *err) {
  pg_store *s = (pg_store *)st;
  memset(out, 0, sizeof *out);
  char sql[512];
  size_t len = 0;
  pg_params p;
  pg__p_reset(&p);
  pg__p_text(&p, tenant);
  add(sql, sizeof sql, &len, "SELECT " AUDIT_COLS " FROM idem_audit WHERE tenant = $%d", p.n);
  if (set(global_id)) {
    pg__p_text(&p, global_id);
    add(sql, sizeof sql, &len, " AND global_id = $%d", p.n);
  }
  if (before_id > 0) {
    pg__p_i64(&p, before_id);
    add(sql, sizeof sql, &len, " AND id < $%d", p.n);
  }
  pg__p_i64(&p, (int64_t)limit + 1);
  add(sql, sizeof sql, &len, " ORDER BY id DESC LIMIT $%d", p.n);
  PGresult *res = NULL;
  err_code rc = pg__exec_call(s, sql, &p, deadline, &res, err);
  if (rc != ERR_OK) return rc;
  int n = PQntuples(res);
  if ((uint32_t)n > limit) {
    out->more = true;
    n = (int)limit;
  }
  if (n > 0 && !(out->recs = calloc((size_t)n, sizeof *out->recs))) {
    PQclear(res);
    return err_oom(err);
  }
  for (int i = 0; i < n; i++) {
    audit_rec *a = &out->recs[i];
    a->id = pg__int(res, i, 0);
    a->at_ms = pg__int(res, i, 1);
    snprintf(a->actor, sizeof a->actor, "%s", pg__str(res, i, 2));
    snprintf(a->action, sizeof a->action, "%s", pg__str(res, i, 3));
    snprintf(a->key.tenant, sizeof a->key.tenant, "%s", tenant);
    snprintf(a->key.global_id, sizeof a->key.global_id, "%s", pg__str(res, i, 4));
    snprintf(a->key.service, sizeof a->key.service, "%s", pg__str(res, i, 5));
    snprintf(a->key.operation, sizeof a->key.operation, "%s", pg__str(res, i, 6));
    a->key.phase = (step_phase)pg__int(res, i, 7);
    snprintf(a->reason, sizeof a->reason, "%s", pg__str(res, i, 8));
    a->from_state = (step_state)pg__int(res, i, 9);
    a->to_state = (step_state)pg__int(res, i, 10);
    snprintf(a->batch_id, sizeof a->batch_id, "%s", pg__str(res, i, 11));
    out->n = (size_t)i + 1;
  }
  PQclear(res);
  err_clear(err);
  return ERR_OK;
}

/* The newest row of one step key and action: idem_audit_saga_idx (tenant, global_id, id). */
static const char SQL_LAST_AUDIT[] =
    "SELECT " AUDIT_COLS " FROM idem_audit WHERE tenant = $1 AND global_id = $2 AND service = $3"
    " AND operation = $4 AND phase = $5 AND action = $6 ORDER BY id DESC LIMIT 1";

err_code pg__last_audit(store *st, const step_key *key, const char *action, int64_t deadline,
                        audit_rec *out, bool *found, err_t *err) {
  pg_store *s = (pg_store *)st;
  memset(out, 0, sizeof *out);
  *found = false;
  pg_params p;
  pg__p_reset(&p);
  pg__p_text(&p, key->tenant);
  pg__p_text(&p, key->global_id);
  pg__p_text(&p, key->service);
  pg__p_text(&p, key->operation);
  pg__p_i64(&p, key->phase);
  pg__p_text(&p, action);
  PGresult *res = NULL;
  err_code rc = pg__exec_call(s, SQL_LAST_AUDIT, &p, deadline, &res, err);
  if (rc != ERR_OK) return rc;
  if (PQntuples(res) == 1) {
    *found = true;
    out->id = pg__int(res, 0, 0);
    out->at_ms = pg__int(res, 0, 1);
    snprintf(out->actor, sizeof out->actor, "%s", pg__str(res, 0, 2));
    snprintf(out->action, sizeof out->action, "%s", pg__str(res, 0, 3));
    out->key = *key;
    snprintf(out->reason, sizeof out->reason, "%s", pg__str(res, 0, 8));
    out->from_state = (step_state)pg__int(res, 0, 9);
    out->to_state = (step_state)pg__int(res, 0, 10);
    snprintf(out->batch_id, sizeof out->batch_id, "%s", pg__str(res, 0, 11));
  }
  PQclear(res);
  err_clear(err);
  return ERR_OK;
}

err_code pg__count_steps(store *st, int64_t deadline, step_counts *out, err_t *err) {
  pg_store *s = (pg_store *)st;
  memset(out, 0, sizeof *out);
  PGresult *res = NULL;
  err_code rc = pg__exec_call(s, SQL_COUNT_OPEN, NULL, deadline, &res, err);
  if (rc != ERR_OK) return rc;
  for (int i = 0; i < PQntuples(res); i++) {
    int64_t state = pg__int(res, i, 0), n = pg__int(res, i, 1);
    if (state == STATE_IN_PROGRESS) {
      out->in_progress = (uint64_t)n;
      out->lease_expired = (uint64_t)pg__int(res, i, 2);
    }
    if (state == STATE_UNKNOWN) out->unknown = (uint64_t)n;
  }
  PQclear(res);
  err_clear(err);
  return ERR_OK;
}
