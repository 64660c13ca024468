/* test_cache_coherence.c — no answer comes from a replay cache that is out of date or judges
 * expiry by a skewed clock (README "Replay cache", docs/limits.md):
 *   shared_db     two coordinators without etcd on one database (the README allows any
 *                 number): a step resolved through one is answered anew by the other at once,
 *                 never replayed from what the other committed before;
 *   skewed_clock  a leader (etcd) whose wall clock runs 30 s behind the database's (libfaketime)
 *                 agrees with LookupStep at both boundaries: the body is gone from BeginStep
 *                 when LookupStep says the result expired (retention_s), and the key is
 *                 forgotten (PROCEED attempt 1) when LookupStep says not found
 *                 (key_retention_s). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

static const uint8_t FP[] = "fp-1";

static idem_begin begin_on(idem_client *c, const idem_step_key *k) {
  idem_begin b = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(c, k, FP, sizeof FP, 0, &b, &e), IDEM_OK, "%s", e.message);
  return b;
}

/* --- two processes, no etcd, one database --- */

TestSuite(shared_db, .init = h_setup, .fini = h_teardown, .timeout = 60);

Test(shared_db, a_step_resolved_through_one_process_is_never_replayed_stale_by_the_other) {
  srv b_srv;
  h_srv_start(&b_srv, NULL, NULL);
  idem_client *a = H.c, *b = h_client(&b_srv, H.t, 5000);
  char gid[64];
  h_unique("g", gid, sizeof gid);
  idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD};

  idem_begin r = begin_on(a, &k);
  cr_assert_eq(r.decision, IDEM_DECISION_PROCEED);
  idem_begin_clear(&r);
  idem_error e = {0};
  cr_assert_eq(idem_step_complete(a, &k, 1, IDEM_OUTCOME_UNKNOWN, 0, "timeout", 7, NULL, &e),
               IDEM_OK, "%s", e.message);
  for (int i = 0; i < 3; i++) { /* A answers the replay (and would keep it, with a cache) */
    r = begin_on(a, &k);
    cr_assert_eq(r.decision, IDEM_DECISION_REPLAY);
    cr_assert_eq(r.result.outcome, IDEM_OUTCOME_UNKNOWN);
    idem_begin_clear(&r);
  }
  /* an operator releases the step for a retry through B */
  idem_resolution res = {.outcome = IDEM_OUTCOME_RETRYABLE, .reason = "never reached the bank"};
  cr_assert_eq(idem_step_resolve(b, &k, &res, NULL, &e), IDEM_OK, "%s", e.message);
  /* A at once: the retry (attempt 2), not REPLAY UNKNOWN from what A committed before */
  r = begin_on(a, &k);
  cr_assert_eq(r.decision, IDEM_DECISION_PROCEED, "A answered decision %d (outcome %d)",
               r.decision, r.result.outcome);
  cr_assert_eq(r.attempt, 2);
  idem_begin_clear(&r);
  /* and B agrees: attempt 2 is A's now */
  int rc = idem_step_begin(b, &k, FP, sizeof FP, 0, &r, &e);
  cr_assert_eq(rc, IDEM_ABORTED, "B: %d %s", rc, e.message);
  idem_begin_clear(&r);
  /* A completes; B resolves it to another answer; A replays B's, not its own */
  cr_assert_eq(idem_step_complete(a, &k, 2, IDEM_OUTCOME_UNKNOWN, 0, "again", 5, NULL, &e),
               IDEM_OK, "%s", e.message);
  idem_resolution done = {.outcome = IDEM_OUTCOME_SUCCEEDED,
                          .code = 200,
                          .body = "settled",
                          .body_len = 7,
                          .reason = "checked with the bank",
                          .actor = "ops"};
  cr_assert_eq(idem_step_resolve(b, &k, &done, NULL, &e), IDEM_OK, "%s", e.message);
  r = begin_on(a, &k);
  cr_assert_eq(r.decision, IDEM_DECISION_REPLAY);
  cr_assert_eq(r.result.outcome, IDEM_OUTCOME_SUCCEEDED);
  cr_assert_eq(r.result.body_len, 7);
  idem_begin_clear(&r);
  idem_close(b);
  cr_assert_eq(h_srv_stop(&b_srv), 0);
}

/* --- a leader whose wall clock is 30 s behind the database's --- */

#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
#define RETENTION_S 3
#define KEY_RETENTION_S 9

static char asan_opts[512];

static void skewed_setup(void) {
  /* an ASan build's runtime must come first among the preloaded libraries; libfaketime goes
   * before it here, which ASan allows with verify_asan_link_order=0 */
  const char *a = getenv("ASAN_OPTIONS");
  snprintf(asan_opts, sizeof asan_opts, "ASAN_OPTIONS=%s%sverify_asan_link_order=0", a ? a : "",
           a && *a ? ":" : "");
  static const char *env[6];
  env[0] = "LD_PRELOAD=" FAKETIME_LIB;
  env[1] = "FAKETIME=-30s";
  env[2] = "FAKETIME_DONT_FAKE_MONOTONIC=1";
  env[3] = "FAKETIME_DONT_RESET=1";
  env[4] = asan_opts;
  env[5] = NULL;
  h_fixture_start(&H, &(h_fixture_conf){.metrics = true,
                                        .deadline_ms = 5000,
                                        .etcd = true,
                                        .env = env,
                                        .args = (const char *const[]){"--reaper-interval", "0",
                                                                      NULL}});
}

