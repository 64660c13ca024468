/* test_replay_cache.c — the leader's replay cache seen from a client: replays are
 * answered from it (counted on /metrics), and a record changed by an operator (ResolveStep)
 * or released for a retry is never answered from a stale copy. The cache runs only on a node
 * elected through etcd (the fence keeps every other writer out), so this suite's coordinator
 * is; test_cache_coherence.c has the deployments where it must not answer. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

#define HITS "idem_replay_cache_lookups_total{result=\"hit\"}"

static void setup(void) {
  h_fixture_start(&H, &(h_fixture_conf){
                          .metrics = true, .deadline_ms = 5000, .any_exit = true, .etcd = true});
}

TestSuite(replay_cache, .init = setup, .fini = h_teardown, .timeout = 60);

/* BeginStep that must REPLAY with outcome and body. */
static void expect_replay(const idem_step_key *k, idem_outcome outcome, const char *body) {
  idem_begin b;
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(H.c, k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_REPLAY, "decision %d", b.decision);
  cr_assert_eq(b.result.outcome, outcome, "outcome %d", b.result.outcome);
  cr_assert_eq(b.result.body_len, strlen(body));
  if (strlen(body) > 0) cr_assert_arr_eq(b.result.body, body, strlen(body));
  idem_begin_clear(&b);
}

static uint64_t begin_proceed(const idem_step_key *k) {
  idem_begin b;
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(H.c, k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED, "decision %d", b.decision);
  uint64_t attempt = b.attempt;
  idem_begin_clear(&b);
  return attempt;
}

Test(replay_cache, replays_are_answered_from_the_cache) {
  char gid[64];
  h_unique("g", gid, sizeof gid);
  idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD};
  uint64_t attempt = begin_proceed(&k);
  idem_error e = {0};
  cr_assert_eq(
      idem_step_complete(H.c, &k, attempt, IDEM_OUTCOME_SUCCEEDED, 201, "paid", 4, NULL, &e),
      IDEM_OK, "%s", e.message);
  double before = h_metric(H.metrics_port, HITS);
  cr_assert_geq(before, 0, "no cache counter on /metrics");
  for (int i = 0; i < 20; i++) expect_replay(&k, IDEM_OUTCOME_SUCCEEDED, "paid");
  double after = h_metric(H.metrics_port, HITS);
  cr_assert_geq(after - before, 20, "hits went from %.0f to %.0f", before, after);
}

Test(replay_cache, a_resolved_step_replays_the_resolution_at_once) {
  char gid[64];
  h_unique("g", gid, sizeof gid);
  idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD};
  uint64_t attempt = begin_proceed(&k);
  idem_error e = {0};
  cr_assert_eq(
      idem_step_complete(H.c, &k, attempt, IDEM_OUTCOME_UNKNOWN, 0, "timeout", 7, NULL, &e),
      IDEM_OK, "%s", e.message);
  expect_replay(&k, IDEM_OUTCOME_UNKNOWN, "timeout"); /* now in the cache */
  idem_resolution res = {.outcome = IDEM_OUTCOME_SUCCEEDED,
                         .code = 200,
                         .body = "settled",
                         .body_len = 7,
                         .reason = "checked with the bank",
                         .actor = "ops"};
  cr_assert_eq(idem_step_resolve(H.c, &k, &res, NULL, &e), IDEM_OK, "%s", e.message);
  expect_replay(&k, IDEM_OUTCOME_SUCCEEDED, "settled");
}

Test(replay_cache, a_step_released_for_retry_proceeds_instead_of_replaying) {
  char gid[64];
  h_unique("g", gid, sizeof gid);
  idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD};
  uint64_t attempt = begin_proceed(&k);
  idem_error e = {0};
  cr_assert_eq(idem_step_complete(H.c, &k, attempt, IDEM_OUTCOME_UNKNOWN, 0, NULL, 0, NULL, &e),
               IDEM_OK, "%s", e.message);
  expect_replay(&k, IDEM_OUTCOME_UNKNOWN, "");
  idem_resolution res = {.outcome = IDEM_OUTCOME_RETRYABLE, .reason = "never reached the bank"};
  cr_assert_eq(idem_step_resolve(H.c, &k, &res, NULL, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(begin_proceed(&k), attempt + 1);
}
