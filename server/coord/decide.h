/* decide.h — the decision table of docs/api.md §3 and the rules of §4, as pure functions.
 *
 * No I/O, no clock, no allocation: each function looks at what the store holds for a step
 * pair (read under the pair's lock, see store_step_fn) and the database clock, and says what
 * to answer and which records to write. The store applies the writes in the same transaction,
 * so under any concurrency exactly one caller gets DECISION_PROCEED for a key and attempt.
 *
 * Records whose retention has passed (expires_ms != 0 && expires_ms <= now) are treated as
 * absent: the key is new again. Between a record's result retention and its key retention
 * (docs/api.md §12) it answers as before, but a REPLAY carries outcome and code without the body
 * (result_expired).
 *
 * Bodies in the written records and in decide_begin_out borrow from the inputs (the request
 * or *cur); the caller copies what it keeps past the store callback.
 */
#ifndef IDEM_DECIDE_H
#define IDEM_DECIDE_H

#include <stdbool.h>
#include <stdint.h>

#include "../domain/record.h"
#include "../domain/record_admin.h"
#include "../util/err.h"

typedef struct decide_begin_in {
  const step_key *key; /* validated; key->phase says which table applies */
  const uint8_t *fp;
  size_t fp_len;
  uint32_t lease_ms;    /* effective lease: the request's, else the policy's */
  step_retention retention; /* the policy's (for tombstones and null compensations) */
  /* the call's trace id (docs/api.md §22; NULL or "" = none): a new attempt records it as
   * begin_trace_id (and clears complete_trace_id); a record this call finishes (a null
   * compensation, an abandoned forward) as complete_trace_id */
  const char *trace_id;
} decide_begin_in;

typedef struct decide_begin_out {
  step_decision decision;
  uint64_t attempt;
  int64_t lease_expires_ms; /* PROCEED: the new lease */
  bool takeover;            /* PROCEED after an expired lease of an earlier attempt */
  int64_t expires_ms;       /* when the record will be forgotten (0 while unfinished) */
  int64_t result_expires_ms; /* REPLAY: when the body is (was) dropped */
  bool result_expired;       /* REPLAY past result retention: outcome and code, no body */
  /* REPLAY: the stored result (body borrowed from *cur) */
  bool has_result;
  step_outcome outcome;
  int32_t code;
  const uint8_t *body;
  size_t body_len;
  int64_t completed_ms;
} decide_begin_out;

/* BeginStep. Returns ERR_OK with out filled, or ERR_ABORTED (step in progress, retry_after_ms
 * set to the time left on the lease), or ERR_PRECONDITION (fingerprint mismatch). w may hold
 * writes even when an error is returned (an expired forward abandoned before a compensation
 * that then meets a conflict). */
err_code decide_begin(const decide_begin_in *in, const step_pair *cur, decide_begin_out *out,
                      step_writes *w, err_t *err);

typedef struct decide_complete_in {
  const step_key *key;
  uint64_t attempt;
  step_outcome outcome; /* SUCCEEDED, FAILED, RETRYABLE or UNKNOWN (validated) */
  int32_t code;
  const uint8_t *body;
  size_t body_len;
  step_retention retention; /* the policy's */
  const char *trace_id;      /* the call's (NULL or "" = none): the finished record's
                                complete_trace_id */
} decide_complete_in;

/* CompleteStep (docs/api.md §4). On ERR_OK *after points at the record as it stands after the call
 * (in w, or in cur for a harmless repeat). Errors: ERR_NOT_FOUND (no record), ERR_ABORTED
 * (lease lost: newer attempt, abandoned, released), ERR_PRECONDITION (attempt never issued, or
 * finished differently). */
err_code decide_complete(const decide_complete_in *in, const step_pair *cur, step_writes *w,
                         const step_rec **after, err_t *err);

/* ExtendLease: the caller's own IN_PROGRESS attempt gets lease now + lease_ms.
 * ERR_NOT_FOUND (no record), ERR_ABORTED (not IN_PROGRESS under that attempt). */
err_code decide_extend(const step_key *key, uint64_t attempt, uint32_t lease_ms,
                       const step_pair *cur, step_writes *w, int64_t *lease_expires_ms,
                       err_t *err);

/* The state a result's outcome leaves a step in (Complete and ResolveStep alike):
 * SUCCEEDED, FAILED, UNKNOWN, and RELEASED for RETRYABLE. */
step_state decide_state_of(step_outcome outcome);

/* ResolveStep: the resolution rule on the pair read under the lock (see coord_resolve_step).
 * Only an IN_PROGRESS or UNKNOWN step can be resolved (else ERR_PRECONDITION, reason
 * not-resolvable; ERR_NOT_FOUND when there is none). On ERR_OK w holds the one write, *after
 * points at it and *from is the state it replaces; the body is borrowed from the input. */
err_code coord_decide_resolve(const step_key *key, step_outcome outcome, int32_t code,
                              const uint8_t *body, size_t body_len, step_retention ret,
                              const step_pair *cur, step_writes *w, const step_rec **after,
                              step_state *from, err_t *err);

/* A ResolveStep met a step it cannot resolve (not-resolvable): whether that call is a repeat of
 * the resolve that settled the step, to be answered OK with the record (docs/api.md §12). r is
 * the step's record, read after the refusal; last its newest "resolve" audit row (NULL when it
 * has none). True when that row is a single ResolveStep (no batch id) by actor with reason that
 * took the step from IN_PROGRESS or UNKNOWN to the state outcome leaves (decide_state_of), r is
 * still in that state, finished no later than the row was written (a later completion of a new
 * attempt is not the resolve's), with outcome and code, and body unless the result expired. */
bool coord_decide_resolve_repeat(const step_rec *r, const audit_rec *last, step_outcome outcome,
                                 int32_t code, const uint8_t *body, size_t body_len,
                                 const char *actor, const char *reason);

#endif
