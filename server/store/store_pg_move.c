/* store_pg_move.c — see store_pg_move.h. */
#include "store_pg_move.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../domain/slot.h"
#include "../util/clock.h"
#include "store_pg_internal.h"

#define MOVE_APPLY_ERRORS_MAX 3 /* the subscription's workers' errors before a move gives up */
#define MOVE_TABLES_N 4
static const char *const move_tables[MOVE_TABLES_N] = {"idem_sagas", "idem_saga_labels",
                                                       "idem_steps", "idem_audit"};
#define DELETE_BATCH 5000

struct store_move {
  pg_store side[2]; /* MOVE_SIDE_SOURCE, MOVE_SIDE_TARGET */
  bool ok[2];
  char id[24];   /* "" for a request's checks */
  char name[64]; /* idem_move_<id> */
  uint32_t from, to;
};

err_code store_pg_move_session_open(const char *src, const char *dst, const char *id,
                                    uint32_t from, uint32_t to, store_pg_move_session **out,
                                    err_t *err) {
  *out = NULL;
  if (id && !slot_move_id_valid(id)) /* the id goes into SQL text (object names) */
    return err_set(err, ERR_INVALID, "id: a move id is m and 16 lowercase hex digits");
  store_pg_move_session *s = calloc(1, sizeof *s);
  if (!s) return err_oom(err);
  const char *ci[2] = {src, dst};
  for (int i = 0; i < 2; i++) {
    if (!(s->ok[i] = pg__init(&s->side[i], ci[i]))) {
      store_pg_move_session_close(s);
      return err_oom(err);
    }
    s->side[i].app_name = "idem-move";
  }
  snprintf(s->id, sizeof s->id, "%s", id ? id : "");
  snprintf(s->name, sizeof s->name, "idem_move_%s", s->id);
  s->from = from;
  s->to = to;
  *out = s;
  return ERR_OK;
}

void store_pg_move_session_close(store_pg_move_session *s) {
  if (!s) return;
  for (int i = 0; i < 2; i++)
    if (s->ok[i]) pg__fini(&s->side[i]);
  free(s);
}

/* One call on a side's connection (made again when it was lost). */
typedef struct conn {
  pg_store *s;
  bool ok;
} conn;

static err_code open_conn(conn *c, store_pg_move_session *ms, int side, int64_t deadline,
                          err_t *err) {
  c->s = &ms->side[side];
  c->ok = true;
  return pg__call_start(c->s, deadline, err);
}

static void close_conn(conn *c, int64_t deadline) {
  if (!c->ok) return;
  pg__rollback(c->s, deadline);
  c->ok = false;
}

static err_code need_id(const store_pg_move_session *ms, err_t *err) {
  return ms->id[0] ? ERR_OK : err_set(err, ERR_INTERNAL, "a move session without a move id");
}

/* Runs sql; with out, the first column of the first row as an integer (0 when none / NULL). */
static err_code q(conn *c, const char *sql, const pg_params *p, int64_t *out, int64_t deadline,
                  err_t *err) {
  PGresult *res = NULL;
  err_code rc = pg__exec(c->s, sql, p, deadline, out ? &res : NULL, err);
  if (rc == ERR_OK && out) *out = PQntuples(res) ? pg__int(res, 0, 0) : 0;
  PQclear(res);
  return rc;
}

/* The same with one text parameter. */
static err_code q1(conn *c, const char *sql, const char *v, int64_t *out, int64_t deadline,
                   err_t *err) {
  pg_params p;
  pg__p_reset(&p);
  pg__p_text(&p, v);
  return q(c, sql, &p, out, deadline, err);
}

