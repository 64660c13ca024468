/* test_coord_wait.c — BeginStep with wait_ms (docs/api.md §12) at the decision-table level: calls
 * parked in a coord_waiters table (polled by the test instead of its thread) over the in-memory
 * store, whose commits wake them through its change hook as the batcher's do. Each waiter is
 * answered exactly once, as BeginStep answers on the new state, or ABORTED / UNAVAILABLE when
 * its wait, the table or leadership ends first. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord/coord.h"
#include "metrics/metrics.h"
#include "support_memstore.h"
#include "util/clock.h"

static memstore *m;
static coord_ctx ctx;
static coord_waiters *w;
static int64_t far, t0;
static bool leads = true;

static bool leading(void *arg, char *leader, size_t cap) {
  (void)arg;
  if (!leads) snprintf(leader, cap, "%s", "10.0.0.2:50051");
  return leads;
}

static void on_change(void *arg, const step_key *key) {
  coord_waiters_changed(arg, key);
}

static void start(size_t max) {
  m = memstore_new(clock_wall_ms());
  coord_ctx_init(&ctx);
  coord_waiters_cfg wc = {.max_waiters = max, .leading = leading};
  w = coord_waiters_new(&wc);
  cr_assert_not_null(w);
  ctx.waiters = w;
  m->on_change = on_change;
  m->on_change_arg = w;
  leads = true;
  far = clock_mono_ms() + 3600 * 1000;
  t0 = clock_mono_ms();
}

static void setup(void) {
  start(0);
}
static void teardown(void) {
  coord_waiters_free(w);
  store_close(&m->base);
}
TestSuite(coord_wait, .init = setup, .fini = teardown);

typedef struct seen {
  int calls;
  err_code rc;
  err_t err;
  coord_begin_result begin;
} seen;

static void on_begin(void *arg, err_code rc, coord_begin_result *out, err_t *err) {
  seen *s = arg;
  s->calls++;
  s->rc = rc;
  if (rc != ERR_OK) s->err = *err;
  coord_begin_result_clear(&s->begin);
  s->begin = *out;
  memset(out, 0, sizeof *out);
}

static void on_complete(void *arg, err_code rc, step_rec *out, err_t *err) {
  (void)out;
  (void)err;
  *(err_code *)arg = rc;
}

static const coord_key_in fwd = {"g-1", "pay", "charge", PHASE_FORWARD, NULL};
static const coord_key_in comp = {"g-1", "pay", "charge", PHASE_COMPENSATION, NULL};
static const uint8_t FP[2] = {1, 2};

static void begin(const coord_key_in *k, uint32_t lease_ms, uint32_t wait_ms, seen *s) {
  coord_begin_step_wait_async(&ctx, &m->base, "acme", k, FP, sizeof FP, lease_ms, wait_ms, far,
                              NULL, on_begin, s);
}

/* begin, linked to a cancellation cell */
static void begin_cell(const coord_key_in *k, uint32_t wait_ms, coord_wait_cell *cell, seen *s) {
  coord_begin_step_wait_async(&ctx, &m->base, "acme", k, FP, sizeof FP, 0, wait_ms, far, cell,
                              on_begin, s);
}

/* Runs the store and the table until nothing is left to do at mono time `at`. */
static void settle_at(int64_t at) {
  for (int i = 0; i < 20; i++) {
    int ran = memstore_run_submitted(m);
    coord_waiters_poll(w, at);
    if (ran == 0 && memstore_run_submitted(m) == 0) break;
  }
}

static void complete(const coord_key_in *k, uint64_t attempt, int outcome, const char *body) {
  err_code rc = ERR_INTERNAL;
  coord_complete_step_async(&ctx, &m->base, "acme", k, attempt, outcome, 201, (const uint8_t *)body,
                            strlen(body), far, on_complete, &rc);
  memstore_run_submitted(m);
  cr_assert_eq(rc, ERR_OK);
}

/* The step is begun (PROCEED, attempt 1) and a second caller waits on it. */
static void first_and_waiter(seen *first, seen *waiter, uint32_t wait_ms) {
  begin(&fwd, 0, 0, first);
  settle_at(t0);
  cr_assert_eq(first->begin.decision, DECISION_PROCEED);
  begin(&fwd, 0, wait_ms, waiter);
  settle_at(t0);
  cr_assert_eq(waiter->calls, 0, "a waiter is not answered while the step is in progress");
  cr_assert_eq(coord_waiters_count(w), 1);
}

