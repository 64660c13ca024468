/* store_pg_slots.c — slot groups in the PostgreSQL store (docs/api.md §17): the slot every row
 * keyed by saga is written with, the cluster's slot count kept in the store (idem_cluster), and
 * the background fill of rows written before version 8 of the schema (store_pg_migrate.c creates
 * the column, the table and idem_slot, the rule in SQL). */
#include <stdatomic.h>
#include <stdlib.h>

#include "../domain/slot.h"
#include "store_pg.h"
#include "store_pg_internal.h"

static _Atomic uint32_t g_slots = SLOTS_DEFAULT;

void store_pg_set_slots(uint32_t slots) {
  atomic_store(&g_slots, slots ? slots : SLOTS_DEFAULT);
}

int64_t pg__slot(const char *tenant, const char *global_id) {
  return slot_of(tenant, global_id, atomic_load(&g_slots));
}

static const char SQL_CLUSTER_READ[] = "SELECT slots FROM idem_cluster WHERE id = 1";
static const char SQL_CLUSTER_ADD[] =
    "INSERT INTO idem_cluster (id, slots, created_ms) VALUES (1, $1, " PG_NOW_MS ")";
/* A batch of rows without a slot, per table (rows being written are skipped: their writer
 * gives them one). */
#define FILL_SQL(t)                                                      \
  "UPDATE " t                                                            \
  " SET slot = idem_slot(tenant, global_id, $1) WHERE ctid = ANY(ARRAY(" \
  "SELECT ctid FROM " t " WHERE slot IS NULL LIMIT $2 FOR UPDATE SKIP LOCKED))"
static const char *const SQL_FILL[] = {
    FILL_SQL("idem_steps"),
    FILL_SQL("idem_sagas"),
    FILL_SQL("idem_saga_labels"),
    FILL_SQL("idem_audit"),
};

static err_code slots_check(pg_store *s, uint32_t slots, int64_t deadline, uint32_t *had,
                            err_t *err) {
  err_code rc = pg__call_start(s, deadline, err);
  if (rc == ERR_OK)
    rc = pg__exec(s, "BEGIN ISOLATION LEVEL READ COMMITTED", NULL, deadline, NULL, err);
  if (rc == ERR_OK) rc = pg__exec(s, PG_SQL_MIGRATE_LOCK, NULL, deadline, NULL, err);
  PGresult *res = NULL;
  if (rc == ERR_OK) rc = pg__exec(s, SQL_CLUSTER_READ, NULL, deadline, &res, err);
  if (rc != ERR_OK) return rc;
  *had = PQntuples(res) ? (uint32_t)pg__int(res, 0, 0) : 0;
  PQclear(res);
  if (*had && *had != slots) {
    pg__exec(s, "ROLLBACK", NULL, deadline, NULL, err);
    return err_set(err, ERR_INVALID, "the store was created with %u slots, not %u", *had, slots);
  }
  pg_params p;
  pg__p_reset(&p);
  pg__p_i64(&p, slots);
  if (!*had) rc = pg__exec(s, SQL_CLUSTER_ADD, &p, deadline, NULL, err);
  if (rc == ERR_OK) rc = pg__exec(s, "COMMIT", NULL, deadline, NULL, err);
  return rc;
}

static err_code slots_fill(pg_store *s, uint32_t slots, int limit, int64_t deadline, long *filled,
                           err_t *err) {
  err_code rc = pg__call_start(s, deadline, err);
  pg_params p;
  pg__p_reset(&p);
  pg__p_i64(&p, slots);
  pg__p_i64(&p, limit);
  for (size_t i = 0; rc == ERR_OK && i < sizeof SQL_FILL / sizeof SQL_FILL[0]; i++) {
    PGresult *res = NULL;
    rc = pg__exec(s, SQL_FILL[i], &p, deadline, &res, err);
    if (rc == ERR_OK) *filled += atol(PQcmdTuples(res));
    PQclear(res);
  }
  return rc;
}

err_code store_pg_slots_fill(const char *conninfo, uint32_t slots, int limit, int64_t deadline,
                             long *filled, err_t *err) {
  *filled = 0;
  pg_store s;
  if (!pg__init(&s, conninfo)) return err_oom(err);
  err_code rc = slots_fill(&s, slots, limit, deadline, filled, err);
  if (rc == ERR_OK) err_clear(err);
  pg__fini(&s);
  return rc;
}

err_code store_pg_slots_check(const char *conninfo, uint32_t slots, int64_t deadline, err_t *err) {
  pg_store s;
  if (!pg__init(&s, conninfo)) return err_oom(err);
  uint32_t had = 0;
  err_code rc = slots_check(&s, slots, deadline, &had, err);
  if (rc != ERR_OK)
    pg__rollback(&s, deadline);
  else
    err_clear(err);
  pg__fini(&s);
  return rc;
}
