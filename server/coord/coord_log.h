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

#endif
