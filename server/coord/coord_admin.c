/* coord_admin.c — ListSteps, ResolveStep and ListAudit (see coord_admin.h): validation, page
 * tokens, the resolution rule, and the audited step transaction. */
#include "coord_admin.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../metrics/metrics.h"
#include "../util/clock.h"
#include "../util/traceparent.h"
#include "coord_log.h"
#include "coord_resolve.h"
#include "coord_step.h"
#include "../validate/validate.h"

/* --- shared helpers --- */

static const char *nz(const char *s) {
  return s ? s : "";
}

static uint32_t page_size(uint32_t n) {
  if (n == 0) return LIST_PAGE_DEFAULT;
  return n > LIST_PAGE_MAX ? LIST_PAGE_MAX : n;
}

/* --- byte-bounded pages (docs/api.md §16) --- */

/* Keeps the first records whose sizes fit in the page (at least one) and clears the rest; true
 * when any was cut. */
static bool page_trim(step_rec *recs, size_t *n, coord_rec_size_fn size) {
  if (!size) return false;
  size_t total = 0, keep = *n;
  for (size_t i = 0; i < *n; i++) {
    total += size(&recs[i]);
    if (total > COORD_PAGE_BYTES - COORD_PAGE_RESERVE && i > 0) {
      keep = i;
      break;
    }
  }
  for (size_t i = keep; i < *n; i++) step_rec_clear(&recs[i]);
  bool cut = keep < *n;
  *n = keep;
  return cut;
}

/* --- ListSteps --- */

err_code coord__list_filter(const char *tenant, const coord_list_in *in, step_filter *f,
                            err_t *err) {
  err_code rc;
  if ((rc = validate_tenant(tenant, err)) != ERR_OK) return rc;
  if (in->state < STATE_NONE || in->state > STATE_RELEASED)
    return err_set(err, ERR_INVALID, "state: unknown step state %d", in->state);
  if (in->lease_expired_only && in->state != STATE_NONE && in->state != STATE_IN_PROGRESS)
    return err_set(err, ERR_INVALID, "lease_expired_only: only IN_PROGRESS steps hold a lease");
  if (*nz(in->service) && (rc = validate_name("service", in->service, err)) != ERR_OK) return rc;
  if (*nz(in->operation) && (rc = validate_name("operation", in->operation, err)) != ERR_OK)
    return rc;
  if (*nz(in->global_id) && (rc = validate_global_id("global_id", in->global_id, err)) != ERR_OK)
    return rc;
  if (*nz(in->trace_id) && !trace_id_valid(in->trace_id))
    return err_set(err, ERR_INVALID,
                   "trace_id: must be 32 lower-case hex digits, not all zero (a W3C trace id)");
  if (in->updated_before_ms < 0)
    return err_set(err, ERR_INVALID, "updated_before_unix_ms: must not be negative");
  *f = (step_filter){
      .tenant = tenant,
      .state = (step_state)in->state,
      .service = nz(in->service),
      .operation = nz(in->operation),
      .global_id = nz(in->global_id),
      .trace_id = nz(in->trace_id),
      .updated_before_ms = in->updated_before_ms,
      .lease_expired_only = in->lease_expired_only,
      .limit = page_size(in->page_size),
  };
  return ERR_OK;
}

/* The start of every paged answer: an empty page, no next page, no error. */
static void page_start(void *out, size_t size, char next_token[COORD_TOKEN_MAX], err_t *err) {
  memset(out, 0, size);
  next_token[0] = '\0';
  err_clear(err);
}

err_code coord_list_steps(const coord_ctx *ctx, store *st, const char *tenant,
                          const coord_list_in *in, int64_t deadline, step_list *out,
                          char next_token[COORD_TOKEN_MAX], err_t *err) {
  page_start(out, sizeof *out, next_token, err);
  step_filter f;
  err_code rc = coord__list_filter(tenant, in, &f, err);
  if (rc != ERR_OK) return rc;
  if (*nz(in->page_token)) {
    if ((rc = coord_steps_token_decode(&f, in->page_token, &f.after, err)) != ERR_OK) return rc;
    f.has_after = true;
  }
  if (in->rec_size) f.max_body_bytes = COORD_PAGE_BYTES;
  rc = store_list_steps(st, &f, coord__store_deadline(ctx, deadline), out, err);
  if (rc != ERR_OK) {
    step_list_clear(out);
    return rc;
  }
  if (page_trim(out->recs, &out->n, in->rec_size)) out->more = true;
  if (out->more && out->n > 0 &&
      !coord_steps_token_encode(&f, &out->recs[out->n - 1].key, next_token)) {
    step_list_clear(out);
    return err_set(err, ERR_INTERNAL, "page token too long");
  }
  return ERR_OK;
}

