/* test_coord_bulk.c — Admin.ResolveSteps (docs/api.md §12) at the level of its rules, on the
 * in-memory store: validation before any store call, the unchanged-since-matched rule, a dry run
 * that changes nothing, max_steps refusing everything, one audit row per resolution with the
 * batch id, the same request id answering the first answer, and a step changed between the match
 * and its resolution skipped. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "coord/coord_admin.h"
#include "support_memstore.h"
#include "util/clock.h"

#define NOW 1700000000000LL

static memstore *m;
static coord_ctx ctx;
static int64_t far;

static void setup(void) {
  m = memstore_new(NOW);
  coord_ctx_init(&ctx);
  far = clock_mono_ms() + 3600 * 1000;
}
static void teardown(void) {
  if (m) store_close(&m->base);
  m = NULL;
}
TestSuite(bulk, .init = setup, .fini = teardown);

static void put(const char *gid, step_state st, int64_t lease_end) {
  step_rec r;
  memset(&r, 0, sizeof r);
  snprintf(r.key.tenant, sizeof r.key.tenant, "acme");
  snprintf(r.key.global_id, sizeof r.key.global_id, "%s", gid);
  snprintf(r.key.service, sizeof r.key.service, "payment");
  snprintf(r.key.operation, sizeof r.key.operation, "charge");
  r.key.phase = PHASE_FORWARD;
  r.present = true;
  r.state = st;
  r.attempt = 1;
  r.created_ms = r.updated_ms = NOW - 60000;
  r.lease_expires_ms = lease_end;
  if (st == STATE_UNKNOWN) r.outcome = OUTCOME_UNKNOWN;
  memstore_put(m, &r);
}

/* 5 in progress with an expired lease, 1 with a running one, 2 unknown, 1 succeeded */
static void seed(void) {
  char gid[16];
  for (int i = 0; i < 5; i++) {
    snprintf(gid, sizeof gid, "g-%d", i);
    put(gid, STATE_IN_PROGRESS, NOW - 1000);
  }
  put("g-running", STATE_IN_PROGRESS, NOW + 60000);
  put("u-1", STATE_UNKNOWN, 0);
  put("u-2", STATE_UNKNOWN, 0);
  put("s-1", STATE_SUCCEEDED, 0);
}

static coord_bulk_in stuck(const char *request_id) {
  return (coord_bulk_in){.filter = {.state = STATE_IN_PROGRESS, .lease_expired_only = true},
                         .outcome = OUTCOME_FAILED,
                         .code = 409,
                         .body = (const uint8_t *)"gave up",
                         .body_len = 7,
                         .reason = "gateway outage, refunded by hand",
                         .actor = "alice",
                         .max_steps = 10,
                         .request_id = request_id};
}

static step_state state_of(const char *gid) {
  step_key k;
  memset(&k, 0, sizeof k);
  snprintf(k.tenant, sizeof k.tenant, "acme");
  snprintf(k.global_id, sizeof k.global_id, "%s", gid);
  snprintf(k.service, sizeof k.service, "payment");
  snprintf(k.operation, sizeof k.operation, "charge");
  k.phase = PHASE_FORWARD;
  const step_rec *r = memstore_get(m, &k);
  return r ? r->state : STATE_NONE;
}

static void assert_invalid(coord_bulk_in in, const char *field) {
  coord_bulk_out out;
  err_t e;
  int calls = m->calls;
  cr_assert_eq(coord_resolve_steps(&ctx, &m->base, "acme", &in, far, &out, &e), ERR_INVALID,
               "%s: %s", field, e.msg);
  cr_assert(strstr(e.msg, field), "message \"%s\" lacks %s", e.msg, field);
  cr_assert_eq(m->calls, calls, "the store was called on invalid input");
}

Test(bulk, unchanged_rule) {
  step_rec a, b;
  memset(&a, 0, sizeof a);
  a.present = true;
  a.state = STATE_IN_PROGRESS;
  a.attempt = 2;
  a.updated_ms = 5;
  b = a;
  cr_assert(coord_bulk_unchanged(&a, &b));
  b.updated_ms = 6; /* extended, taken over, completed: a newer row */
  cr_assert(!coord_bulk_unchanged(&a, &b));
  b = a;
  b.attempt = 3;
  cr_assert(!coord_bulk_unchanged(&a, &b));
  b = a;
  b.state = STATE_SUCCEEDED;
  cr_assert(!coord_bulk_unchanged(&a, &b));
  b = a;
  b.present = false; /* reaped */
  cr_assert(!coord_bulk_unchanged(&a, &b));
}

Test(bulk, validation_before_the_store) {
  coord_bulk_in in = stuck("");
  assert_invalid(in, "request_id");
  in = stuck("r");
  in.filter = (coord_list_in){.state = STATE_SUCCEEDED};
  assert_invalid(in, "filter.state");
  in.filter = (coord_list_in){0};
  assert_invalid(in, "filter.state");
  in = stuck("r");
  in.max_steps = 0;
  assert_invalid(in, "max_steps");
  in.max_steps = BULK_STEPS_MAX + 1;
  assert_invalid(in, "max_steps");
  in = stuck("r");
  in.reason = "";
  assert_invalid(in, "reason");
  in = stuck("r");
  in.outcome = OUTCOME_UNKNOWN;
  assert_invalid(in, "outcome");
  in = stuck("r");
  in.filter.service = "Not A Name";
  assert_invalid(in, "service");
}

