/* test_decide_resolve.c — coord_decide_resolve_repeat (docs/api.md §12): which ResolveStep on a
 * settled step repeats the resolution that settled it, on the pure function of decide.h. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "coord/decide.h"
#include "support_decide.h"

static uint8_t body[] = "declined";

/* A step FAILED (409, "declined") by a single ResolveStep of alice's, and that audit row. */
static void settled(step_rec *r, audit_rec *a) {
  *r = sd_rec(PHASE_FORWARD, STATE_FAILED, 1, NULL);
  r->outcome = OUTCOME_FAILED;
  r->code = 409;
  r->body = body;
  r->body_len = sizeof body - 1;
  r->completed_ms = SD_NOW - 7000;
  memset(a, 0, sizeof *a);
  a->at_ms = SD_NOW - 6999; /* written after the record, in the same transaction */
  snprintf(a->action, sizeof a->action, "resolve");
  snprintf(a->actor, sizeof a->actor, "alice");
  snprintf(a->reason, sizeof a->reason, "bank said no");
  a->from_state = STATE_UNKNOWN;
  a->to_state = STATE_FAILED;
}

static bool repeat(const step_rec *r, const audit_rec *a) {
  return coord_decide_resolve_repeat(r, a, OUTCOME_FAILED, 409, body, sizeof body - 1, "alice",
                                     "bank said no");
}

Test(decide_resolve, the_same_resolution_is_a_repeat) {
  step_rec r;
  audit_rec a;
  settled(&r, &a);
  cr_assert(repeat(&r, &a));
  r.body = NULL, r.body_len = 0, r.result_expired = true; /* past retention_s: outcome and code */
  cr_assert(repeat(&r, &a));
}

Test(decide_resolve, anything_else_is_not) {
  step_rec r;
  audit_rec a;
  settled(&r, &a);
  cr_assert(!coord_decide_resolve_repeat(&r, &a, OUTCOME_SUCCEEDED, 409, body, sizeof body - 1,
                                         "alice", "bank said no"), "another outcome");
  cr_assert(!coord_decide_resolve_repeat(&r, &a, OUTCOME_FAILED, 410, body, sizeof body - 1,
                                         "alice", "bank said no"), "another code");
  cr_assert(!coord_decide_resolve_repeat(&r, &a, OUTCOME_FAILED, 409, body, 3, "alice",
                                         "bank said no"), "another body");
  cr_assert(!coord_decide_resolve_repeat(&r, &a, OUTCOME_FAILED, 409, body, sizeof body - 1, "bob",
                                         "bank said no"), "another actor");
  cr_assert(!coord_decide_resolve_repeat(&r, &a, OUTCOME_FAILED, 409, body, sizeof body - 1,
                                         "alice", "bank said so"), "another reason");
  cr_assert(!repeat(&r, NULL), "no resolve audit row: its own attempt finished it");
  static const char *const cases[] = {"part of a ResolveSteps",
                                      "finished after the row: a new attempt's",
                                      "the row released it", "the row came from a settled state",
                                      "no record"};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    settled(&r, &a);
    if (i == 0) snprintf(a.batch_id, sizeof a.batch_id, "b-1");
    if (i == 1) r.completed_ms = a.at_ms + 1;
    if (i == 2) a.to_state = STATE_RELEASED;
    if (i == 3) a.from_state = STATE_SUCCEEDED;
    if (i == 4) r.present = false;
    cr_assert(!repeat(&r, &a), "%s", cases[i]);
  }
}
