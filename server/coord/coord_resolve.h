/* coord_resolve.h — coord-internal: what ResolveStep (coord_admin.c) and ResolveSteps
 * (coord_bulk.c) share: the listing filter, the checks of a resolution's inputs, the retention
 * of a key and the step-transaction callback that applies the resolution rule. */
#ifndef IDEM_COORD_RESOLVE_H
#define IDEM_COORD_RESOLVE_H

#include "coord_admin.h"

/* ListStepsRequest's filters (validated) as a step_filter; page_token is not read. */
err_code coord__list_filter(const char *tenant, const coord_list_in *in, step_filter *f,
                            err_t *err);

/* outcome (SUCCEEDED, FAILED, RETRYABLE), body, reason (required), *actor ("" = tenant: set
 * here). ERR_INVALID naming the field. */
err_code coord__resolution_check(const coord_ctx *ctx, const char *tenant, int outcome,
                                 const uint8_t *body, size_t body_len, const char *reason,
                                 const char **actor, err_t *err);

/* The retention of a resolved result for key (its effective policy). */
step_retention coord__retention_of(const coord_ctx *ctx, const step_key *k);

/* store_step_fn: coord_decide_resolve on the pair, from/to states into audit, the record
 * after into *out (owned). */
typedef struct coord__resolve_arg {
  const step_key *key;
  step_outcome outcome;
  int32_t code;
  const uint8_t *body;
  size_t body_len;
  step_retention retention;
  audit_rec *audit; /* from/to filled here; inserted by the store on ERR_OK */
  step_rec *out;
  char trace_id[REC_TRACE_ID_MAX + 1]; /* the call's ("" = none): the complete_trace_id written */
} coord__resolve_arg;
err_code coord__resolve_fn(void *argp, const step_pair *cur, step_writes *w, err_t *err);

/* What a resolution of key needs: its audit row (actor, "resolve", reason, batch id: "" for a
 * single one) into *audit and the callback's argument into *a, pointing at audit and out. */
void coord__resolve_prepare(const coord_ctx *ctx, const step_key *key, int outcome, int32_t code,
                            const uint8_t *body, size_t body_len, const char *actor,
                            const char *reason, const char *batch_id, audit_rec *audit,
                            step_rec *out, coord__resolve_arg *a);

#endif
