/* decide.c — the decision table of docs/api.md §3 and the rules of §4 (see decide.h).
 *
 * Pure functions: no I/O, no clock, no allocation. "now" is always cur->now_ms (the database
 * clock). A record whose retention has passed (expires_ms != 0 && expires_ms <= now) counts as
 * absent; one whose result retention has passed (step_rec_result_expired) is replayed without
 * its body (docs/api.md §12). Bodies of written records borrow from the inputs (*cur or the request).
 *
 * Choices where docs/api.md is silent (documented in the README):
 *  - A RELEASED forward record is treated like no forward record by a compensation: nothing
 *    ran to undo, so the forward is tombstoned and the compensation is null.
 *  - A takeover or a fresh attempt after RELEASED adopts the caller's fingerprint when the
 *    record had none.
 *  - A null compensation stores the caller's fingerprint, so a later compensation with a
 *    different fingerprint is refused like any other mismatch.
 */
#include "decide.h"

#include <stdio.h>
#include <string.h>

#include "idem/v1/names.h"

/* --- helpers --- */

/* The record exists and counts (domain/record.h: step_rec_live). */
static bool live(const step_rec *r, int64_t now) {
  return step_rec_live(r, now);
}

/* A record finished (or tombstoned) at now is kept: its body for ret.result_s, the rest of it
 * for ret.key_s (docs/api.md §12; never less than result_s). */
static void retain(step_rec *r, int64_t now, step_retention ret) {
  uint32_t key_s = ret.key_s > ret.result_s ? ret.key_s : ret.result_s;
  r->result_expires_ms = now + (int64_t)ret.result_s * 1000;
  r->expires_ms = now + (int64_t)key_s * 1000;
  r->result_expired = false;
}


/* Both fingerprints are set and differ. */
static bool fp_mismatch(const step_rec *r, const uint8_t *fp, size_t fp_len) {
  if (r->fp_len == 0 || fp_len == 0) return false;
  return r->fp_len != fp_len || memcmp(r->fp, fp, fp_len) != 0;
}

static bool is_finished(step_state s) {
  return s == STATE_SUCCEEDED || s == STATE_FAILED || s == STATE_UNKNOWN;
}

/* A compensation record that no caller executed (docs/api.md §3: attempt 0). */
static bool is_null_compensation(const step_rec *r) {
  return r->attempt == 0 && r->state == STATE_SUCCEEDED;
}

static void set_fp(step_rec *r, const uint8_t *fp, size_t fp_len) {
  memset(r->fp, 0, sizeof r->fp);
  if (fp_len > 0) memcpy(r->fp, fp, fp_len);
  r->fp_len = fp_len;
}

static void clear_result(step_rec *r) {
  r->outcome = OUTCOME_UNSPECIFIED;
  r->code = 0;
  r->body = NULL;
  r->body_len = 0;
  r->completed_ms = 0;
  r->result_expired = false;
}

/* Copies the call's trace id (NULL = none) into a record's trace id field. */
static void set_trace(char dst[REC_TRACE_ID_MAX + 1], const char *trace_id) {
  snprintf(dst, REC_TRACE_ID_MAX + 1, "%s", trace_id ? trace_id : "");
}

/* r starts an attempt under the call's trace: begun by it, finished by nobody yet. */
static void trace_begun(step_rec *r, const char *trace_id) {
  set_trace(r->begin_trace_id, trace_id);
  r->complete_trace_id[0] = '\0';
}

/* Appends a write slot; the caller fills it. */
static step_rec *push(step_writes *w) {
  return &w->recs[w->n++];
}

/* A brand-new record of key (with phase) created at now: no result, no lease, no expiry. */
static void fresh(step_rec *r, const step_key *key, step_phase phase, int64_t now) {
  memset(r, 0, sizeof *r);
  r->present = true;
  r->key = *key;
  r->key.phase = phase;
  r->created_ms = now;
  r->updated_ms = now;
}

