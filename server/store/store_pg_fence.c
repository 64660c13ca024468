/* store_pg_fence.c — fencing (docs/api.md §7): the epoch is the election revision; every
 * write runs under one and the database refuses it when idem_fence holds a newer one.
 *
 * How: each connection of a fenced store carries the session setting idem.epoch (set at
 * connect through the startup options, and again with set_config when the store's epoch source
 * changes: pg__fence_sync in store_pg_conn.c). Migration 4 puts a statement-level trigger on every
 * table the coordinator writes (idem_steps, idem_sagas, idem_saga_labels, idem_policies,
 * idem_audit): before any INSERT, UPDATE or DELETE it takes the fence lock shared, reads idem_fence
 * and raises SQLSTATE IF001 when the fence is above idem.epoch. So fencing is a property of the
 * write path, whatever the statement: the step transactions, sagas, policies, the audit trail and
 * the reaper are all covered, and so is any later write to those tables. The check holds the
 * fence's advisory lock shared to the commit, and the raise takes it exclusive, so a new leader's
 * raise waits for every transaction that passed the check under the old epoch: each old-epoch
 * commit comes before the raise, and the raise before the new leader's first commit. A connection
 * without idem.epoch (tools, tests) is not fenced.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/clock.h"
#include "../util/log.h"
#include "store_pg_internal.h"

/* Ends every transaction of another coordinator process on this database: before a new
 * leader serves, any such transaction belongs to a former leader (standbys do not write) —
 * possibly a paused one holding the fence's share lock or a pair lock forever. Its work was
 * not committed and now never will be. Run only after a first raise has had its chance (see
 * store_pg_fence_raise): ending a transaction whose COMMIT is under way leaves its outcome
 * unknown to its leader, which must then answer its caller "outcome unknown". */
static const char SQL_TERMINATE[] =
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
    " WHERE application_name = $1 AND pid <> pg_backend_pid()"
    " AND datname = current_database() AND xact_start IS NOT NULL"
    " AND backend_type = 'client backend'";

/* (1768187245, 4): the fence's advisory lock (the migration lock is (…, 1)); the trigger
 * takes it shared. */
static const char SQL_FENCE_LOCK[] = "SELECT pg_advisory_xact_lock(1768187245, 4)";
static const char SQL_RAISE[] =
    "UPDATE idem_fence SET epoch = $1 WHERE id = 1 AND epoch <= $1 RETURNING epoch";
static const char SQL_READ[] = "SELECT epoch FROM idem_fence WHERE id = 1";

#define RAISE_LOCK_TIMEOUT "SET lock_timeout = '300ms'"

void store_pg_set_epoch_source(store *st, const _Atomic uint64_t *epoch) {
  pg_store *s = (pg_store *)st;
  s->epoch_src = epoch;
  pg__drop(s); /* the next call connects with the setting */
}

void store_pg_set_metrics_group(store *st, int group) {
  ((pg_store *)st)->mgroup = group;
}

err_code store_pg_fence_read(const char *conninfo, int64_t deadline, uint64_t *epoch, err_t *err) {
  pg_store s;
  *epoch = 0;
  if (!pg__init(&s, conninfo)) return err_oom(err);
  PGresult *res = NULL;
  err_code rc = pg__call_start(&s, deadline, err);
  if (rc == ERR_OK) rc = pg__exec(&s, SQL_READ, NULL, deadline, &res, err);
  if (rc == ERR_OK) {
    if (PQntuples(res) > 0) *epoch = (uint64_t)pg__int(res, 0, 0);
    PQclear(res);
    err_clear(err);
  }
  pg__fini(&s);
  return rc;
}

/* SQL_TERMINATE, logged when it ended any. */
static err_code end_former(pg_store *s, const pg_params *p, int64_t deadline, err_t *err) {
  PGresult *res = NULL;
  err_code rc = pg__exec(s, SQL_TERMINATE, p, deadline, &res, err);
  if (rc != ERR_OK) return rc;
  int64_t ended = pg__int(res, 0, 0);
  PQclear(res);
  if (ended > 0) {
    char n[24];
    snprintf(n, sizeof n, "%" PRId64, ended);
    log_kv(LOG_INFO, "fence: ended transactions of a former leader", "count", n,
           (const char *)NULL);
  }
  return ERR_OK;
}

