/* test_store_faults.c — every store call of BeginStep, CompleteStep and ResolveStep failed in
 * turn, the way SQLite tests its I/O errors: each operation runs once unfaulted, counting its
 * store calls (support_memstore.h); then, for every N up to that count, a fresh store fails
 * its Nth call (of any operation, then the Nth of each operation alone), before the call
 * starts and again at its commit. Each time:
 *  - the answer is ERR_UNAVAILABLE with the store's reason, and nothing is handed out (a
 *    BeginStep under a fail-open policy answers DECISION_PROCEED_UNGUARDED instead: coord.h);
 *  - nothing was half-written: both records of the step pair and the audit trail are as they
 *    were before the call;
 *  - the same call again, without the failure, succeeds with the unfaulted run's answer and
 *    leaves the store as the unfaulted run did.
 * The non-blocking forms (coord_begin_step_async, coord_complete_step_async) go through the
 * same walk: their submission and the transaction it queues are separate store calls. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord/coord.h"
#include "coord/coord_admin.h"
#include "support_decide.h"
#include "support_memstore.h"
#include "util/clock.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
/* Criterion ignores a worker's exit status after a passing test: each walk ends with an
 * explicit leak check (every answer, snapshot and store of the walk has been freed). */
#define LEAK_CHECK() cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "memory leaked")
#else
#define LEAK_CHECK() ((void)0)
#endif

static const coord_key_in FWD = {"g-1", SD_SERVICE, "charge", PHASE_FORWARD, NULL};
static const coord_key_in COMP = {"g-1", SD_SERVICE, "charge", PHASE_COMPENSATION, NULL};
static const uint8_t FP[] = {'f', 'p', '-', 'a'};

/* ---------------- what a call answered ---------------- */

typedef struct answer {
  int calls; /* answers given: exactly one per call */
  err_code rc;
  err_t err;
  coord_begin_result begin; /* BeginStep (owned) */
  step_rec rec;             /* CompleteStep, ResolveStep (owned) */
} answer;

static void answer_clear(answer *a) {
  coord_begin_result_clear(&a->begin);
  step_rec_clear(&a->rec);
}

static void assert_rec_eq(const step_rec *got, const step_rec *want, const char *what) {
  cr_assert_eq(got->present, want->present, "%s: present", what);
  if (!want->present) return;
  cr_assert_str_eq(got->key.tenant, want->key.tenant, "%s: tenant", what);
  cr_assert_str_eq(got->key.global_id, want->key.global_id, "%s: global_id", what);
  cr_assert_str_eq(got->key.service, want->key.service, "%s: service", what);
  cr_assert_str_eq(got->key.operation, want->key.operation, "%s: operation", what);
  cr_assert_eq(got->key.phase, want->key.phase, "%s: phase", what);
  cr_assert_eq(got->state, want->state, "%s: state", what);
  cr_assert_eq(got->attempt, want->attempt, "%s: attempt", what);
  cr_assert_eq(got->fp_len, want->fp_len, "%s: fingerprint length", what);
  cr_assert(memcmp(got->fp, want->fp, want->fp_len) == 0, "%s: fingerprint", what);
  cr_assert_eq(got->outcome, want->outcome, "%s: outcome", what);
  cr_assert_eq(got->code, want->code, "%s: code", what);
  cr_assert_eq(got->body_len, want->body_len, "%s: body length", what);
  cr_assert(want->body_len == 0 || memcmp(got->body, want->body, want->body_len) == 0, "%s: body",
            what);
  cr_assert_eq(got->completed_ms, want->completed_ms, "%s: completed_ms", what);
  cr_assert_eq(got->created_ms, want->created_ms, "%s: created_ms", what);
  cr_assert_eq(got->updated_ms, want->updated_ms, "%s: updated_ms", what);
  cr_assert_eq(got->lease_expires_ms, want->lease_expires_ms, "%s: lease_expires_ms", what);
  cr_assert_eq(got->expires_ms, want->expires_ms, "%s: expires_ms", what);
}

