/* test_replay_cache.c — the leader's replay cache: what it keeps, what it drops. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/replay_cache.h"
#include "util/clock.h"

static step_key key_of(const char *gid) {
  step_key k;
  memset(&k, 0, sizeof k);
  snprintf(k.tenant, sizeof k.tenant, "t1");
  snprintf(k.global_id, sizeof k.global_id, "%s", gid);
  snprintf(k.service, sizeof k.service, "pay");
  snprintf(k.operation, sizeof k.operation, "charge");
  return k;
}

/* A pair whose forward record is in state st (with a body when finished). */
static step_pair pair_of(const char *gid, step_state st, const char *body) {
  step_pair p;
  memset(&p, 0, sizeof p);
  p.fwd.key = key_of(gid);
  p.fwd.key.phase = PHASE_FORWARD;
  p.comp.key = p.fwd.key;
  p.comp.key.phase = PHASE_COMPENSATION;
  p.fwd.present = true;
  p.fwd.state = st;
  p.fwd.attempt = 3;
  p.fwd.fp_len = 2;
  p.fwd.fp[0] = 0xab;
  p.fwd.fp[1] = 0xcd;
  if (body) {
    p.fwd.body = (uint8_t *)body;
    p.fwd.body_len = strlen(body);
    p.fwd.outcome = OUTCOME_SUCCEEDED;
    p.fwd.code = 201;
  }
  p.fwd.expires_ms = 1234567;
  p.now_ms = 1000000; /* the database's clock at the commit */
  return p;
}

static void clear_pair(step_pair *p) {
  step_rec_clear(&p->fwd);
  step_rec_clear(&p->comp);
}

Test(replay_cache, a_finished_pair_comes_back_whole_and_owned) {
  replay_cache *c = replay_cache_new(NULL);
  char body[] = "receipt-42";
  step_pair in = pair_of("g1", STATE_SUCCEEDED, body);
  replay_cache_committed(c, 0, &in);
  memset(body, 'x', sizeof body - 1); /* the cache copied it */
  step_pair out;
  step_key k = key_of("g1");
  k.phase = PHASE_COMPENSATION; /* the phase does not matter: the pair is the unit */
  cr_assert(replay_cache_get(c, &k, &out));
  cr_assert(out.fwd.present);
  cr_assert_not(out.comp.present);
  cr_assert_eq(out.fwd.state, STATE_SUCCEEDED);
  cr_assert_eq(out.fwd.attempt, 3);
  cr_assert_eq(out.fwd.code, 201);
  cr_assert_eq(out.fwd.expires_ms, 1234567);
  cr_assert_eq(out.fwd.fp_len, 2);
  cr_assert_eq(out.fwd.fp[1], 0xcd);
  cr_assert_eq(out.fwd.body_len, 10);
  cr_assert_arr_eq(out.fwd.body, "receipt-42", 10);
  cr_assert_str_eq(out.fwd.key.global_id, "g1");
  cr_assert_eq(out.fwd.key.phase, PHASE_FORWARD);
  cr_assert_eq(out.comp.key.phase, PHASE_COMPENSATION);
  clear_pair(&out);
  step_key other = key_of("g2");
  cr_assert_not(replay_cache_get(c, &other, &out));
  replay_cache_free(c);
}

Test(replay_cache, a_commit_that_leaves_nothing_finished_removes_the_pair) {
  replay_cache *c = replay_cache_new(NULL);
  step_pair done = pair_of("g1", STATE_FAILED, "no");
  replay_cache_committed(c, 0, &done);
  step_pair out;
  step_key k = key_of("g1");
  cr_assert(replay_cache_get(c, &k, &out));
  clear_pair(&out);
  step_pair again = pair_of("g1", STATE_IN_PROGRESS, NULL); /* e.g. resolved to RELEASED, retried */
  replay_cache_committed(c, 0, &again);
  cr_assert_not(replay_cache_get(c, &k, &out));
  step_pair released = pair_of("g1", STATE_RELEASED, NULL);
  replay_cache_committed(c, 0, &released);
  cr_assert_not(replay_cache_get(c, &k, &out));
  replay_cache_stats st;
  replay_cache_stats_get(c, &st);
  cr_assert_eq(st.entries, 0);
  cr_assert_eq(st.bytes, 0);
  replay_cache_free(c);
}

