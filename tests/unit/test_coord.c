/* test_coord.c — the wiring of coord_* (coord.h) over the in-memory store double:
 * validation before any store access, policy resolution, deadlines, ownership of outputs,
 * callbacks that run more than once, and error propagation. The rules themselves are tested
 * in test_decide.c. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord/coord.h"
#include "coord/coord_admin.h"
#include "support_memstore.h"
#include "util/clock.h"
#include "util/uuidv7.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
/* Criterion ignores a worker's exit status (and fini assertions) after a passing test, so
 * tests that move ownership end with an explicit leak check. */
#define LEAK_CHECK() cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "memory leaked")
#else
#define LEAK_CHECK() ((void)0)
#endif

#define NOW 1700000000000LL

static memstore *m;
static coord_ctx ctx;
static int64_t far; /* a deadline far in the future */

static void setup(void) {
  m = memstore_new(NOW);
  coord_ctx_init(&ctx);
  far = clock_mono_ms() + 3600 * 1000;
}
static void teardown(void) {
  if (m) store_close(&m->base);
  m = NULL;
}
TestSuite(coord, .init = setup, .fini = teardown);

static coord_key_in fwd_key = {"g-1", "payments", "charge", PHASE_FORWARD, NULL};
static coord_key_in comp_key = {"g-1", "payments", "charge", PHASE_COMPENSATION, NULL};

static void assert_invalid(err_code rc, const err_t *e, const char *field) {
  cr_assert_eq(rc, ERR_INVALID, "rc %d: %s", rc, e->msg);
  cr_assert(strstr(e->msg, field), "message \"%s\" lacks %s", e->msg, field);
  cr_assert_eq(m->calls, 0, "the store was called on invalid input");
  cr_assert_eq(m->fn_calls, 0);
}

/* A resolver returning fixed values and remembering what it was asked. */
typedef struct fake_policy {
  int calls;
  char service[REC_NAME_MAX + 1], operation[REC_NAME_MAX + 1];
} fake_policy;

static void fake_resolve(void *arg, const char *tenant, const char *service, const char *operation,
                         policy *out) {
  (void)tenant;
  fake_policy *fp = arg;
  fp->calls++;
  strcpy(fp->service, service);
  strcpy(fp->operation, operation);
  policy_default(service, operation, out);
  out->mode = FAILURE_MODE_FAIL_OPEN;
  out->retention_s = 77;
  out->lease_ms = 4321;
  out->updated_ms = 5;
}

/* Runs BeginStep then CompleteStep(attempt 1) with body on key k. */
static void begin_and_complete(const coord_key_in *k, int outcome, const char *body) {
  coord_begin_result r;
  err_t e;
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", k, NULL, 0, 0, far, &r, &e), ERR_OK, "%s",
               e.msg);
  step_rec rec;
  cr_assert_eq(coord_complete_step(&ctx, &m->base, "acme", k, r.attempt, outcome, 201,
                                   (const uint8_t *)body, strlen(body), far, &rec, &e),
               ERR_OK, "%s", e.msg);
  step_rec_clear(&rec);
  coord_begin_result_clear(&r);
}

/* ---------------- ctx ---------------- */

Test(coord, ctx_defaults) {
  coord_ctx c;
  memset(&c, 0xAB, sizeof c);
  coord_ctx_init(&c);
  cr_assert_null(c.resolve_policy);
  cr_assert_null(c.resolve_arg);
  cr_assert_eq(c.body_max, REC_BODY_MAX_DEFAULT);
  cr_assert_eq(c.store_timeout_ms, 2000);
}

/* ---------------- BeginStep ---------------- */