static void assert_answer_eq(const answer *got, const answer *want, const char *what) {
  cr_assert_eq(got->calls, 1, "%s: answered %d times", what, got->calls);
  cr_assert_eq(got->rc, want->rc, "%s: rc %d (%s), want %d", what, got->rc, got->err.msg, want->rc);
  const coord_begin_result *g = &got->begin, *w = &want->begin;
  cr_assert_eq(g->decision, w->decision, "%s: decision", what);
  cr_assert_eq(g->attempt, w->attempt, "%s: attempt", what);
  cr_assert_eq(g->lease_expires_ms, w->lease_expires_ms, "%s: lease_expires_ms", what);
  cr_assert_eq(g->takeover, w->takeover, "%s: takeover", what);
  cr_assert_eq(g->expires_ms, w->expires_ms, "%s: expires_ms", what);
  cr_assert_eq(g->has_result, w->has_result, "%s: has_result", what);
  cr_assert_eq(g->outcome, w->outcome, "%s: outcome", what);
  cr_assert_eq(g->code, w->code, "%s: code", what);
  cr_assert_eq(g->body_len, w->body_len, "%s: body length", what);
  cr_assert(w->body_len == 0 || memcmp(g->body, w->body, w->body_len) == 0, "%s: body", what);
  cr_assert_eq(g->completed_ms, w->completed_ms, "%s: completed_ms", what);
  assert_rec_eq(&got->rec, &want->rec, what);
}

/* ---------------- what the store holds ---------------- */

/* Both records of the pair (sd_key's) and the audit trail, copied. */
typedef struct snapshot {
  step_rec fwd, comp;
  audit_rec *audit;
  size_t n_audit;
} snapshot;

static void snap_rec(const memstore *m, step_phase ph, step_rec *out) {
  step_key k = sd_key(ph);
  const step_rec *r = memstore_get(m, &k);
  memset(out, 0, sizeof *out);
  if (r) cr_assert(step_rec_copy(out, r));
}

static snapshot snap(const memstore *m) {
  snapshot s;
  memset(&s, 0, sizeof s);
  snap_rec(m, PHASE_FORWARD, &s.fwd);
  snap_rec(m, PHASE_COMPENSATION, &s.comp);
  s.n_audit = m->n_audit;
  if (s.n_audit) {
    s.audit = malloc(s.n_audit * sizeof *s.audit);
    cr_assert(s.audit);
    memcpy(s.audit, m->audit, s.n_audit * sizeof *s.audit);
  }
  return s;
}

static void snap_clear(snapshot *s) {
  step_rec_clear(&s->fwd);
  step_rec_clear(&s->comp);
  free(s->audit);
  memset(s, 0, sizeof *s);
}

static bool snap_same(const snapshot *a, const snapshot *b) {
  return a->fwd.present == b->fwd.present && a->comp.present == b->comp.present &&
         a->fwd.state == b->fwd.state && a->comp.state == b->comp.state &&
         a->fwd.updated_ms == b->fwd.updated_ms && a->comp.updated_ms == b->comp.updated_ms &&
         a->n_audit == b->n_audit;
}

static void assert_snap_eq(const memstore *m, const snapshot *want, const char *what) {
  snapshot got = snap(m);
  char w[160];
  snprintf(w, sizeof w, "%s: the forward record", what);
  assert_rec_eq(&got.fwd, &want->fwd, w);
  snprintf(w, sizeof w, "%s: the compensation record", what);
  assert_rec_eq(&got.comp, &want->comp, w);
  cr_assert_eq(got.n_audit, want->n_audit, "%s: %zu audit rows, want %zu", what, got.n_audit,
               want->n_audit);
  for (size_t i = 0; i < want->n_audit; i++) {
    const audit_rec *g = &got.audit[i], *x = &want->audit[i];
    cr_assert_eq(g->id, x->id, "%s: audit row %zu id", what, i);
    cr_assert_eq(g->at_ms, x->at_ms, "%s: audit row %zu at_ms", what, i);
    cr_assert_str_eq(g->actor, x->actor, "%s: audit row %zu actor", what, i);
    cr_assert_str_eq(g->action, x->action, "%s: audit row %zu action", what, i);
    cr_assert_str_eq(g->reason, x->reason, "%s: audit row %zu reason", what, i);
    cr_assert_str_eq(g->key.global_id, x->key.global_id, "%s: audit row %zu key", what, i);
    cr_assert_eq(g->key.phase, x->key.phase, "%s: audit row %zu phase", what, i);
    cr_assert_eq(g->from_state, x->from_state, "%s: audit row %zu from", what, i);
    cr_assert_eq(g->to_state, x->to_state, "%s: audit row %zu to", what, i);
  }
  snap_clear(&got);
}