Test(coord_wait, a_complete_releases_the_waiter_with_a_replay) {
  seen a = {0}, b = {0};
  first_and_waiter(&a, &b, 10000);
  cr_assert_eq(metrics_waiting(), 1);
  complete(&fwd, 1, OUTCOME_SUCCEEDED, "paid");
  cr_assert_eq(b.calls, 0, "woken calls are run again by the table, not by the commit");
  settle_at(t0);
  cr_assert_eq(b.calls, 1);
  cr_assert_eq(b.rc, ERR_OK);
  cr_assert_eq(b.begin.decision, DECISION_REPLAY);
  cr_assert_eq(b.begin.body_len, 4);
  cr_assert_eq(memcmp(b.begin.body, "paid", 4), 0);
  cr_assert_eq(coord_waiters_count(w), 0);
  cr_assert_eq(metrics_waiting(), 0);
  coord_begin_result_clear(&a.begin);
  coord_begin_result_clear(&b.begin);
}

Test(coord_wait, a_retryable_complete_releases_the_waiter_with_the_next_attempt) {
  seen a = {0}, b = {0};
  first_and_waiter(&a, &b, 10000);
  complete(&fwd, 1, OUTCOME_RETRYABLE, "busy");
  settle_at(t0);
  cr_assert_eq(b.calls, 1);
  cr_assert_eq(b.begin.decision, DECISION_PROCEED);
  cr_assert_eq(b.begin.attempt, 2);
  cr_assert_not(b.begin.takeover);
  coord_begin_result_clear(&a.begin);
  coord_begin_result_clear(&b.begin);
}

Test(coord_wait, a_compensation_waits_on_its_forward_and_proceeds_once_it_succeeded) {
  seen a = {0}, c = {0};
  begin(&fwd, 0, 0, &a);
  settle_at(t0);
  begin(&comp, 0, 10000, &c);
  settle_at(t0);
  cr_assert_eq(c.calls, 0, "the forward is in progress: the compensation waits");
  complete(&fwd, 1, OUTCOME_SUCCEEDED, "paid");
  settle_at(t0);
  cr_assert_eq(c.calls, 1);
  cr_assert_eq(c.rc, ERR_OK);
  cr_assert_eq(c.begin.decision, DECISION_PROCEED);
  cr_assert_eq(c.begin.attempt, 1);
  coord_begin_result_clear(&a.begin);
  coord_begin_result_clear(&c.begin);
}

Test(coord_wait, a_compensation_waiting_on_a_forward_that_failed_is_a_null_compensation) {
  seen a = {0}, c = {0};
  begin(&fwd, 0, 0, &a);
  settle_at(t0);
  begin(&comp, 0, 10000, &c);
  settle_at(t0);
  complete(&fwd, 1, OUTCOME_FAILED, "declined");
  settle_at(t0);
  cr_assert_eq(c.calls, 1);
  cr_assert_eq(c.begin.decision, DECISION_SKIP_NULL_COMPENSATION);
  coord_begin_result_clear(&a.begin);
  coord_begin_result_clear(&c.begin);
}

