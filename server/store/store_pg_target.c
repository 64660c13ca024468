/* store_pg_target.c — what a person needs when the store cannot be reached at start:
 * where the coordinator was trying to connect (host, port, database, user; never a password),
 * and a host name that does not exist. Whether trying again can help is the error's permanent
 * flag (err.h), set by store_pg_conn.c from the SQLSTATE of the server's refusal. */
#include <libpq-fe.h>
#include <netdb.h>
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

/* The first host of a comma-separated list that does not resolve (the resolver says the name
 * does not exist: EAI_NONAME, not a temporary failure), copied into bad; false when none. A
 * socket directory (/...) and a numeric address are not looked up. */
static bool unresolvable(const char *hosts, char *bad, size_t cap) {
  for (const char *p = hosts; p && *p;) {
    size_t n = strcspn(p, ",");
    char h[256];
    snprintf(h, sizeof h, "%.*s", (int)(n < sizeof h ? n : sizeof h - 1), p);
    p += n + (p[n] == ',');
    if (!h[0] || h[0] == '/' || h[0] == '@') continue;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int gai = getaddrinfo(h, NULL, &hints, &ai);
    if (ai) freeaddrinfo(ai);
    if (gai == EAI_NONAME) {
      snprintf(bad, cap, "%s", h);
      return true;
    }
  }
  return false;
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
           host   ? host
           : addr ? addr
                  : "(the local socket)",
           port ? port : "5432",
           db     ? db
           : user ? user
                  : "(the user's name)",
           user ? user : "(this OS user)");
  char bad[256];
  bool no_host = !addr && host && unresolvable(host, bad, sizeof bad);
  PQconninfoFree(defs);
  PQconninfoFree(opts);
  if (no_host)
    return err_set(err, ERR_INVALID, "--pg: host %s does not resolve (the name does not exist)",
                   bad);
  err_clear(err);
  return ERR_OK;
}