/* ---------------- the operations ---------------- */

static int64_t far(void) {
  return clock_mono_ms() + 3600 * 1000;
}

static void on_begin(void *arg, err_code rc, coord_begin_result *out, err_t *err) {
  answer *a = arg;
  a->calls++;
  a->rc = rc;
  if (err) a->err = *err;
  a->begin = *out; /* taken: coord clears what is left */
  memset(out, 0, sizeof *out);
}

static void on_complete(void *arg, err_code rc, step_rec *out, err_t *err) {
  answer *a = arg;
  a->calls++;
  a->rc = rc;
  if (err) a->err = *err;
  if (rc == ERR_OK)
    cr_assert(step_rec_copy(&a->rec, out));
  else
    cr_assert_not(out->present, "a failed CompleteStep handed out a record");
}

static void begin_fwd(const coord_ctx *ctx, memstore *m, answer *a) {
  a->rc =
      coord_begin_step(ctx, &m->base, "acme", &FWD, FP, sizeof FP, 0, far(), &a->begin, &a->err);
  a->calls = 1;
}

static void begin_comp(const coord_ctx *ctx, memstore *m, answer *a) {
  a->rc =
      coord_begin_step(ctx, &m->base, "acme", &COMP, FP, sizeof FP, 0, far(), &a->begin, &a->err);
  a->calls = 1;
}

static void complete_fwd(const coord_ctx *ctx, memstore *m, answer *a) {
  a->rc = coord_complete_step(ctx, &m->base, "acme", &FWD, 1, OUTCOME_SUCCEEDED, 201,
                              (const uint8_t *)"paid", 4, far(), &a->rec, &a->err);
  a->calls = 1;
}

static void resolve_fwd(const coord_ctx *ctx, memstore *m, answer *a) {
  coord_resolve_in in = {.key = FWD,
                         .outcome = OUTCOME_SUCCEEDED,
                         .code = 200,
                         .body = (const uint8_t *)"settled",
                         .body_len = 7,
                         .reason = "the ledger shows the charge",
                         .actor = "alice"};
  a->rc = coord_resolve_step(ctx, &m->base, "acme", &in, far(), &a->rec, &a->err);
  a->calls = 1;
}

static void resolve_fwd_retryable(const coord_ctx *ctx, memstore *m, answer *a) {
  coord_resolve_in in = {
      .key = FWD, .outcome = OUTCOME_RETRYABLE, .reason = "never reached the bank"};
  a->rc = coord_resolve_step(ctx, &m->base, "acme", &in, far(), &a->rec, &a->err);
  a->calls = 1;
}

static void begin_fwd_async(const coord_ctx *ctx, memstore *m, answer *a) {
  coord_begin_step_async(ctx, &m->base, "acme", &FWD, FP, sizeof FP, 0, far(), on_begin, a);
  memstore_run_submitted(m);
}

static void begin_comp_async(const coord_ctx *ctx, memstore *m, answer *a) {
  coord_begin_step_async(ctx, &m->base, "acme", &COMP, FP, sizeof FP, 0, far(), on_begin, a);
  memstore_run_submitted(m);
}

static void complete_fwd_async(const coord_ctx *ctx, memstore *m, answer *a) {
  coord_complete_step_async(ctx, &m->base, "acme", &FWD, 1, OUTCOME_SUCCEEDED, 201,
                            (const uint8_t *)"paid", 4, far(), on_complete, a);
  memstore_run_submitted(m);
}

/* ---------------- what the store holds before ---------------- */

static void seed_nothing(memstore *m) {
  (void)m;
}

