/* store_pg_saga.c — BeginSaga and GetSaga on PostgreSQL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/log.h"
#include "store_pg_internal.h"

/* A new saga row, stamped with the database clock. No row back: a live or expired row holds
 * the request id (or, never in practice, the global id). */
static const char SQL_SAGA_INSERT[] =
    "WITH n AS (SELECT " PG_NOW_MS
    " AS now_ms)"
    " INSERT INTO idem_sagas (tenant, global_id, request_id, saga_type, created_ms, expires_ms,"
    " slot)"
    " SELECT $1, $2, $3, $4, n.now_ms, n.now_ms + $5::bigint, $6 FROM n"
    " ON CONFLICT DO NOTHING RETURNING created_ms";

static const char SQL_SAGA_BY_REQUEST[] =
    "SELECT global_id, created_ms, expires_ms, " PG_NOW_MS
    " FROM idem_sagas WHERE tenant = $1 AND request_id = $2 FOR UPDATE";

static const char SQL_SAGA_DETACH[] =
    "UPDATE idem_sagas SET request_id = NULL WHERE tenant = $1 AND global_id = $2";

static const char SQL_SAGA_GET[] =
    "SELECT saga_type, created_ms FROM idem_sagas"
    " WHERE tenant = $1 AND global_id = $2 AND expires_ms > " PG_NOW_MS;

static const char SQL_LABELS_GET[] =
    "SELECT key, value FROM idem_saga_labels WHERE tenant = $1 AND global_id = $2 ORDER BY key";

/* A page of the saga's steps (saga_page), $1 tenant, $2 global_id, then: the limit, the body
 * bound, the cursor. A step past its retention is treated as absent (as decide.h does), except
 * UNKNOWN. The body bound cuts after the step whose body crosses it (n__ counts the steps before
 * the cut). */
#define SAGA_ORDER "created_ms, phase, service, operation"
#define SAGA_STEPS_PAGE(after)                                                       \
  "SELECT service, operation, " PG_STEP_COLS                                         \
  ", n__ FROM ("                                                                     \
  "SELECT t.*, count(*) OVER () AS n__, coalesce(octet_length(body), 0) AS len__,"   \
  " sum(coalesce(octet_length(body), 0)) OVER (ORDER BY " SAGA_ORDER                 \
  " ROWS UNBOUNDED PRECEDING) AS run__ FROM ("                                       \
  "SELECT service, operation, " PG_STEP_COLS                                         \
  " FROM idem_steps"                                                                 \
  " WHERE tenant = $1 AND global_id = $2 AND " PG_LIVE after " ORDER BY " SAGA_ORDER \
  " LIMIT $3) t) u WHERE $4::bigint = 0 OR run__ - len__ <= $4::bigint ORDER BY " SAGA_ORDER

static const char SQL_STEPS_FIRST[] = SAGA_STEPS_PAGE("");
static const char SQL_STEPS_AFTER[] = SAGA_STEPS_PAGE(
    " AND (created_ms, phase, service, operation) > ($5::bigint, $6::smallint, $7, $8)");

#define LABELS_PER_INSERT 32

/* Inserts labels[0..n) of a new saga in batches: the statement text holds only placeholders. */
static err_code insert_labels(pg_store *s, const saga_new *in, int64_t deadline, err_t *err) {
  for (size_t done = 0; done < in->n_labels;) {
    size_t batch = in->n_labels - done;
    if (batch > LABELS_PER_INSERT) batch = LABELS_PER_INSERT;
    char sql[160 + LABELS_PER_INSERT * 32];
    size_t len = (size_t)snprintf(sql, sizeof sql,
                                  "INSERT INTO idem_saga_labels (tenant, global_id, key, value,"
                                  " slot) VALUES ");
    pg_params p;
    pg__p_reset(&p);
    pg__p_text(&p, in->tenant);
    pg__p_text(&p, in->global_id);
    pg__p_i64(&p, pg__slot(in->tenant, in->global_id));
    for (size_t i = 0; i < batch; i++) {
      const saga_label *l = &in->labels[done + i];
      pg__p_text(&p, l->key ? l->key : "");
      pg__p_text(&p, l->value ? l->value : "");
      len += (size_t)snprintf(sql + len, sizeof sql - len, "%s($1, $2, $%d, $%d, $3)",
                              i ? ", " : "", p.n - 1, p.n);
    }
    snprintf(sql + len, sizeof sql - len, " ON CONFLICT DO NOTHING");
    err_code rc = pg__exec(s, sql, &p, deadline, NULL, err);
    if (rc != ERR_OK) return rc;
    done += batch;
  }
  return ERR_OK;
}

