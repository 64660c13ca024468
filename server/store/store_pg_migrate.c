/* store_pg_migrate.c — the versioned schema. Each migration is a list of statements applied
 * in its own transaction under a transaction-level advisory lock on a fixed key, and recorded
 * in idem_schema_version; a version already recorded is skipped. So running twice, or from
 * several processes at once, is harmless. Add migrations at the end; never edit one that
 * shipped.
 *
 * The compatibility promise (docs/upgrading.md): a migration either expands (adds what older
 * code ignores: a table, a nullable or defaulted column, an index; older nodes run on it) or
 * contracts (drops or tightens what older code used), and a contraction ships no earlier than
 * one release after the expansion it undoes. Each row of idem_schema_version records `needs`:
 * the oldest schema version whose code can run on a database carrying that migration (0 for an
 * expansion: any). A node whose newest known version is below a recorded `needs` refuses to
 * start (store_pg_schema_check); one that is merely older than the schema runs on it. */
#include <string.h>

#include "../util/log.h"
#include "store_pg_internal.h"

/* pg_advisory_xact_lock(int, int): its own key space, apart from the pair locks (bigint). */
static const char SQL_MIGRATE_LOCK[] = PG_SQL_MIGRATE_LOCK;

static const char SQL_VERSION_TABLE[] =
    "CREATE TABLE IF NOT EXISTS idem_schema_version ("
    " version int PRIMARY KEY,"
    " applied_ms bigint NOT NULL)";

/* `needs` (added in 0.2.0; rows written before it read 0: every migration up to 10 expands).
 * A release older than 0.2.0 inserts rows without it: they read 0 too. */
static const char SQL_VERSION_NEEDS[] =
    "ALTER TABLE idem_schema_version ADD COLUMN IF NOT EXISTS needs int NOT NULL DEFAULT 0";

static const char SQL_VERSION_READ[] =
    "SELECT coalesce(max(version), 0), coalesce(max(needs), 0) FROM idem_schema_version";

static const char SQL_VERSION_HAS[] = "SELECT 1 FROM idem_schema_version WHERE version = $1";

static const char SQL_VERSION_ADD[] =
    "INSERT INTO idem_schema_version (version, applied_ms, needs) VALUES ($1, " PG_NOW_MS ", $2)";

typedef struct migration {
  int version;
  const char *const *sql; /* NULL-terminated; one statement each (extended protocol) */
} migration;

/* The contractions: for each, the oldest schema version whose code runs on it (the newest
 * version of the release that stopped using what it drops). A migration not listed here is an
 * expansion (needs 0: every older node runs on it). None yet; ends with {0, 0}. */
static const struct {
  int version, needs;
} contractions[] = {{0, 0}};

static int needs_of(int version) {
  for (size_t i = 0; contractions[i].version; i++)
    if (contractions[i].version == version) return contractions[i].needs;
  return 0;
}

static const char *const m1_sql[] = {
    "CREATE TABLE idem_steps ("
    " tenant text NOT NULL,"
    " global_id text NOT NULL,"
    " service text NOT NULL,"
    " operation text NOT NULL,"
    " phase smallint NOT NULL,"
    " state smallint NOT NULL,"
    " attempt bigint NOT NULL,"
    " fingerprint bytea NOT NULL DEFAULT '',"
    " outcome smallint NOT NULL DEFAULT 0,"
    " code int NOT NULL DEFAULT 0,"
    " body bytea NOT NULL DEFAULT '',"
    " completed_ms bigint NOT NULL DEFAULT 0,"
    " created_ms bigint NOT NULL,"
    " updated_ms bigint NOT NULL,"
    " lease_expires_ms bigint NOT NULL DEFAULT 0,"
    " expires_ms bigint NOT NULL DEFAULT 0,"
    " PRIMARY KEY (tenant, global_id, service, operation, phase))",
    "CREATE INDEX idem_steps_state_idx ON idem_steps (tenant, state, updated_ms)",
    "CREATE INDEX idem_steps_expires_idx ON idem_steps (expires_ms) WHERE expires_ms > 0",
    "CREATE TABLE idem_sagas ("
    " tenant text NOT NULL,"
    " global_id text NOT NULL,"
    " request_id text,"
    " saga_type text NOT NULL DEFAULT '',"
    " created_ms bigint NOT NULL,"
    " expires_ms bigint NOT NULL,"
    " PRIMARY KEY (tenant, global_id))",
    "CREATE UNIQUE INDEX idem_sagas_request_idx ON idem_sagas (tenant, request_id)"
    " WHERE request_id IS NOT NULL",
    "CREATE INDEX idem_sagas_expires_idx ON idem_sagas (expires_ms)",
    "CREATE TABLE idem_saga_labels ("
    " tenant text NOT NULL,"
    " global_id text NOT NULL,"
    " key text NOT NULL,"
    " value text NOT NULL,"
    " PRIMARY KEY (tenant, global_id, key),"
    " FOREIGN KEY (tenant, global_id) REFERENCES idem_sagas (tenant, global_id)"
    " ON DELETE CASCADE)",
    "CREATE TABLE idem_fence ("
    " id int PRIMARY KEY CHECK (id = 1),"
    " epoch bigint NOT NULL)",
    "INSERT INTO idem_fence (id, epoch) VALUES (1, 0) ON CONFLICT DO NOTHING",
    NULL,
};