err_code store_pg_fence_raise(const char *conninfo, uint64_t epoch, int64_t deadline,
                              bool *superseded, err_t *err) {
  *superseded = false;
  if (epoch > INT64_MAX) return err_set(err, ERR_INVALID, "epoch out of range");
  pg_store s;
  if (!pg__init(&s, conninfo)) return err_oom(err);
  char num[24];
  snprintf(num, sizeof num, "%" PRIu64, epoch);
  err_code rc = pg__call_start(&s, deadline, err);
  if (rc == ERR_OK) rc = pg__exec(&s, RAISE_LOCK_TIMEOUT, NULL, deadline, NULL, err);
  for (int round = 0; rc == ERR_OK; round++) {
    pg_params p;
    pg__p_reset(&p);
    pg__p_text(&p, PG_APP_NAME);
    PGresult *res = NULL;
    /* the first round ends nothing: a former leader that stepped down on purpose (SIGTERM's
     * resign, the balancer's yield) is finishing the step transactions it had begun, and the
     * exclusive lock below waits for them (lock_timeout 300 ms) to commit and be answered.
     * Ending them here cut commits in mid-flight: committed, and their callers told "outcome
     * unknown" (docs/internals.md, "The drain"). A later round (a paused former leader held the
     * lock) ends them first; after the raise, what is left is ended too (below). */
    if (round > 0 && (rc = end_former(&s, &p, deadline, err)) != ERR_OK) break;
    pg__p_reset(&p);
    pg__p_text(&p, num);
    rc = pg__exec(&s, "BEGIN ISOLATION LEVEL READ COMMITTED", NULL, deadline, NULL, err);
    if (rc == ERR_OK) rc = pg__exec(&s, SQL_FENCE_LOCK, NULL, deadline, NULL, err);
    if (rc == ERR_OK) rc = pg__exec(&s, SQL_RAISE, &p, deadline, &res, err);
    bool raised = rc == ERR_OK && PQntuples(res) == 1;
    if (rc == ERR_OK) PQclear(res);
    if (rc == ERR_OK) rc = pg__exec(&s, "COMMIT", NULL, deadline, NULL, err);
    if (rc != ERR_OK) {
      /* lock_timeout: a former leader holds the shared lock (paused, or took it after we ended
       * the others): the next round ends its transactions first */
      bool again = strcmp(s.sqlstate, "55P03") == 0 && clock_mono_ms() < deadline && round < 20;
      pg__rollback(&s, deadline);
      if (again) {
        rc = ERR_OK;
        continue;
      }
      break;
    }
    /* what a former leader still has open passed no check under its epoch (the raise waited for
     * those that did), so it can write nothing now: ended, so that no row lock it holds (a
     * paused process) blocks this leader */
    if (raised) {
      pg__p_reset(&p);
      pg__p_text(&p, PG_APP_NAME);
      rc = end_former(&s, &p, deadline, err);
    }
    if (!raised) { /* the fence is above our epoch: a newer leader exists */
      uint64_t cur = 0;
      rc = pg__exec(&s, SQL_READ, NULL, deadline, &res, err);
      if (rc == ERR_OK) {
        cur = PQntuples(res) ? (uint64_t)pg__int(res, 0, 0) : 0;
        PQclear(res);
      }
      *superseded = true;
      if (rc == ERR_OK)
        rc = err_fail(err, ERR_UNAVAILABLE, ERR_R_FENCED,
                      "not the leader (fenced): fence at %" PRIu64 ", this epoch %" PRIu64, cur,
                      epoch);
    }
    break;
  }
  if (rc == ERR_OK) err_clear(err);
  pg__fini(&s);
  return rc;
}
