/* test_decide_retention.c — keys remembered longer than results (docs/api.md §12) in the decision
 * table: a finished step keeps its body for retention_s and the rest of the record for
 * key_retention_s; in between BeginStep answers REPLAY with outcome and code, no body and
 * result_expired, a different fingerprint is still refused, and after key_retention_s the key
 * is new again. */
#include <criterion/criterion.h>
#include <string.h>

#include "coord/decide.h"
#include "support_decide.h"

#define KEY_RET_S 600u /* the policy's key retention, ten times SD_RET_S */

/* A SUCCEEDED forward completed at SD_NOW - 7000 whose body is kept to result_end and the
 * record to key_end. */
static step_rec finished(int64_t result_end, int64_t key_end) {
  step_rec r = sd_rec(PHASE_FORWARD, STATE_SUCCEEDED, 1, "fp-a");
  sd_with_result(&r, OUTCOME_SUCCEEDED, 201);
  r.result_expires_ms = result_end;
  r.expires_ms = key_end;
  return r;
}

static decide_begin_in begin_in(const step_key *k, const char *fp) {
  return (decide_begin_in){.key = k,
                           .fp = (const uint8_t *)fp,
                           .fp_len = strlen(fp),
                           .lease_ms = SD_LEASE,
                           .retention = {SD_RET_S, KEY_RET_S}};
}

/* A Complete of attempt 1 with SUCCEEDED, code 201 and body, under the test's retentions. */
static decide_complete_in complete_in(const step_key *k, const char *body) {
  return (decide_complete_in){.key = k,
                              .attempt = 1,
                              .outcome = OUTCOME_SUCCEEDED,
                              .code = 201,
                              .body = (const uint8_t *)body,
                              .body_len = strlen(body),
                              .retention = {SD_RET_S, KEY_RET_S}};
}

static err_code begin(const step_key *k, const char *fp, const step_pair *cur,
                      decide_begin_out *out, step_writes *w, err_t *err) {
  decide_begin_in in = begin_in(k, fp);
  return decide_begin(&in, cur, out, w, err);
}

Test(decide_retention, a_complete_keeps_the_body_for_retention_and_the_key_for_key_retention) {
  step_key k = sd_key(PHASE_FORWARD);
  step_pair cur = {.now_ms = SD_NOW};
  cur.fwd = sd_rec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, "fp-a");
  decide_complete_in in = complete_in(&k, "paid");
  step_writes w;
  const step_rec *after = NULL;
  err_t err;
  cr_assert_eq(decide_complete(&in, &cur, &w, &after, &err), ERR_OK, "%s", err.msg);
  cr_assert_eq(w.n, 1);
  cr_assert_eq(after->result_expires_ms, SD_RET_END);
  cr_assert_eq(after->expires_ms, SD_NOW + (int64_t)KEY_RET_S * 1000);
  cr_assert_not(after->result_expired);

  /* key_retention_s 0, or below retention_s, means retention_s: one expiry for both */
  for (uint32_t kr = 0; kr <= 1; kr++) {
    in.retention.key_s = kr;
    cr_assert_eq(decide_complete(&in, &cur, &w, &after, &err), ERR_OK, "%s", err.msg);
    cr_assert_eq(after->result_expires_ms, SD_RET_END);
    cr_assert_eq(after->expires_ms, SD_RET_END, "key_retention_s %u", kr);
  }
}

Test(decide_retention, before_result_retention_the_replay_carries_the_body) {
  step_key k = sd_key(PHASE_FORWARD);
  step_pair cur = {.now_ms = SD_NOW, .fwd = finished(SD_NOW + 1, SD_NOW + 500000)};
  decide_begin_out out;
  step_writes w;
  err_t err;
  cr_assert_eq(begin(&k, "fp-a", &cur, &out, &w, &err), ERR_OK, "%s", err.msg);
  cr_assert_eq(out.decision, DECISION_REPLAY);
  cr_assert_not(out.result_expired);
  cr_assert_eq(out.body_len, sizeof sd_stored_body - 1);
  cr_assert(memcmp(out.body, sd_stored_body, out.body_len) == 0);
  cr_assert_eq(out.result_expires_ms, SD_NOW + 1);
  cr_assert_eq(out.expires_ms, SD_NOW + 500000);
  cr_assert_eq(w.n, 0);
}