Test(coord_wait, at_the_lease_end_exactly_one_waiter_takes_over_and_the_others_wait_on) {
  seen a = {0}, v[3] = {0};
  begin(&fwd, 1000, 0, &a);
  settle_at(t0);
  for (int i = 0; i < 3; i++) begin(&fwd, 1000, 60000, &v[i]);
  settle_at(t0);
  cr_assert_eq(coord_waiters_count(w), 3);
  settle_at(t0 + 500); /* no timer is due yet (the lease ends 1 s after they parked) */
  for (int i = 0; i < 3; i++) cr_assert_eq(v[i].calls, 0);

  m->now_ms += 1001;                 /* the lease ends on the database clock... */
  settle_at(clock_mono_ms() + 1100); /* ...and the timer fires */
  int proceeds = 0, answered = 0;
  for (int i = 0; i < 3; i++) {
    answered += v[i].calls;
    if (v[i].calls == 1 && v[i].rc == ERR_OK && v[i].begin.decision == DECISION_PROCEED) {
      proceeds++;
      cr_assert_eq(v[i].begin.attempt, 2);
      cr_assert(v[i].begin.takeover);
    }
  }
  cr_assert_eq(proceeds, 1, "exactly one waiter takes the expired lease over");
  cr_assert_eq(answered, 1, "the others wait on (the new attempt is in progress)");
  cr_assert_eq(coord_waiters_count(w), 2);

  uint64_t timeouts = metrics_wait_timed_out_total();
  settle_at(clock_mono_ms() + 61000); /* their wait (60 s from when they began) runs out */
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(v[i].calls, 1, "every waiter is answered exactly once");
    if (v[i].begin.decision != DECISION_PROCEED) {
      cr_assert_eq(v[i].rc, ERR_ABORTED);
      cr_assert_eq(v[i].err.reason, ERR_R_IN_PROGRESS);
      cr_assert_gt(v[i].err.retry_after_ms, 0);
    }
    coord_begin_result_clear(&v[i].begin);
  }
  cr_assert_eq(metrics_wait_timed_out_total() - timeouts, 2);
  cr_assert_eq(coord_waiters_count(w), 0);
  coord_begin_result_clear(&a.begin);
}

Test(coord_wait, a_wait_that_runs_out_is_answered_aborted) {
  seen a = {0}, b = {0};
  int64_t before = clock_mono_ms();
  first_and_waiter(&a, &b, 100);
  settle_at(before + 50);
  cr_assert_eq(b.calls, 0);
  settle_at(clock_mono_ms() + 150);
  cr_assert_eq(b.calls, 1);
  cr_assert_eq(b.rc, ERR_ABORTED);
  cr_assert_eq(b.err.reason, ERR_R_IN_PROGRESS);
  coord_begin_result_clear(&a.begin);
}

Test(coord_wait, without_wait_ms_or_over_its_limit_nothing_waits) {
  seen a = {0}, b = {0}, bad = {0};
  begin(&fwd, 0, 0, &a);
  settle_at(t0);
  begin(&fwd, 0, 0, &b);
  settle_at(t0);
  cr_assert_eq(b.calls, 1);
  cr_assert_eq(b.rc, ERR_ABORTED);
  int submits = m->submit_calls;
  begin(&fwd, 0, 60001, &bad);
  cr_assert_eq(bad.calls, 1, "refused before the store");
  cr_assert_eq(bad.rc, ERR_INVALID);
  cr_assert_eq(strncmp(bad.err.msg, "wait_ms: ", 9), 0, "%s", bad.err.msg);
  cr_assert_eq(m->submit_calls, submits);
  coord_begin_result_clear(&a.begin);
}

Test(coord_wait, beyond_max_waiters_the_answer_is_aborted_at_once) {
  coord_waiters_free(w);
  store_close(&m->base);
  start(2);
  seen a = {0}, v[3] = {0};
  begin(&fwd, 0, 0, &a);
  settle_at(t0);
  for (int i = 0; i < 3; i++) begin(&fwd, 0, 10000, &v[i]);
  settle_at(t0);
  cr_assert_eq(v[0].calls + v[1].calls, 0);
  cr_assert_eq(v[2].calls, 1);
  cr_assert_eq(v[2].rc, ERR_ABORTED);
  cr_assert_eq(coord_waiters_count(w), 2);
  complete(&fwd, 1, OUTCOME_SUCCEEDED, "ok");
  settle_at(t0);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(v[i].calls, 1);
    cr_assert_eq(v[i].begin.decision, DECISION_REPLAY);
    coord_begin_result_clear(&v[i].begin);
  }
  coord_begin_result_clear(&a.begin);
}

