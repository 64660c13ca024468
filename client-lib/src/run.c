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

#define WAIT_MS_MAX 60000

static int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/* A try gRPC ended without saying whether the coordinator had it (client.c's lost_try). */
static bool lost(int rc, const idem_error *err) {
  return rc == IDEM_CANCELLED && !err->reason[0] && err->outcome_unknown;
}

/* The deadline ended the retries of `call` with rc: IDEM_STEP_UNKNOWN when a try of the client
 * was lost since the run began (the step may have begun, or been stored, on it), else rc. */
static int given_up(idem_client *c, const run_conf *conf, const char *call, int rc,
                    idem_error *err) {
  bool retried = rc == IDEM_UNAVAILABLE || rc == IDEM_DEADLINE_EXCEEDED || rc == IDEM_ABORTED;
  if (!(retried || lost(rc, err)) || !idem__lost_since(c, conf->began_ms)) return rc;
  int last = err->code;
  char reason[sizeof err->reason];
  snprintf(reason, sizeof reason, "%s", err->reason);
  idem__err_reset(err);
  err->outcome_unknown = true;
  return idem__fail(err, IDEM_STEP_UNKNOWN,
                    "%s: a try was lost and the run's deadline passed before an answer said what "
                    "it did (last: %s%s%s)",
                    call, idem_strerror(last), reason[0] ? " " : "", reason);
}

/* Waits before retry n; false when the wait would cross the deadline (give up). */
static bool wait_before_retry(const run_conf *rc, int n, int64_t hint_ms) {
  int64_t wait = idem__backoff_ms(rc->base_ms, rc->max_ms, n);
  if (hint_ms > 0) {
    int64_t floor = min64(hint_ms, rc->max_ms);
    if (wait < floor) wait = floor;
  }
  if (idem__now_ms() + wait >= rc->end_ms) return false;
  idem__sleep_ms(wait);
  return true;
}

static int begin_with_retries(idem_client *c, const idem_step_key *key, const uint8_t *fp,
                              size_t fp_len, const run_conf *conf, idem_begin *b, int *retries,
                              idem_error *err) {
  for (int n = 0;; n++) {
    int64_t left = conf->end_ms - idem__now_ms();
    if (left <= 0) break; /* err holds the last error (n > 0 here) */
    /* waiting: the coordinator answers when the step changes, within what is left */
    uint32_t wait_ms = conf->wait ? (uint32_t)min64(left, WAIT_MS_MAX) : 0;
    int64_t timeout = min64(conf->call_ms + wait_ms, left);
    int rc = idem__step_begin(c, key, fp, fp_len, conf->lease_ms, wait_ms, timeout, b, err);
    /* no answer in time from one of several coordinators: another may decide (docs/api.md §20) */
    bool elsewhere = rc == IDEM_DEADLINE_EXCEEDED && idem__client_endpoints(c) > 1;
    /* a call deadline that ran into the run's, after a lost try: STEP_UNKNOWN (given_up) */
    if (rc == IDEM_DEADLINE_EXCEEDED && !elsewhere) return given_up(c, conf, "BeginStep", rc, err);
    if (rc != IDEM_ABORTED && rc != IDEM_UNAVAILABLE && !elsewhere && !lost(rc, err)) return rc;
    if (!wait_before_retry(conf, n, rc == IDEM_ABORTED ? err->retry_after_ms : 0))
      return given_up(c, conf, "BeginStep", rc, err);
    (*retries)++;
  }
  if (err->code == IDEM_OK) return idem__fail(err, IDEM_DEADLINE_EXCEEDED, "run deadline exceeded");
  return given_up(c, conf, "BeginStep", err->code, err);
}

/* The first Complete always gets a full per-call deadline, even when the run's deadline has
 * passed while the action ran: leaving the step IN_PROGRESS would make it run again after its
 * lease expires. Retries stay inside the run's deadline. */
static int complete_with_retries(idem_client *c, const idem_step_key *key, uint64_t attempt,
                                 const idem_result *res, const run_conf *conf,
                                 int64_t *completed_unix_ms, idem_error *err) {
  for (int n = 0;; n++) {
    int64_t timeout = conf->call_ms;
    if (n > 0) {
      int64_t left = conf->end_ms - idem__now_ms();
      if (left <= 0) return given_up(c, conf, "CompleteStep", err->code, err);
      timeout = min64(timeout, left);
    }
    idem_record rec;
    int rc = idem__step_complete(c, key, attempt, res->outcome, res->code, res->body, res->body_len,
                                 timeout, &rec, err);
    if (rc == IDEM_OK) {
      *completed_unix_ms = rec.has_result ? rec.result.completed_unix_ms : 0;
      idem_record_clear(&rec);
      return IDEM_OK;
    }
    if (rc != IDEM_UNAVAILABLE && rc != IDEM_DEADLINE_EXCEEDED && !lost(rc, err)) return rc;
    if (!wait_before_retry(conf, n, 0)) return given_up(c, conf, "CompleteStep", rc, err);
  }
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
      .call_ms = idem__client_deadline_ms(c),
      .wait = !o.no_wait,
      .began_ms = idem__now_ms(),
  };
  if (conf.max_ms < conf.base_ms) conf.max_ms = conf.base_ms;

  /* fail-open: the operation's failure mode is learnt from every BeginStep answer (calls.c),
   * so the first try is never held up by a GetPolicy; only an older coordinator, whose answer
   * does not name it, leaves the mode unknown and is asked after its answer */
  const char *svc = key ? key->service : NULL, *op = key ? key->operation : NULL;

  idem_begin b;
  int retries = 0;
  const char *unguarded_source = "server";
  int64_t began_ms = idem__now_ms();
  int rc = begin_with_retries(c, key, fp, fp_len, &conf, &b, &retries, err);
  if (rc == IDEM_OK && svc && op && idem__policy_cached_mode(c, svc, op) == 0)
    idem__policy_refresh(c, svc, op, conf.call_ms);
  if (rc != IDEM_OK) {
    /* no coordinator can decide (every known address called during this run: none answered,
     * or each said its store or its election is down): a fail-open operation with a journal
     * runs anyway (docs/api.md §20) */
    if (!idem__unreachable(c, err, began_ms) || !idem__client_journal(c) ||
        idem__policy_cached_mode(c, svc, op) != IDEM_FAIL_OPEN)
      return rc;
    memset(&b, 0, sizeof b);
    b.decision = IDEM_DECISION_PROCEED_UNGUARDED;
    unguarded_source = "client";
  }

  rep->decision = b.decision;
  rep->attempt = b.attempt;
  rep->begin_retries = retries;
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
  if (unguarded && idem__client_journal(c)) {
    rc = idem__journal_append(idem__client_journal(c), unguarded_source, idem__client_tenant(c),
                              key, fp, fp_len, &rep->result, err);
    if (rc != IDEM_OK) return rc; /* *rep stays filled: the action did run */
    rep->journaled = true;
  }

  /* Unguarded: nothing was recorded, so there is nothing to complete. */
  if (!unguarded) {
    rc = complete_with_retries(c, key, ctx.attempt, &rep->result, &conf,
                               &rep->result.completed_unix_ms, err);
    if (rc == IDEM_STEP_UNKNOWN) return rc; /* *rep stays filled: the action did run */
    if (rc != IDEM_OK) goto fail;
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