err_code store_pg_move_check(store_pg_move_session *ms, store_pg_move_side side, const char *what,
                             int64_t deadline, err_t *err) {
  bool source = side == MOVE_SIDE_SOURCE;
  conn c = {0};
  err_code rc = open_conn(&c, ms, side, deadline, err);
  int64_t v = 0;
  if (rc == ERR_OK)
    rc = q(&c, "SELECT coalesce((SELECT max(version) FROM idem_schema_version), 0)::bigint", NULL,
           &v, deadline, err);
  if (rc == ERR_OK && v < 10)
    rc = err_set(err, ERR_PRECONDITION,
                 "%s: its store has version %lld of idem's schema, a move needs 10 (start a node of "
                 "this version with it first)",
                 what, (long long)v);
  if (rc == ERR_OK && source) {
    rc = q(&c, "SELECT (current_setting('wal_level') = 'logical')::int::bigint", NULL, &v, deadline,
           err);
    if (rc == ERR_OK && !v)
      rc = err_set(err, ERR_PRECONDITION,
                   "%s: its PostgreSQL runs with wal_level=%s; moving slots out of it needs "
                   "wal_level=logical (set it and restart that PostgreSQL)",
                   what, "replica");
    if (rc == ERR_OK)
      rc = q(&c,
             "SELECT (EXISTS (SELECT 1 FROM idem_steps WHERE slot IS NULL) OR EXISTS (SELECT 1"
             " FROM idem_sagas WHERE slot IS NULL))::int::bigint",
             NULL, &v, deadline, err);
    if (rc == ERR_OK && v)
      rc = err_set(err, ERR_PRECONDITION,
                   "%s: rows written before version 8 are still being given their slot; try "
                   "again in a minute",
                   what);
  }
  if (rc == ERR_OK && !source) {
    rc = q(&c, "SELECT rolsuper::int::bigint FROM pg_roles WHERE rolname = current_user", NULL, &v,
           deadline, err);
    if (rc == ERR_OK && !v)
      rc = err_set(err, ERR_PRECONDITION,
                   "%s: its role is not a superuser; a move's target creates a subscription "
                   "(PostgreSQL 15: superuser only)",
                   what);
  }
  close_conn(&c, deadline);
  return rc;
}

err_code store_pg_move_identity(store_pg_move_session *ms, store_pg_move_side side, char *out,
                                size_t cap, int64_t deadline, err_t *err) {
  conn c = {0};
  err_code rc = open_conn(&c, ms, side, deadline, err);
  PGresult *res = NULL;
  if (rc == ERR_OK)
    rc = pg__exec(c.s,
                  "SELECT (SELECT system_identifier FROM pg_control_system())::text || '/' ||"
                  " substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)",
                  NULL, deadline, &res, err);
  if (rc == ERR_OK) snprintf(out, cap, "%s", PQntuples(res) ? pg__str(res, 0, 0) : "");
  PQclear(res);
  close_conn(&c, deadline);
  return rc;
}

err_code store_pg_move_publish(store_pg_move_session *ms, int64_t deadline, err_t *err) {
  const char *id = ms->id, *name = ms->name;
  uint32_t from = ms->from, to = ms->to;
  conn c = {0};
  err_code rc = need_id(ms, err);
  if (rc == ERR_OK) rc = open_conn(&c, ms, MOVE_SIDE_SOURCE, deadline, err);
  char sql[1024];
  for (int i = 0; rc == ERR_OK && i < MOVE_TABLES_N; i++) {
    snprintf(sql, sizeof sql, "ALTER TABLE %s REPLICA IDENTITY FULL", move_tables[i]);
    rc = q(&c, sql, NULL, NULL, deadline, err);
  }
  int64_t have = 0;
  if (rc == ERR_OK)
    rc = q1(&c, "SELECT count(*) FROM pg_publication WHERE pubname = $1", name, &have, deadline,
            err);
  if (rc == ERR_OK && !have) {
    char w[96];
    snprintf(w, sizeof w, "WHERE (slot BETWEEN %u AND %u)", from, to);
    snprintf(sql, sizeof sql,
             "CREATE PUBLICATION %s FOR TABLE idem_sagas %s, idem_saga_labels %s, idem_steps %s,"
             " idem_audit %s, idem_move_marks WHERE (move_id = '%s')"
             " WITH (publish = 'insert, update, delete')",
             name, w, w, w, w, id);
    rc = q(&c, sql, NULL, NULL, deadline, err);
  }
  if (rc == ERR_OK)
    rc = q1(&c, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", name, &have,
            deadline, err);
  if (rc == ERR_OK && !have)
    rc = q1(&c, "SELECT 0::bigint FROM pg_create_logical_replication_slot($1, 'pgoutput')", name,
            NULL, deadline, err);
  close_conn(&c, deadline);
  return rc;
}

