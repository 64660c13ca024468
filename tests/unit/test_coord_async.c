/* test_coord_async.c — BeginStep and CompleteStep without blocking (coord.h, "the non-blocking
 * forms") over the in-memory store double, whose submissions run only when the test
 * says so (memstore_run_submitted: "later, on the store's thread"). What is answered before
 * the call returns (invalid input, a replay from the cache, a refused submission) never
 * reaches the store; everything else is answered exactly once, after the store's answer, with
 * the same result the blocking form gives. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/replay_cache.h"
#include "coord/coord.h"
#include "support_cache.h"
#include "support_decide.h"
#include "support_memstore.h"
#include "util/clock.h"

static memstore *m;
static coord_ctx ctx;
static int64_t far;

static void setup(void) {
  m = memstore_new(clock_wall_ms());
  coord_ctx_init(&ctx);
  far = clock_mono_ms() + 3600 * 1000;
}
static void teardown(void) {
  store_close(&m->base);
}
TestSuite(coord_async, .init = setup, .fini = teardown);

/* What a done callback saw. */
typedef struct seen {
  int calls;
  err_code rc;
  char msg[ERR_MSG_MAX];
  coord_begin_result begin; /* moved out of *out (body included) */
  step_rec rec;             /* a copy */
} seen;

static void seen_clear(seen *s) {
  coord_begin_result_clear(&s->begin);
  step_rec_clear(&s->rec);
}

static void on_begin(void *arg, err_code rc, coord_begin_result *out, err_t *err) {
  seen *s = arg;
  s->calls++;
  s->rc = rc;
  snprintf(s->msg, sizeof s->msg, "%s", rc == ERR_OK ? "" : err->msg);
  s->begin = *out; /* take it: coord clears what is left */
  memset(out, 0, sizeof *out);
}

static void on_complete(void *arg, err_code rc, step_rec *out, err_t *err) {
  seen *s = arg;
  s->calls++;
  s->rc = rc;
  snprintf(s->msg, sizeof s->msg, "%s", rc == ERR_OK ? "" : err->msg);
  if (rc == ERR_OK && !step_rec_copy(&s->rec, out)) abort();
}

static const coord_key_in key = {"g-1", "pay", "charge", PHASE_FORWARD, NULL};
static const uint8_t FP[2] = {1, 2};

static void begin_async(const coord_key_in *k, seen *s) {
  coord_begin_step_async(&ctx, &m->base, "acme", k, FP, sizeof FP, 0, far, on_begin, s);
}

Test(coord_async, invalid_input_is_answered_at_once_and_never_submitted) {
  coord_key_in bad = key;
  bad.service = "no spaces";
  seen s = {0};
  begin_async(&bad, &s);
  cr_assert_eq(s.calls, 1, "not answered before returning");
  cr_assert_eq(s.rc, ERR_INVALID);
  cr_assert(strstr(s.msg, "service"), "%s", s.msg);
  seen c = {0};
  coord_complete_step_async(&ctx, &m->base, "acme", &key, 0, OUTCOME_SUCCEEDED, 0, NULL, 0, far,
                            on_complete, &c);
  cr_assert_eq(c.calls, 1);
  cr_assert_eq(c.rc, ERR_INVALID);
  cr_assert(strstr(c.msg, "attempt"), "%s", c.msg);
  cr_assert_eq(m->submit_calls, 0);
  cr_assert_eq(m->calls, 0);
}