Test(coord, begin_validates_before_the_store) {
  coord_begin_result r;
  err_t e;
  uint8_t fp[65] = {0};
  coord_key_in k = fwd_key;
  assert_invalid(coord_begin_step(&ctx, &m->base, "", &k, NULL, 0, 0, far, &r, &e), &e, "tenant");
  assert_invalid(coord_begin_step(&ctx, &m->base, NULL, &k, NULL, 0, 0, far, &r, &e), &e, "tenant");
  k.global_id = "bad id";
  assert_invalid(coord_begin_step(&ctx, &m->base, "acme", &k, NULL, 0, 0, far, &r, &e), &e,
                 "key.global_id");
  k = fwd_key;
  k.service = NULL;
  assert_invalid(coord_begin_step(&ctx, &m->base, "acme", &k, NULL, 0, 0, far, &r, &e), &e,
                 "key.service");
  k = fwd_key;
  k.operation = "Charge";
  assert_invalid(coord_begin_step(&ctx, &m->base, "acme", &k, NULL, 0, 0, far, &r, &e), &e,
                 "key.operation");
  k = fwd_key;
  k.phase = PHASE_UNSPECIFIED;
  assert_invalid(coord_begin_step(&ctx, &m->base, "acme", &k, NULL, 0, 0, far, &r, &e), &e,
                 "key.phase");
  assert_invalid(coord_begin_step(&ctx, &m->base, "acme", &fwd_key, fp, 65, 0, far, &r, &e), &e,
                 "fingerprint");
  assert_invalid(coord_begin_step(&ctx, &m->base, "acme", &fwd_key, NULL, 0, REC_LEASE_MS_MAX + 1,
                                  far, &r, &e),
                 &e, "lease_ms");
  assert_invalid(coord_begin_step(&ctx, &m->base, "acme", NULL, NULL, 0, 0, far, &r, &e), &e,
                 "key");
  cr_assert_eq(r.decision, DECISION_UNSPECIFIED);
  cr_assert_null(r.body);
}

Test(coord, begin_fresh_key_proceeds_with_policy_lease) {
  coord_begin_result r;
  err_t e;
  const uint8_t fp[] = {1, 2, 3};
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &fwd_key, fp, 3, 0, far, &r, &e), ERR_OK,
               "%s", e.msg);
  cr_assert_eq(r.decision, DECISION_PROCEED);
  cr_assert_eq(r.attempt, 1);
  cr_assert_eq(r.lease_expires_ms, NOW + POLICY_DEFAULT_LEASE_MS);
  cr_assert_eq(r.mode, FAILURE_MODE_FAIL_CLOSED, "the built-in default's failure mode");
  cr_assert_not(r.takeover);
  cr_assert_not(r.has_result);
  cr_assert_eq(m->step_txn_calls, 1);

  step_key k = {"acme", "g-1", "payments", "charge", PHASE_FORWARD};
  const step_rec *s = memstore_get(m, &k);
  cr_assert_not_null(s);
  cr_assert_eq(s->state, STATE_IN_PROGRESS);
  cr_assert_eq(s->fp_len, 3);
  cr_assert_eq(s->fp[2], 3);
  coord_begin_result_clear(&r);
}

Test(coord, begin_requested_lease_overrides_policy) {
  coord_begin_result r;
  err_t e;
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &fwd_key, NULL, 0, 1234, far, &r, &e),
               ERR_OK);
  cr_assert_eq(r.lease_expires_ms, NOW + 1234);
}

Test(coord, begin_uses_the_resolver) {
  fake_policy fp = {0};
  ctx.resolve_policy = fake_resolve;
  ctx.resolve_arg = &fp;
  coord_begin_result r;
  err_t e;
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &fwd_key, NULL, 0, 0, far, &r, &e), ERR_OK);
  cr_assert_eq(fp.calls, 1);
  cr_assert_str_eq(fp.service, "payments");
  cr_assert_str_eq(fp.operation, "charge");
  cr_assert_eq(r.lease_expires_ms, NOW + 4321);
  cr_assert_eq(r.mode, FAILURE_MODE_FAIL_OPEN, "the resolved policy's failure mode");

  /* retention reaches the decision: a null compensation expires after 77 s */
  coord_key_in other = {"g-2", "payments", "charge", PHASE_COMPENSATION, NULL};
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &other, NULL, 0, 0, far, &r, &e), ERR_OK);
  cr_assert_eq(r.decision, DECISION_SKIP_NULL_COMPENSATION);
  cr_assert_eq(r.expires_ms, NOW + 77000);
  cr_assert_eq(r.mode, FAILURE_MODE_FAIL_OPEN, "a SKIP carries the failure mode too");
}

