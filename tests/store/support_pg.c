/* support_pg.c — helpers shared by the store tests (support_pg.h). */
#include "support_pg.h"

#include <criterion/criterion.h>

#include "store/store_pg.h"
#include "store/store_pg_internal.h"
#include "util/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void sp_setup(const char *prefix, char *tenant, size_t cap) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(tenant, cap, "%s-%d-%ld", prefix, (int)getpid(), (long)ts.tv_nsec);
  err_t e;
  cr_assert_eq(store_pg_migrate(pgx_url(), clock_mono_ms() + 10000, &e), ERR_OK, "migrate: %s",
               e.msg);
}

step_key sp_key(const char *tenant, const char *gid, const char *service, const char *operation) {
  step_key k;
  memset(&k, 0, sizeof k);
  snprintf(k.tenant, sizeof k.tenant, "%s", tenant);
  snprintf(k.global_id, sizeof k.global_id, "%s", gid);
  snprintf(k.service, sizeof k.service, "%s", service);
  snprintf(k.operation, sizeof k.operation, "%s", operation);
  k.phase = PHASE_FORWARD;
  return k;
}

int64_t sp_in_ms(int64_t ms) {
  return clock_mono_ms() + ms;
}

PGconn *hold_pair_lock(const char *url, const step_key *key) {
  PGconn *holder = pgx_connect(url);
  pgx_exec(holder, "BEGIN", 0, NULL);
  const char *kp[] = {key->tenant, key->global_id, key->service, key->operation};
  pgx_exec(holder, pg__sql_pair_lock, 4, kp);
  return holder;
}

void release_pair_lock(PGconn *holder) {
  PQclear(PQexec(holder, "ROLLBACK"));
}
