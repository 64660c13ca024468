/* run.c — idem_step_run: BeginStep (with retries) → the caller's action → CompleteStep.
 *
 * BeginStep waits on the coordinator (wait_ms: what is left of the run, at most 60 s) while the
 * step is in progress elsewhere, unless no_wait; an ABORTED that still comes back (the wait ran
 * out, or the coordinator holds too many waiting calls) is retried like any other.
 * Waits use exponential backoff with full jitter: sleep = random(0, min(max, base * 2^n)),
 * raised to the server's idem-retry-after-ms hint (capped at max) after an ABORTED. Nothing
 * sleeps past the run's deadline: when the next wait would cross it, the last error is returned.
 * A lost try (CANCELLED with no idem-reason, outcome unknown) is retried like UNAVAILABLE, at
 * BeginStep and at CompleteStep; when the deadline ends a run that lost a try, the error is
 * IDEM_STEP_UNKNOWN (idem.h, docs/api.md §20).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem_internal.h"

#define DEFAULT_RUN_DEADLINE_MS 10000
#define DEFAULT_BACKOFF_BASE_MS 50
#define DEFAULT_BACKOFF_MAX_MS 1000

typedef struct run_conf {
  int64_t end_ms; /* monotonic */
  uint32_t lease_ms;
  int64_t base_ms;
  int64_t max_ms;
  int64_t call_ms;  /* the client's per-call deadline */
  bool wait;        /* BeginStep waits on a step in progress (wait_ms) */
  int64_t began_ms; /* monotonic: when the run began (lost tries since then count) */
} run_conf;

/* How the run's calls retry (the one retry loop, route.c): inside the run's deadline, with the
 * run's backoff; a lost try since the run began turns the deadline's error into
 * IDEM_STEP_UNKNOWN. */
static idem__retry run_retry(const run_conf *conf, unsigned also) {
  return (idem__retry){.end_ms = conf->end_ms,
                       .try_ms = conf->call_ms,
                       .base_ms = conf->base_ms,
                       .max_ms = conf->max_ms,
                       .also = also,
                       .lost_since_ms = conf->began_ms};
}

/* Calls the action and copies what it reports into *res. */
static int run_action(idem_step_fn fn, void *arg, const idem_step_ctx *ctx, idem_result *res,
                      idem_error *err) {
  idem_step_output out = {.outcome = IDEM_OUTCOME_UNKNOWN};
  fn(arg, ctx, &out);
  memset(res, 0, sizeof *res);
  /* An action that reports no valid outcome may or may not have acted: UNKNOWN. */
  if (out.outcome < IDEM_OUTCOME_SUCCEEDED || out.outcome > IDEM_OUTCOME_UNKNOWN)
    out.outcome = IDEM_OUTCOME_UNKNOWN;
  res->outcome = out.outcome;
  res->code = out.code;
  if (out.body && out.body_len > 0) {
    if (!(res->body = malloc(out.body_len))) return idem__fail(err, IDEM_NOMEM, "out of memory");
    memcpy(res->body, out.body, out.body_len);
    res->body_len = out.body_len;
  }
  return IDEM_OK;
}

