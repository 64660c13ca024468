/* barrier.c — idem_pg: business writes and the step's dedup row in one local transaction.
 * See <idem/idem_pg.h> for the contract. All SQL uses parameters. */
#include <idem/idem_pg.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(idem_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(idem_error *err, int code, const char *fmt, ...) {
  if (err) {
    memset(err, 0, sizeof *err);
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* The first line of libpq's message, without the trailing newline. */
static const char *pg_msg(PGconn *conn, char *buf, size_t cap) {
  snprintf(buf, cap, "%s", PQerrorMessage(conn));
  buf[strcspn(buf, "\n")] = '\0';
  return buf;
}

static int db_fail(PGconn *conn, idem_error *err, const char *what) {
  char m[200];
  return fail(err, IDEM_UNAVAILABLE, "barrier %s: %s", what, pg_msg(conn, m, sizeof m));
}

static const char *const create_sql =
    "CREATE TABLE IF NOT EXISTS idem_barrier ("
    " global_id text NOT NULL, service text NOT NULL, operation text NOT NULL,"
    " phase smallint NOT NULL, fence bigint NOT NULL CHECK (fence >= 1),"
    " outcome smallint, code integer NOT NULL DEFAULT 0, body bytea,"
    " applied_at timestamptz NOT NULL DEFAULT now(),"
    " PRIMARY KEY (global_id, service, operation, phase))";

int idem_pg_barrier_init(PGconn *conn, idem_error *err) {
  if (err) memset(err, 0, sizeof *err);
  if (!conn) return fail(err, IDEM_INVALID_ARGUMENT, "conn is null");
  /* CREATE TABLE IF NOT EXISTS can still race on the catalog; serialize with an advisory lock
   * held for the transaction only. */
  PGresult *r = PQexec(conn, "BEGIN");
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  if (!ok) return db_fail(conn, err, "init");
  r = PQexec(conn, "SELECT pg_advisory_xact_lock(7342190001)");
  ok = PQresultStatus(r) == PGRES_TUPLES_OK;
  PQclear(r);
  if (ok) {
    r = PQexec(conn, create_sql);
    ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
  }
  int rc = ok ? IDEM_OK : db_fail(conn, err, "init");
  r = PQexec(conn, ok ? "COMMIT" : "ROLLBACK");
  if (ok && PQresultStatus(r) != PGRES_COMMAND_OK) rc = db_fail(conn, err, "init");
  PQclear(r);
  return rc;
}

void idem_pg_report_clear(idem_pg_report *r) {
  if (!r) return;
  free(r->result.body);
  memset(r, 0, sizeof *r);
}

static bool key_ok(const idem_step_key *key) {
  return key && key->global_id && *key->global_id && key->service && *key->service &&
         key->operation && *key->operation &&
         (key->phase == IDEM_FORWARD || key->phase == IDEM_COMPENSATION);
}

static void rollback(PGconn *conn) {
  PQclear(PQexec(conn, "ROLLBACK"));
}

/* Reads the stored row (result columns: fence, outcome, code, body) into rep. */
static int read_row(PGresult *r, idem_pg_report *rep, idem_error *err) {
  rep->applied_earlier = true;
  rep->fence = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
  rep->result.outcome = PQgetisnull(r, 0, 1) ? IDEM_OUTCOME_UNKNOWN
                                             : (idem_outcome)atoi(PQgetvalue(r, 0, 1));
  rep->result.code = (int32_t)atoi(PQgetvalue(r, 0, 2));
  if (!PQgetisnull(r, 0, 3) && PQgetlength(r, 0, 3) > 0) {
    size_t n = (size_t)PQgetlength(r, 0, 3);
    if (!(rep->result.body = malloc(n))) return fail(err, IDEM_NOMEM, "out of memory");
    memcpy(rep->result.body, PQgetvalue(r, 0, 3), n);
    rep->result.body_len = n;
  }
  return IDEM_OK;
}

/* Binary result format so that body (bytea) arrives raw; integers as text via ::text casts. */
static const char *const select_bin_sql =
    "SELECT fence::text, outcome::text, code::text, body FROM idem_barrier"
    " WHERE global_id = $1 AND service = $2 AND operation = $3 AND phase = $4";

static PGresult *select_row(PGconn *conn, const char *const params[4]) {
  /* resultFormat 1 = binary for every column: text columns come back as their raw bytes. */
  return PQexecParams(conn, select_bin_sql, 4, NULL, params, NULL, NULL, 1);
}

int idem_pg_barrier_lookup(PGconn *conn, const idem_step_key *key, idem_pg_report *rep,
                           idem_error *err) {
  if (err) memset(err, 0, sizeof *err);
  if (rep) memset(rep, 0, sizeof *rep);
  if (!conn || !rep || !key_ok(key)) return fail(err, IDEM_INVALID_ARGUMENT, "invalid argument");
  char phase[4];
  snprintf(phase, sizeof phase, "%d", (int)key->phase);
  const char *const p[4] = {key->global_id, key->service, key->operation, phase};
  PGresult *r = select_row(conn, p);
  int rc;
  if (PQresultStatus(r) != PGRES_TUPLES_OK)
    rc = db_fail(conn, err, "lookup");
  else if (PQntuples(r) == 0)
    rc = fail(err, IDEM_NOT_FOUND, "no barrier row for this step");
  else
    rc = read_row(r, rep, err);
  PQclear(r);
  if (rc != IDEM_OK) idem_pg_report_clear(rep);
  return rc;
}

/* The claim: a row no attempt has finished, from an older attempt only (fence < attempt). */
static const char *const claim_sql =
    "INSERT INTO idem_barrier (global_id, service, operation, phase, fence)"
    " VALUES ($1, $2, $3, $4, $5)"
    " ON CONFLICT (global_id, service, operation, phase) DO UPDATE SET fence = EXCLUDED.fence"
    " WHERE idem_barrier.fence < EXCLUDED.fence AND idem_barrier.outcome IS NULL"
    " RETURNING fence";

static const char *const finish_sql =
    "UPDATE idem_barrier SET outcome = $6, code = $7, body = $8, applied_at = now()"
    " WHERE global_id = $1 AND service = $2 AND operation = $3 AND phase = $4 AND fence = $5";

static int run(PGconn *conn, const idem_step_key *key, uint64_t attempt, idem_pg_effect_fn fn,
               void *arg, idem_pg_report *rep, idem_error *err) {
  memset(rep, 0, sizeof *rep);
  if (err) memset(err, 0, sizeof *err);
  if (!conn || !fn || !key_ok(key) || attempt == 0)
    return fail(err, IDEM_INVALID_ARGUMENT, "invalid argument");

  char phase[4], fence[24];
  snprintf(phase, sizeof phase, "%d", (int)key->phase);
  snprintf(fence, sizeof fence, "%" PRIu64, attempt);
  const char *const p[5] = {key->global_id, key->service, key->operation, phase, fence};

  PGresult *r = PQexec(conn, "BEGIN");
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  if (!ok) return db_fail(conn, err, "begin");

  r = PQexecParams(conn, claim_sql, 5, NULL, p, NULL, NULL, 0);
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    PQclear(r);
    int rc = db_fail(conn, err, "claim");
    rollback(conn);
    return rc;
  }
  bool claimed = PQntuples(r) == 1;
  PQclear(r);
  if (!claimed) { /* applied by an earlier (or concurrent, now committed) attempt */
    r = select_row(conn, p);
    int rc;
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
      rc = db_fail(conn, err, "read");
    else
      rc = read_row(r, rep, err);
    PQclear(r);
    rollback(conn);
    if (rc != IDEM_OK) idem_pg_report_clear(rep);
    return rc;
  }

  idem_step_output out = {.outcome = IDEM_OUTCOME_UNKNOWN};
  fn(conn, arg, attempt, &out);
  if (out.outcome != IDEM_OUTCOME_SUCCEEDED && out.outcome != IDEM_OUTCOME_FAILED) {
    rollback(conn);
    rep->rolled_back = true;
    rep->result.outcome = IDEM_OUTCOME_RETRYABLE;
    rep->result.code = out.code;
    return IDEM_OK;
  }

  char outcome[4], code[16];
  snprintf(outcome, sizeof outcome, "%d", (int)out.outcome);
  snprintf(code, sizeof code, "%" PRId32, out.code);
  const char *fp[8] = {p[0], p[1], p[2], p[3], p[4], outcome, code, (const char *)out.body};
  int lens[8] = {0, 0, 0, 0, 0, 0, 0, (int)out.body_len};
  int fmts[8] = {0, 0, 0, 0, 0, 0, 0, 1};
  if (!out.body || out.body_len == 0) fp[7] = NULL;
  r = PQexecParams(conn, finish_sql, 8, NULL, fp, lens, fmts, 0);
  ok = PQresultStatus(r) == PGRES_COMMAND_OK && strcmp(PQcmdTuples(r), "1") == 0;
  PQclear(r);
  if (!ok) {
    int rc = db_fail(conn, err, "record");
    rollback(conn);
    return rc;
  }
  if (out.body && out.body_len) {
    if (!(rep->result.body = malloc(out.body_len))) {
      rollback(conn);
      return fail(err, IDEM_NOMEM, "out of memory");
    }
    memcpy(rep->result.body, out.body, out.body_len);
    rep->result.body_len = out.body_len;
  }
  rep->result.outcome = out.outcome;
  rep->result.code = out.code;

  r = PQexec(conn, "COMMIT");
  ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  if (!ok) {
    int rc = db_fail(conn, err, "commit");
    if (err) err->outcome_unknown = true;
    idem_pg_report_clear(rep);
    return rc;
  }
  rep->applied = true;
  rep->fence = attempt;
  return IDEM_OK;
}

int idem_pg_barrier_run(PGconn *conn, const idem_step_key *key, uint64_t attempt,
                        idem_pg_effect_fn fn, void *arg, idem_pg_report *rep, idem_error *err) {
  idem_pg_report scratch;
  int rc = run(conn, key, attempt, fn, arg, rep ? rep : &scratch, err);
  if (!rep) idem_pg_report_clear(&scratch);
  return rc;
}