static err_code begin_saga_once(pg_store *s, const saga_new *in, int64_t deadline, saga_begun *out,
                                err_t *err) {
  err_code rc = pg__exec(s, "BEGIN ISOLATION LEVEL READ COMMITTED", NULL, deadline, NULL, err);
  if (rc != ERR_OK) return rc;
  pg_params p;
  PGresult *res = NULL;
  /* at most: insert (conflict), find expired, detach, insert */
  for (int round = 0; round < 3; round++) {
    pg__p_reset(&p);
    pg__p_text(&p, in->tenant);
    pg__p_text(&p, in->global_id);
    pg__p_text(&p, in->request_id);
    pg__p_text(&p, in->saga_type ? in->saga_type : "");
    pg__p_i64(&p, (int64_t)in->retention_s * 1000);
    pg__p_i64(&p, pg__slot(in->tenant, in->global_id));
    rc = pg__exec(s, SQL_SAGA_INSERT, &p, deadline, &res, err);
    if (rc != ERR_OK) return rc;
    if (PQntuples(res) == 1) {
      snprintf(out->global_id, sizeof out->global_id, "%s", in->global_id);
      out->created = true;
      out->created_ms = pg__int(res, 0, 0);
      PQclear(res);
      rc = insert_labels(s, in, deadline, err);
      if (rc != ERR_OK) return rc;
      return pg__exec(s, "COMMIT", NULL, deadline, NULL, err);
    }
    PQclear(res);
    if (!in->request_id) break; /* the global id itself exists */

    pg__p_reset(&p);
    pg__p_text(&p, in->tenant);
    pg__p_text(&p, in->request_id);
    rc = pg__exec(s, SQL_SAGA_BY_REQUEST, &p, deadline, &res, err);
    if (rc != ERR_OK) return rc;
    if (PQntuples(res) == 0) { /* gone since the insert looked: try again */
      PQclear(res);
      continue;
    }
    int64_t expires = pg__int(res, 0, 2), now = pg__int(res, 0, 3);
    if (expires > now) {
      snprintf(out->global_id, sizeof out->global_id, "%s", pg__str(res, 0, 0));
      out->created = false;
      out->created_ms = pg__int(res, 0, 1);
      PQclear(res);
      return pg__exec(s, "COMMIT", NULL, deadline, NULL, err);
    }
    /* the request id's retention has passed: detach it from its old saga and reuse it */
    char old[REC_GLOBAL_ID_MAX + 1];
    snprintf(old, sizeof old, "%s", pg__str(res, 0, 0));
    PQclear(res);
    pg__p_reset(&p);
    pg__p_text(&p, in->tenant);
    pg__p_text(&p, old);
    rc = pg__exec(s, SQL_SAGA_DETACH, &p, deadline, NULL, err);
    if (rc != ERR_OK) return rc;
  }
  pg__rollback(s, deadline);
  log_kv(LOG_ERROR, "saga id already exists", "tenant", in->tenant, "global_id", in->global_id,
         NULL);
  return err_set(err, ERR_INTERNAL, "saga id already exists");
}

err_code pg__begin_saga(store *st, const saga_new *in, int64_t deadline, saga_begun *out,
                        err_t *err) {
  pg_store *s = (pg_store *)st;
  memset(out, 0, sizeof *out);
  bool stale_retried = false;
  for (int tries = 0;; tries++) {
    err_code rc = pg__call_start(s, deadline, err);
    if (rc != ERR_OK) return rc;
    rc = begin_saga_once(s, in, deadline, out, err);
    if (rc == ERR_OK) break;
    pg_retry why = s->retry;
    pg__rollback(s, deadline);
    memset(out, 0, sizeof *out);
    if (why == PG_RETRY_STALE && !stale_retried) {
      stale_retried = true;
      continue;
    }
    if (why != PG_RETRY_SERIAL) return rc;
    if (tries + 1 >= PG_TXN_RETRIES)
      return err_fail(err, ERR_UNAVAILABLE, ERR_R_STORE_CONFLICT,
                      "store conflict: too many retries");
    pg__backoff(tries + 1, deadline);
  }
  err_clear(err);
  return ERR_OK;
}

/* --- GetSaga --- */