Test(coord, begin_replay_returns_an_owned_body) {
  begin_and_complete(&fwd_key, OUTCOME_SUCCEEDED, "receipt-123");
  coord_begin_result r;
  err_t e;
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &fwd_key, NULL, 0, 0, far, &r, &e), ERR_OK,
               "%s", e.msg);
  cr_assert_eq(r.decision, DECISION_REPLAY);
  cr_assert(r.has_result);
  cr_assert_eq(r.outcome, OUTCOME_SUCCEEDED);
  cr_assert_eq(r.code, 201);
  cr_assert_eq(r.completed_ms, NOW);
  cr_assert_eq(r.expires_ms, NOW + POLICY_DEFAULT_RETENTION_S * 1000LL);
  cr_assert_eq(r.body_len, 11);
  step_key k = {"acme", "g-1", "payments", "charge", PHASE_FORWARD};
  cr_assert_neq(r.body, memstore_get(m, &k)->body, "the body must be a copy");
  store_close(&m->base); /* the store's memory is gone; the copy must survive */
  m = NULL;
  cr_assert(memcmp(r.body, "receipt-123", 11) == 0);
  coord_begin_result_clear(&r);
  cr_assert_null(r.body);
  cr_assert_eq(r.body_len, 0);
  LEAK_CHECK();
}

Test(coord, begin_callback_run_several_times_keeps_only_the_last) {
  begin_and_complete(&fwd_key, OUTCOME_FAILED, "declined");
  m->txn_runs = 3;
  coord_begin_result r;
  err_t e;
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &fwd_key, NULL, 0, 0, far, &r, &e), ERR_OK);
  cr_assert_eq(m->fn_calls, 2 + 3); /* begin + complete, then 3 runs */
  cr_assert_eq(r.decision, DECISION_REPLAY);
  cr_assert_eq(r.body_len, 8);
  cr_assert(memcmp(r.body, "declined", 8) == 0);
  coord_begin_result_clear(&r); /* ASan reports the earlier runs' copies if they leaked */
  LEAK_CHECK();
}

Test(coord, begin_in_progress_is_aborted_with_retry_after) {
  coord_begin_result r;
  err_t e;
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &fwd_key, NULL, 0, 500, far, &r, &e),
               ERR_OK);
  m->now_ms += 100;
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &fwd_key, NULL, 0, 0, far, &r, &e),
               ERR_ABORTED);
  cr_assert_eq(e.code, ERR_ABORTED);
  cr_assert_eq(e.retry_after_ms, 400);
  cr_assert_eq(r.decision, DECISION_UNSPECIFIED);
  cr_assert_eq(r.attempt, 0);

  m->now_ms += 400; /* lease over: takeover */
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &fwd_key, NULL, 0, 0, far, &r, &e), ERR_OK);
  cr_assert_eq(r.decision, DECISION_PROCEED);
  cr_assert_eq(r.attempt, 2);
  cr_assert(r.takeover);
  LEAK_CHECK();
}

Test(coord, begin_compensation_flow_through_the_store) {
  coord_begin_result r;
  err_t e;
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &comp_key, NULL, 0, 0, far, &r, &e),
               ERR_OK);
  cr_assert_eq(r.decision, DECISION_SKIP_NULL_COMPENSATION);
  /* the tombstone now blocks the forward action */
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &fwd_key, NULL, 0, 0, far, &r, &e), ERR_OK);
  cr_assert_eq(r.decision, DECISION_SKIP_ALREADY_COMPENSATED);
  cr_assert_eq(m->n_recs, 2);
}

Test(coord, begin_store_failure_propagates) {
  m->fail_rc = ERR_UNAVAILABLE;
  coord_begin_result r;
  err_t e;
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &fwd_key, NULL, 0, 0, far, &r, &e),
               ERR_UNAVAILABLE);
  cr_assert_eq(e.code, ERR_UNAVAILABLE);
  cr_assert_eq(m->fn_calls, 0);
  cr_assert_null(r.body);
  LEAK_CHECK();
}

