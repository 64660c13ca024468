/* coord_step.h — internal to coord/: BeginStep and CompleteStep in parts, shared by the
 * blocking forms (coord.c) and the non-blocking ones (coord_async.c):
 *   prepare (validate, resolve the policy) -> [BeginStep: the replay cache] -> the step
 *   transaction (fn with its arg) -> settle (what the caller is told).
 */
#ifndef IDEM_COORD_STEP_H
#define IDEM_COORD_STEP_H

#include "coord.h"
#include "decide.h"

/* Copies key->trace_id into dst when it is a valid trace id, else "" (coord.h). */
void coord__trace_of(const coord_key_in *key, char dst[REC_TRACE_ID_MAX + 1]);

/* min(deadline, now + ctx->store_timeout_ms) on the monotonic clock. */
int64_t coord__store_deadline(const coord_ctx *ctx, int64_t deadline);

/* --- BeginStep --- */

typedef struct coord__begin_arg {
  decide_begin_in in; /* in.trace_id points at trace_id (set by coord__begin_fn) */
  coord_begin_result *out;
  char trace_id[REC_TRACE_ID_MAX + 1]; /* the call's, copied: "" when none */
  failure_mode mode;                   /* the resolved policy's: copied into every answer */
} coord__begin_arg;

/* The step transaction's callback (arg: coord__begin_arg). */
err_code coord__begin_fn(void *argp, const step_pair *cur, step_writes *w, err_t *err);

/* Validates a BeginStep and resolves its policy into *k, *pol and *a (a->out = out; a->in
 * borrows k and fp). */
err_code coord__begin_prepare(const coord_ctx *ctx, const char *tenant, const coord_key_in *key,
                              const uint8_t *fp, size_t fp_len, uint32_t lease_ms, step_key *k,
                              policy *pol, coord__begin_arg *a, coord_begin_result *out,
                              err_t *err);

/* A requested lease (lease_ms; 0 = the policy's, always fine) must be shorter than the key
 * retention in effect under pol: attempt numbers start again at 1 once a key is forgotten
 * (docs/limits.md "Attempt numbers"). ERR_INVALID naming lease_ms otherwise. */
err_code coord__lease_within_key(const policy *pol, uint32_t lease_ms, err_t *err);

/* The answer from the leader's replay cache when the cached pair gives one that writes
 * nothing; true with *rc (and a->out / err) set on a hit. count_miss: count a miss too. */
bool coord__begin_from_cache(const coord_ctx *ctx, const step_key *k, coord__begin_arg *a,
                             bool count_miss, err_code *rc, err_t *err);

/* What the caller is told after the step transaction answered rc: out cleared on an error;
 * a fail-open operation proceeds unguarded when the store was unreachable. */
err_code coord__begin_settle(const step_key *k, const policy *pol, err_code rc,
                             coord_begin_result *out, err_t *err);

/* --- CompleteStep --- */

typedef struct coord__complete_arg {
  decide_complete_in in; /* in.trace_id points at trace_id (set by coord__complete_fn) */
  step_rec *out;         /* owned copy of the record after the call */
  char trace_id[REC_TRACE_ID_MAX + 1];
} coord__complete_arg;

err_code coord__complete_fn(void *argp, const step_pair *cur, step_writes *w, err_t *err);

/* Validates a CompleteStep and resolves its policy into *k and *a (a->out = out; a->in borrows
 * k and body). */
err_code coord__complete_prepare(const coord_ctx *ctx, const char *tenant, const coord_key_in *key,
                                 uint64_t attempt, int outcome, int32_t code, const uint8_t *body,
                                 size_t body_len, step_key *k, coord__complete_arg *a,
                                 step_rec *out, err_t *err);

#endif