static int step_run(idem_client *c, const idem_step_key *key, const uint8_t *fp, size_t fp_len,
                    idem_step_fn fn, void *arg, const idem_run_options *ro, idem_run_report *rep,
                    idem_error *err) {
  memset(rep, 0, sizeof *rep);
  idem__err_reset(err);
  if (!c) return idem__fail(err, IDEM_INVALID_ARGUMENT, "client is null");
  if (!fn) return idem__fail(err, IDEM_INVALID_ARGUMENT, "fn is null");

  idem_run_options o = {0};
  if (ro) o = *ro;
  run_conf conf = {
      .end_ms = idem__now_ms() + (o.deadline_ms > 0 ? o.deadline_ms : DEFAULT_RUN_DEADLINE_MS),
      .lease_ms = o.lease_ms,
      .base_ms = o.backoff_base_ms > 0 ? o.backoff_base_ms : DEFAULT_BACKOFF_BASE_MS,
      .max_ms = o.backoff_max_ms > 0 ? o.backoff_max_ms : DEFAULT_BACKOFF_MAX_MS,
      .call_ms = c->deadline_ms,
      .wait = !o.no_wait,
      .began_ms = idem__now_ms(),
  };
  if (conf.max_ms < conf.base_ms) conf.max_ms = conf.base_ms;

  /* fail-open: the operation's failure mode is learnt from every BeginStep answer (calls.c),
   * so the first try is never held up by a GetPolicy; only an older coordinator, whose answer
   * does not name it, leaves the mode unknown and is asked after its answer */
  const char *svc = key ? key->service : NULL, *op = key ? key->operation : NULL;

  idem_begin b;
  const char *unguarded_source = "server";
  int64_t began_ms = conf.began_ms;
  /* BeginStep retries ABORTED (after at least idem-retry-after-ms), UNAVAILABLE, lost tries, and
   * DEADLINE_EXCEEDED from one of several addresses (another may decide, docs/api.md §20) */
  idem__retry begin = run_retry(&conf, IDEM__RETRY_ABORTED | IDEM__RETRY_ELSEWHERE);
  begin.poll = conf.wait;
  int rc = idem__step_begin(c, key, fp, fp_len, conf.lease_ms, 0, &begin, &b, err);
  if (rc == IDEM_OK) idem__policy_learn(c, svc, op, conf.call_ms);
  if (rc != IDEM_OK) {
    /* no coordinator can decide (every known address called during this run: none answered,
     * or each said its store or its election is down): a fail-open operation with a journal
     * runs anyway (docs/api.md §20) */
    if (!idem__fail_open(c, svc, op, err, began_ms)) return rc;
    memset(&b, 0, sizeof b);
    b.decision = IDEM_DECISION_PROCEED_UNGUARDED;
    unguarded_source = "client";
  }

  rep->decision = b.decision;
  rep->attempt = b.attempt;
  rep->begin_retries = begin.retries;
  switch (b.decision) {
    case IDEM_DECISION_REPLAY:
      rep->replayed = true;
      rep->result = b.result; /* moves the body */
      memset(&b.result, 0, sizeof b.result);
      idem_begin_clear(&b);
      return IDEM_OK;
    case IDEM_DECISION_SKIP_NULL_COMPENSATION:
    case IDEM_DECISION_SKIP_ALREADY_COMPENSATED:
      idem_begin_clear(&b);
      return IDEM_OK;
    case IDEM_DECISION_PROCEED:
    case IDEM_DECISION_PROCEED_UNGUARDED:
      break;
    default:
      idem_begin_clear(&b);
      memset(rep, 0, sizeof *rep);
      return idem__fail(err, IDEM_BAD_RESPONSE, "unknown decision %d", (int)b.decision);
  }

  bool unguarded = b.decision == IDEM_DECISION_PROCEED_UNGUARDED;
  idem_step_ctx ctx = {
      .key = key, .attempt = b.attempt, .takeover = b.takeover, .unguarded = unguarded};
  int64_t lease_expires = b.lease_expires_unix_ms;
  idem_begin_clear(&b);
  rep->ran = true;
  rep->takeover = ctx.takeover;
  rep->unguarded = unguarded;
  /* a guarded action keeps its lease while it runs (keeper.c) */
  idem__keeper *keeper =
      unguarded ? NULL : idem__keeper_start(c, key, ctx.attempt, conf.lease_ms, lease_expires);
  rc = run_action(fn, arg, &ctx, &rep->result, err);
  (void)idem__keeper_stop(keeper); /* a lost lease: the CompleteStep below is refused */
  if (rc != IDEM_OK) goto fail;

  /* Unguarded: one journal line for idem_journal_reconcile (format in idem.h). */
  if (unguarded && c->journal_path) {
    rc = idem__journal_append(c->journal_path, unguarded_source, idem__client_tenant(c), key, fp,
                              fp_len, &rep->result, err);
    if (rc != IDEM_OK) return rc; /* *rep stays filled: the action did run */
    rep->journaled = true;
  }

  /* Unguarded: nothing was recorded, so there is nothing to complete. */
  /* CompleteStep retries UNAVAILABLE, DEADLINE_EXCEEDED and lost tries; its first try (and its
   * failover) always gets a full per-call deadline, even when the run's deadline passed while
   * the action ran: leaving the step IN_PROGRESS would make it run again after its lease
   * expires. */
  if (!unguarded) {
    idem__retry complete = run_retry(&conf, IDEM__RETRY_DEADLINE);
    complete.first_full = true;
    idem_record rec;
    idem_result *res = &rep->result;
    rc = idem__step_complete(c, key, ctx.attempt, res->outcome, res->code, res->body, res->body_len,
                             &complete, &rec, err);
    if (rc == IDEM_STEP_UNKNOWN) return rc; /* *rep stays filled: the action did run */
    if (rc != IDEM_OK) goto fail;
    res->completed_unix_ms = rec.has_result ? rec.result.completed_unix_ms : 0;
    idem_record_clear(&rec);
  }
  if (rep->result.outcome == IDEM_OUTCOME_RETRYABLE)
    return idem__fail(err, IDEM_STEP_FAILED,
                      "the action reported a retryable failure; the key was released");
  idem__err_reset(err);
  return IDEM_OK;

fail:
  idem_run_report_clear(rep);
  return rc;
}

int idem_step_run(idem_client *c, const idem_step_key *key, const uint8_t *fp, size_t fp_len,
                  idem_step_fn fn, void *arg, const idem_run_options *ro, idem_run_report *rep,
                  idem_error *err) {
  idem_error scratch_err;
  if (rep) return step_run(c, key, fp, fp_len, fn, arg, ro, rep, err ? err : &scratch_err);
  /* the caller wants no report: what the report owns is freed here */
  idem_run_report scratch_rep;
  int rc = step_run(c, key, fp, fp_len, fn, arg, ro, &scratch_rep, err ? err : &scratch_err);
  idem_run_report_clear(&scratch_rep);
  return rc;
}