TestSuite(skewed_clock, .init = skewed_setup, .fini = h_teardown, .timeout = 90);

typedef enum { BODY, EXPIRED, GONE, OTHER } phase_seen;

/* What LookupStep says of k now: the body, the result expired (no body), not found, or
 * something else (a new incarnation in progress). */
static phase_seen lookup(const idem_step_key *k) {
  idem_record rec = {0};
  idem_error e = {0};
  int rc = idem_step_lookup(H.c, k, &rec, &e);
  if (rc == IDEM_NOT_FOUND) return GONE;
  cr_assert_eq(rc, IDEM_OK, "%s", e.message);
  phase_seen p = rec.state != IDEM_STATE_SUCCEEDED ? OTHER
                 : rec.result.body_len == 4         ? BODY
                                                    : EXPIRED;
  idem_record_clear(&rec);
  return p;
}

/* Completes a step under a policy of retention_s / key_retention_s, then samples until the key
 * is forgotten; each BeginStep must agree with the LookupSteps around it. */
static void agree_until_forgotten(uint32_t retention_s, uint32_t key_retention_s, int seen[4]) {
  /* the node's wall clock is behind the database's (which the test's shares) */
  idem_status st;
  idem_error e = {0};
  cr_assert_eq(idem_get_status(H.c, &st, &e), IDEM_OK, "%s", e.message);
  cr_assert_lt(st.started_unix_ms, h_wall_ms() - 20000, "the node's clock is not 30 s behind");
  idem_policy p = {.failure_mode = IDEM_FAIL_CLOSED,
                   .retention_s = retention_s,
                   .key_retention_s = key_retention_s,
                   .lease_ms = 2000}; /* shorter than the key retention (docs/limits.md) */
  snprintf(p.service, sizeof p.service, "pay");
  snprintf(p.operation, sizeof p.operation, "charge-%u-%u", retention_s, key_retention_s);
  cr_assert_eq(idem_policy_set(H.c, &p, NULL, &e), IDEM_OK, "%s", e.message);
  char gid[64];
  h_unique("g", gid, sizeof gid);
  idem_step_key k = {gid, "pay", p.operation, IDEM_FORWARD};
  idem_begin r = begin_on(H.c, &k);
  cr_assert_eq(r.decision, IDEM_DECISION_PROCEED);
  idem_begin_clear(&r);
  cr_assert_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_SUCCEEDED, 200, "paid", 4, NULL, &e),
               IDEM_OK, "%s", e.message);
  /* Lookup, Begin, Lookup: where both lookups agree, BeginStep must say the same */
  int64_t end = h_now_ms() + (key_retention_s + 15) * 1000;
  for (;;) {
    cr_assert_lt(h_now_ms(), end, "the key was never forgotten");
    phase_seen before = lookup(&k);
    if (before == GONE) {
      r = begin_on(H.c, &k); /* forgotten: a new incarnation (this writes: the last sample) */
      cr_assert_eq(r.decision, IDEM_DECISION_PROCEED,
                   "LookupStep: not found; BeginStep: decision %d (result_expired %d)",
                   r.decision, r.result_expired);
      cr_assert_eq(r.attempt, 1);
      idem_begin_clear(&r);
      seen[GONE]++;
      break;
    }
    r = begin_on(H.c, &k);
    phase_seen after = lookup(&k);
    if (r.decision == IDEM_DECISION_PROCEED) { /* forgotten between the first lookup and it */
      cr_assert_neq(after, before, "LookupStep says the key is known; BeginStep forgot it");
      cr_assert_eq(r.attempt, 1);
      idem_begin_clear(&r);
      seen[GONE]++;
      break;
    }
    if (before == after && before != OTHER) {
      seen[before]++;
      cr_assert_eq(r.decision, IDEM_DECISION_REPLAY,
                   "LookupStep: %s; BeginStep: decision %d",
                   before == BODY ? "the body" : "result expired", r.decision);
      if (before == BODY)
        cr_assert_eq(r.result.body_len, 4, "LookupStep has the body, BeginStep not");
      else if (before == EXPIRED)
        cr_assert_eq(r.result.body_len, 0, "LookupStep: result expired; BeginStep replays the body");
    }
    idem_begin_clear(&r);
    h_sleep_ms(100); /* not a wait: samples every 100 ms across both boundaries */
  }
}

/* The body boundary (retention_s 3), then the key's (key_retention_s 9). */
Test(skewed_clock, a_node_30_s_behind_agrees_with_lookup_at_both_boundaries) {
  int seen[4] = {0};
  agree_until_forgotten(RETENTION_S, KEY_RETENTION_S, seen);
  cr_assert_gt(seen[BODY], 0);
  cr_assert_gt(seen[EXPIRED], 0);
  fprintf(stderr,
          "node 30 s behind: %d samples with the body, %d past retention_s, then forgotten: "
          "BeginStep agreed with LookupStep at each\n",
          seen[BODY], seen[EXPIRED]);
}

/* The key's boundary alone (key_retention_s = retention_s: the body and the key go together). */
Test(skewed_clock, a_node_30_s_behind_forgets_the_key_when_lookup_does) {
  int seen[4] = {0};
  agree_until_forgotten(RETENTION_S, RETENTION_S, seen);
  cr_assert_gt(seen[BODY], 0);
  cr_assert_eq(seen[GONE], 1);
}