Test(coord, store_deadline_is_capped_by_the_store_timeout) {
  coord_begin_result r;
  err_t e;
  ctx.store_timeout_ms = 250;
  int64_t before = clock_mono_ms();
  coord_begin_step(&ctx, &m->base, "acme", &fwd_key, NULL, 0, 0, far, &r, &e);
  int64_t after = clock_mono_ms();
  cr_assert_geq(m->last_deadline, before + 250);
  cr_assert_leq(m->last_deadline, after + 250);

  int64_t soon = clock_mono_ms() + 5;
  coord_lookup_step(&ctx, &m->base, "acme", &fwd_key, soon, &(step_rec){0}, &e);
  cr_assert_eq(m->last_deadline, soon, "the caller's nearer deadline wins");
}

/* ---------------- CompleteStep ---------------- */

Test(coord, complete_validates_before_the_store) {
  step_rec out;
  err_t e;
  uint8_t big[9] = "123456789";
  ctx.body_max = 8;
  assert_invalid(coord_complete_step(&ctx, &m->base, "acme", &fwd_key, 0, OUTCOME_SUCCEEDED, 0,
                                     NULL, 0, far, &out, &e),
                 &e, "attempt");
  assert_invalid(coord_complete_step(&ctx, &m->base, "acme", &fwd_key, 1, OUTCOME_UNSPECIFIED, 0,
                                     NULL, 0, far, &out, &e),
                 &e, "outcome");
  assert_invalid(
      coord_complete_step(&ctx, &m->base, "acme", &fwd_key, 1, 9, 0, NULL, 0, far, &out, &e), &e,
      "outcome");
  assert_invalid(coord_complete_step(&ctx, &m->base, "acme", &fwd_key, 1, OUTCOME_SUCCEEDED, 0, big,
                                     9, far, &out, &e),
                 &e, "body");
  assert_invalid(coord_complete_step(&ctx, &m->base, "bad tenant", &fwd_key, 1, OUTCOME_SUCCEEDED,
                                     0, NULL, 0, far, &out, &e),
                 &e, "tenant");
  cr_assert_not(out.present);
  /* exactly body_max is fine (reaches the store: no such step) */
  cr_assert_eq(coord_complete_step(&ctx, &m->base, "acme", &fwd_key, 1, OUTCOME_SUCCEEDED, 0, big,
                                   8, far, &out, &e),
               ERR_NOT_FOUND);
  cr_assert(strstr(e.msg, "no such step"));
}

Test(coord, complete_returns_an_owned_record) {
  coord_begin_result r;
  err_t e;
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &fwd_key, NULL, 0, 0, far, &r, &e), ERR_OK);
  m->now_ms += 10;
  uint8_t *body = (uint8_t *)strdup("done");
  step_rec out;
  cr_assert_eq(coord_complete_step(&ctx, &m->base, "acme", &fwd_key, 1, OUTCOME_SUCCEEDED, 7, body,
                                   4, far, &out, &e),
               ERR_OK, "%s", e.msg);
  cr_assert_neq(out.body, body);
  memset(body, 'X', 4); /* the caller's buffer is only borrowed */
  free(body);
  cr_assert(out.present);
  cr_assert_eq(out.state, STATE_SUCCEEDED);
  cr_assert_eq(out.attempt, 1);
  cr_assert_eq(out.code, 7);
  cr_assert_eq(out.body_len, 4);
  cr_assert(memcmp(out.body, "done", 4) == 0);
  cr_assert_eq(out.completed_ms, NOW + 10);
  cr_assert_eq(out.expires_ms, NOW + 10 + POLICY_DEFAULT_RETENTION_S * 1000LL);

  step_key k = {"acme", "g-1", "payments", "charge", PHASE_FORWARD};
  const step_rec *s = memstore_get(m, &k);
  cr_assert_eq(s->state, STATE_SUCCEEDED);
  cr_assert(memcmp(s->body, "done", 4) == 0, "the store got the body");
  step_rec_clear(&out);
  LEAK_CHECK();
}