/* The forward step running (attempt 1, its lease live). */
static void seed_running(memstore *m) {
  step_rec f = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, "fp-a");
  memstore_put(m, &f);
}

/* The forward step's lease ran out (attempt 1). */
static void seed_expired(memstore *m) {
  step_rec f = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, "fp-a");
  f.lease_expires_ms = SD_NOW - 1;
  memstore_put(m, &f);
}

/* The forward step's outcome is unknown, and an operator resolved an earlier step (the audit
 * trail is not empty). */
static void seed_unknown(memstore *m) {
  step_rec f = sd_rec(PHASE_FORWARD, STATE_UNKNOWN, 1, "fp-a");
  sd_with_result(&f, OUTCOME_UNKNOWN, 504);
  memstore_put(m, &f);
  audit_rec a;
  memset(&a, 0, sizeof a);
  a.key = sd_key(PHASE_FORWARD);
  strcpy(a.key.global_id, "g-0");
  strcpy(a.actor, "bob");
  strcpy(a.action, "resolve");
  strcpy(a.reason, "an earlier incident");
  a.from_state = STATE_UNKNOWN;
  a.to_state = STATE_FAILED;
  memstore_add_audit(m, &a);
}

/* ---------------- the walk ---------------- */

typedef struct scenario {
  const char *name;
  void (*seed)(memstore *m);
  void (*run)(const coord_ctx *ctx, memstore *m, answer *a);
  bool fail_open;                      /* the operation's policy is fail-open */
  step_decision decision;              /* a BeginStep's unfaulted decision (0: not a BeginStep) */
  int writes_fwd, writes_comp, audits; /* what the unfaulted run changes (1 = changed) */
} scenario;

static memstore *fresh(const scenario *sc, coord_ctx *ctx) {
  memstore *m = memstore_new(SD_NOW);
  sc->seed(m);
  coord_ctx_init(ctx);
  if (sc->fail_open) ctx->resolve_policy = sd_fail_open_policy;
  return m;
}

/* One failure: the nth call of op (at its commit when at_commit) fails. */
static void one_fault(const scenario *sc, memstore_op op, int n, bool at_commit, const answer *want,
                      const snapshot *after) {
  char what[200];
  snprintf(what, sizeof what, "%s, %s call %d failing%s", sc->name, memstore_op_name(op), n,
           at_commit ? " at its commit" : "");
  coord_ctx ctx;
  memstore *m = fresh(sc, &ctx);
  snapshot before = snap(m);
  if (at_commit)
    memstore_fail_nth_at_commit(m, op, n);
  else
    memstore_fail_nth(m, op, n);

  answer a = {0};
  sc->run(&ctx, m, &a);
  cr_assert_eq(m->faults, 1, "%s: the failure did not happen", what);
  cr_assert_eq(a.calls, 1, "%s: answered %d times", what, a.calls);
  if (sc->fail_open) {
    cr_assert_eq(a.rc, ERR_OK, "%s: rc %d (%s)", what, a.rc, a.err.msg);
    cr_assert_eq(a.begin.decision, DECISION_PROCEED_UNGUARDED, "%s: decision %d", what,
                 a.begin.decision);
    cr_assert_eq(a.begin.attempt, 0, "%s: an unguarded run has no attempt", what);
    cr_assert_not(a.begin.has_result, "%s", what);
    cr_assert_null(a.begin.body, "%s", what);
  } else {
    cr_assert_eq(a.rc, ERR_UNAVAILABLE, "%s: rc %d (%s)", what, a.rc, a.err.msg);
    cr_assert_eq(a.err.code, ERR_UNAVAILABLE, "%s", what);
    cr_assert_eq(a.err.reason, ERR_R_STORE_UNAVAILABLE, "%s: reason %s", what,
                 err_reason_word(a.err.reason));
    cr_assert_eq(a.begin.decision, DECISION_UNSPECIFIED, "%s: a decision was handed out", what);
    cr_assert_null(a.begin.body, "%s", what);
    cr_assert_not(a.rec.present, "%s: a record was handed out", what);
    cr_assert_null(a.rec.body, "%s", what);
  }
  answer_clear(&a);
  assert_snap_eq(m, &before, what);

  /* again, without the failure */
  answer b = {0};
  int calls0 = memstore_calls(m, MEMSTORE_ANY);
  sc->run(&ctx, m, &b);
  char retry[220];
  snprintf(retry, sizeof retry, "%s, then retried", what);
  assert_answer_eq(&b, want, retry);
  cr_assert_eq(m->faults, 1, "%s: failed again", retry);
  cr_assert_gt(memstore_calls(m, MEMSTORE_ANY), calls0, "%s: the store was not asked", retry);
  assert_snap_eq(m, after, retry);
  answer_clear(&b);
  snap_clear(&before);
  store_close(&m->base);
}