/* Version 2 (policies and reaping): per-tenant policies (tenant "*" = the
 * server-wide rows seeded from the config file) and the reaper's index: finished steps by
 * retention expiry, never IN_PROGRESS (1) or UNKNOWN (4). */
static const char *const m2_sql[] = {
    "CREATE TABLE IF NOT EXISTS idem_policies ("
    " tenant text NOT NULL,"
    " service text NOT NULL,"
    " operation text NOT NULL,"
    " failure_mode smallint NOT NULL,"
    " retention_s bigint NOT NULL,"
    " lease_ms bigint NOT NULL,"
    " updated_ms bigint NOT NULL,"
    " PRIMARY KEY (tenant, service, operation))",
    "CREATE INDEX IF NOT EXISTS idem_steps_reap_idx ON idem_steps (expires_ms)"
    " WHERE expires_ms > 0 AND state NOT IN " PG_UNREAPABLE_STATES,
    NULL,
};

/* Version 3 (incident response): the audit trail and the indexes behind ListSteps
 * (keyset pagination in key order per state) and the /metrics step gauges. */
static const char *const m3_sql[] = {
    "CREATE TABLE IF NOT EXISTS idem_audit ("
    " id bigserial PRIMARY KEY,"
    " tenant text NOT NULL,"
    " at_ms bigint NOT NULL,"
    " actor text NOT NULL,"
    " action text NOT NULL,"
    " global_id text NOT NULL DEFAULT '',"
    " service text NOT NULL DEFAULT '',"
    " operation text NOT NULL DEFAULT '',"
    " phase smallint NOT NULL DEFAULT 0,"
    " reason text NOT NULL DEFAULT '',"
    " from_state smallint NOT NULL DEFAULT 0,"
    " to_state smallint NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS idem_audit_tenant_idx ON idem_audit (tenant, id)",
    "CREATE INDEX IF NOT EXISTS idem_audit_saga_idx ON idem_audit (tenant, global_id, id)",
    "CREATE INDEX IF NOT EXISTS idem_steps_list_state_idx ON idem_steps"
    " (tenant, state, global_id, service, operation, phase)",
    "CREATE INDEX IF NOT EXISTS idem_steps_open_idx ON idem_steps (state) WHERE state "
    "IN " PG_OPEN_STATES,
    NULL,
};

/* Version 4 (high availability): fencing. A statement-level trigger on every table
 * the coordinator writes refuses INSERT/UPDATE/DELETE when the session's idem.epoch is older
 * than idem_fence's epoch (SQLSTATE IF001, see store_pg_fence.c). It first takes the fence's
 * advisory lock SHARED (held to the end of the transaction; cheap, unlike FOR SHARE on one hot
 * row), and a new leader raises the fence under the same lock EXCLUSIVE, so the raise waits for
 * the old epoch's open transactions and every later check sees the new epoch. Sessions without
 * idem.epoch (tools, tests) are not fenced. A table added later needs its own trigger. */