Test(replay_cache, the_clock_given_back_is_the_databases_carried_forward_never_the_nodes) {
  replay_cache *c = replay_cache_new(NULL);
  step_pair p = pair_of("g1", STATE_SUCCEEDED, "ok");
  int64_t t0 = clock_mono_ms();
  replay_cache_committed(c, 0, &p);
  step_key k = key_of("g1");
  step_pair out;
  cr_assert(replay_cache_get(c, &k, &out));
  int64_t t1 = clock_mono_ms();
  /* 1,000,000 (the database's clock at the commit) plus the monotonic time since: nothing
   * of this node's wall clock (about 1.8e12 today) */
  cr_assert_geq(out.now_ms, 1000000);
  cr_assert_leq(out.now_ms, 1000000 + (t1 - t0), "now_ms %lld", (long long)out.now_ms);
  clear_pair(&out);
  p.now_ms = 0; /* no database clock: nothing could say when it expires, so not kept */
  replay_cache_committed(c, 0, &p);
  cr_assert_not(replay_cache_get(c, &k, &out));
  replay_cache_free(c);
}

Test(replay_cache, an_epoch_change_drops_everything_and_stale_commits_are_ignored) {
  static _Atomic uint64_t epoch;
  atomic_store(&epoch, 7);
  replay_cache_cfg cfg = {.epoch = &epoch};
  replay_cache *c = replay_cache_new(&cfg);
  step_pair p = pair_of("g1", STATE_SUCCEEDED, "ok");
  replay_cache_committed(c, 7, &p);
  step_key k = key_of("g1");
  step_pair out;
  cr_assert(replay_cache_get(c, &k, &out));
  clear_pair(&out);
  atomic_store(&epoch, 9); /* a new term: nothing of the old one may answer */
  cr_assert_not(replay_cache_get(c, &k, &out));
  replay_cache_committed(c, 7, &p); /* a commit made under the old epoch arriving late */
  cr_assert_not(replay_cache_get(c, &k, &out));
  replay_cache_committed(c, 9, &p);
  cr_assert(replay_cache_get(c, &k, &out));
  clear_pair(&out);
  replay_cache_stats st;
  replay_cache_stats_get(c, &st);
  cr_assert_eq(st.dropped_epochs, 1);
  replay_cache_free(c);
}

Test(replay_cache, bounded_by_entries_and_bytes_oldest_first) {
  replay_cache_cfg cfg = {.max_entries = 100, .max_bytes = 64 * 1024};
  replay_cache *c = replay_cache_new(&cfg);
  char *big = malloc(4000);
  memset(big, 'b', 3999);
  big[3999] = '\0';
  for (int i = 0; i < 1000; i++) {
    char gid[32];
    snprintf(gid, sizeof gid, "g%d", i);
    step_pair p = pair_of(gid, STATE_SUCCEEDED, i % 2 ? big : "small");
    replay_cache_committed(c, 0, &p);
    replay_cache_stats st;
    replay_cache_stats_get(c, &st);
    cr_assert_leq(st.entries, 100, "entries %llu at %d", (unsigned long long)st.entries, i);
    cr_assert_leq(st.bytes, 64 * 1024, "bytes %llu at %d", (unsigned long long)st.bytes, i);
  }
  step_pair out;
  step_key newest = key_of("g999"), oldest = key_of("g0");
  cr_assert(replay_cache_get(c, &newest, &out));
  cr_assert_eq(out.fwd.body_len, 3999);
  clear_pair(&out);
  cr_assert_not(replay_cache_get(c, &oldest, &out));
  free(big);
  replay_cache_free(c);
}
