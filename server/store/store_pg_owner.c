/* store_pg_owner.c — the cluster a database belongs to (domain/owner.h; migration 13 creates
 * idem_owner, one row, and idem_owner_audit). The rule is the caller's (owner_decide, through
 * a callback); this file reads the row and writes what the rule decided, in one transaction
 * under the migration lock, so that two nodes of two clusters starting at once on a fresh
 * database cannot both claim it. */
#include <string.h>

#include "../util/log.h"
#include "store_pg_internal.h"

/* A schema older than version 13 has no idem_owner: nothing is recorded. */
static const char SQL_HAS_TABLE[] = "SELECT to_regclass('idem_owner') IS NOT NULL";
static const char SQL_READ[] =
    "SELECT cluster_id, prefix, etcd, group_name, node, claimed_ms FROM idem_owner WHERE id = 1";
static const char SQL_READ_LOCKED[] =
    "SELECT cluster_id, prefix, etcd, group_name, node, claimed_ms FROM idem_owner WHERE id = 1"
    " FOR UPDATE";
static const char SQL_CLAIM[] =
    "INSERT INTO idem_owner (id, cluster_id, prefix, etcd, group_name, node, claimed_ms)"
    " VALUES (1, $1, $2, $3, $4, $5, " PG_NOW_MS ")";
static const char SQL_REPLACE[] =
    "UPDATE idem_owner SET cluster_id = $1, prefix = $2, etcd = $3, group_name = $4, node = $5,"
    " claimed_ms = " PG_NOW_MS " WHERE id = 1";
static const char SQL_AUDIT[] =
    "INSERT INTO idem_owner_audit (at_ms, action, actor, cluster_id, prefix, etcd, group_name,"
    " from_cluster_id, from_prefix, from_etcd, from_group, from_node, from_claimed_ms,"
    " from_epoch) VALUES (" PG_NOW_MS ", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)";
/* Other coordinator processes with a session on this database (the former owner's nodes). */
static const char SQL_OTHERS[] =
    "SELECT count(*), coalesce(string_agg(DISTINCT coalesce(host(client_addr), 'local'), ', '),"
    " '') FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()"
    " AND datname = current_database() AND backend_type = 'client backend'";
/* A takeover starts the fence again: the former owner's epochs (another etcd's revisions) mean
 * nothing to the new owner, whose first leader raises it to its own (store_pg_fence.c). Under
 * the fence's lock, as a raise. */
static const char SQL_FENCE_LOCK[] = "SELECT pg_advisory_xact_lock(1768187245, 4)";
static const char SQL_FENCE_READ[] = "SELECT epoch FROM idem_fence WHERE id = 1";
static const char SQL_FENCE_RESET[] = "UPDATE idem_fence SET epoch = 0 WHERE id = 1";