static const char *const m4_sql[] = {
    "CREATE OR REPLACE FUNCTION idem_fence_check() RETURNS trigger LANGUAGE plpgsql AS $f$"
    " DECLARE mine text := current_setting('idem.epoch', true); cur bigint;"
    " BEGIN"
    "  IF mine IS NULL OR mine = '' THEN RETURN NULL; END IF;"
    "  PERFORM pg_advisory_xact_lock_shared(1768187245, 4);"
    "  SELECT epoch INTO cur FROM idem_fence WHERE id = 1;"
    "  IF cur IS NOT NULL AND cur > mine::bigint THEN"
    "   RAISE EXCEPTION 'not the leader (fenced): epoch % is older than %', mine, cur"
    "    USING ERRCODE = 'IF001';"
    "  END IF;"
    "  RETURN NULL;"
    " END $f$",
    "DO $d$ DECLARE t text; BEGIN"
    " FOREACH t IN ARRAY ARRAY['idem_steps', 'idem_sagas', 'idem_saga_labels',"
    "  'idem_policies', 'idem_audit'] LOOP"
    "  IF to_regclass(t) IS NOT NULL THEN"
    "   EXECUTE format('DROP TRIGGER IF EXISTS %I ON %I', t || '_fence', t);"
    "   EXECUTE format('CREATE TRIGGER %I BEFORE INSERT OR UPDATE OR DELETE ON %I"
    " FOR EACH STATEMENT EXECUTE FUNCTION idem_fence_check()', t || '_fence', t);"
    "  END IF;"
    " END LOOP; END $d$",
    NULL,
};

/* Version 5 (throughput): two indexes of version 1 that nothing reads any more, and
 * that every step write paid for (each Begin inserts a row, each Complete writes a new row
 * version in every index: the state changes). ListSteps uses idem_steps_list_state_idx (and
 * filters updated_ms there), the reaper idem_steps_reap_idx; no statement looks steps up by
 * expiry alone. Measured on pairs at 64 in flight: 1,430 bytes of WAL per pair with them, 1,210
 * without. */
static const char *const m5_sql[] = {
    "DROP INDEX IF EXISTS idem_steps_state_idx",
    "DROP INDEX IF EXISTS idem_steps_expires_idx",
    NULL,
};

/* Version 6 (bulk resolution, docs/api.md §12): the batch a resolution belonged to, and the answers
 * of ResolveSteps by request id (kept a day; the reaper drops older ones), fenced like the rest. */
static const char *const m6_sql[] = {
    "ALTER TABLE idem_audit ADD COLUMN IF NOT EXISTS batch_id text",
    "CREATE TABLE IF NOT EXISTS idem_bulk ("
    " tenant text NOT NULL,"
    " request_id text NOT NULL,"
    " batch_id text NOT NULL,"
    " matched int NOT NULL,"
    " resolved int NOT NULL,"
    " sample text NOT NULL," /* "gid/service/operation/phase" separated by spaces */
    " created_ms bigint NOT NULL,"
    " expires_ms bigint NOT NULL,"
    " PRIMARY KEY (tenant, request_id))",
    "DROP TRIGGER IF EXISTS idem_bulk_fence ON idem_bulk",
    "CREATE TRIGGER idem_bulk_fence BEFORE INSERT OR UPDATE OR DELETE ON idem_bulk"
    " FOR EACH STATEMENT EXECUTE FUNCTION idem_fence_check()",
    NULL,
};

/* Version 7 (keys remembered longer than results, docs/api.md §12): when a step's body is dropped
 * (0 = with the row, as every row written before this version), the policy's key retention
 * (0 = its retention), and the reaper's first stage: rows whose body goes before the row does,
 * while they still hold one (the update to an empty body takes the row out of the index). */
static const char *const m7_sql[] = {
    "ALTER TABLE idem_steps ADD COLUMN IF NOT EXISTS result_expires_ms bigint NOT NULL DEFAULT 0",
    "ALTER TABLE idem_policies ADD COLUMN IF NOT EXISTS key_retention_s bigint NOT NULL DEFAULT 0",
    "CREATE INDEX IF NOT EXISTS idem_steps_body_reap_idx ON idem_steps (result_expires_ms)"
    " WHERE result_expires_ms > 0 AND result_expires_ms < expires_ms AND body <> ''::bytea"
    " AND state NOT IN " PG_UNREAPABLE_STATES,
    NULL,
};

