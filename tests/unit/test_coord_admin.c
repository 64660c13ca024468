/* test_coord_admin.c — incident response rules without a network or a database: the
 * ResolveStep rule (coord_decide_resolve), page tokens, and the validation of ListSteps,
 * ResolveStep and ListAudit (which must refuse before touching the store: the store here is
 * NULL, so reaching it would crash). */
#include <criterion/criterion.h>
#include <string.h>

#include "coord/coord_admin.h"
#include "support_decide.h"

/* ResolveStep's keys are of service "payment". */
static step_key key_of(step_phase ph) {
  return sd_key_svc("payment", ph);
}

static step_pair pair_with(step_state st, int64_t lease_end, int64_t expires) {
  step_pair p;
  memset(&p, 0, sizeof p);
  p.now_ms = SD_NOW;
  p.fwd.present = st != STATE_NONE;
  p.fwd.key = key_of(PHASE_FORWARD);
  p.fwd.state = st;
  p.fwd.attempt = 3;
  p.fwd.created_ms = SD_NOW - 5000;
  p.fwd.updated_ms = SD_NOW - 4000;
  p.fwd.lease_expires_ms = lease_end;
  p.fwd.expires_ms = expires;
  p.comp.key = key_of(PHASE_COMPENSATION);
  return p;
}

Test(resolve, in_progress_to_succeeded_keeps_attempt_and_stores_result) {
  step_key k = key_of(PHASE_FORWARD);
  step_pair cur = pair_with(STATE_IN_PROGRESS, SD_NOW - 1, 0);
  step_writes w;
  const step_rec *after;
  step_state from;
  err_t e;
  cr_assert_eq(coord_decide_resolve(&k, OUTCOME_SUCCEEDED, 201, (const uint8_t *)"ok", 2, (step_retention){60, 60}, &cur,
                                    &w, &after, &from, &e),
               ERR_OK);
  cr_assert_eq(w.n, 1);
  cr_assert_eq(after, &w.recs[0]);
  cr_assert_eq(from, STATE_IN_PROGRESS);
  cr_assert_eq(after->state, STATE_SUCCEEDED);
  cr_assert_eq(after->attempt, 3);
  cr_assert_eq(after->outcome, OUTCOME_SUCCEEDED);
  cr_assert_eq(after->code, 201);
  cr_assert_eq(after->body_len, 2);
  cr_assert_eq(after->lease_expires_ms, 0);
  cr_assert_eq(after->completed_ms, SD_NOW);
  cr_assert_eq(after->expires_ms, SD_NOW + 60000);
}

Test(resolve, retryable_releases_the_key) {
  step_key k = key_of(PHASE_FORWARD);
  step_pair cur = pair_with(STATE_UNKNOWN, 0, SD_NOW - 1); /* unknown is never forgotten */
  step_writes w;
  const step_rec *after;
  step_state from;
  err_t e;
  cr_assert_eq(
      coord_decide_resolve(&k, OUTCOME_RETRYABLE, 0, NULL, 0, (step_retention){60, 60}, &cur, &w, &after, &from, &e),
      ERR_OK);
  cr_assert_eq(from, STATE_UNKNOWN);
  cr_assert_eq(after->state, STATE_RELEASED);
  cr_assert_eq(after->outcome, OUTCOME_RETRYABLE);
}

Test(resolve, finished_and_missing_steps_are_refused) {
  step_key k = key_of(PHASE_FORWARD);
  step_state refused[] = {STATE_SUCCEEDED, STATE_FAILED, STATE_ABANDONED, STATE_RELEASED};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    step_pair cur = pair_with(refused[i], 0, SD_NOW + 1000);
    step_writes w;
    const step_rec *after;
    step_state from;
    err_t e;
    cr_assert_eq(
        coord_decide_resolve(&k, OUTCOME_SUCCEEDED, 0, NULL, 0, (step_retention){60, 60}, &cur, &w, &after, &from, &e),
        ERR_PRECONDITION, "state %d", (int)refused[i]);
    cr_assert_eq(w.n, 0);
    cr_assert(strstr(e.msg, "only in_progress and unknown steps can be resolved"), "%s", e.msg);
  }
  step_pair none = pair_with(STATE_NONE, 0, 0);
  step_pair expired = pair_with(STATE_SUCCEEDED, 0, SD_NOW - 1); /* past retention: absent */
  step_writes w;
  const step_rec *after;
  step_state from;
  err_t e;
  cr_assert_eq(
      coord_decide_resolve(&k, OUTCOME_FAILED, 0, NULL, 0, (step_retention){60, 60}, &none, &w, &after, &from, &e),
      ERR_NOT_FOUND);
  cr_assert_eq(
      coord_decide_resolve(&k, OUTCOME_FAILED, 0, NULL, 0, (step_retention){60, 60}, &expired, &w, &after, &from, &e),
      ERR_NOT_FOUND);
  /* the compensation phase has its own record */
  step_key kc = key_of(PHASE_COMPENSATION);
  step_pair fwd_only = pair_with(STATE_IN_PROGRESS, SD_NOW + 1000, 0);
  cr_assert_eq(
      coord_decide_resolve(&kc, OUTCOME_FAILED, 0, NULL, 0, (step_retention){60, 60}, &fwd_only, &w, &after, &from, &e),
      ERR_NOT_FOUND);
}

static step_filter filter(void) {
  step_filter f;
  memset(&f, 0, sizeof f);
  f.tenant = "acme";
  f.state = STATE_IN_PROGRESS;
  f.service = "payment";
  f.operation = "";
  f.global_id = "";
  f.limit = 100;
  return f;
}