static err_code mismatch(err_t *err) {
  err_fail(err, ERR_PRECONDITION, ERR_R_FINGERPRINT_MISMATCH,
           "fingerprint mismatch: the key was begun with a different request");
  err_detail(err, "the step keeps the fingerprint of the request that began it");
  err_hint(err, "send the same request again, or use a new key for a different one");
  return ERR_PRECONDITION;
}

static err_code in_progress(const step_rec *r, int64_t now, err_t *err) {
  err_fail(err, ERR_ABORTED, ERR_R_IN_PROGRESS, "step in progress");
  int64_t left = r->lease_expires_ms - now;
  if (err) err->retry_after_ms = left > 0 ? left : 1;
  return ERR_ABORTED;
}

/* Fills out for a PROCEED on the written record r. */
static void proceed(const step_rec *r, bool takeover, decide_begin_out *out) {
  out->decision = DECISION_PROCEED;
  out->attempt = r->attempt;
  out->lease_expires_ms = r->lease_expires_ms;
  out->takeover = takeover;
  out->expires_ms = 0;
}

/* Writes a new IN_PROGRESS record, attempt 1, for the key's own phase. */
static err_code create_in_progress(const decide_begin_in *in, int64_t now, decide_begin_out *out,
                                   step_writes *w) {
  step_rec *r = push(w);
  fresh(r, in->key, in->key->phase, now);
  r->state = STATE_IN_PROGRESS;
  r->attempt = 1;
  set_fp(r, in->fp, in->fp_len);
  r->lease_expires_ms = now + in->lease_ms;
  trace_begun(r, in->trace_id);
  proceed(r, false, out);
  return ERR_OK;
}

/* The next attempt on an existing record (takeover of an expired lease, or after RELEASED):
 * IN_PROGRESS, attempt+1, new lease, no result; the caller's fingerprint when it had none. */
static err_code next_attempt(const decide_begin_in *in, const step_rec *cur_rec, int64_t now,
                             bool takeover, decide_begin_out *out, step_writes *w) {
  step_rec *r = push(w);
  *r = *cur_rec;
  r->state = STATE_IN_PROGRESS;
  r->attempt = cur_rec->attempt + 1;
  if (r->fp_len == 0) set_fp(r, in->fp, in->fp_len);
  clear_result(r);
  r->updated_ms = now;
  r->lease_expires_ms = now + in->lease_ms;
  r->expires_ms = 0;
  r->result_expires_ms = 0;
  trace_begun(r, in->trace_id);
  proceed(r, takeover, out);
  return ERR_OK;
}

/* FORWARD rows 3–8 applied to a live record r (the forward record for a FORWARD begin, the
 * compensation record itself for a COMPENSATION begin). */
static err_code existing_row(const decide_begin_in *in, const step_rec *r, int64_t now,
                             decide_begin_out *out, step_writes *w, err_t *err) {
  if (fp_mismatch(r, in->fp, in->fp_len)) return mismatch(err);
  switch (r->state) {
    case STATE_IN_PROGRESS:
      if (r->lease_expires_ms > now) return in_progress(r, now, err);
      return next_attempt(in, r, now, true, out, w);
    case STATE_RELEASED:
      return next_attempt(in, r, now, false, out, w);
    case STATE_SUCCEEDED:
    case STATE_FAILED:
    case STATE_UNKNOWN:
      out->decision = DECISION_REPLAY;
      out->attempt = r->attempt;
      out->expires_ms = r->expires_ms;
      out->result_expires_ms = r->result_expires_ms ? r->result_expires_ms : r->expires_ms;
      out->has_result = true;
      out->outcome = r->outcome;
      out->code = r->code;
      out->result_expired = step_rec_result_expired(r, now);
      if (!out->result_expired && r->body_len > 0) { /* past retention_s: outcome and code only */
        out->body = r->body;
        out->body_len = r->body_len;
      }
      out->completed_ms = r->completed_ms;
      return ERR_OK;
    case STATE_ABANDONED:
      out->decision = DECISION_SKIP_ALREADY_COMPENSATED;
      out->attempt = r->attempt;
      out->expires_ms = r->expires_ms;
      return ERR_OK;
    default:
      return err_set(err, ERR_INTERNAL, "stored step has an invalid state %d", (int)r->state);
  }
}