Test(decide_retention, past_result_retention_replay_without_body_and_refuse_another_fingerprint) {
  step_key k = sd_key(PHASE_FORWARD);
  step_pair cur = {.now_ms = SD_NOW, .fwd = finished(SD_NOW, SD_NOW + 500000)};
  decide_begin_out out;
  step_writes w;
  err_t err;
  cr_assert_eq(begin(&k, "fp-a", &cur, &out, &w, &err), ERR_OK, "%s", err.msg);
  cr_assert_eq(out.decision, DECISION_REPLAY, "a key past retention_s is not new");
  cr_assert(out.result_expired);
  cr_assert(out.has_result);
  cr_assert_eq(out.outcome, OUTCOME_SUCCEEDED);
  cr_assert_eq(out.code, 201);
  cr_assert_eq(out.attempt, 1);
  cr_assert_null(out.body);
  cr_assert_eq(out.body_len, 0);
  cr_assert_eq(out.result_expires_ms, SD_NOW);
  cr_assert_eq(out.expires_ms, SD_NOW + 500000);
  cr_assert_eq(w.n, 0, "a replay writes nothing");

  cr_assert_eq(begin(&k, "fp-b", &cur, &out, &w, &err), ERR_PRECONDITION,
               "a different fingerprint is still refused");
  cr_assert(strstr(err.msg, "fingerprint mismatch"), "%s", err.msg);
  cr_assert_eq(w.n, 0);
}

Test(decide_retention, the_store_flag_alone_hides_the_body) {
  /* the store read the row a moment after now_ms and found the result expired */
  step_key k = sd_key(PHASE_FORWARD);
  step_pair cur = {.now_ms = SD_NOW, .fwd = finished(SD_NOW + 5, SD_NOW + 500000)};
  cur.fwd.result_expired = true;
  cur.fwd.body = NULL;
  cur.fwd.body_len = 0;
  decide_begin_out out;
  step_writes w;
  err_t err;
  cr_assert_eq(begin(&k, "fp-a", &cur, &out, &w, &err), ERR_OK, "%s", err.msg);
  cr_assert_eq(out.decision, DECISION_REPLAY);
  cr_assert(out.result_expired);
}

Test(decide_retention, past_key_retention_the_key_is_new_again) {
  step_key k = sd_key(PHASE_FORWARD);
  step_pair cur = {.now_ms = SD_NOW, .fwd = finished(SD_NOW - 100000, SD_NOW)};
  decide_begin_out out;
  step_writes w;
  err_t err;
  cr_assert_eq(begin(&k, "fp-b", &cur, &out, &w, &err), ERR_OK, "%s", err.msg);
  cr_assert_eq(out.decision, DECISION_PROCEED);
  cr_assert_eq(out.attempt, 1);
  cr_assert_eq(w.n, 1);
  cr_assert_eq(w.recs[0].result_expires_ms, 0, "an unfinished record has no result expiry");
  cr_assert_eq(w.recs[0].expires_ms, 0);
}

Test(decide_retention, an_unknown_outcome_keeps_its_body_past_result_retention) {
  step_key k = sd_key(PHASE_FORWARD);
  step_pair cur = {.now_ms = SD_NOW, .fwd = finished(SD_NOW - 100000, SD_NOW - 50000)};
  cur.fwd.state = STATE_UNKNOWN;
  cur.fwd.outcome = OUTCOME_UNKNOWN;
  decide_begin_out out;
  step_writes w;
  err_t err;
  cr_assert_eq(begin(&k, "fp-a", &cur, &out, &w, &err), ERR_OK, "%s", err.msg);
  cr_assert_eq(out.decision, DECISION_REPLAY);
  cr_assert_not(out.result_expired, "UNKNOWN is kept, body and all, until resolved");
  cr_assert_eq(out.body_len, sizeof sd_stored_body - 1);
}

