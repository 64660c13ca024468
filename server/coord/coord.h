/* coord.h — the coordinator's operations, one per RPC, as plain C (no gRPC, no libpq).
 *
 * Each function validates its raw inputs (validate.h), resolves the operation's policy, and
 * runs the decision (decide.h) inside one store transaction. Strings passed in are borrowed
 * (NULL reads as ""); outputs documented as owned are freed by the named clear function.
 * The tenant always comes from the caller's credentials/metadata, never from a message.
 * `deadline` is absolute on the monotonic clock (clock_mono_ms()); store calls are bounded by
 * min(deadline, now + ctx->store_timeout_ms).
 *
 * Thread-safety: a coord_ctx is shared by all workers (read-only after setup); a store is
 * per worker.
 */
#ifndef IDEM_COORD_H
#define IDEM_COORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../cache/replay_cache.h"
#include "../domain/policy.h"
#include "../domain/record.h"
#include "../store/store.h"
#include "../util/err.h"
#include "coord_wait.h"

typedef struct coord_ctx {
  policy_resolve_fn resolve_policy; /* NULL: the built-in default */
  void *resolve_arg;
  size_t body_max;          /* result body limit, default REC_BODY_MAX_DEFAULT */
  int64_t store_timeout_ms; /* per store call, default 2000 */
  /* policies: called after Admin.SetPolicy/DeletePolicy committed, with the
   * caller's store, so the resolver sees the change at once (NULL: nothing to do). */
  void (*policies_changed)(void *arg, store *st, int64_t deadline); /* arg = resolve_arg */
  /* throughput: the leader's replay cache (NULL: none). BeginStep first runs the
   * decision on the cached pair; an answer that writes nothing (REPLAY, a SKIP, or a
   * fingerprint mismatch) is given from it, anything else goes to the store. */
  replay_cache *cache;
  /* the leader's parked BeginStep calls (coord_wait.h; NULL: no call waits, wait_ms is
   * checked and then answered as 0). Used by coord_begin_step_wait_async only. */
  coord_waiters *waiters;
  /* slot groups (docs/api.md §17; slots 0: no rule). BeginSaga issues a global id in the
   * request id's slot (slot_of(tenant, request_id, slots)); without a request id, in a slot
   * owns_slot accepts (this group's). */
  uint32_t slots;
  bool (*owns_slot)(void *arg, uint32_t slot);
  void *owns_arg;
} coord_ctx;

/* Sets the defaults above. */
void coord_ctx_init(coord_ctx *ctx);

/* A StepKey as decoded from the wire (borrowed strings), and the trace the call came in
 * (docs/api.md §22): trace_id, the caller's W3C trace id (32 lower-case hex) as the rpc layer
 * read it from the call's traceparent; NULL or "" = none, and anything else that is not a valid
 * trace id reads as none. BeginStep, CompleteStep and ResolveStep store it with the records
 * they begin or finish (step_rec.begin_trace_id / complete_trace_id); other calls ignore it. */
typedef struct coord_key_in {
  const char *global_id;
  const char *service;
  const char *operation;
  int phase;
  const char *trace_id;
} coord_key_in;

typedef struct coord_begin_result {
  step_decision decision;
  uint64_t attempt;
  int64_t lease_expires_ms;
  bool takeover;
  int64_t expires_ms;        /* when the key is forgotten */
  int64_t result_expires_ms; /* REPLAY: when the body is (was) dropped */
  bool result_expired;       /* REPLAY past the result's retention: no body (docs/api.md §12) */
  bool has_result;           /* REPLAY */
  step_outcome outcome;
  int32_t code;
  uint8_t *body; /* owned */
  size_t body_len;
  int64_t completed_ms;
  failure_mode mode; /* the operation's effective policy's (docs/api.md §20), on every answer */
} coord_begin_result;

void coord_begin_result_clear(coord_begin_result *r);

/* BeginStep. lease_ms 0 = the policy's. ERR_ABORTED carries err->retry_after_ms.
 * When the store cannot be reached (ERR_UNAVAILABLE, not a conflict) and the operation's
 * policy is fail-open, answers ERR_OK with DECISION_PROCEED_UNGUARDED (attempt 0, nothing
 * recorded; counted with metrics_unguarded() and logged); fail-closed stays ERR_UNAVAILABLE. */
err_code coord_begin_step(const coord_ctx *ctx, store *st, const char *tenant,
                          const coord_key_in *key, const uint8_t *fp, size_t fp_len,
                          uint32_t lease_ms, int64_t deadline, coord_begin_result *out, err_t *err);