static void copy(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

static void row_owner(const PGresult *res, owner_rec *out) {
  memset(out, 0, sizeof *out);
  copy(out->cluster_id, sizeof out->cluster_id, pg__str(res, 0, 0));
  copy(out->prefix, sizeof out->prefix, pg__str(res, 0, 1));
  copy(out->etcd, sizeof out->etcd, pg__str(res, 0, 2));
  copy(out->group, sizeof out->group, pg__str(res, 0, 3));
  copy(out->node, sizeof out->node, pg__str(res, 0, 4));
  out->claimed_ms = pg__int(res, 0, 5);
}

err_code store_pg_owner_read(const char *conninfo, int64_t deadline, owner_rec *out, bool *found,
                             err_t *err) {
  memset(out, 0, sizeof *out);
  *found = false;
  pg_store s;
  if (!pg__init(&s, conninfo)) return err_oom(err);
  PGresult *res = NULL;
  err_code rc = pg__exec_call(&s, SQL_HAS_TABLE, NULL, deadline, &res, err);
  bool has = false;
  if (rc == ERR_OK) {
    has = PQntuples(res) > 0 && PQgetvalue(res, 0, 0)[0] != 0; /* binary bool */
    PQclear(res);
  }
  if (rc == ERR_OK && has) {
    rc = pg__exec(&s, SQL_READ, NULL, deadline, &res, err);
    if (rc == ERR_OK) {
      if (PQntuples(res) > 0) {
        row_owner(res, out);
        *found = true;
      }
      PQclear(res);
    }
  }
  if (rc == ERR_OK) err_clear(err);
  pg__fini(&s);
  return rc;
}

static void audit_params(pg_params *p, const char *action, const char *actor,
                         const owner_rec *mine, const owner_rec *from, int64_t from_epoch) {
  pg__p_reset(p);
  pg__p_text(p, action);
  pg__p_text(p, actor);
  pg__p_text(p, mine->cluster_id);
  pg__p_text(p, mine->prefix);
  pg__p_text(p, mine->etcd);
  pg__p_text(p, mine->group);
  pg__p_text(p, from ? from->cluster_id : "");
  pg__p_text(p, from ? from->prefix : "");
  pg__p_text(p, from ? from->etcd : "");
  pg__p_text(p, from ? from->group : "");
  pg__p_text(p, from ? from->node : "");
  pg__p_i64(p, from ? from->claimed_ms : 0);
  pg__p_i64(p, from_epoch);
}

static void owner_params(pg_params *p, const owner_rec *mine) {
  pg__p_reset(p);
  pg__p_text(p, mine->cluster_id);
  pg__p_text(p, mine->prefix);
  pg__p_text(p, mine->etcd);
  pg__p_text(p, mine->group);
  pg__p_text(p, mine->node);
}

/* The takeover's own check and the fence's reset; *epoch the fence it held. */
static err_code take_over(pg_store *s, int64_t deadline, int64_t *epoch, err_t *err) {
  pg_params p;
  pg__p_reset(&p);
  pg__p_text(&p, PG_APP_NAME);
  PGresult *res = NULL;
  err_code rc = pg__exec(s, SQL_OTHERS, &p, deadline, &res, err);
  if (rc != ERR_OK) return rc;
  int64_t others = pg__int(res, 0, 0);
  char from[256];
  copy(from, sizeof from, pg__str(res, 0, 1));
  PQclear(res);
  if (others > 0)
    return err_set(err, ERR_PRECONDITION,
                   "%lld sessions of other coordinator processes are connected to this "
                   "database (from %s): stop every node of the owner before taking it over",
                   (long long)others, from);
  rc = pg__exec(s, SQL_FENCE_LOCK, NULL, deadline, NULL, err);
  if (rc == ERR_OK) rc = pg__exec(s, SQL_FENCE_READ, NULL, deadline, &res, err);
  if (rc != ERR_OK) return rc;
  *epoch = PQntuples(res) ? pg__int(res, 0, 0) : 0;
  PQclear(res);
  return pg__exec(s, SQL_FENCE_RESET, NULL, deadline, NULL, err);
}

static err_code settle(pg_store *s, const owner_rec *mine, const char *actor, int64_t deadline,
                       store_owner_decide_fn decide, void *arg, store_owner_settled *out,
                       err_t *err) {
  err_code rc = pg__call_start(s, deadline, err);
  if (rc == ERR_OK)
    rc = pg__exec(s, "BEGIN ISOLATION LEVEL READ COMMITTED", NULL, deadline, NULL, err);
  if (rc == ERR_OK) rc = pg__exec(s, PG_SQL_MIGRATE_LOCK, NULL, deadline, NULL, err);
  PGresult *res = NULL;
  if (rc == ERR_OK) rc = pg__exec(s, SQL_READ_LOCKED, NULL, deadline, &res, err);
  if (rc != ERR_OK) return rc;
  out->found = PQntuples(res) > 0;
  if (out->found) row_owner(res, &out->recorded);
  PQclear(res);
  out->verdict = decide(arg, out->found ? &out->recorded : NULL);
  pg_params p;
  if (out->verdict == OWNER_CLAIM) {
    owner_params(&p, mine);
    rc = pg__exec(s, SQL_CLAIM, &p, deadline, NULL, err);
    audit_params(&p, "claim", actor, mine, NULL, 0);
    if (rc == ERR_OK) rc = pg__exec(s, SQL_AUDIT, &p, deadline, NULL, err);
  } else if (out->verdict == OWNER_TAKE_OVER) {
    int64_t epoch = 0;
    rc = take_over(s, deadline, &epoch, err);
    if (rc != ERR_OK) {
      pg__rollback(s, deadline);
      return rc;
    }
    out->former_epoch = epoch;
    owner_params(&p, mine);
    rc = pg__exec(s, SQL_REPLACE, &p, deadline, NULL, err);
    audit_params(&p, "take-over", actor, mine, &out->recorded, epoch);
    if (rc == ERR_OK) rc = pg__exec(s, SQL_AUDIT, &p, deadline, NULL, err);
  } else {
    return pg__exec(s, "ROLLBACK", NULL, deadline, NULL, err);
  }
  if (rc == ERR_OK) rc = pg__exec(s, "COMMIT", NULL, deadline, NULL, err);
  return rc;
}

err_code store_pg_owner_settle(const char *conninfo, const owner_rec *mine, const char *actor,
                               int64_t deadline, store_owner_decide_fn decide, void *arg,
                               store_owner_settled *out, err_t *err) {
  memset(out, 0, sizeof *out);
  pg_store s;
  if (!pg__init(&s, conninfo)) return err_oom(err);
  err_code rc = ERR_OK;
  for (int tries = 0; tries < PG_TXN_RETRIES; tries++) {
    rc = settle(&s, mine, actor, deadline, decide, arg, out, err);
    if (rc == ERR_OK || s.retry != PG_RETRY_SERIAL) break;
    pg__rollback(&s, deadline);
    pg__backoff(tries + 1, deadline);
  }
  if (rc != ERR_OK) {
    pg__rollback(&s, deadline);
  } else {
    err_clear(err);
  }
  pg__fini(&s);
  return rc;
}