/* Version 8 (slot groups, docs/api.md §17): every table keyed by saga gets the saga's slot,
 * fnv1a64(tenant, NUL, global_id) mod S (proto/idem/v1/slot.h; idem_slot below is the same rule
 * in SQL, for rows written before), and the cluster's S is recorded (idem_cluster). New rows get
 * their slot from the writer; rows still without one are filled at start (store_pg_slots_check,
 * in batches through the partial indexes on slot IS NULL, empty once filled: a write with its
 * slot adds nothing to them). No index on slot itself yet: nothing reads by slot until slots
 * move (§18), and every index costs each step write. */
static const char *const m8_sql[] = {
    "CREATE TABLE IF NOT EXISTS idem_cluster (id int PRIMARY KEY CHECK (id = 1),"
    " slots int NOT NULL, created_ms bigint NOT NULL)",
    "CREATE OR REPLACE FUNCTION idem_slot(tenant text, id text, slots int) RETURNS int"
    " LANGUAGE plpgsql IMMUTABLE STRICT AS $f$"
    " DECLARE b bytea := convert_to(tenant, 'UTF8') || decode('00', 'hex') || convert_to(id, "
    "'UTF8');"
    "  h numeric := 14695981039346656037; lo int;"
    " BEGIN"
    "  FOR i IN 0 .. length(b) - 1 LOOP"
    "   lo := (h % 256)::int;"
    "   h := h - lo + (lo # get_byte(b, i));"
    "   h := (h * 1099511628211) % 18446744073709551616;"
    "  END LOOP;"
    "  RETURN (h % slots)::int;"
    " END $f$",
    "ALTER TABLE idem_steps ADD COLUMN IF NOT EXISTS slot int",
    "ALTER TABLE idem_sagas ADD COLUMN IF NOT EXISTS slot int",
    "ALTER TABLE idem_saga_labels ADD COLUMN IF NOT EXISTS slot int",
    "ALTER TABLE idem_audit ADD COLUMN IF NOT EXISTS slot int",
    "CREATE INDEX IF NOT EXISTS idem_steps_noslot_idx ON idem_steps (tenant) WHERE slot IS NULL",
    "CREATE INDEX IF NOT EXISTS idem_sagas_noslot_idx ON idem_sagas (tenant) WHERE slot IS NULL",
    "CREATE INDEX IF NOT EXISTS idem_labels_noslot_idx ON idem_saga_labels (tenant)"
    " WHERE slot IS NULL",
    "CREATE INDEX IF NOT EXISTS idem_audit_noslot_idx ON idem_audit (tenant) WHERE slot IS NULL",
    NULL,
};

/* Version 9 (moving slots, docs/api.md §18; store_pg_move.c): the slots this store must not
 * write (idem_slot_blocks: moving in or out, or moved away), enforced by row triggers whose WHEN
 * lists the ranges (idem_slot_blocks_sync rebuilds them: free for rows outside them; logical
 * replication's apply runs as a replica and does not fire them), a move's marks (the last row a
 * move replicates) and indexes by slot (a move counts and deletes its rows by slot). */