/* --- GetSaga --- */

err_code coord_get_saga(const coord_ctx *ctx, store *st, const char *tenant,
                        const coord_saga_in *in, int64_t deadline, saga_view *out,
                        char next_token[COORD_TOKEN_MAX], err_t *err) {
  page_start(out, sizeof *out, next_token, err);
  err_code rc;
  if ((rc = validate_tenant(tenant, err)) != ERR_OK) return rc;
  if ((rc = validate_global_id("global_id", in->global_id, err)) != ERR_OK) return rc;
  saga_page pg = {.limit = REC_SAGA_PAGE_MAX,
                  .max_body_bytes = in->rec_size ? COORD_PAGE_BYTES : 0};
  if (*nz(in->page_token) &&
      (rc = coord_saga_token_decode(tenant, in->global_id, in->page_token, &pg, err)) != ERR_OK)
    return rc;
  rc = store_get_saga(st, tenant, in->global_id, &pg, coord__store_deadline(ctx, deadline), out,
                      err);
  if (rc != ERR_OK) {
    saga_view_clear(out);
    return rc;
  }
  if (page_trim(out->steps, &out->n_steps, in->rec_size)) out->more = true;
  if (out->more && out->n_steps > 0 &&
      !coord_saga_token_encode(tenant, in->global_id, &out->steps[out->n_steps - 1], next_token)) {
    saga_view_clear(out);
    return err_set(err, ERR_INTERNAL, "page token too long");
  }
  return ERR_OK;
}

/* --- ResolveStep --- */

err_code coord__resolve_fn(void *argp, const step_pair *cur, step_writes *w, err_t *err) {
  coord__resolve_arg *a = argp;
  step_rec_clear(a->out);
  const step_rec *after = NULL;
  step_state from;
  err_code rc = coord_decide_resolve(a->key, a->outcome, a->code, a->body, a->body_len,
                                     a->retention, cur, w, &after, &from, err);
  if (rc != ERR_OK) return rc;
  step_rec *n = &w->recs[w->n - 1]; /* the resolved record, *after */
  snprintf(n->complete_trace_id, sizeof n->complete_trace_id, "%s", a->trace_id);
  a->audit->from_state = from;
  a->audit->to_state = after->state;
  if (!step_rec_copy(a->out, after)) {
    w->n = 0;
    return err_oom(err);
  }
  return ERR_OK;
}

/* Strict UTF-8 without control characters (C0, DEL, C1 are refused): validate_text. A lenient
 * check here let surrogates through to Postgres, which refused them as an internal error. */
static bool clean_utf8(const char *s) {
  err_t e;
  return validate_text("text", s, SIZE_MAX, &e) == ERR_OK;
}

err_code coord__resolution_check(const coord_ctx *ctx, const char *tenant, int outcome,
                                 const uint8_t *body, size_t body_len, const char *reason,
                                 const char **actor, err_t *err) {
  err_code rc;
  if (outcome != OUTCOME_SUCCEEDED && outcome != OUTCOME_FAILED && outcome != OUTCOME_RETRYABLE)
    return err_set(err, ERR_INVALID,
                   "outcome: must be OUTCOME_SUCCEEDED, OUTCOME_FAILED or "
                   "OUTCOME_RETRYABLE");
  if ((rc = validate_body(body_len, ctx->body_max, err)) != ERR_OK) return rc;
  if (body_len > 0 && !body) return err_set(err, ERR_INVALID, "body: missing bytes");
  reason = nz(reason);
  if (!*reason) return err_set(err, ERR_INVALID, "reason: a reason is required to resolve a step");
  if ((rc = validate_reason("reason", reason, AUDIT_REASON_MAX, err)) != ERR_OK) return rc;
  if (!*nz(*actor)) *actor = tenant; /* the caller is known by its tenant (its credentials) */
  if (strlen(*actor) > AUDIT_ACTOR_MAX || !clean_utf8(*actor))
    return err_set(err, ERR_INVALID,
                   "actor: must be at most %d bytes of UTF-8 without control characters",
                   AUDIT_ACTOR_MAX);
  return ERR_OK;
}

step_retention coord__retention_of(const coord_ctx *ctx, const step_key *k) {
  policy pol;
  err_t ignored;
  coord_get_policy(ctx, k->tenant, k->service, k->operation, &pol, &ignored);
  if (!pol.retention_s) pol.retention_s = POLICY_DEFAULT_RETENTION_S;
  return policy_retention(&pol);
}

