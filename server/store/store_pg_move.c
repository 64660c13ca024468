/* store_pg_move.c — see store_pg_move.h. */
#include "store_pg_move.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/clock.h"
#include "store_pg_internal.h"

#define MOVE_APPLY_ERRORS_MAX 3 /* the subscription's workers' errors before a move gives up */
#define MOVE_TABLES_N 4
static const char *const move_tables[MOVE_TABLES_N] = {"idem_sagas", "idem_saga_labels",
                                                       "idem_steps", "idem_audit"};
#define DELETE_BATCH 5000
#define MARK_POLL_MS 5 /* the handoff asks this often whether the mark has arrived */

/* Connections. A handoff makes several calls on each side within a second, and a new
 * connection costs the server a process: the calls take an idle connection to the same store
 * from a small cache (kept until store_pg_move_disconnect), or open their own when all are busy.
 * store_pg_move_delete's session setting never goes back to the cache (its own connection). */
#define CACHE_MAX 4
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  pg_store s;
  bool open, busy;
} cache[CACHE_MAX];

typedef struct conn {
  pg_store *s; /* &own or a cache entry's */
  pg_store own;
  int cached; /* the cache entry, -1 for own */
  bool ok;
} conn;

/* A cache entry for conninfo, marked busy; -1 when none is free. */
static int cache_take(const char *conninfo) {
  int got = -1, free_at = -1;
  pthread_mutex_lock(&cache_mu);
  for (int i = 0; i < CACHE_MAX && got < 0; i++) {
    if (cache[i].open && !cache[i].busy && strcmp(cache[i].s.conninfo, conninfo) == 0) got = i;
    if (!cache[i].open && free_at < 0) free_at = i;
  }
  if (got < 0 && free_at >= 0 && pg__init(&cache[free_at].s, conninfo)) {
    cache[free_at].open = true;
    got = free_at;
  }
  if (got >= 0) cache[got].busy = true;
  pthread_mutex_unlock(&cache_mu);
  return got;
}

static err_code open_conn_as(conn *c, const char *conninfo, bool reuse, int64_t deadline,
                             err_t *err) {
  c->cached = reuse ? cache_take(conninfo) : -1;
  c->s = c->cached >= 0 ? &cache[c->cached].s : &c->own;
  c->ok = c->cached >= 0 || pg__init(&c->own, conninfo);
  if (!c->ok) return err_oom(err);
  return pg__call_start(c->s, deadline, err);
}

static err_code open_conn(conn *c, const char *conninfo, int64_t deadline, err_t *err) {
  return open_conn_as(c, conninfo, true, deadline, err);
}

static void close_conn(conn *c, int64_t deadline) {
  if (!c->ok) return;
  pg__rollback(c->s, deadline);
  c->ok = false;
  if (c->cached < 0) {
    pg__fini(&c->own);
    return;
  }
  pthread_mutex_lock(&cache_mu);
  cache[c->cached].busy = false;
  pthread_mutex_unlock(&cache_mu);
}