static const char *const m9_sql[] = {
    "CREATE TABLE IF NOT EXISTS idem_slot_blocks (from_slot int NOT NULL, to_slot int NOT NULL,"
    " move_id text NOT NULL, why text NOT NULL, PRIMARY KEY (move_id, from_slot))",
    "CREATE TABLE IF NOT EXISTS idem_move_marks (move_id text PRIMARY KEY, at_ms bigint NOT NULL)",
    "CREATE OR REPLACE FUNCTION idem_slot_blocked() RETURNS trigger LANGUAGE plpgsql AS $f$"
    " BEGIN"
    "  IF current_setting('idem.slot_cleanup', true) = 'on' THEN"
    "   IF TG_OP = 'DELETE' THEN RETURN OLD; END IF; RETURN NEW;"
    "  END IF;"
    "  RAISE EXCEPTION 'slot % is not served by this store (moved or moving)',"
    "   CASE WHEN TG_OP = 'DELETE' THEN OLD.slot ELSE NEW.slot END USING ERRCODE = 'IF002';"
    " END $f$",
    "CREATE OR REPLACE FUNCTION idem_slot_blocks_sync() RETURNS void LANGUAGE plpgsql AS $f$"
    " DECLARE t text; w text; d text;"
    " BEGIN"
    "  SELECT string_agg(format('(NEW.slot BETWEEN %s AND %s)', from_slot, to_slot), ' OR '),"
    "   string_agg(format('(OLD.slot BETWEEN %s AND %s)', from_slot, to_slot), ' OR ')"
    "   INTO w, d FROM idem_slot_blocks;"
    "  FOREACH t IN ARRAY ARRAY['idem_steps', 'idem_sagas', 'idem_saga_labels'] LOOP"
    "   EXECUTE format('DROP TRIGGER IF EXISTS %I ON %I', t || '_slotblock_w', t);"
    "   EXECUTE format('DROP TRIGGER IF EXISTS %I ON %I', t || '_slotblock_d', t);"
    "   IF w IS NOT NULL THEN"
    "    EXECUTE format('CREATE TRIGGER %I BEFORE INSERT OR UPDATE ON %I FOR EACH ROW WHEN (%s)"
    " EXECUTE FUNCTION idem_slot_blocked()', t || '_slotblock_w', t, w);"
    "    EXECUTE format('CREATE TRIGGER %I BEFORE DELETE ON %I FOR EACH ROW WHEN (%s)"
    " EXECUTE FUNCTION idem_slot_blocked()', t || '_slotblock_d', t, d);"
    "   END IF;"
    "  END LOOP;"
    " END $f$",
    "CREATE INDEX IF NOT EXISTS idem_steps_slot_idx ON idem_steps (slot)",
    "CREATE INDEX IF NOT EXISTS idem_sagas_slot_idx ON idem_sagas (slot)",
    "CREATE INDEX IF NOT EXISTS idem_audit_slot_idx ON idem_audit (slot)",
    NULL,
};

/* Version 10 (moving slots): audit rows that arrive by a move take an id of this store's own
 * sequence, as each store numbers its audit rows itself and the source's ids may already be
 * taken here (a duplicate key would stop the move's apply). A replica trigger: it fires only in
 * logical replication's copy and apply, never for this store's own writes. Its search_path is
 * the migration's (the apply worker's is empty). */
static const char *const m10_sql[] = {
    "CREATE OR REPLACE FUNCTION idem_audit_renumber() RETURNS trigger LANGUAGE plpgsql"
    " SET search_path FROM CURRENT AS $f$"
    " BEGIN NEW.id := nextval('idem_audit_id_seq'); RETURN NEW; END $f$",
    "DROP TRIGGER IF EXISTS idem_audit_renumber ON idem_audit",
    "CREATE TRIGGER idem_audit_renumber BEFORE INSERT ON idem_audit FOR EACH ROW"
    " EXECUTE FUNCTION idem_audit_renumber()",
    "ALTER TABLE idem_audit ENABLE REPLICA TRIGGER idem_audit_renumber",
    NULL,
};

/* Version 11 (trace context, docs/api.md §22): the trace ids of the call that began a step's
 * current attempt and of the call that finished it. An expand migration (docs/upgrading.md):
 * both default to '' so that a node of an earlier release, which names neither column, keeps
 * inserting and updating rows (an update of its leaves the ids as they were). ListSteps'
 * trace_id filter reads the partial indexes (a row without an id adds nothing to them). */
static const char *const m11_sql[] = {
    "ALTER TABLE idem_steps ADD COLUMN IF NOT EXISTS begin_trace_id text NOT NULL DEFAULT ''",
    "ALTER TABLE idem_steps ADD COLUMN IF NOT EXISTS complete_trace_id text NOT NULL DEFAULT ''",
    "CREATE INDEX IF NOT EXISTS idem_steps_begin_trace_idx ON idem_steps (tenant, begin_trace_id)"
    " WHERE begin_trace_id <> ''",
    "CREATE INDEX IF NOT EXISTS idem_steps_complete_trace_idx ON idem_steps"
    " (tenant, complete_trace_id) WHERE complete_trace_id <> ''",
    NULL,
};

