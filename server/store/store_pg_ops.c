/* store_pg_ops.c — the PostgreSQL store's face: store_pg_open and the ops table, close and
 * ping; a step transaction goes through group commit (store_pg_batch.c) when the store has a
 * batcher, else straight to store_pg.c. */
#include <stdlib.h>

#include "store_pg_internal.h"

static void pg_close(store *st) {
  pg_store *s = (pg_store *)st;
  if (!s) return;
  pg__fini(s);
  free(s);
}

static err_code pg_ping(store *st, int64_t deadline, err_t *err) {
  pg_store *s = (pg_store *)st;
  return pg__exec_call(s, "SELECT 1", NULL, deadline, NULL, err);
}

/* One step transaction, with an audit row in the same transaction (incident response). */
static err_code pg_step_txn_audit(store *st, const step_key *key, int64_t deadline,
                                  store_step_fn fn, void *arg, const audit_rec *audit, err_t *err) {
  pg_store *s = (pg_store *)st;
  if (s->batcher) return pg__batch_step_txn(s, key, deadline, fn, arg, audit, err);
  return pg__step_txn(st, key, deadline, fn, arg, audit, err);
}

static err_code pg_step_txn(store *st, const step_key *key, int64_t deadline, store_step_fn fn,
                            void *arg, err_t *err) {
  return pg_step_txn_audit(st, key, deadline, fn, arg, NULL, err);
}

/* only through the batcher (which is thread-safe; this store's connection is not
 * touched, so any thread may call it). */
static err_code pg_step_txn_submit(store *st, const step_key *key, int64_t deadline,
                                   store_step_fn fn, void *arg, store_step_done_fn done,
                                   void *done_arg, err_t *err) {
  store_batcher *b = ((pg_store *)st)->batcher;
  if (!b) return err_set(err, ERR_UNIMPLEMENTED, "store: no group commit");
  return store_batcher_submit(b, key, deadline, fn, arg, done, done_arg, err);
}

static const store_ops pg_ops = {
    .version = STORE_OPS_VERSION,
    .close = pg_close,
    .ping = pg_ping,
    .step_txn = pg_step_txn,
    .lookup_step = pg__lookup_step,
    .begin_saga = pg__begin_saga,
    .get_saga = pg__get_saga,
    /* incident response: store_pg_admin.c */
    .list_steps = pg__list_steps,
    .step_txn_audit = pg_step_txn_audit,
    .list_audit = pg__list_audit,
    .last_audit = pg__last_audit,
    .bulk_get = pg__bulk_get,
    .bulk_put = pg__bulk_put,
    .count_steps = pg__count_steps,
    /* policies and reaping: store_pg_policy.c */
    .policy_put = pg__policy_put,
    .policy_delete = pg__policy_delete,
    .policy_list = pg__policy_list,
    .reap_steps = pg__reap_steps,
    .reap_sagas = pg__reap_sagas,
    .reap_bodies = pg__reap_bodies,
    /* throughput: store_pg_batch.c */
    .step_txn_submit = pg_step_txn_submit,
};

store *store_pg_open(const char *conninfo) {
  pg_store *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  if (!pg__init(s, conninfo)) {
    free(s);
    return NULL;
  }
  s->base.ops = &pg_ops;
  return &s->base;
}