static void walk(const scenario *sc) {
  /* the unfaulted run: its answer, its store calls, the store after it */
  coord_ctx ctx;
  memstore *m = fresh(sc, &ctx);
  snapshot before = snap(m);
  answer want = {0};
  sc->run(&ctx, m, &want);
  cr_assert_eq(want.calls, 1, "%s: answered %d times", sc->name, want.calls);
  cr_assert_eq(want.rc, ERR_OK, "%s: rc %d (%s)", sc->name, want.rc, want.err.msg);
  if (sc->decision) cr_assert_eq(want.begin.decision, sc->decision, "%s: decision", sc->name);
  snapshot after = snap(m);
  /* the failures below must be seen to leave the store alone: the call changes it */
  cr_assert(!snap_same(&before, &after), "%s: the call changed nothing", sc->name);
  cr_assert_eq(after.fwd.updated_ms != before.fwd.updated_ms ||
                   after.fwd.state != before.fwd.state || after.fwd.present != before.fwd.present,
               sc->writes_fwd, "%s: the forward record", sc->name);
  cr_assert_eq(after.comp.present != before.comp.present, sc->writes_comp,
               "%s: the compensation record", sc->name);
  cr_assert_eq(after.n_audit - before.n_audit, (size_t)sc->audits, "%s: audit rows", sc->name);
  int calls[MEMSTORE_OP__COUNT];
  for (int op = 0; op < MEMSTORE_OP__COUNT; op++) calls[op] = memstore_calls(m, op);
  store_close(&m->base);
  snap_clear(&before);

  int walked = 0;
  char per_op[200] = "";
  size_t len = 0;
  for (int op = 1; op < MEMSTORE_OP__COUNT; op++)
    if (calls[op])
      len += (size_t)snprintf(per_op + len, sizeof per_op - len, "%s%s %d", len ? ", " : "",
                              memstore_op_name(op), calls[op]);
  cr_assert_gt(calls[MEMSTORE_ANY], 0, "%s: no store call", sc->name);
  for (int at_commit = 0; at_commit < 2; at_commit++) {
    for (int n = 1; n <= calls[MEMSTORE_ANY]; n++, walked++)
      one_fault(sc, MEMSTORE_ANY, n, at_commit, &want, &after);
    for (int op = 1; op < MEMSTORE_OP__COUNT; op++)
      for (int n = 1; n <= calls[op]; n++, walked++)
        one_fault(sc, (memstore_op)op, n, at_commit, &want, &after);
  }
  printf(
      "store faults: %-44s %d store call%s (%s): %d failures, each answered %s, nothing "
      "half-written, the retry as unfaulted\n",
      sc->name, calls[MEMSTORE_ANY], calls[MEMSTORE_ANY] == 1 ? "" : "s", per_op, walked,
      sc->fail_open ? "PROCEED_UNGUARDED" : "UNAVAILABLE");
  fflush(stdout);
  answer_clear(&want);
  snap_clear(&after);
  LEAK_CHECK();
}

/* ---------------- BeginStep ---------------- */

Test(store_faults, begin_forward_fresh_key) {
  scenario sc = {.name = "BeginStep forward, nothing stored",
                 .seed = seed_nothing,
                 .run = begin_fwd,
                 .decision = DECISION_PROCEED,
                 .writes_fwd = 1};
  walk(&sc);
}