void coord__resolve_prepare(const coord_ctx *ctx, const step_key *key, int outcome, int32_t code,
                            const uint8_t *body, size_t body_len, const char *actor,
                            const char *reason, const char *batch_id, audit_rec *audit,
                            step_rec *out, coord__resolve_arg *a) {
  memset(audit, 0, sizeof *audit);
  audit->key = *key;
  snprintf(audit->actor, sizeof audit->actor, "%s", actor);
  snprintf(audit->action, sizeof audit->action, "resolve");
  snprintf(audit->reason, sizeof audit->reason, "%s", nz(reason));
  snprintf(audit->batch_id, sizeof audit->batch_id, "%s", batch_id);
  *a = (coord__resolve_arg){.key = key,
                            .outcome = (step_outcome)outcome,
                            .code = code,
                            .body = body,
                            .body_len = body_len,
                            .retention = coord__retention_of(ctx, key),
                            .audit = audit,
                            .out = out};
}

/* A ResolveStep refused not-resolvable (*err): OK with the record when the call repeats the
 * resolve that settled the step (coord_decide_resolve_repeat on the record and the key's newest
 * resolve audit row, read after the refusal); else the refusal stands. The reads need no lock:
 * a settled step changes only by a new attempt, whose completion the rule tells apart. */
static err_code resolve_repeat(const coord_ctx *ctx, store *st, const audit_rec *mine,
                               const coord_resolve_in *in, int64_t deadline, step_rec *out,
                               err_t *err) {
  step_rec_clear(out);
  err_t refusal = *err;
  audit_rec last;
  bool found = false;
  int64_t sd = coord__store_deadline(ctx, deadline);
  /* a read that fails answers its error, not the refusal: the refusal would say no try acted */
  err_code rc = store_last_audit(st, &mine->key, "resolve", sd, &last, &found, err);
  if (rc == ERR_OK && found) rc = store_lookup_step(st, &mine->key, sd, out, err);
  if (rc != ERR_OK) {
    step_rec_clear(out);
    return rc;
  }
  if (!found || !coord_decide_resolve_repeat(out, &last, (step_outcome)in->outcome, in->code,
                                             in->body, in->body_len, mine->actor, mine->reason)) {
    step_rec_clear(out);
    *err = refusal;
    return ERR_PRECONDITION;
  }
  err_clear(err);
  return ERR_OK;
}

err_code coord_resolve_step(const coord_ctx *ctx, store *st, const char *tenant,
                            const coord_resolve_in *in, int64_t deadline, step_rec *out,
                            err_t *err) {
  memset(out, 0, sizeof *out);
  err_clear(err);
  step_key k;
  err_code rc = validate_key(nz(tenant), nz(in->key.global_id), nz(in->key.service),
                             nz(in->key.operation), in->key.phase, &k, err);
  if (rc != ERR_OK) return rc;
  const char *actor = in->actor;
  rc = coord__resolution_check(ctx, k.tenant, in->outcome, in->body, in->body_len, in->reason,
                               &actor, err);
  if (rc != ERR_OK) return rc;
  audit_rec audit;
  coord__resolve_arg a;
  coord__resolve_prepare(ctx, &k, in->outcome, in->code, in->body, in->body_len, actor, in->reason,
                         "", &audit, out, &a);
  coord__trace_of(&in->key, a.trace_id);
  rc = coord__step_txn(st, &k, coord__store_deadline(ctx, deadline), coord__resolve_fn, &a, &audit,
                       "resolve", err);
  if (rc == ERR_PRECONDITION && err && err->reason == ERR_R_NOT_RESOLVABLE)
    return resolve_repeat(ctx, st, &audit, in, deadline, out, err);
  if (rc != ERR_OK) {
    step_rec_clear(out);
    return rc;
  }
  metrics_resolved(in->outcome);
  return ERR_OK;
}

/* --- ListAudit --- */

err_code coord_list_audit(const coord_ctx *ctx, store *st, const char *tenant,
                          const char *global_id, uint32_t size, const char *page_token,
                          int64_t deadline, audit_list *out, char next_token[COORD_TOKEN_MAX],
                          err_t *err) {
  page_start(out, sizeof *out, next_token, err);
  err_code rc;
  if ((rc = validate_tenant(tenant, err)) != ERR_OK) return rc;
  global_id = nz(global_id);
  if (*global_id && (rc = validate_global_id("global_id", global_id, err)) != ERR_OK) return rc;
  int64_t before = 0;
  if (*nz(page_token) &&
      (rc = coord_audit_token_decode(tenant, global_id, page_token, &before, err)) != ERR_OK)
    return rc;
  rc = store_list_audit(st, tenant, global_id, before, page_size(size),
                        coord__store_deadline(ctx, deadline), out, err);
  if (rc != ERR_OK) {
    audit_list_clear(out);
    return rc;
  }
  if (out->more && out->n > 0)
    coord_audit_token_encode(tenant, global_id, out->recs[out->n - 1].id, next_token);
  return ERR_OK;
}