Test(bulk, dry_run_then_resolve_then_repeat) {
  seed();
  coord_bulk_out out;
  err_t e;
  coord_bulk_in in = stuck("r-1");
  in.dry_run = true;
  cr_assert_eq(coord_resolve_steps(&ctx, &m->base, "acme", &in, far, &out, &e), ERR_OK, "%s",
               e.msg);
  cr_assert_eq(out.rec.matched, 5);
  cr_assert_eq(out.rec.resolved, 0);
  cr_assert_eq(out.rec.n_sample, 5);
  cr_assert(out.dry_run);
  cr_assert_str_eq(out.rec.batch_id, "");
  cr_assert_eq(state_of("g-0"), STATE_IN_PROGRESS, "a dry run changed a step");
  cr_assert_eq(m->n_audit, 0);

  in = stuck("r-1");
  in.max_steps = 4; /* 5 match: nothing at all */
  cr_assert_eq(coord_resolve_steps(&ctx, &m->base, "acme", &in, far, &out, &e), ERR_PRECONDITION);
  cr_assert(strstr(e.msg, "max_steps"), "%s", e.msg);
  cr_assert_eq(state_of("g-0"), STATE_IN_PROGRESS);
  cr_assert_eq(m->n_audit, 0);

  in = stuck("r-1");
  cr_assert_eq(coord_resolve_steps(&ctx, &m->base, "acme", &in, far, &out, &e), ERR_OK, "%s",
               e.msg);
  cr_assert_eq(out.rec.matched, 5);
  cr_assert_eq(out.rec.resolved, 5);
  cr_assert(!out.replayed);
  cr_assert_eq(strlen(out.rec.batch_id), 36, "batch id %s", out.rec.batch_id);
  for (int i = 0; i < 5; i++) {
    char gid[16];
    snprintf(gid, sizeof gid, "g-%d", i);
    cr_assert_eq(state_of(gid), STATE_FAILED, "%s", gid);
  }
  cr_assert_eq(state_of("g-running"), STATE_IN_PROGRESS, "a running lease was resolved");
  cr_assert_eq(state_of("u-1"), STATE_UNKNOWN);
  cr_assert_eq(m->n_audit, 5);
  for (size_t i = 0; i < m->n_audit; i++) {
    cr_assert_str_eq(m->audit[i].batch_id, out.rec.batch_id);
    cr_assert_str_eq(m->audit[i].actor, "alice");
    cr_assert_eq(m->audit[i].to_state, STATE_FAILED);
  }

  char first[BULK_ID_MAX + 1];
  snprintf(first, sizeof first, "%s", out.rec.batch_id);
  put("g-9", STATE_IN_PROGRESS, NOW - 1000); /* new work after the first run */
  cr_assert_eq(coord_resolve_steps(&ctx, &m->base, "acme", &in, far, &out, &e), ERR_OK);
  cr_assert(out.replayed, "the same request id ran again");
  cr_assert_str_eq(out.rec.batch_id, first);
  cr_assert_eq(out.rec.matched, 5);
  cr_assert_eq(out.rec.resolved, 5);
  cr_assert_eq(state_of("g-9"), STATE_IN_PROGRESS, "a repeat resolved something new");
  cr_assert_eq(m->n_audit, 5);
}

/* A concurrent call changes u-1 after the match, before its transaction: it is skipped. */
static void change_first_unknown(void *ms, const step_key *key, void *arg) {
  (void)arg;
  if (strcmp(key->global_id, "u-1") != 0) return;
  memstore *mm = ms;
  step_rec r = *memstore_get(mm, key);
  r.body = NULL;
  r.body_len = 0;
  r.state = STATE_SUCCEEDED; /* resolved one by one by someone else */
  r.updated_ms++;
  memstore_put(mm, &r);
}

Test(bulk, a_step_changed_since_it_matched_is_skipped) {
  seed();
  m->before_txn = change_first_unknown;
  coord_bulk_in in = stuck("r-2");
  in.filter = (coord_list_in){.state = STATE_UNKNOWN};
  coord_bulk_out out;
  err_t e;
  cr_assert_eq(coord_resolve_steps(&ctx, &m->base, "acme", &in, far, &out, &e), ERR_OK, "%s",
               e.msg);
  cr_assert_eq(out.rec.matched, 2);
  cr_assert_eq(out.rec.resolved, 1);
  cr_assert_eq(state_of("u-1"), STATE_SUCCEEDED, "the concurrent change was overwritten");
  cr_assert_eq(state_of("u-2"), STATE_FAILED);
  cr_assert_eq(m->n_audit, 1);
}

Test(bulk, a_store_failure_remembers_nothing_and_a_repeat_finishes) {
  seed();
  coord_bulk_in in = stuck("r-3");
  coord_bulk_out out;
  err_t e;
  memstore_fail_nth(m, MEMSTORE_STEP_TXN_AUDIT, 3); /* the third resolution fails */
  cr_assert_eq(coord_resolve_steps(&ctx, &m->base, "acme", &in, far, &out, &e), ERR_UNAVAILABLE);
  cr_assert_eq(m->n_audit, 2);
  cr_assert_eq(m->n_bulk, 0, "a cut-short run was remembered");
  cr_assert_eq(coord_resolve_steps(&ctx, &m->base, "acme", &in, far, &out, &e), ERR_OK, "%s",
               e.msg);
  cr_assert(!out.replayed);
  cr_assert_eq(out.rec.matched, 3, "the repeat matches what is left");
  cr_assert_eq(out.rec.resolved, 3);
  cr_assert_eq(m->n_audit, 5);
}
