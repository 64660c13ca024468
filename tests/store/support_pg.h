/* support_pg.h — helpers shared by the store tests (support_pg.c). */
#ifndef IDEM_TESTS_STORE_SUPPORT_PG_H
#define IDEM_TESTS_STORE_SUPPORT_PG_H

#include <libpq-fe.h>

#include "store/store.h"

/* Another session on url that holds key's pair lock, taken with the store's own statement
 * (pg__sql_pair_lock) in a transaction it leaves open: release_pair_lock (or PQfinish) frees
 * it. */
PGconn *hold_pair_lock(const char *url, const step_key *key);
void release_pair_lock(PGconn *holder);

#endif