Test(coord_wait, a_cancelled_waiter_is_answered_at_once_and_frees_its_place) {
  coord_waiters_free(w);
  store_close(&m->base);
  start(2);
  seen a = {0}, v[2] = {0}, next = {0};
  coord_wait_cell cells[2] = {0};
  begin(&fwd, 0, 0, &a);
  settle_at(t0);
  for (int i = 0; i < 2; i++) begin_cell(&fwd, 10000, &cells[i], &v[i]);
  settle_at(t0);
  cr_assert_eq(coord_waiters_count(w), 2, "both parked: the table is full");
  coord_waiters_cancel(w, &cells[0]);
  cr_assert_eq(v[0].calls, 1, "answered by the cancel itself");
  cr_assert_eq(v[0].rc, ERR_ABORTED);
  cr_assert_str_eq(v[0].err.msg, "cancelled by the caller");
  cr_assert_eq(coord_waiters_count(w), 1, "its place is free");
  cr_assert_null(cells[0].wt);
  coord_waiters_cancel(w, &cells[0]); /* a second cancel, and one after the answer: nothing */
  cr_assert_eq(v[0].calls, 1);
  begin(&fwd, 0, 10000, &next);
  settle_at(t0);
  cr_assert_eq(next.calls, 0, "the freed place is taken by the next waiter");
  cr_assert_eq(coord_waiters_count(w), 2);
  complete(&fwd, 1, OUTCOME_SUCCEEDED, "ok");
  settle_at(t0);
  cr_assert_eq(v[0].calls, 1, "never answered twice");
  cr_assert_eq(v[1].begin.decision, DECISION_REPLAY);
  cr_assert_eq(next.begin.decision, DECISION_REPLAY);
  cr_assert_null(cells[1].wt, "unlinked once answered");
  coord_waiters_cancel(w, &cells[1]); /* after its answer: nothing */
  cr_assert_eq(v[1].calls, 1);
  coord_begin_result_clear(&a.begin);
  coord_begin_result_clear(&v[1].begin);
  coord_begin_result_clear(&next.begin);
}

Test(coord_wait, a_call_cancelled_while_it_runs_again_is_not_parked) {
  seen a = {0}, b = {0};
  coord_wait_cell cell = {0};
  begin(&fwd, 0, 0, &a);
  settle_at(t0);
  begin_cell(&fwd, 10000, &cell, &b);
  settle_at(t0);
  cr_assert_eq(coord_waiters_count(w), 1);
  /* a commit wakes it (ready, not parked): the cancel only marks it */
  step_key k = {.tenant = "acme", .global_id = "g-1", .service = "pay", .operation = "charge"};
  coord_waiters_changed(w, &k);
  coord_waiters_cancel(w, &cell);
  cr_assert_eq(b.calls, 0, "being run again: answered by its run");
  settle_at(t0);
  cr_assert_eq(b.calls, 1);
  cr_assert_eq(b.rc, ERR_ABORTED);
  cr_assert_str_eq(b.err.msg, "cancelled by the caller", "not parked again");
  cr_assert_eq(coord_waiters_count(w), 0);
  coord_begin_result_clear(&a.begin);
}

Test(coord_wait, a_node_that_stops_leading_answers_its_waiters_unavailable_with_the_leader) {
  seen a = {0}, b = {0};
  first_and_waiter(&a, &b, 10000);
  leads = false;
  settle_at(t0 + 1);
  cr_assert_eq(b.calls, 1);
  cr_assert_eq(b.rc, ERR_UNAVAILABLE);
  cr_assert_eq(b.err.reason, ERR_R_NOT_LEADER);
  cr_assert_str_eq(b.err.leader, "10.0.0.2:50051");
  /* and a call that would park now is refused the same way */
  seen c = {0};
  begin(&fwd, 0, 10000, &c);
  settle_at(t0 + 2);
  cr_assert_eq(c.calls, 1);
  cr_assert_eq(c.rc, ERR_UNAVAILABLE);
  coord_begin_result_clear(&a.begin);
}

Test(coord_wait, closing_the_table_answers_every_waiter_once) {
  seen a = {0}, b = {0};
  first_and_waiter(&a, &b, 10000);
  coord_waiters_close(w);
  cr_assert_eq(b.calls, 1);
  cr_assert_eq(b.rc, ERR_UNAVAILABLE);
  cr_assert_eq(b.err.reason, ERR_R_SHUTTING_DOWN);
  coord_waiters_close(w); /* idempotent */
  complete(&fwd, 1, OUTCOME_SUCCEEDED, "late");
  settle_at(t0);
  cr_assert_eq(b.calls, 1);
  coord_begin_result_clear(&a.begin);
}

