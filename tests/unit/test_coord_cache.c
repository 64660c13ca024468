/* test_coord_cache.c — BeginStep and the leader's replay cache: what the cache may
 * answer without the store (REPLAY, SKIP, fingerprint mismatch), and what always goes to the
 * store (anything that writes, records near the end of their retention, misses). The store
 * double fails every call, so an answer that needed it shows up as ERR_UNAVAILABLE. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cache/replay_cache.h"
#include "coord/coord.h"
#include "support_cache.h"
#include "support_memstore.h"
#include "util/clock.h"

static memstore *m;
static coord_ctx ctx;
static replay_cache *cache;
static int64_t far;
static const uint8_t FP[2] = {1, 2};

static void setup(void) {
  m = memstore_new(clock_wall_ms());
  m->fail_rc = ERR_UNAVAILABLE; /* any store access fails */
  coord_ctx_init(&ctx);
  cache = replay_cache_new(NULL);
  ctx.cache = cache;
  far = clock_mono_ms() + 60000;
}
static void teardown(void) {
  store_close(&m->base);
  replay_cache_free(cache);
}
TestSuite(coord_cache, .init = setup, .fini = teardown);

static err_code begin(const char *gid, int phase, const uint8_t *fp, coord_begin_result *r,
                      err_t *e) {
  coord_key_in k = {.global_id = gid, .service = "pay", .operation = "charge", .phase = phase};
  return coord_begin_step(&ctx, &m->base, "acme", &k, fp, fp ? 2 : 0, 0, far, r, e);
}

Test(coord_cache, a_replay_is_answered_without_the_store) {
  cache_finished_forward(cache, "g1", FP, sizeof FP, 3600 * 1000);
  coord_begin_result r;
  err_t e;
  cr_assert_eq(begin("g1", PHASE_FORWARD, FP, &r, &e), ERR_OK, "%s", e.msg);
  cr_assert_eq(r.decision, DECISION_REPLAY);
  cr_assert_eq(r.outcome, OUTCOME_SUCCEEDED);
  cr_assert_eq(r.code, 200);
  cr_assert_eq(r.body_len, 4);
  cr_assert_arr_eq(r.body, "paid", 4);
  cr_assert_eq(r.mode, FAILURE_MODE_FAIL_CLOSED, "a cached answer carries the failure mode");
  cr_assert_eq(m->calls, 0, "the store was asked");
  coord_begin_result_clear(&r);
  replay_cache_stats st;
  replay_cache_stats_get(cache, &st);
  cr_assert_eq(st.hits, 1);
}

Test(coord_cache, a_fingerprint_mismatch_is_answered_without_the_store) {
  cache_finished_forward(cache, "g1", FP, sizeof FP, 3600 * 1000);
  const uint8_t other[2] = {9, 9};
  coord_begin_result r;
  err_t e;
  cr_assert_eq(begin("g1", PHASE_FORWARD, other, &r, &e), ERR_PRECONDITION);
  cr_assert(strstr(e.msg, "fingerprint mismatch"), "%s", e.msg);
  cr_assert_eq(m->calls, 0);
}

Test(coord_cache, anything_that_writes_goes_to_the_store) {
  cache_finished_forward(cache, "g1", FP, sizeof FP, 3600 * 1000);
  coord_begin_result r;
  err_t e;
  /* a compensation of a finished forward: PROCEED, a write */
  cr_assert_eq(begin("g1", PHASE_COMPENSATION, FP, &r, &e), ERR_UNAVAILABLE);
  cr_assert_eq(m->step_txn_calls, 1);
  cr_assert_eq(r.decision, DECISION_UNSPECIFIED);
  cr_assert_null(r.body);
}

Test(coord_cache, a_record_near_the_end_of_its_retention_goes_to_the_store) {
  cache_finished_forward(cache, "g1", FP, sizeof FP,
                         5000); /* inside the margin: the reaper may be there first */
  coord_begin_result r;
  err_t e;
  cr_assert_eq(begin("g1", PHASE_FORWARD, FP, &r, &e), ERR_UNAVAILABLE);
  cr_assert_eq(m->step_txn_calls, 1);
}

Test(coord_cache, a_miss_goes_to_the_store) {
  coord_begin_result r;
  err_t e;
  cr_assert_eq(begin("never", PHASE_FORWARD, FP, &r, &e), ERR_UNAVAILABLE);
  cr_assert_eq(m->step_txn_calls, 1);
  replay_cache_stats st;
  replay_cache_stats_get(cache, &st);
  cr_assert_eq(st.misses, 1);
}

/* docs/api.md §12: well past its result retention the cache answers the REPLAY itself, without the
 * body; near that moment (either side) the database clock decides. */
Test(coord_cache, a_result_well_past_its_retention_is_replayed_without_its_body) {
  cache_finished_forward_result(cache, "g1", FP, sizeof FP, 3600 * 1000, -60000);
  coord_begin_result r;
  err_t e;
  cr_assert_eq(begin("g1", PHASE_FORWARD, FP, &r, &e), ERR_OK, "%s", e.msg);
  cr_assert_eq(r.decision, DECISION_REPLAY);
  cr_assert(r.result_expired);
  cr_assert_eq(r.code, 200);
  cr_assert_eq(r.body_len, 0);
  cr_assert_null(r.body);
  cr_assert_eq(m->calls, 0, "the store was asked");
  coord_begin_result_clear(&r);
  const uint8_t other[2] = {9, 9};
  cr_assert_eq(begin("g1", PHASE_FORWARD, other, &r, &e), ERR_PRECONDITION);
  cr_assert_eq(m->calls, 0);
}

Test(coord_cache, a_result_near_the_end_of_its_retention_goes_to_the_store) {
  cache_finished_forward_result(cache, "g1", FP, sizeof FP, 3600 * 1000, 3000);
  cache_finished_forward_result(cache, "g2", FP, sizeof FP, 3600 * 1000, -3000);
  coord_begin_result r;
  err_t e;
  cr_assert_eq(begin("g1", PHASE_FORWARD, FP, &r, &e), ERR_UNAVAILABLE);
  cr_assert_eq(begin("g2", PHASE_FORWARD, FP, &r, &e), ERR_UNAVAILABLE);
  cr_assert_eq(m->step_txn_calls, 2);
}