Test(coord, complete_repeat_returns_the_stored_record_and_survives_retries) {
  begin_and_complete(&fwd_key, OUTCOME_UNKNOWN, "maybe");
  m->txn_runs = 2;
  step_rec out;
  err_t e;
  cr_assert_eq(coord_complete_step(&ctx, &m->base, "acme", &fwd_key, 1, OUTCOME_UNKNOWN, 201,
                                   (const uint8_t *)"maybe", 5, far, &out, &e),
               ERR_OK, "%s", e.msg);
  cr_assert_eq(out.state, STATE_UNKNOWN);
  cr_assert(memcmp(out.body, "maybe", 5) == 0);
  step_rec_clear(&out);

  cr_assert_eq(coord_complete_step(&ctx, &m->base, "acme", &fwd_key, 1, OUTCOME_SUCCEEDED, 201,
                                   (const uint8_t *)"maybe", 5, far, &out, &e),
               ERR_PRECONDITION);
  cr_assert_not(out.present);
  cr_assert_null(out.body);
  LEAK_CHECK();
}

Test(coord, complete_stale_attempt_is_aborted) {
  coord_begin_result r;
  err_t e;
  coord_begin_step(&ctx, &m->base, "acme", &fwd_key, NULL, 0, 100, far, &r, &e);
  m->now_ms += 100;
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &fwd_key, NULL, 0, 0, far, &r, &e), ERR_OK);
  cr_assert_eq(r.attempt, 2);
  step_rec out;
  cr_assert_eq(coord_complete_step(&ctx, &m->base, "acme", &fwd_key, 1, OUTCOME_SUCCEEDED, 0, NULL,
                                   0, far, &out, &e),
               ERR_ABORTED);
  cr_assert(strstr(e.msg, "lease lost"), "%s", e.msg);
}

/* ---------------- ExtendLease ---------------- */

Test(coord, extend_validates_before_the_store) {
  int64_t lease = 99;
  err_t e;
  assert_invalid(coord_extend_lease(&ctx, &m->base, "acme", &fwd_key, 0, 1000, far, &lease, &e), &e,
                 "attempt");
  assert_invalid(coord_extend_lease(&ctx, &m->base, "acme", &fwd_key, 1, REC_LEASE_MS_MAX + 1, far,
                                    &lease, &e),
                 &e, "lease_ms");
  coord_key_in bad = fwd_key;
  bad.global_id = "";
  assert_invalid(coord_extend_lease(&ctx, &m->base, "acme", &bad, 1, 1000, far, &lease, &e), &e,
                 "key.global_id");
  cr_assert_eq(lease, 0);
}

Test(coord, extend_pushes_the_lease) {
  coord_begin_result r;
  err_t e;
  coord_begin_step(&ctx, &m->base, "acme", &fwd_key, NULL, 0, 100, far, &r, &e);
  m->now_ms += 50;
  int64_t lease = 0;
  cr_assert_eq(coord_extend_lease(&ctx, &m->base, "acme", &fwd_key, 1, 9000, far, &lease, &e),
               ERR_OK, "%s", e.msg);
  cr_assert_eq(lease, NOW + 50 + 9000);
  step_key k = {"acme", "g-1", "payments", "charge", PHASE_FORWARD};
  cr_assert_eq(memstore_get(m, &k)->lease_expires_ms, NOW + 50 + 9000);

  cr_assert_eq(coord_extend_lease(&ctx, &m->base, "acme", &fwd_key, 1, 0, far, &lease, &e), ERR_OK);
  cr_assert_eq(lease, NOW + 50 + POLICY_DEFAULT_LEASE_MS, "0 = the policy's lease");

  cr_assert_eq(coord_extend_lease(&ctx, &m->base, "acme", &fwd_key, 2, 9000, far, &lease, &e),
               ERR_ABORTED);
  cr_assert_eq(lease, 0);
  cr_assert_eq(coord_extend_lease(&ctx, &m->base, "acme", &comp_key, 1, 9000, far, &lease, &e),
               ERR_NOT_FOUND);
}

/* ---------------- LookupStep ---------------- */