/* CompleteStep. On ERR_OK fills *out as an owned record (step_rec_clear). */
err_code coord_complete_step(const coord_ctx *ctx, store *st, const char *tenant,
                             const coord_key_in *key, uint64_t attempt, int outcome, int32_t code,
                             const uint8_t *body, size_t body_len, int64_t deadline, step_rec *out,
                             err_t *err);

/* --- the non-blocking forms ---
 * For a caller that must never wait on the store (the rpc layer's completion-queue thread):
 * the same answers as coord_begin_step / coord_complete_step, given to done() exactly once —
 * before the function returns (invalid input, a replay from the cache, a store that cannot
 * take the call) or later on the store's thread, after the commit (store_step_txn_submit: st
 * may be shared by any number of threads). *out belongs to the call: done reads it (or moves
 * what it keeps out of it) and coord clears it afterwards. The strings of key, fp and body are
 * borrowed until done has run. */
typedef void (*coord_begin_done_fn)(void *arg, err_code rc, coord_begin_result *out, err_t *err);
typedef void (*coord_complete_done_fn)(void *arg, err_code rc, step_rec *out, err_t *err);

void coord_begin_step_async(const coord_ctx *ctx, store *st, const char *tenant,
                            const coord_key_in *key, const uint8_t *fp, size_t fp_len,
                            uint32_t lease_ms, int64_t deadline, coord_begin_done_fn done,
                            void *arg);

void coord_complete_step_async(const coord_ctx *ctx, store *st, const char *tenant,
                               const coord_key_in *key, uint64_t attempt, int outcome, int32_t code,
                               const uint8_t *body, size_t body_len, int64_t deadline,
                               coord_complete_done_fn done, void *arg);

/* BeginStep with waiting (docs/api.md §12): as coord_begin_step_async, but where the answer would
 * be ERR_ABORTED for a step (or a compensation's forward) in progress, the call waits in
 * ctx->waiters (coord_wait.h) for up to wait_ms (0 to REC_WAIT_MS_MAX, else ERR_INVALID naming
 * wait_ms), and at most until shortly before deadline, holding no thread and no store
 * connection; it then runs BeginStep again each time the step's pair changes or its lease
 * ends. done still runs exactly once: with the answer on the new state, ERR_ABORTED when the
 * wait ran out (or the table is full), or ERR_UNAVAILABLE when this node stopped leading
 * (err->leader set) or is shutting down. Strings of key and fp stay borrowed until done ran.
 * cell (NULL: none) links the call to its caller's cancellation: coord_waiters_cancel on it
 * answers a parked call at once (ERR_ABORTED "cancelled by the caller") and frees its place. */
void coord_begin_step_wait_async(const coord_ctx *ctx, store *st, const char *tenant,
                                 const coord_key_in *key, const uint8_t *fp, size_t fp_len,
                                 uint32_t lease_ms, uint32_t wait_ms, int64_t deadline,
                                 coord_wait_cell *cell, coord_begin_done_fn done, void *arg);

/* wait_ms as BeginStep accepts it (for a caller that answers without waiting). */
err_code coord_check_wait_ms(uint32_t wait_ms, err_t *err);

/* ExtendLease. lease_ms 0 = the policy's. */
err_code coord_extend_lease(const coord_ctx *ctx, store *st, const char *tenant,
                            const coord_key_in *key, uint64_t attempt, uint32_t lease_ms,
                            int64_t deadline, int64_t *lease_expires_ms, err_t *err);

/* LookupStep. ERR_NOT_FOUND when there is no record; else *out is owned. */
err_code coord_lookup_step(const coord_ctx *ctx, store *st, const char *tenant,
                           const coord_key_in *key, int64_t deadline, step_rec *out, err_t *err);

/* BeginSaga. request_id "" or NULL = none (always a new saga). Labels borrowed. */
err_code coord_begin_saga(const coord_ctx *ctx, store *st, const char *tenant,
                          const char *request_id, const char *saga_type, const saga_label *labels,
                          size_t n_labels, int64_t deadline, saga_begun *out, err_t *err);

/* GetSaga (paged, as ListSteps): coord_admin.h. */

/* GetPolicy: the effective policy of (service, operation) for tenant; no store access.
 * Admin.SetPolicy/DeletePolicy/ListPolicies: coord_policy.h. */
err_code coord_get_policy(const coord_ctx *ctx, const char *tenant, const char *service,
                          const char *operation, policy *out, err_t *err);

#endif
