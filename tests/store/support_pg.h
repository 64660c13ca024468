/* support_pg.h — helpers shared by the store tests (support_pg.c). SQL on the test database
 * goes through pgexec.h (tests/support), which this includes. */
#ifndef IDEM_TESTS_STORE_SUPPORT_PG_H
#define IDEM_TESTS_STORE_SUPPORT_PG_H

#include <libpq-fe.h>

#include <stddef.h>
#include <stdint.h>

#include "pgexec.h"
#include "store/store.h"

/* A suite's set-up: a fresh tenant name "PREFIX-pid-ns" into tenant, and the schema migrated. */
void sp_setup(const char *prefix, char *tenant, size_t cap);

/* The key (tenant, gid, service, operation, FORWARD), every field zero-padded. */
step_key sp_key(const char *tenant, const char *gid, const char *service, const char *operation);

/* A deadline ms from now (monotonic). */
int64_t sp_in_ms(int64_t ms);

/* Another session on url that holds key's pair lock, taken with the store's own statement
 * (pg__sql_pair_lock) in a transaction it leaves open: release_pair_lock (or PQfinish) frees
 * it. */
PGconn *hold_pair_lock(const char *url, const step_key *key);
void release_pair_lock(PGconn *holder);

#endif