/* The FORWARD table of docs/api.md §3. */
static err_code begin_forward(const decide_begin_in *in, const step_pair *cur,
                              decide_begin_out *out, step_writes *w, err_t *err) {
  int64_t now = cur->now_ms;
  bool fwd_live = live(&cur->fwd, now);
  if (live(&cur->comp, now)) { /* hanging protection */
    out->decision = DECISION_SKIP_ALREADY_COMPENSATED;
    out->attempt = fwd_live ? cur->fwd.attempt : 0;
    out->expires_ms = cur->comp.expires_ms;
    return ERR_OK;
  }
  if (!fwd_live) return create_in_progress(in, now, out, w);
  return existing_row(in, &cur->fwd, now, out, w, err);
}

/* The compensation record decides (docs/api.md §3, last two rows of the COMPENSATION table). */
static err_code comp_decides(const decide_begin_in *in, const step_pair *cur, decide_begin_out *out,
                             step_writes *w, err_t *err) {
  int64_t now = cur->now_ms;
  const step_rec *c = &cur->comp;
  if (!live(c, now)) return create_in_progress(in, now, out, w);
  if (is_null_compensation(c)) {
    out->decision = DECISION_SKIP_NULL_COMPENSATION;
    out->attempt = 0;
    out->expires_ms = c->expires_ms;
    return ERR_OK;
  }
  return existing_row(in, c, now, out, w, err);
}

/* Writes a null compensation: SUCCEEDED, attempt 0, empty result, retained like a result. */
static err_code null_compensation(const decide_begin_in *in, int64_t now, decide_begin_out *out,
                                  step_writes *w) {
  step_rec *c = push(w);
  fresh(c, in->key, PHASE_COMPENSATION, now);
  c->state = STATE_SUCCEEDED;
  c->attempt = 0;
  set_fp(c, in->fp, in->fp_len);
  c->outcome = OUTCOME_SUCCEEDED;
  c->code = 0;
  c->completed_ms = now;
  retain(c, now, in->retention);
  set_trace(c->complete_trace_id, in->trace_id);
  out->decision = DECISION_SKIP_NULL_COMPENSATION;
  out->attempt = 0;
  out->expires_ms = c->expires_ms;
  return ERR_OK;
}

/* Writes the forward record as ABANDONED: from f when live (keeps attempt and fingerprint),
 * else a tombstone with attempt 0. No result, no lease, retained. */
static void abandon_forward(const decide_begin_in *in, const step_rec *f, int64_t now,
                            step_writes *w) {
  step_rec *r = push(w);
  if (f) {
    *r = *f;
    clear_result(r);
    r->updated_ms = now;
  } else {
    fresh(r, in->key, PHASE_FORWARD, now);
    r->attempt = 0;
  }
  r->state = STATE_ABANDONED;
  r->lease_expires_ms = 0;
  retain(r, now, in->retention);
  set_trace(r->complete_trace_id, in->trace_id);
}

