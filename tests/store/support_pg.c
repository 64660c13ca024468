/* support_pg.c — helpers shared by the store tests (support_pg.h). */
#include "support_pg.h"

#include <criterion/criterion.h>

#include "store/store_pg_internal.h"

PGconn *hold_pair_lock(const char *url, const step_key *key) {
  PGconn *holder = PQconnectdb(url);
  cr_assert_eq(PQstatus(holder), CONNECTION_OK, "connect: %s", PQerrorMessage(holder));
  PGresult *r = PQexec(holder, "BEGIN");
  cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "begin: %s", PQerrorMessage(holder));
  PQclear(r);
  const char *kp[] = {key->tenant, key->global_id, key->service, key->operation};
  r = PQexecParams(holder, pg__sql_pair_lock, 4, NULL, kp, NULL, NULL, 0);
  cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "lock: %s", PQerrorMessage(holder));
  PQclear(r);
  return holder;
}

void release_pair_lock(PGconn *holder) { PQclear(PQexec(holder, "ROLLBACK")); }