Test(tokens, steps_round_trip_and_tamper) {
  step_filter f = filter();
  step_key after = key_of(PHASE_COMPENSATION), back;
  char tok[COORD_TOKEN_MAX];
  err_t e;
  cr_assert(coord_steps_token_encode(&f, &after, tok));
  cr_assert(strspn(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") ==
            strlen(tok));
  cr_assert_eq(coord_steps_token_decode(&f, tok, &back, &e), ERR_OK, "%s", e.msg);
  cr_assert_str_eq(back.global_id, "g-1");
  cr_assert_str_eq(back.service, "payment");
  cr_assert_str_eq(back.operation, "charge");
  cr_assert_eq(back.phase, PHASE_COMPENSATION);

  step_filter other = f;
  other.service = "inventory";
  cr_assert_eq(coord_steps_token_decode(&other, tok, &back, &e), ERR_INVALID);
  cr_assert(strstr(e.msg, "page_token"), "%s", e.msg);
  other = f;
  other.tenant = "evil";
  cr_assert_eq(coord_steps_token_decode(&other, tok, &back, &e), ERR_INVALID);

  const char *bad[] = {"", "x", "!!!!", "czAwMDAwMDAwMDAwMDAwMDA", "YWJj"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_assert_eq(coord_steps_token_decode(&f, bad[i], &back, &e), ERR_INVALID, "%s", bad[i]);
  /* a flipped bit in the filter hash (a flipped bit in the key part is just another cursor,
   * still confined to the tenant and filters) */
  tok[4] = tok[4] == 'A' ? 'B' : 'A';
  cr_assert_eq(coord_steps_token_decode(&f, tok, &back, &e), ERR_INVALID);
}

Test(tokens, audit_round_trip_and_scope) {
  char tok[COORD_TOKEN_MAX];
  int64_t id = 0;
  err_t e;
  cr_assert(coord_audit_token_encode("acme", "g-1", 12345, tok));
  cr_assert_eq(coord_audit_token_decode("acme", "g-1", tok, &id, &e), ERR_OK);
  cr_assert_eq(id, 12345);
  cr_assert_eq(coord_audit_token_decode("acme", "", tok, &id, &e), ERR_INVALID);
  cr_assert_eq(coord_audit_token_decode("other", "g-1", tok, &id, &e), ERR_INVALID);
}

Test(validation, refused_before_the_store) {
  coord_ctx ctx;
  coord_ctx_init(&ctx);
  step_list l;
  char next[COORD_TOKEN_MAX];
  err_t e;
  coord_list_in li = {.state = 9};
  cr_assert_eq(coord_list_steps(&ctx, NULL, "acme", &li, 0, &l, next, &e), ERR_INVALID);
  li = (coord_list_in){.state = STATE_UNKNOWN, .lease_expired_only = true};
  cr_assert_eq(coord_list_steps(&ctx, NULL, "acme", &li, 0, &l, next, &e), ERR_INVALID);
  li = (coord_list_in){.service = "Bad Name"};
  cr_assert_eq(coord_list_steps(&ctx, NULL, "acme", &li, 0, &l, next, &e), ERR_INVALID);
  li = (coord_list_in){.page_token = "garbage"};
  cr_assert_eq(coord_list_steps(&ctx, NULL, "acme", &li, 0, &l, next, &e), ERR_INVALID);

  step_rec out;
  coord_resolve_in ri = {.key = {"g-1", "payment", "charge", PHASE_FORWARD, NULL},
                         .outcome = OUTCOME_SUCCEEDED,
                         .reason = ""};
  cr_assert_eq(coord_resolve_step(&ctx, NULL, "acme", &ri, 0, &out, &e), ERR_INVALID);
  cr_assert(strstr(e.msg, "reason"), "%s", e.msg);
  ri.reason = "line\r\nbreak"; /* LF alone may break lines; a CR is refused */
  cr_assert_eq(coord_resolve_step(&ctx, NULL, "acme", &ri, 0, &out, &e), ERR_INVALID);
  ri.reason = "tab\there";
  cr_assert_eq(coord_resolve_step(&ctx, NULL, "acme", &ri, 0, &out, &e), ERR_INVALID);
  ri.reason = "ok";
  ri.outcome = OUTCOME_UNKNOWN;
  cr_assert_eq(coord_resolve_step(&ctx, NULL, "acme", &ri, 0, &out, &e), ERR_INVALID);
  ri.outcome = OUTCOME_FAILED;
  ri.key.phase = 0;
  cr_assert_eq(coord_resolve_step(&ctx, NULL, "acme", &ri, 0, &out, &e), ERR_INVALID);
  ri.key.phase = PHASE_FORWARD;
  char long_actor[AUDIT_ACTOR_MAX + 2];
  memset(long_actor, 'a', sizeof long_actor - 1);
  long_actor[sizeof long_actor - 1] = '\0';
  ri.actor = long_actor;
  cr_assert_eq(coord_resolve_step(&ctx, NULL, "acme", &ri, 0, &out, &e), ERR_INVALID);

  audit_list al;
  cr_assert_eq(coord_list_audit(&ctx, NULL, "acme", "bad id!", 0, "", 0, &al, next, &e),
               ERR_INVALID);
  cr_assert_eq(coord_list_audit(&ctx, NULL, "acme", "", 0, "nope", 0, &al, next, &e), ERR_INVALID);
}