Test(coord, lookup) {
  step_rec out;
  err_t e;
  coord_key_in bad = fwd_key;
  bad.phase = 7;
  assert_invalid(coord_lookup_step(&ctx, &m->base, "acme", &bad, far, &out, &e), &e, "key.phase");

  cr_assert_eq(coord_lookup_step(&ctx, &m->base, "acme", &fwd_key, far, &out, &e), ERR_NOT_FOUND);
  cr_assert(strstr(e.msg, "no such step"));
  cr_assert_not(out.present);

  begin_and_complete(&fwd_key, OUTCOME_SUCCEEDED, "body!");
  cr_assert_eq(coord_lookup_step(&ctx, &m->base, "acme", &fwd_key, far, &out, &e), ERR_OK);
  cr_assert(out.present);
  cr_assert_eq(out.state, STATE_SUCCEEDED);
  cr_assert(memcmp(out.body, "body!", 5) == 0);
  step_rec_clear(&out);

  /* another tenant sees nothing */
  cr_assert_eq(coord_lookup_step(&ctx, &m->base, "other", &fwd_key, far, &out, &e), ERR_NOT_FOUND);

  m->fail_rc = ERR_UNAVAILABLE;
  cr_assert_eq(coord_lookup_step(&ctx, &m->base, "acme", &fwd_key, far, &out, &e), ERR_UNAVAILABLE);
  cr_assert_not(out.present);
  LEAK_CHECK();
}

/* ---------------- BeginSaga ---------------- */

Test(coord, begin_saga_validates_before_the_store) {
  saga_begun out;
  err_t e;
  char long_type[200];
  memset(long_type, 'a', 129);
  long_type[129] = '\0';
  assert_invalid(coord_begin_saga(&ctx, &m->base, "", NULL, NULL, NULL, 0, far, &out, &e), &e,
                 "tenant");
  assert_invalid(coord_begin_saga(&ctx, &m->base, "acme", "bad\n", NULL, NULL, 0, far, &out, &e),
                 &e, "request_id");
  assert_invalid(coord_begin_saga(&ctx, &m->base, "acme", NULL, long_type, NULL, 0, far, &out, &e),
                 &e, "saga_type");
  saga_label many[REC_LABELS_MAX + 1];
  char keys[REC_LABELS_MAX + 1][8];
  for (int i = 0; i <= REC_LABELS_MAX; i++) {
    snprintf(keys[i], sizeof keys[i], "k%d", i);
    many[i].key = keys[i];
    many[i].value = "v";
  }
  assert_invalid(
      coord_begin_saga(&ctx, &m->base, "acme", NULL, NULL, many, REC_LABELS_MAX + 1, far, &out, &e),
      &e, "labels");
  saga_label badkey[] = {{"ok", "v"}, {"bad key", "v"}};
  assert_invalid(coord_begin_saga(&ctx, &m->base, "acme", NULL, NULL, badkey, 2, far, &out, &e), &e,
                 "labels");
  saga_label badval[] = {{"k", "\xff"}};
  assert_invalid(coord_begin_saga(&ctx, &m->base, "acme", NULL, NULL, badval, 1, far, &out, &e), &e,
                 "labels");
  saga_label dup[] = {{"k", "1"}, {"k", "2"}};
  assert_invalid(coord_begin_saga(&ctx, &m->base, "acme", NULL, NULL, dup, 2, far, &out, &e), &e,
                 "labels");
  cr_assert_eq(out.global_id[0], '\0');

  /* exactly REC_LABELS_MAX labels are fine */
  cr_assert_eq(
      coord_begin_saga(&ctx, &m->base, "acme", NULL, NULL, many, REC_LABELS_MAX, far, &out, &e),
      ERR_OK, "%s", e.msg);
  cr_assert_eq(m->last_saga.n_labels, REC_LABELS_MAX);
}