/* Adds a block of from..to for move id (why: "moving in", "moving out") and rebuilds the
 * triggers, in the caller's transaction. */
static err_code add_block(conn *c, const char *id, uint32_t from, uint32_t to, const char *why,
                          int64_t deadline, err_t *err) {
  pg_params p;
  pg__p_reset(&p);
  pg__p_i64(&p, from);
  pg__p_i64(&p, to);
  pg__p_text(&p, id);
  pg__p_text(&p, why);
  err_code rc = q(c,
                  "INSERT INTO idem_slot_blocks (from_slot, to_slot, move_id, why)"
                  " VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                  &p, NULL, deadline, err);
  if (rc == ERR_OK) rc = q(c, "SELECT idem_slot_blocks_sync()", NULL, NULL, deadline, err);
  return rc;
}

err_code store_pg_move_subscribe(store_pg_move_session *ms, int64_t deadline, err_t *err) {
  const char *id = ms->id, *name = ms->name, *src = ms->side[MOVE_SIDE_SOURCE].conninfo;
  conn c = {0};
  err_code rc = need_id(ms, err);
  if (rc == ERR_OK) rc = open_conn(&c, ms, MOVE_SIDE_TARGET, deadline, err);
  int64_t have = 0;
  char sql[2048];
  if (rc == ERR_OK) rc = q(&c, "BEGIN", NULL, NULL, deadline, err);
  if (rc == ERR_OK) rc = add_block(&c, id, ms->from, ms->to, "moving in", deadline, err);
  if (rc == ERR_OK) rc = q(&c, "COMMIT", NULL, NULL, deadline, err);
  if (rc == ERR_OK)
    rc = q1(&c, "SELECT count(*) FROM pg_subscription WHERE subname = $1", name, &have, deadline,
            err);
  PGresult *res = NULL;
  if (rc == ERR_OK && !have) {
    pg_params p;
    pg__p_reset(&p);
    pg__p_text(&p, src);
    rc = pg__exec(c.s, "SELECT quote_literal($1)", &p, deadline, &res, err);
  }
  /* the apply commits without waiting for its WAL flush (each of the source's commits would
   * otherwise cost the target a flush of its own, slowing its other slots through the copy):
   * the unblock at the handoff commits with synchronous_commit on after the mark has arrived,
   * and its flush (on a synchronous standby too) covers everything applied before it */
  if (rc == ERR_OK && !have) {
    snprintf(sql, sizeof sql,
             "CREATE SUBSCRIPTION %s CONNECTION %s PUBLICATION %s WITH (create_slot = false,"
             " slot_name = '%s', copy_data = true, synchronous_commit = 'off')",
             name, pg__str(res, 0, 0), name, name);
    rc = q(&c, sql, NULL, NULL, deadline, err);
  }
  PQclear(res);
  close_conn(&c, deadline);
  return rc;
}

err_code store_pg_move_progress(store_pg_move_session *ms, bool *synced, int64_t *lag,
                                uint64_t *rows, int64_t deadline, err_t *err) {
  *synced = false;
  *lag = -1;
  *rows = 0;
  const char *name = ms->name;
  uint32_t from = ms->from, to = ms->to;
  conn s, c;
  memset(&s, 0, sizeof s);
  memset(&c, 0, sizeof c);
  err_code rc = need_id(ms, err);
  if (rc == ERR_OK) rc = open_conn(&s, ms, MOVE_SIDE_SOURCE, deadline, err);
  int64_t have = 0, v = 0;
  if (rc == ERR_OK)
    rc = q1(&s, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", name, &have,
            deadline, err);
  if (rc == ERR_OK && !have)
    rc = err_set(err, ERR_PRECONDITION,
                 "the source's replication slot %s is gone (a failover of its PostgreSQL: "
                 "logical slots do not survive one in PostgreSQL 15)",
                 name);
  if (rc == ERR_OK)
    rc = q1(&s,
            "SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), -1)::bigint"
            " FROM pg_replication_slots WHERE slot_name = $1",
            name, lag, deadline, err);
  close_conn(&s, deadline);
  if (rc == ERR_OK) rc = open_conn(&c, ms, MOVE_SIDE_TARGET, deadline, err);
  if (rc == ERR_OK)
    rc = q1(&c,
            "SELECT (count(*) * 100 + count(*) FILTER (WHERE sr.srsubstate <> 'r'))::bigint"
            " FROM pg_subscription_rel sr JOIN pg_subscription s ON s.oid = sr.srsubid"
            " WHERE s.subname = $1",
            name, &v, deadline, err);
  if (rc == ERR_OK) *synced = v / 100 == MOVE_TABLES_N + 1 && v % 100 == 0;
  /* a replication that keeps failing (its worker restarts every few seconds and fails again)
   * would hold the move in copying: it is rolled back, pointing at the log */
  if (rc == ERR_OK)
    rc = q1(&c,
            "SELECT coalesce((SELECT apply_error_count + sync_error_count FROM"
            " pg_stat_subscription_stats WHERE subname = $1), 0)::bigint",
            name, &v, deadline, err);
  if (rc == ERR_OK && v >= MOVE_APPLY_ERRORS_MAX)
    rc = err_set(err, ERR_PRECONDITION,
                 "the target's logical replication failed %lld times (the target PostgreSQL's "
                 "log says why)",
                 (long long)v);
  if (rc == ERR_OK) {
    pg_params p;
    pg__p_reset(&p);
    pg__p_i64(&p, from);
    pg__p_i64(&p, to);
    rc = q(&c,
           "SELECT ((SELECT count(*) FROM idem_steps WHERE slot BETWEEN $1 AND $2) +"
           " (SELECT count(*) FROM idem_sagas WHERE slot BETWEEN $1 AND $2))::bigint",
           &p, &v, deadline, err);
    if (rc == ERR_OK) *rows = (uint64_t)v;
  }
  close_conn(&c, deadline);
  return rc;
}

err_code store_pg_move_block(store_pg_move_session *ms, uint64_t epoch, int64_t deadline,
                             err_t *err) {
  const char *id = ms->id;
  conn c = {0};
  err_code rc = need_id(ms, err);
  if (rc == ERR_OK) rc = open_conn(&c, ms, MOVE_SIDE_SOURCE, deadline, err);
  int64_t fence = 0;
  if (rc == ERR_OK) rc = q(&c, "BEGIN", NULL, NULL, deadline, err);
  /* shared, like every fenced write: a new leader's raise (exclusive) waits for this, and one
   * raised before is seen below */
  if (rc == ERR_OK)
    rc = q(&c, "SELECT 0::bigint FROM pg_advisory_xact_lock_shared(1768187245, 4)", NULL, NULL,
           deadline, err);
  if (rc == ERR_OK) rc = add_block(&c, id, ms->from, ms->to, "moving out", deadline, err);
  if (rc == ERR_OK)
    rc = q(&c, "SELECT epoch FROM idem_fence WHERE id = 1", NULL, &fence, deadline, err);
  if (rc == ERR_OK && (uint64_t)fence > epoch) {
    err_fail(err, ERR_UNAVAILABLE, ERR_R_FENCED, "not the leader (fenced): epoch %llu < %lld",
             (unsigned long long)epoch, (long long)fence);
    rc = ERR_UNAVAILABLE;
  }
  if (rc == ERR_OK)
    rc = q1(&c,
            "INSERT INTO idem_move_marks (move_id, at_ms) VALUES ($1, " PG_NOW_MS
            ") ON CONFLICT (move_id) DO UPDATE SET at_ms = excluded.at_ms",
            id, NULL, deadline, err);
  if (rc == ERR_OK) rc = q(&c, "COMMIT", NULL, NULL, deadline, err);
  close_conn(&c, deadline);
  return rc;
}

/* Whether a notification of the mark of ms's move is among those libpq holds (the others are
 * dropped: another move's). */
static bool mark_notified(store_pg_move_session *ms, PGconn *pc) {
  bool mine = false;
  PGnotify *n;
  while ((n = PQnotifies(pc))) {
    if (strcmp(n->relname, "idem_move_marks") == 0 && strcmp(n->extra, ms->id) == 0) mine = true;
    PQfreemem(n);
  }
  return mine;
}

err_code store_pg_move_wait_marked(store_pg_move_session *ms, int64_t until, bool *arrived,
                                   err_t *err) {
  const char *id = ms->id;
  conn c = {0};
  *arrived = false;
  int64_t deadline = until > clock_mono_ms() + 1000 ? until : clock_mono_ms() + 1000;
  err_code rc = need_id(ms, err);
  if (rc == ERR_OK) rc = open_conn(&c, ms, MOVE_SIDE_TARGET, deadline, err);
  /* LISTEN first (again each time: a no-op on a connection that listens, and a connection made
   * again after a lost one does not), then look: a mark that arrived before the LISTEN is in
   * the table, one after it is announced (schema version 12) */
  if (rc == ERR_OK) rc = q(&c, "LISTEN idem_move_marks", NULL, NULL, deadline, err);
  int64_t n = 0;
  if (rc == ERR_OK)
    rc = q1(&c, "SELECT count(*) FROM idem_move_marks WHERE move_id = $1", id, &n, deadline, err);
  if (rc == ERR_OK) *arrived = n > 0 || mark_notified(ms, c.s->conn);
  while (rc == ERR_OK && !*arrived && clock_mono_ms() < until) {
    PGconn *pc = c.s->conn;
    int w = pg__wait_fd(PQsocket(pc), false, until);
    if (w < 0 || (w > 0 && !PQconsumeInput(pc))) {
      rc = pg__lost(c.s, err);
      break;
    }
    *arrived = mark_notified(ms, pc);
  }
  close_conn(&c, deadline);
  return rc;
}

err_code store_pg_move_count(store_pg_move_session *ms, store_pg_move_side side, uint64_t *steps,
                             uint64_t *sagas, int64_t deadline, err_t *err) {
  conn c = {0};
  int64_t a = 0, b = 0;
  pg_params p;
  pg__p_reset(&p);
  pg__p_i64(&p, ms->from);
  pg__p_i64(&p, ms->to);
  err_code rc = open_conn(&c, ms, side, deadline, err);
  if (rc == ERR_OK)
    rc = q(&c, "SELECT count(*) FROM idem_steps WHERE slot BETWEEN $1 AND $2", &p, &a, deadline,
           err);
  if (rc == ERR_OK)
    rc = q(&c, "SELECT count(*) FROM idem_sagas WHERE slot BETWEEN $1 AND $2", &p, &b, deadline,
           err);
  *steps = (uint64_t)a;
  *sagas = (uint64_t)b;
  close_conn(&c, deadline);
  return rc;
}

/* Drops replication slot name on the source (its walsender ended first); ERR_OK when gone. */
static err_code drop_slot(store_pg_move_session *ms, const char *name, int64_t deadline,
                          err_t *err) {
  conn s = {0};
  err_code rc = open_conn(&s, ms, MOVE_SIDE_SOURCE, deadline, err);
  for (int attempt = 0; rc == ERR_OK; attempt++) {
    int64_t have = 0;
    rc = q1(&s, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", name, &have,
            deadline, err);
    if (rc != ERR_OK || !have) break;
    q1(&s,
       "SELECT count(pg_terminate_backend(active_pid)) FROM pg_replication_slots"
       " WHERE slot_name = $1 AND active",
       name, NULL, deadline, err);
    rc = q1(&s, "SELECT 0::bigint FROM pg_drop_replication_slot($1)", name, NULL, deadline, err);
    if (rc == ERR_OK) break;
    if (attempt >= 50) break; /* still active: err says so */
    err_clear(err);
    rc = ERR_OK;
    pg__backoff(attempt, deadline);
  }
  close_conn(&s, deadline);
  return rc;
}

err_code store_pg_move_unsubscribe(store_pg_move_session *ms, int64_t deadline, err_t *err) {
  const char *name = ms->name;
  char sql[256];
  conn c = {0};
  memset(&c, 0, sizeof c);
  int64_t have = 0;
  err_code rc = need_id(ms, err);
  if (rc == ERR_OK) rc = open_conn(&c, ms, MOVE_SIDE_TARGET, deadline, err);
  if (rc == ERR_OK)
    rc = q1(&c, "SELECT count(*) FROM pg_subscription WHERE subname = $1", name, &have, deadline,
            err);
  const char *steps[] = {"ALTER SUBSCRIPTION %s DISABLE", "ALTER SUBSCRIPTION %s SET (slot_name = NONE)",
                         "DROP SUBSCRIPTION %s"};
  for (size_t i = 0; rc == ERR_OK && have && i < sizeof steps / sizeof steps[0]; i++) {
    snprintf(sql, sizeof sql, steps[i], name);
    rc = q(&c, sql, NULL, NULL, deadline, err);
  }
  close_conn(&c, deadline);
  if (rc == ERR_OK) rc = drop_slot(ms, name, deadline, err);
  return rc;
}

err_code store_pg_move_unblock(store_pg_move_session *ms, store_pg_move_side side, bool all,
                               int64_t deadline, err_t *err) {
  conn c = {0};
  memset(&c, 0, sizeof c);
  pg_params p;
  pg__p_reset(&p);
  pg__p_i64(&p, ms->from);
  pg__p_i64(&p, ms->to);
  pg__p_text(&p, all ? NULL : ms->id); /* NULL: every block */
  err_code rc = all ? ERR_OK : need_id(ms, err);
  if (rc == ERR_OK) rc = open_conn(&c, ms, side, deadline, err);
  if (rc == ERR_OK) rc = q(&c, "BEGIN", NULL, NULL, deadline, err);
  /* its commit flushes the WAL of every transaction the move's apply committed before it
   * (store_pg_move_subscribe) */
  if (rc == ERR_OK) rc = q(&c, "SET LOCAL synchronous_commit = on", NULL, NULL, deadline, err);
  if (rc == ERR_OK)
    rc = q(&c,
           "WITH gone AS (DELETE FROM idem_slot_blocks WHERE from_slot <= $2 AND to_slot >= $1"
           " AND ($3::text IS NULL OR move_id = $3) RETURNING *) INSERT INTO idem_slot_blocks"
           " SELECT from_slot, $1 - 1, move_id, why FROM gone WHERE from_slot < $1"
           " UNION ALL SELECT $2 + 1, to_slot, move_id, why FROM gone WHERE to_slot > $2",
           &p, NULL, deadline, err);
  if (rc == ERR_OK) rc = q(&c, "SELECT idem_slot_blocks_sync()", NULL, NULL, deadline, err);
  if (rc == ERR_OK) rc = q(&c, "COMMIT", NULL, NULL, deadline, err);
  close_conn(&c, deadline);
  return rc;
}

err_code store_pg_move_delete(store_pg_move_session *ms, store_pg_move_side side, bool rows,
                              int64_t *deleted, int64_t deadline, err_t *err) {
  *deleted = 0;
  conn c = {0};
  memset(&c, 0, sizeof c);
  err_code rc = need_id(ms, err);
  if (rc == ERR_OK) rc = open_conn(&c, ms, side, deadline, err);
  /* the triggers let these deletes through blocked slots; the setting is the session's (batches
   * of their own transactions), reset below, and a connection that cannot reset it is dropped */
  if (rc == ERR_OK && rows) rc = q(&c, "SET idem.slot_cleanup = 'on'", NULL, NULL, deadline, err);
  static const char *const tables[] = {"idem_saga_labels", "idem_steps", "idem_sagas",
                                       "idem_audit"};
  char sql[512];
  for (size_t i = 0; rc == ERR_OK && rows && i < sizeof tables / sizeof tables[0]; i++) {
    snprintf(sql, sizeof sql,
             "DELETE FROM %s WHERE ctid = ANY(ARRAY(SELECT ctid FROM %s WHERE slot BETWEEN $1 AND"
             " $2 LIMIT %d))",
             tables[i], tables[i], DELETE_BATCH);
    for (;;) {
      pg_params p;
      pg__p_reset(&p);
      pg__p_i64(&p, ms->from);
      pg__p_i64(&p, ms->to);
      PGresult *res = NULL;
      rc = pg__exec(c.s, sql, &p, deadline, &res, err);
      long n = rc == ERR_OK ? atol(PQcmdTuples(res)) : 0;
      PQclear(res);
      *deleted += n;
      if (rc != ERR_OK || n == 0) break;
    }
  }
  if (rc == ERR_OK)
    rc = q1(&c, "DELETE FROM idem_move_marks WHERE move_id = $1", ms->id, NULL, deadline, err);
  if (c.ok && rows) {
    close_conn(&c, deadline); /* out of an aborted transaction, if any */
    err_t e;
    err_clear(&e);
    if (!c.s->conn || pg__exec(c.s, "RESET idem.slot_cleanup", NULL, deadline, NULL, &e) != ERR_OK)
      pg__drop(c.s);
  }
  close_conn(&c, deadline);
  return rc;
}

err_code store_pg_move_unpublish(store_pg_move_session *ms, int64_t deadline, err_t *err) {
  const char *id = ms->id, *name = ms->name;
  char sql[256];
  err_code rc = need_id(ms, err);
  if (rc == ERR_OK) rc = drop_slot(ms, name, deadline, err);
  conn c = {0};
  memset(&c, 0, sizeof c);
  if (rc == ERR_OK) rc = open_conn(&c, ms, MOVE_SIDE_SOURCE, deadline, err);
  if (rc == ERR_OK) {
    snprintf(sql, sizeof sql, "DROP PUBLICATION IF EXISTS %s", name);
    rc = q(&c, sql, NULL, NULL, deadline, err);
  }
  for (int i = 0; rc == ERR_OK && i < MOVE_TABLES_N; i++) {
    snprintf(sql, sizeof sql, "ALTER TABLE %s REPLICA IDENTITY DEFAULT", move_tables[i]);
    rc = q(&c, sql, NULL, NULL, deadline, err);
  }
  if (rc == ERR_OK)
    rc = q1(&c, "DELETE FROM idem_move_marks WHERE move_id = $1", id, NULL, deadline, err);
  close_conn(&c, deadline);
  return rc;
}

err_code store_pg_move_pause(store_pg_move_session *ms, bool pause, int64_t deadline, err_t *err) {
  char sql[128];
  err_code rc = need_id(ms, err);
  if (rc != ERR_OK) return rc;
  snprintf(sql, sizeof sql, "ALTER SUBSCRIPTION %s %s", ms->name, pause ? "DISABLE" : "ENABLE");
  conn c = {0};
  memset(&c, 0, sizeof c);
  rc = open_conn(&c, ms, MOVE_SIDE_TARGET, deadline, err);
  if (rc == ERR_OK) rc = q(&c, sql, NULL, NULL, deadline, err);
  close_conn(&c, deadline);
  return rc;
}