/* The COMPENSATION table of docs/api.md §3. */
static err_code begin_compensation(const decide_begin_in *in, const step_pair *cur,
                                   decide_begin_out *out, step_writes *w, err_t *err) {
  int64_t now = cur->now_ms;
  bool comp_live = live(&cur->comp, now);
  if (comp_live && fp_mismatch(&cur->comp, in->fp, in->fp_len)) return mismatch(err);

  const step_rec *f = live(&cur->fwd, now) ? &cur->fwd : NULL;
  step_state fs = f ? f->state : STATE_NONE;
  switch (fs) {
    case STATE_NONE:
    case STATE_RELEASED: /* nothing ran to undo */
      if (comp_live) return comp_decides(in, cur, out, w, err);
      abandon_forward(in, f, now, w);
      return null_compensation(in, now, out, w);
    case STATE_FAILED:
      if (comp_live) return comp_decides(in, cur, out, w, err);
      return null_compensation(in, now, out, w);
    case STATE_IN_PROGRESS:
      if (f->lease_expires_ms > now) return in_progress(f, now, err);
      abandon_forward(in, f, now, w); /* its late Complete is refused */
      return comp_decides(in, cur, out, w, err);
    case STATE_ABANDONED:
    case STATE_SUCCEEDED:
    case STATE_UNKNOWN:
      return comp_decides(in, cur, out, w, err);
    default:
      return err_set(err, ERR_INTERNAL, "stored step has an invalid state %d", (int)fs);
  }
}

/* --- public --- */

err_code decide_begin(const decide_begin_in *in, const step_pair *cur, decide_begin_out *out,
                      step_writes *w, err_t *err) {
  memset(out, 0, sizeof *out);
  w->n = 0;
  err_clear(err);
  if (in->key->phase == PHASE_FORWARD) return begin_forward(in, cur, out, w, err);
  if (in->key->phase == PHASE_COMPENSATION) return begin_compensation(in, cur, out, w, err);
  return err_set(err, ERR_INVALID, "key.phase: must be PHASE_FORWARD or PHASE_COMPENSATION");
}

/* The key's own record in cur. */
static const step_rec *own_record(const step_key *key, const step_pair *cur) {
  return key->phase == PHASE_COMPENSATION ? &cur->comp : &cur->fwd;
}

step_state decide_state_of(step_outcome outcome) {
  switch (outcome) {
    case OUTCOME_SUCCEEDED:
      return STATE_SUCCEEDED;
    case OUTCOME_FAILED:
      return STATE_FAILED;
    case OUTCOME_UNKNOWN:
      return STATE_UNKNOWN;
    default:
      return STATE_RELEASED; /* RETRYABLE: the key is released, its result kept to inspect */
  }
}

/* n becomes r finished with a result at now (Complete and ResolveStep alike): the body is
 * borrowed from the caller's input. Returns n. */
static const step_rec *finish(step_rec *n, const step_rec *r, const step_key *key,
                              step_outcome outcome, int32_t code, const uint8_t *body,
                              size_t body_len, int64_t now, step_retention ret) {
  *n = *r;
  n->key = *key;
  n->state = decide_state_of(outcome);
  n->outcome = outcome;
  n->code = code;
  n->body = body_len > 0 ? (uint8_t *)body : NULL;
  n->body_len = body_len;
  n->completed_ms = now;
  n->updated_ms = now;
  n->lease_expires_ms = 0;
  retain(n, now, ret);
  return n;
}

/* A retried Complete matches the stored result; past retention_s (body dropped) only its
 * outcome and code can be compared. */
static bool same_result(const step_rec *r, const decide_complete_in *in, int64_t now) {
  if (r->outcome != in->outcome || r->code != in->code) return false;
  if (step_rec_result_expired(r, now)) return true;
  if (r->body_len != in->body_len) return false;
  return in->body_len == 0 || memcmp(r->body, in->body, in->body_len) == 0;
}

