/* coord.c — the coordinator's operations (see coord.h): validate, resolve the policy, run the
 * decision in one store transaction, and copy out what the caller keeps.
 *
 * Guarantees:
 *  - Validation happens before any store access; an invalid request never reaches the store.
 *  - Outputs are zeroed first (never freed: the caller passes an empty or cleared value), and
 *    on any error they are left empty again, owning nothing.
 *  - Store callbacks may run more than once; each run frees what the previous one copied.
 */
#include "coord.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../metrics/metrics.h"
#include "../util/clock.h"
#include "../util/log.h"
#include "../util/uuidv7.h"
#include "../domain/slot.h"
#include "coord_log.h"
#include "coord_step.h"
#include "../util/traceparent.h"
#include "../validate/validate.h"

void coord_ctx_init(coord_ctx *ctx) {
  memset(ctx, 0, sizeof *ctx);
  ctx->resolve_policy = NULL;
  ctx->resolve_arg = NULL;
  ctx->body_max = REC_BODY_MAX_DEFAULT;
  ctx->store_timeout_ms = 2000;
}

void coord_begin_result_clear(coord_begin_result *r) {
  if (!r) return;
  free(r->body);
  memset(r, 0, sizeof *r);
}

/* --- helpers --- */

/* The effective policy of (tenant, service, operation): the context's resolver, else the
 * built-in default. A resolver that leaves lease or retention at 0 gets the default for that
 * field. */
static void resolve(const coord_ctx *ctx, const char *tenant, const char *service,
                    const char *operation, policy *out) {
  if (ctx->resolve_policy)
    ctx->resolve_policy(ctx->resolve_arg, tenant, service, operation, out);
  else
    policy_default(service, operation, out);
  if (out->lease_ms == 0) out->lease_ms = POLICY_DEFAULT_LEASE_MS;
  if (out->retention_s == 0) out->retention_s = POLICY_DEFAULT_RETENTION_S;
}

void coord__trace_of(const coord_key_in *key, char dst[REC_TRACE_ID_MAX + 1]) {
  const char *t = key ? key->trace_id : NULL;
  snprintf(dst, REC_TRACE_ID_MAX + 1, "%s", trace_id_valid(t) ? t : "");
}

int64_t coord__store_deadline(const coord_ctx *ctx, int64_t deadline) {
  int64_t cap = clock_mono_ms() + ctx->store_timeout_ms;
  return deadline < cap ? deadline : cap;
}

static err_code validate_step_key(const char *tenant, const coord_key_in *key, step_key *out,
                                  err_t *err) {
  if (!key) return err_set(err, ERR_INVALID, "key: missing");
  return validate_key(tenant ? tenant : "", key->global_id ? key->global_id : "",
                      key->service ? key->service : "", key->operation ? key->operation : "",
                      key->phase, out, err);
}

static err_code out_of_memory(err_t *err) {
  return err_oom(err);
}

/* --- BeginStep --- */

/* The store could not be reached or did not answer in time (not a conflict between callers:
 * the database answered then, and guarding still works). */
static bool store_unreachable(const err_t *err) {
  return err && err->reason != ERR_R_STORE_CONFLICT;
}

/* Fail-open answer while the store is unreachable: nothing is recorded, so nothing fences
 * this run; counted and logged (never the fingerprint or a body). */
static err_code proceed_unguarded(const step_key *k, coord_begin_result *out, err_t *err) {
  char why[ERR_MSG_MAX];
  snprintf(why, sizeof why, "%s", err->msg);
  coord_begin_result_clear(out);
  out->decision = DECISION_PROCEED_UNGUARDED;
  out->mode = FAILURE_MODE_FAIL_OPEN;
  metrics_unguarded();
  log_kv(LOG_WARN, "store unreachable, fail-open step proceeds unguarded", "tenant", k->tenant,
         "global_id", k->global_id, "service", k->service, "operation", k->operation, "phase",
         k->phase == PHASE_COMPENSATION ? "compensation" : "forward", "error", why,
         (const char *)NULL);
  err_clear(err);
  return ERR_OK;
}

