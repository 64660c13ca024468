/* support_memstore.h — a single-threaded in-memory store (store_ops) for unit tests of coord/.
 *
 * Not a model of concurrency: it exists to check the wiring of coord_* (what reaches the
 * store, what comes back, who owns what). It counts calls, can fail every call with a chosen
 * code, can fail exactly the Nth call of one operation or of any (memstore_fail_nth: a fault
 * walk runs an operation once counting its store calls, then fails each of them in turn), can
 * run a step callback several times (as a store does after a serialization failure), and
 * checks that every write belongs to the transaction's step pair. step_txn_audit keeps the
 * audit rows it commits (audit, n_audit).
 */
#ifndef IDEM_TEST_SUPPORT_MEMSTORE_H
#define IDEM_TEST_SUPPORT_MEMSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "domain/record_admin.h"
#include "store/store.h"

#define MEMSTORE_MAX_SAGAS 16

/* The operations the double counts and can fail one call at a time: its store_ops entries.
 * MEMSTORE_STEP_TXN_SUBMIT is the submission; the submitted transaction, when
 * memstore_run_submitted runs it, is a MEMSTORE_STEP_TXN call. */
typedef enum memstore_op {
  MEMSTORE_ANY = 0, /* all of them */
  MEMSTORE_PING,
  MEMSTORE_STEP_TXN,
  MEMSTORE_STEP_TXN_AUDIT,
  MEMSTORE_LOOKUP_STEP,
  MEMSTORE_BEGIN_SAGA,
  MEMSTORE_GET_SAGA,
  MEMSTORE_STEP_TXN_SUBMIT,
  MEMSTORE_OP__COUNT
} memstore_op;

typedef struct memstore_saga {
  char tenant[REC_GLOBAL_ID_MAX + 1];
  char global_id[REC_GLOBAL_ID_MAX + 1];
  char request_id[REC_REQUEST_ID_MAX + 1]; /* "" = none */
  char saga_type[REC_SAGA_TYPE_MAX + 1];
  int64_t created_ms;
  size_t n_labels;
  char label_keys[REC_LABELS_MAX][REC_LABEL_KEY_MAX + 1];
  char label_values[REC_LABELS_MAX][REC_LABEL_VALUE_MAX + 1];
} memstore_saga;

typedef struct memstore {
  store base;     /* must be first: (store *)m */
  int64_t now_ms; /* the "database clock" handed to step callbacks */

  step_rec *recs; /* owned records */
  size_t n_recs, cap_recs;

  memstore_saga sagas[MEMSTORE_MAX_SAGAS];
  size_t n_sagas;

  /* instrumentation */
  int calls; /* every op but close */
  int step_txn_calls, fn_calls, lookup_calls, begin_saga_calls, get_saga_calls;
  int txn_runs;     /* runs of fn per step_txn (default 1); only the last run's writes apply */
  err_code fail_rc; /* != ERR_OK: every op fails with it, without calling fn */
  int64_t last_deadline;
  saga_new last_saga_new;        /* strings point into last_saga below */
  memstore_saga last_saga;       /* deep copy of the last begin_saga input */
  bool last_saga_had_request_id; /* in->request_id != NULL */

  /* step_txn_submit: queued here, run by memstore_run_submitted (which models the
   * store's own thread, later); submit_rc != ERR_OK refuses every submission with it */
  struct memstore_submitted *submitted;
  int submit_calls;
  err_code submit_rc;

  /* the audit trail step_txn_audit committed, oldest first (ids 1, 2, ...) */
  audit_rec *audit;
  size_t n_audit, cap_audit;

  /* one call at a time (memstore_fail_nth): calls per operation, the pending failure */
  int op_calls[MEMSTORE_OP__COUNT]; /* [MEMSTORE_ANY]: all operations */
  memstore_op fail_op;
  int fail_left;       /* calls of fail_op until the one that fails; 0 = none pending */
  bool fail_at_commit; /* a step transaction fails after fn ran; its writes are dropped */
  int faults;          /* failures made so far */

  /* called at the start of every step transaction, before the pair is read: a test changes a
   * record here as a concurrent caller would have (NULL = none) */
  void (*before_txn)(void *m, const step_key *key, void *arg); /* m: the memstore */
  void *before_txn_arg;

  /* called after a step transaction that wrote to its pair committed, as the batcher's change
   * hook is (NULL = none) */
  void (*on_change)(void *arg, const step_key *key);
  void *on_change_arg;

  /* ResolveSteps' answers by request id (bulk_get / bulk_put) */
  bulk_rec bulk[8];
  size_t n_bulk;
} memstore;

/* A new empty store whose clock reads now_ms. Free with store_close(&m->base). */
memstore *memstore_new(int64_t now_ms);

/* Runs every queued submission (step_txn, then its done callback) in submission order;
 * returns how many ran. */
int memstore_run_submitted(memstore *m);

/* Makes the nth call from now on (n = 1: the next one) of op (MEMSTORE_ANY: of any operation)
 * fail with ERR_UNAVAILABLE, reason ERR_R_STORE_UNAVAILABLE (a database that cannot be
 * reached), before it reads or writes anything. Only that call fails. n <= 0 cancels a
 * pending failure. */
void memstore_fail_nth(memstore *m, memstore_op op, int n);

/* memstore_fail_nth, but a step transaction (step_txn, step_txn_audit, a submitted one when it
 * runs) fails at its commit: fn runs, then its writes and audit row are dropped (the connection
 * lost while committing, rolled back). Other operations fail before they start. */
void memstore_fail_nth_at_commit(memstore *m, memstore_op op, int n);

/* The calls of op (MEMSTORE_ANY: of every operation) the store has had. */
int memstore_calls(const memstore *m, memstore_op op);

/* The name of op ("step_txn", ...), for messages. */
const char *memstore_op_name(memstore_op op);

/* Appends a row to the audit trail as step_txn_audit commits one (the store sets id and
 * at_ms). */
void memstore_add_audit(memstore *m, const audit_rec *a);

/* Inserts or replaces a record (deep copy). */
void memstore_put(memstore *m, const step_rec *r);

/* The stored record of key (exact phase), or NULL; ignores expiry. */
const step_rec *memstore_get(const memstore *m, const step_key *key);

#endif
