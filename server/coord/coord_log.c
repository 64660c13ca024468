/* coord_log.c — the logged step transaction (see coord_log.h). */
#include "coord_log.h"

#include "idem/v1/names.h"

#include <stdio.h>
#include <string.h>

#include "../util/log.h"

static bool live(const step_rec *r, int64_t now) {
  return step_rec_live(r, now);
}

void coord__txn_init(coord__txn *t, store_step_fn fn, void *arg) {
  memset(t, 0, sizeof *t);
  t->fn = fn;
  t->arg = arg;
  t->last_rc = ERR_OK;
}

/* Runs the caller's fn and remembers, from this (possibly last) run, what it changes. */
err_code coord__txn_wrap(void *argp, const step_pair *cur, step_writes *w, err_t *err) {
  coord__txn *t = argp;
  t->n = 0;
  err_code rc = t->fn(t->arg, cur, w, err);
  t->last_rc = rc;
  if (rc != ERR_OK) t->last_err = *err;
  for (int i = 0; i < w->n && i < 2; i++) {
    const step_rec *n = &w->recs[i];
    const step_rec *o = n->key.phase == PHASE_COMPENSATION ? &cur->comp : &cur->fwd;
    step_state from = live(o, cur->now_ms) ? o->state : STATE_NONE;
    uint64_t from_attempt = live(o, cur->now_ms) ? o->attempt : 0;
    if (from == n->state && from_attempt == n->attempt) continue; /* a lease extension */
    t->changes[t->n++] = (coord__change){n->key.phase, n->attempt, from, n->state};
  }
  return rc;
}

static const char *state_word(step_state s) {
  return idem_word_state((int)s);
}

err_code coord__txn_done(const coord__txn *t, const step_key *key, const audit_rec *audit,
                         const char *via, err_code rc, const err_t *err) {
  /* committed: OK, or fn's own error handed back as is (the store commits fn's writes even
   * then); a store failure carries its own message */
  bool committed = rc == ERR_OK || (rc == t->last_rc && rc != ERR_UNAVAILABLE && err &&
                                    !err_from_store(err) && err->reason == t->last_err.reason);
  if (!committed) return rc;
  for (int i = 0; i < t->n; i++) {
    const coord__change *c = &t->changes[i];
    char attempt[24];
    snprintf(attempt, sizeof attempt, "%llu", (unsigned long long)c->attempt);
    const char *phase = c->phase == PHASE_COMPENSATION ? "compensation" : "forward";
    if (audit)
      log_kv(LOG_INFO, "step state changed", "tenant", key->tenant, "global_id", key->global_id,
             "service", key->service, "operation", key->operation, "phase", phase, "attempt",
             attempt, "from", state_word(c->from), "to", state_word(c->to), "via", via, "actor",
             audit->actor, (const char *)NULL);
    else
      log_kv(LOG_INFO, "step state changed", "tenant", key->tenant, "global_id", key->global_id,
             "service", key->service, "operation", key->operation, "phase", phase, "attempt",
             attempt, "from", state_word(c->from), "to", state_word(c->to), "via", via,
             (const char *)NULL);
  }
  return rc;
}

err_code coord__step_txn(store *st, const step_key *key, int64_t deadline, store_step_fn fn,
                         void *arg, const audit_rec *audit, const char *via, err_t *err) {
  coord__txn t;
  coord__txn_init(&t, fn, arg);
  err_code rc = audit ? store_step_txn_audit(st, key, deadline, coord__txn_wrap, &t, audit, err)
                      : store_step_txn(st, key, deadline, coord__txn_wrap, &t, err);
  return coord__txn_done(&t, key, audit, via, rc, err);
}