Test(decide_retention, a_retried_complete_past_result_retention_compares_outcome_and_code) {
  step_key k = sd_key(PHASE_FORWARD);
  step_pair cur = {.now_ms = SD_NOW, .fwd = finished(SD_NOW - 1, SD_NOW + 500000)};
  decide_complete_in in = complete_in(&k, "a body the store no longer has");
  step_writes w;
  const step_rec *after = NULL;
  err_t err;
  cr_assert_eq(decide_complete(&in, &cur, &w, &after, &err), ERR_OK, "%s", err.msg);
  cr_assert_eq(w.n, 0, "a harmless repeat writes nothing");
  cr_assert_eq(after, &cur.fwd);
  in.code = 500;
  cr_assert_eq(decide_complete(&in, &cur, &w, &after, &err), ERR_PRECONDITION);
  cr_assert(strstr(err.msg, "different result"), "%s", err.msg);
  /* before result retention the body still counts */
  cur.fwd.result_expires_ms = SD_NOW + 1;
  in.code = 201;
  cr_assert_eq(decide_complete(&in, &cur, &w, &after, &err), ERR_PRECONDITION);
}

Test(decide_retention, a_compensation_tombstone_and_a_null_compensation_last_as_long_as_keys) {
  /* a compensation with no forward: the forward is tombstoned and the compensation is null;
   * both keep the key for key_retention_s, so a forward that arrives late is skipped as long */
  step_key k = sd_key(PHASE_COMPENSATION);
  step_pair cur = {.now_ms = SD_NOW};
  decide_begin_out out;
  step_writes w;
  err_t err;
  cr_assert_eq(begin(&k, "fp-c", &cur, &out, &w, &err), ERR_OK, "%s", err.msg);
  cr_assert_eq(out.decision, DECISION_SKIP_NULL_COMPENSATION);
  cr_assert_eq(w.n, 2);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(w.recs[i].expires_ms, SD_NOW + (int64_t)KEY_RET_S * 1000, "write %d", i);
    cr_assert_eq(w.recs[i].result_expires_ms, SD_RET_END, "write %d", i);
  }
  cr_assert_eq(out.expires_ms, SD_NOW + (int64_t)KEY_RET_S * 1000);

  /* between the two: the late forward is still skipped */
  step_pair later = {.now_ms = SD_RET_END + 1, .fwd = w.recs[0], .comp = w.recs[1]};
  step_key kf = sd_key(PHASE_FORWARD);
  cr_assert_eq(begin(&kf, "fp-f", &later, &out, &w, &err), ERR_OK, "%s", err.msg);
  cr_assert_eq(out.decision, DECISION_SKIP_ALREADY_COMPENSATED);
}

Test(decide_retention, a_new_attempt_after_release_clears_the_result_expiry) {
  step_key k = sd_key(PHASE_FORWARD);
  step_pair cur = {.now_ms = SD_NOW, .fwd = finished(SD_NOW - 1, SD_NOW + 500000)};
  cur.fwd.state = STATE_RELEASED;
  cur.fwd.outcome = OUTCOME_RETRYABLE;
  decide_begin_out out;
  step_writes w;
  err_t err;
  cr_assert_eq(begin(&k, "fp-a", &cur, &out, &w, &err), ERR_OK, "%s", err.msg);
  cr_assert_eq(out.decision, DECISION_PROCEED);
  cr_assert_eq(out.attempt, 2);
  cr_assert_eq(w.n, 1);
  cr_assert_eq(w.recs[0].result_expires_ms, 0);
  cr_assert_eq(w.recs[0].expires_ms, 0);
  cr_assert_not(w.recs[0].result_expired);
  cr_assert_eq(w.recs[0].body_len, 0);
}