err_code coord__begin_fn(void *argp, const step_pair *cur, step_writes *w, err_t *err) {
  coord__begin_arg *a = argp;
  coord_begin_result_clear(a->out);
  a->in.trace_id = a->trace_id;
  decide_begin_out d;
  err_code rc = decide_begin(&a->in, cur, &d, w, err);
  if (rc != ERR_OK) return rc;
  coord_begin_result *o = a->out;
  o->mode = a->mode;
  o->decision = d.decision;
  o->attempt = d.attempt;
  o->lease_expires_ms = d.lease_expires_ms;
  o->takeover = d.takeover;
  o->expires_ms = d.expires_ms;
  o->result_expires_ms = d.result_expires_ms;
  o->result_expired = d.result_expired;
  o->has_result = d.has_result;
  o->outcome = d.outcome;
  o->code = d.code;
  o->completed_ms = d.completed_ms;
  if (d.body_len > 0) {
    o->body = malloc(d.body_len);
    if (!o->body) {
      w->n = 0; /* a REPLAY writes nothing; never commit a decision we cannot answer */
      coord_begin_result_clear(o);
      return out_of_memory(err);
    }
    memcpy(o->body, d.body, d.body_len);
    o->body_len = d.body_len;
  }
  return ERR_OK;
}

/* a cached record this close to the end of its retention is not answered from the
 * cache (the reaper may have deleted it by the time the database clock gets there); nor one
 * this close to the end of its result's retention, on either side (whether the body is still
 * answered is the database clock's to say; well past it, the table drops the body itself). */
#define CACHE_RETENTION_MARGIN_MS 10000

static bool retained(const step_rec *r, int64_t now) {
  if (!r->present) return true;
  if (!step_rec_live(r, now + CACHE_RETENTION_MARGIN_MS)) return false;
  int64_t re = r->result_expires_ms;
  return r->state == (step_state)REC_KEPT_STATE || re == 0 ||
         re > now + CACHE_RETENTION_MARGIN_MS || re < now - CACHE_RETENTION_MARGIN_MS;
}

/* The answer from the leader's replay cache, when the cached pair gives one that writes
 * nothing: REPLAY, a SKIP or a fingerprint mismatch (the same decision table, on the pair as
 * this leader last committed it). */
bool coord__begin_from_cache(const coord_ctx *ctx, const step_key *k, coord__begin_arg *a,
                             bool count_miss, err_code *rc, err_t *err) {
  step_pair pair;
  if (!replay_cache_get(ctx->cache, k, &pair)) {
    if (count_miss) replay_cache_count(ctx->cache, false);
    return false;
  }
  /* pair.now_ms: the database's clock as the cache carries it forward, never this node's
   * wall clock (which may be skewed): expiry is the database's to decide */
  bool hit = false;
  if (retained(&pair.fwd, pair.now_ms) && retained(&pair.comp, pair.now_ms)) {
    step_writes w;
    memset(&w, 0, sizeof w);
    err_t e;
    err_clear(&e);
    err_code r = coord__begin_fn(a, &pair, &w, &e);
    step_decision d = a->out->decision;
    hit = w.n == 0 &&
          (r == ERR_PRECONDITION ||
           (r == ERR_OK && (d == DECISION_REPLAY || d == DECISION_SKIP_NULL_COMPENSATION ||
                            d == DECISION_SKIP_ALREADY_COMPENSATED)));
    if (hit) {
      *rc = r;
      if (r != ERR_OK && err) *err = e;
    } else {
      coord_begin_result_clear(a->out);
    }
  }
  step_rec_clear(&pair.fwd);
  step_rec_clear(&pair.comp);
  if (hit || count_miss) replay_cache_count(ctx->cache, hit);
  return hit;
}

err_code coord__lease_within_key(const policy *pol, uint32_t lease_ms, err_t *err) {
  uint32_t key_s = policy_key_retention(pol);
  if (lease_ms == 0 || (uint64_t)key_s * 1000 > lease_ms) return ERR_OK;
  return err_set(err, ERR_INVALID,
                 "lease_ms: %u ms is not shorter than the key retention of %s/%s (%u s): a "
                 "holder could outlive its key and complete the next attempt 1",
                 lease_ms, pol->service, pol->operation, key_s);
}