void store_pg_move_disconnect(void) {
  pthread_mutex_lock(&cache_mu);
  for (int i = 0; i < CACHE_MAX; i++)
    if (cache[i].open && !cache[i].busy) {
      pg__fini(&cache[i].s);
      cache[i].open = false;
    }
  pthread_mutex_unlock(&cache_mu);
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

err_code store_pg_move_check(const char *conninfo, bool source, const char *what, int64_t deadline,
                             err_t *err) {
  conn c;
  err_code rc = open_conn(&c, conninfo, deadline, err);
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

err_code store_pg_move_identity(const char *conninfo, char *out, size_t cap, int64_t deadline,
                                err_t *err) {
  conn c;
  err_code rc = open_conn(&c, conninfo, deadline, err);
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

err_code store_pg_move_publish(const char *src, const char *id, uint32_t from, uint32_t to,
                               int64_t deadline, err_t *err) {
  conn c;
  err_code rc = open_conn(&c, src, deadline, err);
  char sql[1024];
  for (int i = 0; rc == ERR_OK && i < MOVE_TABLES_N; i++) {
    snprintf(sql, sizeof sql, "ALTER TABLE %s REPLICA IDENTITY FULL", move_tables[i]);
    rc = q(&c, sql, NULL, NULL, deadline, err);
  }
  int64_t have = 0;
  char name[64];
  snprintf(name, sizeof name, "idem_move_%s", id);
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

err_code store_pg_move_subscribe(const char *dst, const char *src, const char *id, uint32_t from,
                                 uint32_t to, int64_t deadline, err_t *err) {
  conn c;
  err_code rc = open_conn(&c, dst, deadline, err);
  int64_t have = 0;
  char name[64], sql[2048];
  snprintf(name, sizeof name, "idem_move_%s", id);
  if (rc == ERR_OK) rc = q(&c, "BEGIN", NULL, NULL, deadline, err);
  if (rc == ERR_OK) rc = add_block(&c, id, from, to, "moving in", deadline, err);
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

err_code store_pg_move_progress(const char *src, const char *dst, const char *id, uint32_t from,
                                uint32_t to, bool *synced, int64_t *lag, uint64_t *rows,
                                int64_t deadline, err_t *err) {
  *synced = false;
  *lag = -1;
  *rows = 0;
  char name[64];
  snprintf(name, sizeof name, "idem_move_%s", id);
  conn s, c;
  memset(&c, 0, sizeof c);
  err_code rc = open_conn(&s, src, deadline, err);
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
  if (rc == ERR_OK) rc = open_conn(&c, dst, deadline, err);
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

err_code store_pg_move_block(const char *src, const char *id, uint32_t from, uint32_t to,
                             uint64_t epoch, int64_t deadline, err_t *err) {
  conn c;
  err_code rc = open_conn(&c, src, deadline, err);
  int64_t fence = 0;
  if (rc == ERR_OK) rc = q(&c, "BEGIN", NULL, NULL, deadline, err);
  /* shared, like every fenced write: a new leader's raise (exclusive) waits for this, and one
   * raised before is seen below */
  if (rc == ERR_OK)
    rc = q(&c, "SELECT 0::bigint FROM pg_advisory_xact_lock_shared(1768187245, 4)", NULL, NULL,
           deadline, err);
  if (rc == ERR_OK) rc = add_block(&c, id, from, to, "moving out", deadline, err);
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

err_code store_pg_move_wait_marked(const char *dst, const char *id, int64_t until, bool *arrived,
                                   err_t *err) {
  conn c;
  *arrived = false;
  int64_t deadline = until > clock_mono_ms() + 1000 ? until : clock_mono_ms() + 1000;
  err_code rc = open_conn(&c, dst, deadline, err);
  while (rc == ERR_OK) {
    int64_t n = 0;
    rc = q1(&c, "SELECT count(*) FROM idem_move_marks WHERE move_id = $1", id, &n, deadline, err);
    if (rc == ERR_OK && n > 0) *arrived = true;
    if (*arrived || clock_mono_ms() >= until) break;
    nanosleep(&(struct timespec){0, MARK_POLL_MS * 1000000L}, NULL);
  }
  close_conn(&c, deadline);
  return rc;
}

err_code store_pg_move_count(const char *dst, uint32_t from, uint32_t to, uint64_t *steps,
                             uint64_t *sagas, int64_t deadline, err_t *err) {
  conn c;
  int64_t a = 0, b = 0;
  pg_params p;
  pg__p_reset(&p);
  pg__p_i64(&p, from);
  pg__p_i64(&p, to);
  err_code rc = open_conn(&c, dst, deadline, err);
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
static err_code drop_slot(const char *src, const char *name, int64_t deadline, err_t *err) {
  conn s;
  err_code rc = open_conn(&s, src, deadline, err);
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

err_code store_pg_move_unsubscribe(const char *dst, const char *src, const char *id,
                                   int64_t deadline, err_t *err) {
  char name[64], sql[256];
  snprintf(name, sizeof name, "idem_move_%s", id);
  conn c;
  int64_t have = 0;
  err_code rc = open_conn(&c, dst, deadline, err);
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
  if (rc == ERR_OK) rc = drop_slot(src, name, deadline, err);
  return rc;
}

err_code store_pg_move_unblock(const char *conninfo, uint32_t from, uint32_t to, int64_t deadline,
                               err_t *err) {
  conn c;
  pg_params p;
  pg__p_reset(&p);
  pg__p_i64(&p, from);
  pg__p_i64(&p, to);
  err_code rc = open_conn(&c, conninfo, deadline, err);
  if (rc == ERR_OK) rc = q(&c, "BEGIN", NULL, NULL, deadline, err);
  /* its commit flushes the WAL of every transaction the move's apply committed before it
   * (store_pg_move_subscribe) */
  if (rc == ERR_OK) rc = q(&c, "SET LOCAL synchronous_commit = on", NULL, NULL, deadline, err);
  if (rc == ERR_OK)
    rc = q(&c,
           "WITH gone AS (DELETE FROM idem_slot_blocks WHERE from_slot <= $2 AND to_slot >= $1"
           " RETURNING *) INSERT INTO idem_slot_blocks"
           " SELECT from_slot, $1 - 1, move_id, why FROM gone WHERE from_slot < $1"
           " UNION ALL SELECT $2 + 1, to_slot, move_id, why FROM gone WHERE to_slot > $2",
           &p, NULL, deadline, err);
  if (rc == ERR_OK) rc = q(&c, "SELECT idem_slot_blocks_sync()", NULL, NULL, deadline, err);
  if (rc == ERR_OK) rc = q(&c, "COMMIT", NULL, NULL, deadline, err);
  close_conn(&c, deadline);
  return rc;
}

err_code store_pg_move_delete(const char *conninfo, const char *id, uint32_t from, uint32_t to,
                              int64_t *deleted, int64_t deadline, err_t *err) {
  *deleted = 0;
  conn c;
  err_code rc = open_conn_as(&c, conninfo, false, deadline, err); /* SET below */
  if (rc == ERR_OK) rc = q(&c, "SET idem.slot_cleanup = 'on'", NULL, NULL, deadline, err);
  static const char *const tables[] = {"idem_saga_labels", "idem_steps", "idem_sagas",
                                       "idem_audit"};
  char sql[512];
  for (size_t i = 0; rc == ERR_OK && i < sizeof tables / sizeof tables[0]; i++) {
    snprintf(sql, sizeof sql,
             "DELETE FROM %s WHERE ctid = ANY(ARRAY(SELECT ctid FROM %s WHERE slot BETWEEN $1 AND"
             " $2 LIMIT %d))",
             tables[i], tables[i], DELETE_BATCH);
    for (;;) {
      pg_params p;
      pg__p_reset(&p);
      pg__p_i64(&p, from);
      pg__p_i64(&p, to);
      PGresult *res = NULL;
      rc = pg__exec(c.s, sql, &p, deadline, &res, err);
      long n = rc == ERR_OK ? atol(PQcmdTuples(res)) : 0;
      PQclear(res);
      *deleted += n;
      if (rc != ERR_OK || n == 0) break;
    }
  }
  if (rc == ERR_OK)
    rc = q1(&c, "DELETE FROM idem_move_marks WHERE move_id = $1", id, NULL, deadline, err);
  close_conn(&c, deadline);
  return rc;
}

err_code store_pg_move_unpublish(const char *src, const char *id, int64_t deadline, err_t *err) {
  char name[64], sql[256];
  snprintf(name, sizeof name, "idem_move_%s", id);
  err_code rc = drop_slot(src, name, deadline, err);
  conn c;
  memset(&c, 0, sizeof c);
  if (rc == ERR_OK) rc = open_conn(&c, src, deadline, err);
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

err_code store_pg_move_pause(const char *dst, const char *id, bool pause, int64_t deadline,
                             err_t *err) {
  conn c;
  char sql[128];
  snprintf(sql, sizeof sql, "ALTER SUBSCRIPTION idem_move_%s %s", id, pause ? "DISABLE" : "ENABLE");
  err_code rc = open_conn(&c, dst, deadline, err);
  if (rc == ERR_OK) rc = q(&c, sql, NULL, NULL, deadline, err);
  close_conn(&c, deadline);
  return rc;
}