Test(coord, begin_saga_passes_the_right_request) {
  fake_policy fp = {0};
  ctx.resolve_policy = fake_resolve;
  ctx.resolve_arg = &fp;
  saga_label labels[] = {{"team", "payments"}, {"region", "eu"}};
  saga_begun out;
  err_t e;
  int64_t t0 = clock_wall_ms();
  cr_assert_eq(
      coord_begin_saga(&ctx, &m->base, "acme", "req-1", "checkout", labels, 2, far, &out, &e),
      ERR_OK, "%s", e.msg);
  int64_t t1 = clock_wall_ms();
  cr_assert_eq(m->begin_saga_calls, 1);
  cr_assert_str_eq(m->last_saga.tenant, "acme");
  cr_assert(m->last_saga_had_request_id);
  cr_assert_str_eq(m->last_saga.request_id, "req-1");
  cr_assert_str_eq(m->last_saga.saga_type, "checkout");
  cr_assert_eq(m->last_saga.n_labels, 2);
  cr_assert_str_eq(m->last_saga.label_keys[1], "region");
  cr_assert_str_eq(m->last_saga.label_values[1], "eu");
  cr_assert_eq(m->last_saga_new.retention_s, 77);
  cr_assert_str_eq(fp.service, "*");
  cr_assert_str_eq(fp.operation, "*");

  /* the id is a fresh UUIDv7 of the wall clock */
  const char *id = m->last_saga.global_id;
  cr_assert_eq(strlen(id), UUIDV7_STR_LEN, "%s", id);
  cr_assert_eq(id[14], '7');
  char ts_hex[13];
  memcpy(ts_hex, id, 8);
  memcpy(ts_hex + 8, id + 9, 4);
  ts_hex[12] = '\0';
  int64_t ts = strtoll(ts_hex, NULL, 16);
  cr_assert(ts >= t0 && ts <= t1, "timestamp %lld not in [%lld, %lld]", (long long)ts,
            (long long)t0, (long long)t1);
  cr_assert_str_eq(out.global_id, id);
  cr_assert(out.created);
  cr_assert_eq(out.created_ms, NOW);

  /* repeat: the store answers the same saga; coord passes a new candidate id */
  saga_begun again;
  cr_assert_eq(
      coord_begin_saga(&ctx, &m->base, "acme", "req-1", "checkout", labels, 2, far, &again, &e),
      ERR_OK);
  cr_assert_not(again.created);
  cr_assert_str_eq(again.global_id, out.global_id);
  cr_assert_str_neq(m->last_saga.global_id, out.global_id);
}

Test(coord, begin_saga_without_request_id) {
  saga_begun a, b;
  err_t e;
  cr_assert_eq(coord_begin_saga(&ctx, &m->base, "acme", "", NULL, NULL, 0, far, &a, &e), ERR_OK);
  cr_assert_not(m->last_saga_had_request_id, "\"\" must reach the store as NULL");
  cr_assert_str_eq(m->last_saga.saga_type, "");
  cr_assert_eq(m->last_saga_new.retention_s, POLICY_DEFAULT_RETENTION_S);
  cr_assert_eq(coord_begin_saga(&ctx, &m->base, "acme", NULL, NULL, NULL, 0, far, &b, &e), ERR_OK);
  cr_assert_not(m->last_saga_had_request_id);
  cr_assert(a.created && b.created);
  cr_assert_str_neq(a.global_id, b.global_id);
}

Test(coord, begin_saga_store_failure_propagates) {
  m->fail_rc = ERR_UNAVAILABLE;
  saga_begun out;
  err_t e;
  cr_assert_eq(coord_begin_saga(&ctx, &m->base, "acme", "r", "t", NULL, 0, far, &out, &e),
               ERR_UNAVAILABLE);
  cr_assert_eq(out.global_id[0], '\0');
}

/* ---------------- GetSaga ---------------- */

static size_t two_mib(const step_rec *r) {
  (void)r;
  return 2u << 20;
}

Test(coord, get_saga) {
  saga_view v;
  err_t e;
  char next[COORD_TOKEN_MAX];
  coord_saga_in bad_id = {.global_id = "no spaces"}, g1 = {.global_id = "g-1"};
  assert_invalid(coord_get_saga(&ctx, &m->base, "acme", &bad_id, far, &v, next, &e), &e,
                 "global_id");
  assert_invalid(coord_get_saga(&ctx, &m->base, "a b", &g1, far, &v, next, &e), &e, "tenant");

  cr_assert_eq(coord_get_saga(&ctx, &m->base, "acme", &g1, far, &v, next, &e), ERR_NOT_FOUND);
  cr_assert_eq(v.n_steps, 0);
  cr_assert_null(v.steps);

  begin_and_complete(&fwd_key, OUTCOME_SUCCEEDED, "x");
  cr_assert_eq(coord_get_saga(&ctx, &m->base, "acme", &g1, far, &v, next, &e), ERR_OK, "%s", e.msg);
  cr_assert_str_eq(v.global_id, "g-1");
  cr_assert_str_eq(v.saga_type, "");
  cr_assert_eq(v.n_steps, 1);
  cr_assert_eq(v.steps[0].state, STATE_SUCCEEDED);
  cr_assert_str_eq(next, "");
  saga_view_clear(&v);

  cr_assert_eq(coord_get_saga(&ctx, &m->base, "other", &g1, far, &v, next, &e), ERR_NOT_FOUND);
  LEAK_CHECK();
}

