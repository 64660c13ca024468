/* store_pg_pipe.c — several statements in one round trip (libpq pipeline mode), under the
 * same deadline, cancellation and error mapping as pg__exec (store_pg_conn.c). Used by the
 * group commit (store_pg_batch.c). */
#include <string.h>

#include "../util/clock.h"
#include "store_pg_internal.h"

static void clear_all(pg_stmt *st, int n) {
  for (int i = 0; i < n; i++) {
    PQclear(st[i].res);
    st[i].res = NULL;
  }
}

/* Sends every statement and the sync, and flushes. */
static err_code send_all(pg_store *s, pg_stmt *st, int n, int64_t deadline, err_t *err) {
  PGconn *c = s->conn;
  if (PQenterPipelineMode(c) != 1) return pg__lost(s, err);
  for (int i = 0; i < n; i++) {
    const pg_params *p = st[i].p;
    int np = p ? p->n : 0;
    const char *const *vals = p ? p->values : NULL;
    const int *lens = p ? p->lengths : NULL, *fmts = p ? p->formats : NULL;
    int ok;
    if (st[i].name && st[i].prepare)
      ok = PQsendPrepare(c, st[i].name, st[i].sql, 0, NULL);
    else if (st[i].name)
      ok = PQsendQueryPrepared(c, st[i].name, np, vals, lens, fmts, 1);
    else
      ok = PQsendQueryParams(c, st[i].sql, np, NULL, vals, lens, fmts, 1);
    if (!ok || (st[i].flush && PQsendFlushRequest(c) != 1)) return pg__lost(s, err);
  }
  if (PQpipelineSync(c) != 1) return pg__lost(s, err);
  return pg__flush(s, deadline, err);
}

err_code pg__pipeline(pg_store *s, pg_stmt *st, int n, int64_t deadline, err_t *err) {
  for (int i = 0; i < n; i++) st[i].res = NULL;
  err_code rc = pg__round_trip_start(s, deadline, err);
  if (rc == ERR_OK) rc = send_all(s, st, n, deadline, err);
  if (rc != ERR_OK) return rc;

  PGresult *bad = NULL; /* the first error result */
  for (int i = 0; i < n; i++) {
    for (;;) { /* a statement's results, then NULL */
      if ((rc = pg__await(s, deadline, err)) != ERR_OK) goto fail;
      PGresult *r = PQgetResult(s->conn);
      if (!r) break;
      ExecStatusType es = PQresultStatus(r);
      if ((es == PGRES_TUPLES_OK || es == PGRES_COMMAND_OK) && !st[i].res) {
        st[i].res = r;
        st[i].at_us = clock_mono_us();
      } else if (es == PGRES_FATAL_ERROR && !bad) {
        bad = r;
      } else {
        PQclear(r); /* PGRES_PIPELINE_ABORTED after an error, or a second result */
      }
    }
  }
  for (;;) { /* the sync */
    if ((rc = pg__await(s, deadline, err)) != ERR_OK) goto fail;
    PGresult *r = PQgetResult(s->conn);
    if (!r) continue;
    bool sync = PQresultStatus(r) == PGRES_PIPELINE_SYNC;
    PQclear(r);
    if (sync) break;
  }
  if (PQexitPipelineMode(s->conn) != 1) {
    rc = pg__lost(s, err);
    goto fail;
  }
  if (bad) {
    rc = pg__sql_error(s, bad, err);
    goto fail;
  }
  for (int i = 0; i < n; i++) {
    if (!st[i].res) {
      rc = pg__lost(s, err);
      goto fail;
    }
  }
  return ERR_OK;
fail:
  PQclear(bad);
  clear_all(st, n);
  return rc;
}
