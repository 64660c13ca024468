/* coord_bulk.c — Admin.ResolveSteps (docs/api.md §12): resolve every step a ListSteps filter selects,
 * each under its pair lock by the ResolveStep rule, with one audit row each carrying the batch
 * id; repeat-safe by request id.
 *
 * The order of things: validate everything; a request id seen before answers its first answer
 * (replayed) and resolves nothing; match by keyset pages, remembering each step's (state,
 * attempt, updated_ms); more than max_steps matches resolve nothing (FAILED_PRECONDITION); a dry
 * run answers the count and a sample; otherwise each step goes through its own step transaction
 * (the batcher groups them with live traffic, one at a time from here, so the commits of live
 * calls are never queued behind thousands of resolutions), and one that changed since it matched
 * is skipped. The answer is stored under the request id last: a bulk resolution cut short (a
 * store error, the deadline) stores nothing, and repeating it resolves what is still left. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../metrics/metrics.h"
#include "../util/clock.h"
#include "../util/uuidv7.h"
#include "../validate/validate.h"
#include "coord_log.h"
#include "coord_resolve.h"
#include "coord_step.h"

#define BULK_KEEP_S (24u * 3600) /* how long an answer is remembered under its request id */

static const char *nz(const char *s) {
  return s ? s : "";
}

bool coord_bulk_unchanged(const step_rec *matched, const step_rec *cur) {
  return cur->present && cur->state == matched->state && cur->attempt == matched->attempt &&
         cur->updated_ms == matched->updated_ms;
}

/* A matched step: its key and what it looked like (the records' other fields are not kept). */
typedef struct bulk_match {
  step_rec seen; /* key, state, attempt, updated_ms; no body */
} bulk_match;

typedef struct bulk_arg {
  coord__resolve_arg r;
  const step_rec *seen;
  bool changed;
} bulk_arg;

static err_code bulk_fn(void *argp, const step_pair *cur, step_writes *w, err_t *err) {
  bulk_arg *a = argp;
  const step_rec *now = a->seen->key.phase == PHASE_FORWARD ? &cur->fwd : &cur->comp;
  if (!coord_bulk_unchanged(a->seen, now)) {
    a->changed = true;
    return err_set(err, ERR_PRECONDITION, "changed since it matched");
  }
  return coord__resolve_fn(&a->r, cur, w, err);
}

/* Pages through the filter: up to max + 1 matches into *m (owned). */
static err_code match(const coord_ctx *ctx, store *st, step_filter *f, uint32_t max,
                      int64_t deadline, bulk_match **m, size_t *n, err_t *err) {
  *m = NULL;
  *n = 0;
  f->limit = LIST_PAGE_MAX;
  f->has_after = false;
  for (;;) {
    step_list l = {0};
    err_code rc = store_list_steps(st, f, coord__store_deadline(ctx, deadline), &l, err);
    if (rc != ERR_OK) return rc;
    bulk_match *grown = l.n ? realloc(*m, (*n + l.n) * sizeof **m) : *m;
    if (l.n && !grown) {
      step_list_clear(&l);
      return err_oom(err);
    }
    *m = grown;
    for (size_t i = 0; i < l.n && *n <= max; i++) {
      step_rec *s = &(*m)[(*n)++].seen;
      memset(s, 0, sizeof *s);
      s->key = l.recs[i].key;
      s->present = true;
      s->state = l.recs[i].state;
      s->attempt = l.recs[i].attempt;
      s->updated_ms = l.recs[i].updated_ms;
    }
    bool more = l.more && l.n > 0;
    if (more) f->after = l.recs[l.n - 1].key;
    step_list_clear(&l);
    if (!more || *n > max) return ERR_OK;
    f->has_after = true;
  }
}

static err_code check(const coord_ctx *ctx, const char *tenant, const coord_bulk_in *in,
                      step_filter *f, const char **actor, err_t *err) {
  err_code rc = coord__list_filter(tenant, &in->filter, f, err);
  if (rc != ERR_OK) return rc;
  if (f->state != STATE_IN_PROGRESS && f->state != STATE_UNKNOWN && !f->lease_expired_only)
    return err_set(err, ERR_INVALID,
                   "filter.state: must select STEP_STATE_IN_PROGRESS or STEP_STATE_UNKNOWN steps "
                   "(or lease_expired_only): only those can be resolved");
  if (in->max_steps < 1 || in->max_steps > BULK_STEPS_MAX)
    return err_set(err, ERR_INVALID, "max_steps: must be from 1 to %d", BULK_STEPS_MAX);
  if (!*nz(in->request_id))
    return err_set(err, ERR_INVALID,
                   "request_id: required (the same id again answers the first answer)");
  if ((rc = validate_request_id(in->request_id, err)) != ERR_OK) return rc;
  return coord__resolution_check(ctx, tenant, in->outcome, in->body, in->body_len, in->reason,
                                 actor, err);
}