err_code coord__begin_prepare(const coord_ctx *ctx, const char *tenant, const coord_key_in *key,
                              const uint8_t *fp, size_t fp_len, uint32_t lease_ms, step_key *k,
                              policy *pol, coord__begin_arg *a, coord_begin_result *out,
                              err_t *err) {
  err_code rc;
  if ((rc = validate_step_key(tenant, key, k, err)) != ERR_OK) return rc;
  if ((rc = validate_fingerprint(fp_len, err)) != ERR_OK) return rc;
  if (fp_len > 0 && !fp) return err_set(err, ERR_INVALID, "fingerprint: missing bytes");
  if ((rc = validate_lease_ms("lease_ms", lease_ms, 1, err)) != ERR_OK) return rc;
  resolve(ctx, k->tenant, k->service, k->operation, pol);
  if ((rc = coord__lease_within_key(pol, lease_ms, err)) != ERR_OK) return rc;
  *a = (coord__begin_arg){
      .in = {.key = k,
             .fp = fp,
             .fp_len = fp_len,
             .lease_ms = lease_ms ? lease_ms : pol->lease_ms,
             .retention = policy_retention(pol)},
      .out = out,
      .mode = pol->mode ? pol->mode : FAILURE_MODE_FAIL_CLOSED,
  };
  coord__trace_of(key, a->trace_id);
  return ERR_OK;
}

err_code coord_begin_step(const coord_ctx *ctx, store *st, const char *tenant,
                          const coord_key_in *key, const uint8_t *fp, size_t fp_len,
                          uint32_t lease_ms, int64_t deadline, coord_begin_result *out,
                          err_t *err) {
  memset(out, 0, sizeof *out);
  err_clear(err);
  step_key k;
  policy pol;
  coord__begin_arg a;
  err_code rc =
      coord__begin_prepare(ctx, tenant, key, fp, fp_len, lease_ms, &k, &pol, &a, out, err);
  if (rc != ERR_OK) return rc;
  if (ctx->cache && coord__begin_from_cache(ctx, &k, &a, true, &rc, err)) return rc;
  rc = coord__step_txn(st, &k, coord__store_deadline(ctx, deadline), coord__begin_fn, &a, NULL,
                       "begin", err);
  return coord__begin_settle(&k, &pol, rc, out, err);
}

err_code coord__begin_settle(const step_key *k, const policy *pol, err_code rc,
                             coord_begin_result *out, err_t *err) {
  if (rc != ERR_OK) coord_begin_result_clear(out);
  if (rc == ERR_UNAVAILABLE && pol->mode == FAILURE_MODE_FAIL_OPEN && store_unreachable(err))
    return proceed_unguarded(k, out, err);
  return rc;
}

/* --- CompleteStep --- */

err_code coord__complete_fn(void *argp, const step_pair *cur, step_writes *w, err_t *err) {
  coord__complete_arg *a = argp;
  step_rec_clear(a->out);
  a->in.trace_id = a->trace_id;
  const step_rec *after = NULL;
  err_code rc = decide_complete(&a->in, cur, w, &after, err);
  if (rc != ERR_OK) return rc;
  if (!step_rec_copy(a->out, after)) {
    w->n = 0; /* do not commit a completion the caller will not hear about */
    return out_of_memory(err);
  }
  return ERR_OK;
}

err_code coord__complete_prepare(const coord_ctx *ctx, const char *tenant, const coord_key_in *key,
                                 uint64_t attempt, int outcome, int32_t code, const uint8_t *body,
                                 size_t body_len, step_key *k, coord__complete_arg *a,
                                 step_rec *out, err_t *err) {
  err_code rc;
  if ((rc = validate_step_key(tenant, key, k, err)) != ERR_OK) return rc;
  if ((rc = validate_attempt(attempt, err)) != ERR_OK) return rc;
  if ((rc = validate_outcome(outcome, err)) != ERR_OK) return rc;
  if ((rc = validate_body(body_len, ctx->body_max, err)) != ERR_OK) return rc;
  if (body_len > 0 && !body) return err_set(err, ERR_INVALID, "body: missing bytes");

  policy pol;
  resolve(ctx, k->tenant, k->service, k->operation, &pol);
  *a = (coord__complete_arg){
      .in = {.key = k,
             .attempt = attempt,
             .outcome = (step_outcome)outcome,
             .code = code,
             .body = body,
             .body_len = body_len,
             .retention = policy_retention(&pol)},
      .out = out,
  };
  coord__trace_of(key, a->trace_id);
  return ERR_OK;
}