static err_code get_saga_once(pg_store *s, const char *tenant, const char *global_id,
                              const saga_page *pg, int64_t deadline, saga_view *out, err_t *err) {
  pg_params p;
  pg__p_reset(&p);
  pg__p_text(&p, tenant);
  pg__p_text(&p, global_id);
  pg_params ps = p; /* the steps' parameters: p's two strings, then the page's (in ps.num) */
  pg__p_i64(&ps, (int64_t)pg->limit + 1); /* one more: is there a next page? */
  pg__p_i64(&ps, pg->max_body_bytes > INT64_MAX ? INT64_MAX : (int64_t)pg->max_body_bytes);
  if (pg->has_after) {
    pg__p_i64(&ps, pg->after_created_ms);
    pg__p_i64(&ps, pg->after_phase);
    pg__p_text(&ps, pg->after_service);
    pg__p_text(&ps, pg->after_operation);
  }
  PGresult *saga = NULL, *labels = NULL, *steps = NULL;
  /* one snapshot for the three reads */
  err_code rc =
      pg__exec(s, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", NULL, deadline, NULL, err);
  if (rc == ERR_OK) rc = pg__exec(s, SQL_SAGA_GET, &p, deadline, &saga, err);
  if (rc == ERR_OK) rc = pg__exec(s, SQL_LABELS_GET, &p, deadline, &labels, err);
  if (rc == ERR_OK)
    rc = pg__exec(s, pg->has_after ? SQL_STEPS_AFTER : SQL_STEPS_FIRST, &ps, deadline, &steps, err);
  if (rc == ERR_OK) rc = pg__exec(s, "COMMIT", NULL, deadline, NULL, err);
  if (rc != ERR_OK) goto done;

  int ns = PQntuples(steps), nl = PQntuples(labels);
  if (PQntuples(saga) == 0 && ns == 0 && !pg->has_after) {
    rc = err_set(err, ERR_NOT_FOUND, "saga not found: global_id %s", global_id);
    goto done;
  }
  if (ns > 0 && pg__int(steps, 0, PQfnumber(steps, "n__")) > ns) out->more = true;
  if ((uint32_t)ns > pg->limit) {
    out->more = true;
    ns = (int)pg->limit;
  }
  snprintf(out->global_id, sizeof out->global_id, "%s", global_id);
  if (PQntuples(saga) > 0) {
    snprintf(out->saga_type, sizeof out->saga_type, "%s", pg__str(saga, 0, 0));
    out->created_ms = pg__int(saga, 0, 1);
    if (nl > 0) {
      out->labels = calloc((size_t)nl, sizeof *out->labels);
      if (!out->labels) goto oom;
      for (int i = 0; i < nl; i++) {
        out->labels[i].key = strdup(pg__str(labels, i, 0));
        out->labels[i].value = strdup(pg__str(labels, i, 1));
        out->n_labels = (size_t)i + 1;
        if (!out->labels[i].key || !out->labels[i].value) goto oom;
      }
    }
  }
  if (ns > 0) {
    out->steps = calloc((size_t)ns, sizeof *out->steps);
    if (!out->steps) goto oom;
    for (int i = 0; i < ns; i++) {
      step_rec *r = &out->steps[i];
      out->n_steps = (size_t)i + 1;
      if (!pg__row_step(steps, i, 2, true, r)) goto oom;
      step_phase ph = r->key.phase;
      snprintf(r->key.tenant, sizeof r->key.tenant, "%s", tenant);
      snprintf(r->key.global_id, sizeof r->key.global_id, "%s", global_id);
      snprintf(r->key.service, sizeof r->key.service, "%s", pg__str(steps, i, 0));
      snprintf(r->key.operation, sizeof r->key.operation, "%s", pg__str(steps, i, 1));
      r->key.phase = ph;
    }
  }
  goto done;
oom:
  saga_view_clear(out);
  rc = err_oom(err);
done:
  PQclear(saga);
  PQclear(labels);
  PQclear(steps);
  return rc;
}

err_code pg__get_saga(store *st, const char *tenant, const char *global_id, const saga_page *pg,
                      int64_t deadline, saga_view *out, err_t *err) {
  pg_store *s = (pg_store *)st;
  memset(out, 0, sizeof *out);
  err_code rc = ERR_OK;
  for (int tries = 0; tries < 2; tries++) {
    rc = pg__call_start(s, deadline, err);
    if (rc != ERR_OK) return rc;
    rc = get_saga_once(s, tenant, global_id, pg, deadline, out, err);
    if (rc == ERR_OK || rc == ERR_NOT_FOUND) break;
    pg_retry why = s->retry;
    pg__rollback(s, deadline);
    if (why != PG_RETRY_STALE) break;
  }
  if (rc == ERR_OK) err_clear(err);
  return rc;
}