/* Resolves the matches; *resolved counts those that were. */
static err_code resolve_all(const coord_ctx *ctx, store *st, const coord_bulk_in *in,
                            const char *actor, const char *batch_id, const bulk_match *m, size_t n,
                            int64_t deadline, uint32_t *resolved, err_t *err) {
  for (size_t i = 0; i < n; i++) {
    if (clock_mono_ms() >= deadline)
      return err_set(err, ERR_DEADLINE,
                     "deadline exceeded after %u of %zu resolutions (repeat the request to "
                     "resolve the rest)",
                     *resolved, n);
    const step_key *k = &m[i].seen.key;
    audit_rec audit;
    step_rec after = {0};
    bulk_arg a = {.seen = &m[i].seen};
    coord__resolve_prepare(ctx, k, in->outcome, in->code, in->body, in->body_len, actor, in->reason,
                           batch_id, &audit, &after, &a.r);
    coord__trace_of(&(coord_key_in){.trace_id = in->trace_id}, a.r.trace_id);
    err_t e;
    err_code rc = coord__step_txn(st, k, coord__store_deadline(ctx, deadline), bulk_fn, &a, &audit,
                                  "resolve", &e);
    step_rec_clear(&after);
    if (rc == ERR_OK) {
      (*resolved)++;
      metrics_resolved(in->outcome);
    } else if (!a.changed && rc != ERR_PRECONDITION && rc != ERR_NOT_FOUND) {
      *err = e; /* the store failed: stop here; a repeat resolves the rest */
      return rc;
    }
  }
  return ERR_OK;
}

err_code coord_resolve_steps(const coord_ctx *ctx, store *st, const char *tenant,
                             const coord_bulk_in *in, int64_t deadline, coord_bulk_out *out,
                             err_t *err) {
  memset(out, 0, sizeof *out);
  err_clear(err);
  step_filter f;
  const char *actor = in->actor;
  err_code rc = check(ctx, tenant, in, &f, &actor, err);
  if (rc != ERR_OK) return rc;
  bulk_rec *r = &out->rec;
  snprintf(r->tenant, sizeof r->tenant, "%s", tenant);
  snprintf(r->request_id, sizeof r->request_id, "%s", in->request_id);
  out->dry_run = in->dry_run;
  if (!in->dry_run) { /* the same request again: its first answer */
    bool found = false;
    rc = store_bulk_get(st, tenant, in->request_id, coord__store_deadline(ctx, deadline), r, &found,
                        err);
    if (rc != ERR_OK) return rc;
    if (found) {
      out->replayed = true;
      return ERR_OK;
    }
  }
  bulk_match *m = NULL;
  size_t n = 0;
  rc = match(ctx, st, &f, in->max_steps, deadline, &m, &n, err);
  if (rc == ERR_OK && n > in->max_steps)
    rc = err_set(err, ERR_PRECONDITION,
                 "more than max_steps (%u) steps match: nothing was resolved; narrow the filter "
                 "or raise max_steps (at most %d)",
                 in->max_steps, BULK_STEPS_MAX);
  if (rc != ERR_OK) {
    free(m);
    return rc;
  }
  r->matched = (uint32_t)n;
  for (size_t i = 0; i < n && r->n_sample < BULK_SAMPLE_MAX; i++)
    r->sample[r->n_sample++] = m[i].seen.key;
  if (in->dry_run) {
    free(m);
    return ERR_OK;
  }
  if (!uuidv7_new(clock_wall_ms(), r->batch_id)) {
    free(m);
    return err_set(err, ERR_INTERNAL, "cannot make a batch id");
  }
  rc = resolve_all(ctx, st, in, actor, r->batch_id, m, n, deadline, &r->resolved, err);
  free(m);
  if (rc != ERR_OK) return rc;
  bulk_rec first;
  bool stored = false;
  rc = store_bulk_put(st, r, BULK_KEEP_S, coord__store_deadline(ctx, deadline), &first, &stored,
                      err);
  if (rc != ERR_OK) return rc;
  if (!stored) { /* a twin with the same request id finished first: its answer is the answer */
    *r = first;
    out->replayed = true;
  }
  return ERR_OK;
}