err_code coord_complete_step(const coord_ctx *ctx, store *st, const char *tenant,
                             const coord_key_in *key, uint64_t attempt, int outcome, int32_t code,
                             const uint8_t *body, size_t body_len, int64_t deadline, step_rec *out,
                             err_t *err) {
  memset(out, 0, sizeof *out);
  err_clear(err);
  step_key k;
  coord__complete_arg a;
  err_code rc = coord__complete_prepare(ctx, tenant, key, attempt, outcome, code, body, body_len,
                                        &k, &a, out, err);
  if (rc != ERR_OK) return rc;
  rc = coord__step_txn(st, &k, coord__store_deadline(ctx, deadline), coord__complete_fn, &a, NULL,
                       "complete", err);
  if (rc != ERR_OK) step_rec_clear(out);
  return rc;
}

/* --- ExtendLease --- */

typedef struct extend_arg {
  const step_key *key;
  uint64_t attempt;
  uint32_t lease_ms;
  int64_t lease_expires_ms;
} extend_arg;

static err_code extend_fn(void *argp, const step_pair *cur, step_writes *w, err_t *err) {
  extend_arg *a = argp;
  return decide_extend(a->key, a->attempt, a->lease_ms, cur, w, &a->lease_expires_ms, err);
}

err_code coord_extend_lease(const coord_ctx *ctx, store *st, const char *tenant,
                            const coord_key_in *key, uint64_t attempt, uint32_t lease_ms,
                            int64_t deadline, int64_t *lease_expires_ms, err_t *err) {
  *lease_expires_ms = 0;
  err_clear(err);
  step_key k;
  err_code rc;
  if ((rc = validate_step_key(tenant, key, &k, err)) != ERR_OK) return rc;
  if ((rc = validate_attempt(attempt, err)) != ERR_OK) return rc;
  if ((rc = validate_lease_ms("lease_ms", lease_ms, 1, err)) != ERR_OK) return rc;

  policy pol;
  resolve(ctx, k.tenant, k.service, k.operation, &pol);
  if ((rc = coord__lease_within_key(&pol, lease_ms, err)) != ERR_OK) return rc;
  extend_arg a = {.key = &k, .attempt = attempt, .lease_ms = lease_ms ? lease_ms : pol.lease_ms};
  rc = store_step_txn(st, &k, coord__store_deadline(ctx, deadline), extend_fn, &a, err);
  if (rc == ERR_OK) *lease_expires_ms = a.lease_expires_ms;
  return rc;
}

/* --- LookupStep --- */

err_code coord_lookup_step(const coord_ctx *ctx, store *st, const char *tenant,
                           const coord_key_in *key, int64_t deadline, step_rec *out, err_t *err) {
  memset(out, 0, sizeof *out);
  err_clear(err);
  step_key k;
  err_code rc;
  if ((rc = validate_step_key(tenant, key, &k, err)) != ERR_OK) return rc;
  rc = store_lookup_step(st, &k, coord__store_deadline(ctx, deadline), out, err);
  if (rc != ERR_OK) {
    step_rec_clear(out);
    return rc;
  }
  if (!out->present) {
    step_rec_clear(out);
    return err_set(err, ERR_NOT_FOUND, "no such step");
  }
  return ERR_OK;
}

/* --- BeginSaga --- */

#define ISSUE_DRAWS_MAX (64 * SLOTS_MAX) /* far past any slot's expected 1/S share */
#define ISSUE_BLOCK 64                   /* random draws per getrandom */