Test(coord_wait, a_write_between_evaluation_and_parking_is_not_missed) {
  seen a = {0}, b = {0};
  begin(&fwd, 0, 0, &a);
  settle_at(t0);
  begin(&fwd, 0, 10000, &b); /* submitted, not run yet: its change counter is noted */
  int submits = m->submit_calls;
  step_key k = {0};
  snprintf(k.tenant, sizeof k.tenant, "acme");
  snprintf(k.global_id, sizeof k.global_id, "g-1");
  snprintf(k.service, sizeof k.service, "pay");
  snprintf(k.operation, sizeof k.operation, "charge");
  coord_waiters_changed(w, &k); /* a commit to the pair lands while b is on its way */
  memstore_run_submitted(m);    /* b reads "in progress" and tries to park */
  cr_assert_eq(b.calls, 0);
  coord_waiters_poll(w, t0);
  cr_assert_eq(m->submit_calls, submits + 1, "b is run again instead of parked blind");
  memstore_run_submitted(m);
  coord_waiters_poll(w, t0);
  cr_assert_eq(m->submit_calls, submits + 1, "and parked once nothing moved");
  cr_assert_eq(coord_waiters_count(w), 1);
  complete(&fwd, 1, OUTCOME_SUCCEEDED, "x");
  settle_at(t0);
  cr_assert_eq(b.calls, 1);
  cr_assert_eq(b.begin.decision, DECISION_REPLAY);
  coord_begin_result_clear(&a.begin);
  coord_begin_result_clear(&b.begin);
}

Test(coord_wait, a_duplicate_of_a_parked_call_joins_it_without_the_store) {
  seen a = {0}, b = {0}, c = {0}, other = {0};
  first_and_waiter(&a, &b, 10000);
  int submits = m->submit_calls;
  begin(&fwd, 0, 10000, &c);
  cr_assert_eq(m->submit_calls, submits, "the twin's answer is known: no store round trip");
  cr_assert_eq(coord_waiters_count(w), 2);
  /* another fingerprint is not a twin: the store refuses it */
  static const uint8_t FP2[2] = {9, 9};
  coord_begin_step_wait_async(&ctx, &m->base, "acme", &fwd, FP2, sizeof FP2, 0, 10000, far,
                              NULL, on_begin, &other);
  settle_at(t0);
  cr_assert_eq(other.calls, 1);
  cr_assert_eq(other.rc, ERR_PRECONDITION);
  complete(&fwd, 1, OUTCOME_SUCCEEDED, "paid");
  settle_at(t0);
  cr_assert_eq(b.calls + c.calls, 2);
  cr_assert_eq(b.begin.decision, DECISION_REPLAY);
  cr_assert_eq(c.begin.decision, DECISION_REPLAY);
  coord_begin_result_clear(&a.begin);
  coord_begin_result_clear(&b.begin);
  coord_begin_result_clear(&c.begin);
}

Test(coord_wait, a_woken_call_that_joins_a_parked_twin_keeps_one_place) {
  seen a = {0}, b = {0}, c = {0};
  begin(&fwd, 0, 0, &a);
  settle_at(t0);
  begin(&fwd, 0, 10000, &b);
  step_key k = {0};
  snprintf(k.tenant, sizeof k.tenant, "acme");
  snprintf(k.global_id, sizeof k.global_id, "g-1");
  snprintf(k.service, sizeof k.service, "pay");
  snprintf(k.operation, sizeof k.operation, "charge");
  coord_waiters_changed(w, &k);
  memstore_run_submitted(m); /* b: in progress, but the pair moved: ready to run again */
  begin(&fwd, 0, 10000, &c);
  memstore_run_submitted(m); /* c parks */
  cr_assert_eq(coord_waiters_count(w), 2);
  coord_waiters_poll(w, t0); /* b runs again and joins its parked twin c */
  cr_assert_eq(coord_waiters_count(w), 2, "b holds one place, not two");
  complete(&fwd, 1, OUTCOME_SUCCEEDED, "x");
  settle_at(t0);
  cr_assert_eq(b.calls + c.calls, 2);
  cr_assert_eq(coord_waiters_count(w), 0);
  cr_assert_eq(metrics_waiting(), 0);
  coord_begin_result_clear(&a.begin);
  coord_begin_result_clear(&b.begin);
  coord_begin_result_clear(&c.begin);
}