/* docs/api.md §16: a page ends before the record that would take it past 3 MiB; the token names the
 * last record kept, for this saga only. */
Test(coord, get_saga_pages_by_bytes) {
  saga_view v;
  err_t e;
  char next[COORD_TOKEN_MAX];
  begin_and_complete(&fwd_key, OUTCOME_SUCCEEDED, "x");
  begin_and_complete(&comp_key, OUTCOME_SUCCEEDED, "y");
  coord_saga_in in = {.global_id = "g-1", .rec_size = two_mib};
  cr_assert_eq(coord_get_saga(&ctx, &m->base, "acme", &in, far, &v, next, &e), ERR_OK, "%s", e.msg);
  cr_assert_eq(v.n_steps, 1, "two records of 2 MiB must not share a 3 MiB page");
  cr_assert(v.more);
  cr_assert_neq(next[0], '\0');
  saga_page pg = {0};
  cr_assert_eq(coord_saga_token_decode("acme", "g-1", next, &pg, &e), ERR_OK, "%s", e.msg);
  cr_assert(pg.has_after);
  cr_assert_eq(pg.after_created_ms, v.steps[0].created_ms);
  cr_assert_str_eq(pg.after_service, v.steps[0].key.service);
  cr_assert_eq(pg.after_phase, v.steps[0].key.phase);
  cr_assert_eq(coord_saga_token_decode("acme", "g-2", next, &pg, &e), ERR_INVALID);
  cr_assert(strstr(e.msg, "page_token"), "%s", e.msg);
  cr_assert_eq(coord_saga_token_decode("other", "g-1", next, &pg, &e), ERR_INVALID);
  saga_view_clear(&v);
  LEAK_CHECK();
}

/* ---------------- GetPolicy ---------------- */

Test(coord, get_policy) {
  policy p;
  err_t e;
  assert_invalid(coord_get_policy(&ctx, "acme", "Payments", "charge", &p, &e), &e, "service");
  assert_invalid(coord_get_policy(&ctx, "acme", "payments", "", &p, &e), &e, "operation");
  assert_invalid(coord_get_policy(&ctx, "acme", NULL, "charge", &p, &e), &e, "service");
  assert_invalid(coord_get_policy(&ctx, "", "payments", "charge", &p, &e), &e, "tenant");

  cr_assert_eq(coord_get_policy(&ctx, "acme", "payments", "charge", &p, &e), ERR_OK);
  cr_assert_str_eq(p.service, "payments");
  cr_assert_str_eq(p.operation, "charge");
  cr_assert_eq(p.mode, FAILURE_MODE_FAIL_CLOSED);
  cr_assert_eq(p.retention_s, POLICY_DEFAULT_RETENTION_S);
  cr_assert_eq(p.lease_ms, POLICY_DEFAULT_LEASE_MS);

  fake_policy fp = {0};
  ctx.resolve_policy = fake_resolve;
  ctx.resolve_arg = &fp;
  cr_assert_eq(coord_get_policy(&ctx, "acme", "payments", "charge", &p, &e), ERR_OK);
  cr_assert_eq(p.mode, FAILURE_MODE_FAIL_OPEN);
  cr_assert_eq(p.retention_s, 77);
  cr_assert_eq(p.lease_ms, 4321);
  cr_assert_eq(fp.calls, 1);
  cr_assert_eq(m->calls, 0, "GetPolicy never touches the store");
}
