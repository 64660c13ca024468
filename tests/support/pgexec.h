/* pgexec.h — SQL on the test Postgres ($IDEM_TEST_PG_URL) for set-up and checks, the one way
 * every test directory runs it: connect, run a statement with text parameters, read the first
 * value or the rows affected, and make or drop a database of its own. Any failure fails the
 * test, naming the statement and libpq's error. Not for a statement that is meant to fail (call
 * libpq on pgx_connect's connection for that).
 */
#ifndef IDEM_TEST_PGEXEC_H
#define IDEM_TEST_PGEXEC_H

#include <libpq-fe.h>
#include <stddef.h>

/* $IDEM_TEST_PG_URL (fails the test when unset). */
const char *pgx_url(void);

/* $IDEM_TEST_PG_URL with its database name replaced by db (its query string kept), into out. */
void pgx_url_for_db(const char *db, char *out, size_t cap);

/* A connection to url (NULL: $IDEM_TEST_PG_URL) with notices silenced. PQfinish it. */
PGconn *pgx_connect(const char *url);

/* Runs sql with n text params on c (n 0: sql may be several statements; the last one's result
 * is returned); it must succeed (rows or a command). PQclear the result. */
PGresult *pgx_run(PGconn *c, const char *sql, int n, const char *const *params);

/* pgx_run, then: a query's first column of its first row as an integer (-1: no row, or NULL);
 * a command's count of rows affected (0 when it counts none). */
long long pgx_exec(PGconn *c, const char *sql, int n, const char *const *params);

/* pgx_exec on a connection of its own to url (NULL: $IDEM_TEST_PG_URL). */
long long pgx_sql(const char *url, const char *sql, int n, const char *const *params);

/* Creates a fresh database "<prefix>_<unique>" on $IDEM_TEST_PG_URL's server: its name into db
 * (db_cap >= 64) and its URL into url. For what touches the whole database (a coordinator's
 * fence, which ends other sessions' transactions), so that no other test shares it. */
void pgx_db_create(const char *prefix, char *db, size_t db_cap, char *url, size_t url_cap);

/* Drops a database pgx_db_create made, ending its sessions. "" does nothing. */
void pgx_db_drop(const char *db);

#endif