Test(coord_async, a_step_is_answered_once_after_the_store_and_as_the_blocking_form_would) {
  seen s = {0};
  begin_async(&key, &s);
  cr_assert_eq(s.calls, 0, "answered before the store ran it");
  cr_assert_eq(m->submit_calls, 1);
  cr_assert_eq(m->step_txn_calls, 0);
  cr_assert_eq(memstore_run_submitted(m), 1);
  cr_assert_eq(s.calls, 1);
  cr_assert_eq(s.rc, ERR_OK, "%s", s.msg);
  cr_assert_eq(s.begin.decision, DECISION_PROCEED);
  cr_assert_eq(s.begin.attempt, 1);

  /* in progress: the second BeginStep is refused, like coord_begin_step */
  seen again = {0};
  begin_async(&key, &again);
  cr_assert_eq(memstore_run_submitted(m), 1);
  cr_assert_eq(again.rc, ERR_ABORTED, "%s", again.msg);

  seen c = {0};
  const uint8_t body[] = "paid";
  coord_complete_step_async(&ctx, &m->base, "acme", &key, 1, OUTCOME_SUCCEEDED, 201, body, 4, far,
                            on_complete, &c);
  cr_assert_eq(c.calls, 0);
  cr_assert_eq(memstore_run_submitted(m), 1);
  cr_assert_eq(c.calls, 1);
  cr_assert_eq(c.rc, ERR_OK, "%s", c.msg);
  cr_assert_eq(c.rec.state, STATE_SUCCEEDED);
  cr_assert_eq(c.rec.code, 201);
  cr_assert_eq(c.rec.body_len, 4);
  cr_assert_eq(memcmp(c.rec.body, "paid", 4), 0);

  /* a stale attempt: the store's answer, passed on */
  seen stale = {0};
  coord_complete_step_async(&ctx, &m->base, "acme", &key, 7, OUTCOME_SUCCEEDED, 0, NULL, 0, far,
                            on_complete, &stale);
  cr_assert_eq(memstore_run_submitted(m), 1);
  cr_assert_neq(stale.rc, ERR_OK);
  cr_assert_eq(stale.calls, 1);
  seen_clear(&s);
  seen_clear(&again);
  seen_clear(&c);
}

Test(coord_async, a_replay_from_the_cache_is_answered_at_once_without_the_store) {
  replay_cache *cache = replay_cache_new(NULL);
  ctx.cache = cache;
  cache_finished_forward(cache, "g-1", FP, sizeof FP, 3600 * 1000);

  seen s = {0};
  begin_async(&key, &s);
  cr_assert_eq(s.calls, 1, "a hit waited for the store");
  cr_assert_eq(s.rc, ERR_OK, "%s", s.msg);
  cr_assert_eq(s.begin.decision, DECISION_REPLAY);
  cr_assert_eq(s.begin.body_len, 4);
  cr_assert_eq(memcmp(s.begin.body, "paid", 4), 0);
  cr_assert_eq(m->submit_calls, 0);

  /* a miss goes to the store, and is counted once */
  coord_key_in other = key;
  other.global_id = "g-2";
  seen miss = {0};
  begin_async(&other, &miss);
  cr_assert_eq(miss.calls, 0);
  cr_assert_eq(memstore_run_submitted(m), 1);
  cr_assert_eq(miss.begin.decision, DECISION_PROCEED);
  replay_cache_stats st;
  replay_cache_stats_get(cache, &st);
  cr_assert_eq(st.hits, 1);
  cr_assert_eq(st.misses, 1);
  seen_clear(&s);
  seen_clear(&miss);
  ctx.cache = NULL;
  replay_cache_free(cache);
}

Test(coord_async, a_refused_submission_is_answered_at_once_and_fail_open_still_applies) {
  m->submit_rc = ERR_RESOURCE;
  seen s = {0};
  begin_async(&key, &s);
  cr_assert_eq(s.calls, 1);
  cr_assert_eq(s.rc, ERR_RESOURCE, "%s", s.msg);

  /* the store unreachable (its answer, later): a fail-open operation proceeds unguarded */
  m->submit_rc = ERR_OK;
  m->fail_rc = ERR_UNAVAILABLE;
  ctx.resolve_policy = sd_fail_open_policy;
  seen open = {0};
  begin_async(&key, &open);
  cr_assert_eq(open.calls, 0);
  cr_assert_eq(memstore_run_submitted(m), 1);
  cr_assert_eq(open.rc, ERR_OK, "%s", open.msg);
  cr_assert_eq(open.begin.decision, DECISION_PROCEED_UNGUARDED);
  cr_assert_eq(open.begin.attempt, 0);

  /* fail-closed: the store's error */
  ctx.resolve_policy = NULL;
  seen closed = {0};
  begin_async(&key, &closed);
  cr_assert_eq(memstore_run_submitted(m), 1);
  cr_assert_eq(closed.rc, ERR_UNAVAILABLE, "%s", closed.msg);
  seen_clear(&s);
  seen_clear(&open);
  seen_clear(&closed);
}