/* Version 12 (moving slots, round two): a mark arriving (by the move's replication, or written
 * here) is announced on channel idem_move_marks with its move id, so that the handoff waits on
 * a LISTEN instead of asking again and again. ALWAYS: it fires in the apply too. */
static const char *const m12_sql[] = {
    "CREATE OR REPLACE FUNCTION idem_move_mark_arrived() RETURNS trigger LANGUAGE plpgsql"
    " SET search_path FROM CURRENT AS $f$"
    " BEGIN PERFORM pg_notify('idem_move_marks', NEW.move_id); RETURN NULL; END $f$",
    "DROP TRIGGER IF EXISTS idem_move_mark_arrived ON idem_move_marks",
    "CREATE TRIGGER idem_move_mark_arrived AFTER INSERT OR UPDATE ON idem_move_marks"
    " FOR EACH ROW EXECUTE FUNCTION idem_move_mark_arrived()",
    "ALTER TABLE idem_move_marks ENABLE ALWAYS TRIGGER idem_move_mark_arrived",
    NULL,
};

/* Version 13 (one cluster per database, domain/owner.h, store_pg_owner.c): the cluster that owns
 * this database (one row: its id, etcd prefix and endpoints, the group it serves, the node that
 * claimed it) and the audit of each claim and takeover. An expansion: two new tables, which an
 * older node ignores. Not fenced: only a starting node writes them, before it serves. */
static const char *const m13_sql[] = {
    "CREATE TABLE IF NOT EXISTS idem_owner (id int PRIMARY KEY CHECK (id = 1),"
    " cluster_id text NOT NULL, prefix text NOT NULL DEFAULT '', etcd text NOT NULL DEFAULT '',"
    " group_name text NOT NULL, node text NOT NULL DEFAULT '', claimed_ms bigint NOT NULL)",
    "CREATE TABLE IF NOT EXISTS idem_owner_audit (id bigserial PRIMARY KEY,"
    " at_ms bigint NOT NULL, action text NOT NULL, actor text NOT NULL,"
    " cluster_id text NOT NULL, prefix text NOT NULL DEFAULT '', etcd text NOT NULL DEFAULT '',"
    " group_name text NOT NULL, from_cluster_id text NOT NULL DEFAULT '',"
    " from_prefix text NOT NULL DEFAULT '', from_etcd text NOT NULL DEFAULT '',"
    " from_group text NOT NULL DEFAULT '', from_node text NOT NULL DEFAULT '',"
    " from_claimed_ms bigint NOT NULL DEFAULT 0, from_epoch bigint NOT NULL DEFAULT 0)",
    NULL,
};

static const migration migrations[] = {
    {1, m1_sql}, {2, m2_sql},
    {3, m3_sql}, /* version 2 (policies) may sit before it: each version applies on its own */
    {4, m4_sql}, /* fencing: after 2 and 3, whose tables it guards */
    {5, m5_sql}, /* throughput: unused indexes of version 1 */
    {6, m6_sql}, /* bulk resolution: audit batch ids, answers by request id */
    {7, m7_sql}, /* key retention: body expiry, policies' key_retention_s */
    {8, m8_sql}, /* slot groups: the slot column, the cluster's slot count */
    {9, m9_sql},   /* moving slots: blocks, marks, indexes by slot */
    {10, m10_sql}, /* moving slots: moved audit rows numbered by the target */
    {11, m11_sql}, /* trace context: begin and complete trace ids */
    {12, m12_sql}, /* moving slots: a mark's arrival announced (LISTEN idem_move_marks) */
    {13, m13_sql}, /* one cluster per database: the owner and its audit */
};

