/* store_pg_target.c — what a person needs when the store cannot be reached at start:
 * where the coordinator was trying to connect (host, port, database, user; never a password)
 * and whether trying again can help. */
#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>

#include "store_pg.h"

/* The value of keyword in opts (parsed conninfo), else in defs (libpq's defaults: environment
 * variables, then built-ins), else NULL. */
static const char *value_of(const PQconninfoOption *opts, const PQconninfoOption *defs,
                            const char *keyword) {
  for (const PQconninfoOption *o = opts; o && o->keyword; o++)
    if (strcmp(o->keyword, keyword) == 0 && o->val && *o->val) return o->val;
  for (const PQconninfoOption *o = defs; o && o->keyword; o++)
    if (strcmp(o->keyword, keyword) == 0 && o->val && *o->val) return o->val;
  return NULL;
}

err_code store_pg_target(const char *conninfo, char *buf, size_t cap, err_t *err) {
  char *perr = NULL;
  PQconninfoOption *opts = PQconninfoParse(conninfo ? conninfo : "", &perr);
  if (!opts) {
    char why[200];
    snprintf(why, sizeof why, "%s", perr ? perr : "out of memory");
    why[strcspn(why, "\n")] = '\0';
    PQfreemem(perr);
    return err_set(err, ERR_INVALID,
                   "--pg: not a libpq connection string (%s); expected e.g. "
                   "postgresql://USER@HOST:5432/DATABASE",
                   why);
  }
  PQconninfoOption *defs = PQconndefaults();
  const char *host = value_of(opts, defs, "host");
  const char *addr = value_of(opts, defs, "hostaddr");
  const char *port = value_of(opts, defs, "port");
  const char *user = value_of(opts, defs, "user");
  const char *db = value_of(opts, defs, "dbname");
  snprintf(buf, cap, "host %s port %s database %s user %s",
           host ? host : addr ? addr : "(the local socket)", port ? port : "5432",
           db ? db : user ? user : "(the user's name)", user ? user : "(this OS user)");
  PQconninfoFree(defs);
  PQconninfoFree(opts);
  err_clear(err);
  return ERR_OK;
}

/* libpq's and the server's texts for errors no retry can fix: authentication, a database or
 * role that does not exist, a refused pg_hba.conf entry, a bad option. (The texts are the
 * server's English ones: a server with lc_messages in another language is retried.) */
static const char *const permanent[] = {
    "password authentication failed",
    "authentication failed",
    "no pg_hba.conf entry",
    "does not exist", /* database "x" / role "x" does not exist */
    "invalid connection option",
    "invalid sslmode value",
    "invalid port number",
    "invalid integer value",
    "could not translate host name", /* a host name that does not resolve */
    "fe_sendauth: no password supplied",
};

bool store_pg_error_permanent(const err_t *err) {
  for (size_t i = 0; i < sizeof permanent / sizeof permanent[0]; i++)
    if (strstr(err->msg, permanent[i])) return true;
  return false;
}