Test(store_faults, begin_forward_fresh_key_fail_open) {
  scenario sc = {.name = "BeginStep forward, nothing stored, fail-open",
                 .seed = seed_nothing,
                 .run = begin_fwd,
                 .fail_open = true,
                 .decision = DECISION_PROCEED,
                 .writes_fwd = 1};
  walk(&sc);
}

Test(store_faults, begin_forward_takeover) {
  scenario sc = {.name = "BeginStep forward, lease expired (takeover)",
                 .seed = seed_expired,
                 .run = begin_fwd,
                 .decision = DECISION_PROCEED,
                 .writes_fwd = 1};
  walk(&sc);
}

/* a compensation with nothing to undo tombstones the forward step and writes a null
 * compensation: two records in one transaction */
Test(store_faults, begin_compensation_writes_a_tombstone) {
  scenario sc = {.name = "BeginStep compensation, tombstone",
                 .seed = seed_nothing,
                 .run = begin_comp,
                 .decision = DECISION_SKIP_NULL_COMPENSATION,
                 .writes_fwd = 1,
                 .writes_comp = 1};
  walk(&sc);
}

Test(store_faults, begin_compensation_writes_a_tombstone_fail_open) {
  scenario sc = {.name = "BeginStep compensation, tombstone, fail-open",
                 .seed = seed_nothing,
                 .run = begin_comp,
                 .fail_open = true,
                 .decision = DECISION_SKIP_NULL_COMPENSATION,
                 .writes_fwd = 1,
                 .writes_comp = 1};
  walk(&sc);
}

/* the forward step's lease ran out: it is abandoned and the compensation proceeds */
Test(store_faults, begin_compensation_abandons_an_expired_forward) {
  scenario sc = {.name = "BeginStep compensation, forward abandoned",
                 .seed = seed_expired,
                 .run = begin_comp,
                 .decision = DECISION_PROCEED,
                 .writes_fwd = 1,
                 .writes_comp = 1};
  walk(&sc);
}

/* ---------------- CompleteStep ---------------- */

Test(store_faults, complete_succeeded) {
  scenario sc = {
      .name = "CompleteStep succeeded", .seed = seed_running, .run = complete_fwd, .writes_fwd = 1};
  walk(&sc);
}

/* ---------------- ResolveStep (the record and its audit row, one transaction) ---------------- */

Test(store_faults, resolve_unknown_as_succeeded) {
  scenario sc = {.name = "ResolveStep unknown -> succeeded",
                 .seed = seed_unknown,
                 .run = resolve_fwd,
                 .writes_fwd = 1,
                 .audits = 1};
  walk(&sc);
}

Test(store_faults, resolve_in_progress_as_retryable) {
  scenario sc = {.name = "ResolveStep in progress -> retryable",
                 .seed = seed_running,
                 .run = resolve_fwd_retryable,
                 .writes_fwd = 1,
                 .audits = 1};
  walk(&sc);
}

/* ---------------- the non-blocking forms ---------------- */

Test(store_faults, begin_forward_async) {
  scenario sc = {.name = "BeginStep forward (async)",
                 .seed = seed_nothing,
                 .run = begin_fwd_async,
                 .decision = DECISION_PROCEED,
                 .writes_fwd = 1};
  walk(&sc);
}

Test(store_faults, begin_forward_async_fail_open) {
  scenario sc = {.name = "BeginStep forward (async), fail-open",
                 .seed = seed_nothing,
                 .run = begin_fwd_async,
                 .fail_open = true,
                 .decision = DECISION_PROCEED,
                 .writes_fwd = 1};
  walk(&sc);
}

Test(store_faults, begin_compensation_async_writes_a_tombstone) {
  scenario sc = {.name = "BeginStep compensation (async), tombstone",
                 .seed = seed_nothing,
                 .run = begin_comp_async,
                 .decision = DECISION_SKIP_NULL_COMPENSATION,
                 .writes_fwd = 1,
                 .writes_comp = 1};
  walk(&sc);
}

Test(store_faults, complete_succeeded_async) {
  scenario sc = {.name = "CompleteStep succeeded (async)",
                 .seed = seed_running,
                 .run = complete_fwd_async,
                 .writes_fwd = 1};
  walk(&sc);
}