err_code decide_complete(const decide_complete_in *in, const step_pair *cur, step_writes *w,
                         const step_rec **after, err_t *err) {
  w->n = 0;
  *after = NULL;
  err_clear(err);
  int64_t now = cur->now_ms;
  const step_rec *r = own_record(in->key, cur);
  if (!live(r, now)) return err_set(err, ERR_NOT_FOUND, "no such step");
  if (in->attempt > r->attempt)
    return err_fail(err, ERR_PRECONDITION, ERR_R_NEVER_ISSUED, "attempt %llu was never issued",
                    (unsigned long long)in->attempt);
  if (r->state == STATE_ABANDONED)
    return err_fail(err, ERR_ABORTED, ERR_R_LEASE_LOST, "lease lost: the step was abandoned");
#ifndef IDEM_PLANTED_SKIP_FENCE /* a bug planted on purpose, for the fault campaign's checker */
  if (in->attempt < r->attempt)
    return err_fail(err, ERR_ABORTED, ERR_R_LEASE_LOST,
                    "lease lost: attempt %llu was superseded by attempt %llu",
                    (unsigned long long)in->attempt, (unsigned long long)r->attempt);
#endif

  if (r->state == STATE_IN_PROGRESS) {
    /* accepted even when the lease expired, as long as nobody took over */
    step_rec *n = push(w);
    *after = finish(n, r, in->key, in->outcome, in->code, in->body, in->body_len, now,
                    in->retention);
    set_trace(n->complete_trace_id, in->trace_id);
    return ERR_OK;
  }
  if ((is_finished(r->state) || r->state == STATE_RELEASED) && same_result(r, in, now)) {
    *after = r; /* a retried Complete is harmless */
    return ERR_OK;
  }
  return err_fail(err, ERR_PRECONDITION, ERR_R_FINISHED_DIFFERENTLY,
                  "step already finished with a different result");
}

err_code decide_extend(const step_key *key, uint64_t attempt, uint32_t lease_ms,
                       const step_pair *cur, step_writes *w, int64_t *lease_expires_ms,
                       err_t *err) {
  w->n = 0;
  *lease_expires_ms = 0;
  err_clear(err);
  int64_t now = cur->now_ms;
  const step_rec *r = own_record(key, cur);
  if (!live(r, now)) return err_set(err, ERR_NOT_FOUND, "no such step");
  if (r->state != STATE_IN_PROGRESS || r->attempt != attempt)
    return err_fail(err, ERR_ABORTED, ERR_R_LEASE_LOST,
                    "lease lost: attempt %llu does not hold the step", (unsigned long long)attempt);
  step_rec *n = push(w);
  *n = *r;
  n->lease_expires_ms = now + lease_ms;
  n->updated_ms = now;
  *lease_expires_ms = n->lease_expires_ms;
  return ERR_OK;
}

err_code coord_decide_resolve(const step_key *key, step_outcome outcome, int32_t code,
                              const uint8_t *body, size_t body_len, step_retention ret,
                              const step_pair *cur, step_writes *w, const step_rec **after,
                              step_state *from, err_t *err) {
  w->n = 0;
  *after = NULL;
  *from = STATE_NONE;
  err_clear(err);
  int64_t now = cur->now_ms;
  const step_rec *r = own_record(key, cur);
  if (!live(r, now)) return err_set(err, ERR_NOT_FOUND, "no such step");
  if (r->state != STATE_IN_PROGRESS && r->state != STATE_UNKNOWN)
    return err_fail(err, ERR_PRECONDITION, ERR_R_NOT_RESOLVABLE,
                    "step is %s: only in_progress and unknown steps can be resolved",
                    idem_word_state((int)r->state));
  *from = r->state;
  *after = finish(push(w), r, key, outcome, code, body, body_len, now, ret);
  return ERR_OK;
}

bool coord_decide_resolve_repeat(const step_rec *r, const audit_rec *last, step_outcome outcome,
                                 int32_t code, const uint8_t *body, size_t body_len,
                                 const char *actor, const char *reason) {
  if (!r->present || !last) return false;
  step_state to = decide_state_of(outcome);
  if (strcmp(last->action, "resolve") != 0 || last->batch_id[0] != '\0') return false;
  if (strcmp(last->actor, actor) != 0 || strcmp(last->reason, reason) != 0) return false;
  if (last->from_state != STATE_IN_PROGRESS && last->from_state != STATE_UNKNOWN) return false;
  if (last->to_state != to || r->state != to || r->completed_ms > last->at_ms) return false;
  if (r->outcome != outcome || r->code != code) return false;
  if (step_rec_result_expired(r, 0)) return true;
  return r->body_len == body_len && (body_len == 0 || memcmp(r->body, body, body_len) == 0);
}