/* Applies one migration unless it is recorded; returns ERR_OK either way. */
static err_code apply(pg_store *s, const migration *m, int64_t deadline, bool *applied,
                      err_t *err) {
  *applied = false;
  err_code rc = pg__exec(s, "BEGIN ISOLATION LEVEL READ COMMITTED", NULL, deadline, NULL, err);
  if (rc == ERR_OK) rc = pg__exec(s, SQL_MIGRATE_LOCK, NULL, deadline, NULL, err);
  if (rc != ERR_OK) return rc;
  pg_params p;
  pg__p_reset(&p);
  pg__p_i64(&p, m->version);
  PGresult *res = NULL;
  rc = pg__exec(s, SQL_VERSION_HAS, &p, deadline, &res, err); /* sees the lock holder's work */
  if (rc != ERR_OK) return rc;
  bool done = PQntuples(res) > 0;
  PQclear(res);
  if (done) return pg__exec(s, "COMMIT", NULL, deadline, NULL, err);
  for (const char *const *q = m->sql; *q; q++) {
    rc = pg__exec(s, *q, NULL, deadline, NULL, err);
    if (rc != ERR_OK) return rc;
  }
  pg__p_i64(&p, needs_of(m->version));
  rc = pg__exec(s, SQL_VERSION_ADD, &p, deadline, NULL, err);
  if (rc == ERR_OK) rc = pg__exec(s, "COMMIT", NULL, deadline, NULL, err);
  if (rc == ERR_OK) *applied = true;
  return rc;
}

static err_code migrate(pg_store *s, int64_t deadline, err_t *err) {
  err_code rc = pg__call_start(s, deadline, err);
  if (rc != ERR_OK) return rc;
  /* the version table itself, under the same lock (concurrent CREATE TABLE IF NOT EXISTS
   * can otherwise fail on the catalog's unique index) */
  rc = pg__exec(s, "BEGIN ISOLATION LEVEL READ COMMITTED", NULL, deadline, NULL, err);
  if (rc == ERR_OK) rc = pg__exec(s, SQL_MIGRATE_LOCK, NULL, deadline, NULL, err);
  if (rc == ERR_OK) rc = pg__exec(s, SQL_VERSION_TABLE, NULL, deadline, NULL, err);
  if (rc == ERR_OK) rc = pg__exec(s, SQL_VERSION_NEEDS, NULL, deadline, NULL, err);
  if (rc == ERR_OK) rc = pg__exec(s, "COMMIT", NULL, deadline, NULL, err);
  if (rc != ERR_OK) return rc;
  for (size_t i = 0; i < sizeof migrations / sizeof migrations[0]; i++) {
    bool applied = false;
    rc = apply(s, &migrations[i], deadline, &applied, err);
    if (rc != ERR_OK) return rc;
    if (applied) log_msg(LOG_INFO, "schema migrated to version %d", migrations[i].version);
  }
  return ERR_OK;
}

err_code store_pg_migrate(const char *conninfo, int64_t deadline, err_t *err) {
  pg_store s;
  if (!pg__init(&s, conninfo)) return err_oom(err);
  err_code rc = ERR_OK;
  for (int tries = 0; tries < PG_TXN_RETRIES; tries++) {
    rc = migrate(&s, deadline, err);
    if (rc == ERR_OK || s.retry != PG_RETRY_SERIAL) break;
    pg__rollback(&s, deadline);
    pg__backoff(tries + 1, deadline);
  }
  if (rc != ERR_OK) {
    pg__rollback(&s, deadline);
    if (rc == ERR_INTERNAL)
      log_kv(LOG_ERROR, "schema migration failed", "sqlstate", s.sqlstate, NULL);
  } else {
    err_clear(err);
  }
  pg__fini(&s);
  return rc;
}

int store_pg_schema_newest(void) {
  return migrations[sizeof migrations / sizeof migrations[0] - 1].version;
}

err_code store_pg_schema_check(const char *conninfo, int64_t deadline, store_pg_schema *out,
                               err_t *err) {
  memset(out, 0, sizeof *out);
  pg_store s;
  if (!pg__init(&s, conninfo)) return err_oom(err);
  PGresult *res = NULL;
  err_code rc = pg__exec_call(&s, SQL_VERSION_READ, NULL, deadline, &res, err);
  if (rc == ERR_OK) {
    out->version = (int)pg__int(res, 0, 0);
    out->needs = (int)pg__int(res, 0, 1);
    PQclear(res);
    int newest = store_pg_schema_newest();
    if (out->needs > newest)
      rc = err_set(err, ERR_INVALID,
                    "the schema is at version %d, which needs a node that knows schema version "
                    "%d or newer; this node knows up to version %d",
                    out->version, out->needs, newest);
    else
      err_clear(err);
  }
  pg__fini(&s);
  return rc;
}
