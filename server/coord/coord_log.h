/* coord_log.h — internal to coord/: the step transaction with one log line per state change.
 *
 * coord__step_txn runs fn through store_step_txn (or store_step_txn_audit when audit is not
 * NULL) and, once the transaction has committed, logs one line per record whose state or
 * attempt changed:
 *   step state changed tenant=T global_id=G service=S operation=O phase=forward attempt=N
 *     from=in_progress to=succeeded via=complete [actor=A]
 * (text or JSON, as log_init chose). `via` names the operation ("begin", "complete",
 * "resolve"); it must be a string literal. Same contract as store_step_txn otherwise.
 */
#ifndef IDEM_COORD_LOG_H
#define IDEM_COORD_LOG_H

#include "../store/store.h"

err_code coord__step_txn(store *st, const step_key *key, int64_t deadline, store_step_fn fn,
                         void *arg, const audit_rec *audit, const char *via, err_t *err);

/* The same in parts, for a step transaction whose answer comes later (store_step_txn_submit):
 * coord__txn_init(&t, fn, arg), then run coord__txn_wrap with &t as the store's callback, then
 * coord__txn_done with the store's answer (rc, err), which logs and returns rc. */
typedef struct coord__change {
  step_phase phase;
  uint64_t attempt;
  step_state from, to;
} coord__change;

typedef struct coord__txn {
  store_step_fn fn;
  void *arg;
  coord__change changes[2];
  int n;
  err_code last_rc;
  err_t last_err;
} coord__txn;

void coord__txn_init(coord__txn *t, store_step_fn fn, void *arg);
err_code coord__txn_wrap(void *t, const step_pair *cur, step_writes *w, err_t *err);
err_code coord__txn_done(const coord__txn *t, const step_key *key, const audit_rec *audit,
                         const char *via, err_code rc, const err_t *err);

#endif
