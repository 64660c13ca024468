/* pgexec.c — see pgexec.h. */
#include "pgexec.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

const char *pgx_url(void) {
  const char *u = getenv("IDEM_TEST_PG_URL");
  if (!u || !*u) cr_assert_fail("IDEM_TEST_PG_URL is not set: point it at a PostgreSQL database");
  return u;
}

void pgx_url_for_db(const char *db, char *out, size_t cap) {
  const char *base = pgx_url();
  const char *q = strchr(base, '?');
  size_t blen = q ? (size_t)(q - base) : strlen(base);
  const char *slash = NULL;
  const char *host = strstr(base, "://");
  for (const char *p = host ? host + 3 : base; p < base + blen; p++)
    if (*p == '/') slash = p;
  cr_assert(slash, "cannot find the database name in IDEM_TEST_PG_URL (%s)", base);
  int n = snprintf(out, cap, "%.*s/%s%s", (int)(slash - base), base, db, q ? q : "");
  cr_assert(n >= 0 && (size_t)n < cap, "the URL of database %s does not fit %zu bytes", db, cap);
}

static void quiet(void *arg, const char *msg) {
  (void)arg;
  (void)msg;
}

PGconn *pgx_connect(const char *url) {
  PGconn *c = PQconnectdb(url ? url : pgx_url());
  cr_assert(PQstatus(c) == CONNECTION_OK, "postgres connect: %s", PQerrorMessage(c));
  PQsetNoticeProcessor(c, quiet, NULL);
  return c;
}

PGresult *pgx_run(PGconn *c, const char *sql, int n, const char *const *params) {
  /* without params, the simple protocol: sql may hold several statements */
  PGresult *r = n > 0 ? PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0) : PQexec(c, sql);
  ExecStatusType st = PQresultStatus(r);
  cr_assert(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "sql %s: %s", sql, PQerrorMessage(c));
  return r;
}

long long pgx_exec(PGconn *c, const char *sql, int n, const char *const *params) {
  PGresult *r = pgx_run(c, sql, n, params);
  long long v = -1;
  if (PQresultStatus(r) == PGRES_COMMAND_OK)
    v = atoll(PQcmdTuples(r));
  else if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
    v = atoll(PQgetvalue(r, 0, 0));
  PQclear(r);
  return v;
}

long long pgx_sql(const char *url, const char *sql, int n, const char *const *params) {
  PGconn *c = pgx_connect(url);
  long long v = pgx_exec(c, sql, n, params);
  PQfinish(c);
  return v;
}

void pgx_db_create(const char *prefix, char *db, size_t db_cap, char *url, size_t url_cap) {
  char tag[64];
  h_unique("d", tag, sizeof tag);
  snprintf(db, db_cap, "%s_%.40s", prefix, tag + 2);
  for (char *p = db; *p; p++)
    if (*p == '-') *p = '_';
  char sql[160];
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", db);
  pgx_sql(NULL, sql, 0, NULL);
  pgx_url_for_db(db, url, url_cap);
}

void pgx_db_drop(const char *db) {
  if (!db[0]) return;
  char sql[160];
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", db);
  pgx_sql(NULL, sql, 0, NULL);
}