/* A new global id (UUIDv7); with slot groups, drawn until its slot is the request id's (or,
 * without one, a slot of this group): docs/api.md §17. */
static err_code issue_id(const coord_ctx *ctx, const char *tenant, const char *request_id,
                         char id[UUIDV7_STR_LEN + 1], err_t *err) {
  int64_t now = clock_wall_ms();
  if (!ctx->slots) {
    if (!uuidv7_new(now, id))
      return err_set(err, ERR_INTERNAL, "global_id: the random source failed");
    return ERR_OK;
  }
  uint32_t want = request_id[0] ? slot_of(tenant, request_id, ctx->slots) : 0;
  uint8_t rnd[ISSUE_BLOCK][10];
  for (uint32_t draw = 0; draw < ISSUE_DRAWS_MAX; draw++) {
    if (draw % ISSUE_BLOCK == 0 && !uuidv7_random(rnd, sizeof rnd))
      return err_set(err, ERR_INTERNAL, "global_id: the random source failed");
    uuidv7_format(now, rnd[draw % ISSUE_BLOCK], id);
    uint32_t slot = slot_of(tenant, id, ctx->slots);
    if (request_id[0] ? slot == want : !ctx->owns_slot || ctx->owns_slot(ctx->owns_arg, slot))
      return ERR_OK;
  }
  return err_fail(err, ERR_UNAVAILABLE, ERR_R_NOT_LEADER,
                  "global_id: no id drawn falls in a slot of this group");
}

err_code coord_begin_saga(const coord_ctx *ctx, store *st, const char *tenant,
                          const char *request_id, const char *saga_type, const saga_label *labels,
                          size_t n_labels, int64_t deadline, saga_begun *out, err_t *err) {
  memset(out, 0, sizeof *out);
  err_clear(err);
  err_code rc;
  if (!request_id) request_id = "";
  if (!saga_type) saga_type = "";
  if ((rc = validate_tenant(tenant, err)) != ERR_OK) return rc;
  if ((rc = validate_request_id(request_id, err)) != ERR_OK) return rc;
  if ((rc = validate_saga_type(saga_type, err)) != ERR_OK) return rc;
  if (n_labels > REC_LABELS_MAX)
    return err_set(err, ERR_INVALID, "labels: at most %d labels are allowed", REC_LABELS_MAX);
  if (n_labels > 0 && !labels) return err_set(err, ERR_INVALID, "labels: missing");
  for (size_t i = 0; i < n_labels; i++) {
    if ((rc = validate_label(labels[i].key, labels[i].value, err)) != ERR_OK) return rc;
    for (size_t j = 0; j < i; j++)
      if (strcmp(labels[i].key, labels[j].key) == 0)
        return err_set(err, ERR_INVALID, "labels: duplicate key %s", labels[i].key);
  }

  policy pol;
  resolve(ctx, tenant, "*", "*", &pol);
  char id[UUIDV7_STR_LEN + 1];
  if ((rc = issue_id(ctx, tenant, request_id, id, err)) != ERR_OK) return rc;
  saga_new in = {
      .tenant = tenant,
      .global_id = id,
      .request_id = request_id[0] ? request_id : NULL,
      .saga_type = saga_type,
      .labels = n_labels ? labels : NULL,
      .n_labels = n_labels,
      .retention_s = policy_key_retention(&pol), /* a request id is a key (docs/api.md §12) */
  };
  rc = store_begin_saga(st, &in, coord__store_deadline(ctx, deadline), out, err);
  if (rc != ERR_OK) memset(out, 0, sizeof *out);
  return rc;
}

/* --- GetPolicy --- */

err_code coord_get_policy(const coord_ctx *ctx, const char *tenant, const char *service,
                          const char *operation, policy *out, err_t *err) {
  memset(out, 0, sizeof *out);
  err_clear(err);
  err_code rc;
  if ((rc = validate_tenant(tenant, err)) != ERR_OK) return rc;
  if ((rc = validate_name("service", service, err)) != ERR_OK) return rc;
  if ((rc = validate_name("operation", operation, err)) != ERR_OK) return rc;
  resolve(ctx, tenant, service, operation, out);
  return ERR_OK;
}
