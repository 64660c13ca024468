/* rpc_handlers.c — idem.v1.Coordinator: protobuf <-> coord types, one handler per method.
 * Replies are built on the stack (repeated fields in short-lived heap arrays) and encoded
 * before the coord outputs they borrow from are cleared. */
#include <stdlib.h>

#include "../coord/coord_admin.h"
#include "../metrics/metrics.h"
#include "idem/v1/coordinator.pb-c.h"
#include "rpc_convert.h"
#include "rpc_internal.h"

/* record.h promises enum values equal to the proto numbers: the conversions below are casts. */
#define SAME(a, b) _Static_assert((int)(a) == (int)(b), #a " != " #b)
SAME(PHASE_UNSPECIFIED, IDEM__V1__PHASE__PHASE_UNSPECIFIED);
SAME(PHASE_FORWARD, IDEM__V1__PHASE__PHASE_FORWARD);
SAME(PHASE_COMPENSATION, IDEM__V1__PHASE__PHASE_COMPENSATION);
SAME(STATE_NONE, IDEM__V1__STEP_STATE__STEP_STATE_UNSPECIFIED);
SAME(STATE_IN_PROGRESS, IDEM__V1__STEP_STATE__STEP_STATE_IN_PROGRESS);
SAME(STATE_SUCCEEDED, IDEM__V1__STEP_STATE__STEP_STATE_SUCCEEDED);
SAME(STATE_FAILED, IDEM__V1__STEP_STATE__STEP_STATE_FAILED);
SAME(STATE_UNKNOWN, IDEM__V1__STEP_STATE__STEP_STATE_UNKNOWN);
SAME(STATE_ABANDONED, IDEM__V1__STEP_STATE__STEP_STATE_ABANDONED);
SAME(STATE_RELEASED, IDEM__V1__STEP_STATE__STEP_STATE_RELEASED);
SAME(OUTCOME_UNSPECIFIED, IDEM__V1__OUTCOME__OUTCOME_UNSPECIFIED);
SAME(OUTCOME_SUCCEEDED, IDEM__V1__OUTCOME__OUTCOME_SUCCEEDED);
SAME(OUTCOME_FAILED, IDEM__V1__OUTCOME__OUTCOME_FAILED);
SAME(OUTCOME_RETRYABLE, IDEM__V1__OUTCOME__OUTCOME_RETRYABLE);
SAME(OUTCOME_UNKNOWN, IDEM__V1__OUTCOME__OUTCOME_UNKNOWN);
SAME(DECISION_UNSPECIFIED, IDEM__V1__DECISION__DECISION_UNSPECIFIED);
SAME(DECISION_PROCEED, IDEM__V1__DECISION__DECISION_PROCEED);
SAME(DECISION_REPLAY, IDEM__V1__DECISION__DECISION_REPLAY);
SAME(DECISION_SKIP_NULL_COMPENSATION, IDEM__V1__DECISION__DECISION_SKIP_NULL_COMPENSATION);
SAME(DECISION_SKIP_ALREADY_COMPENSATED, IDEM__V1__DECISION__DECISION_SKIP_ALREADY_COMPENSATED);
SAME(DECISION_PROCEED_UNGUARDED, IDEM__V1__DECISION__DECISION_PROCEED_UNGUARDED);
SAME(FAILURE_MODE_UNSPECIFIED, IDEM__V1__FAILURE_MODE__FAILURE_MODE_UNSPECIFIED);
SAME(FAILURE_MODE_FAIL_CLOSED, IDEM__V1__FAILURE_MODE__FAILURE_MODE_FAIL_CLOSED);
SAME(FAILURE_MODE_FAIL_OPEN, IDEM__V1__FAILURE_MODE__FAILURE_MODE_FAIL_OPEN);
#undef SAME

/* --- handlers (conversions: rpc_convert.c) --- */

err_code rpc__begin_saga(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c, err_t *err) {
  const Idem__V1__BeginSagaRequest *req = (const Idem__V1__BeginSagaRequest *)in;
  saga_label *labels = NULL;
  if (req->n_labels) {
    labels = calloc(req->n_labels, sizeof *labels);
    if (!labels) return err_oom(err);
    for (size_t i = 0; i < req->n_labels; i++) {
      labels[i].key = req->labels[i]->key;
      labels[i].value = req->labels[i]->value;
    }
  }
  saga_begun out;
  err_code rc = coord_begin_saga(rq->coord, rq->st, rq->tenant, req->request_id, req->saga_type,
                                 labels, req->n_labels, rq->deadline, &out, err);
  free(labels);
  if (rc != ERR_OK) return rc;
  Idem__V1__BeginSagaResponse resp = IDEM__V1__BEGIN_SAGA_RESPONSE__INIT;
  resp.global_id = out.global_id;
  resp.created = out.created;
  resp.created_unix_ms = out.created_ms;
  return rpc__call_reply(c, &resp.base, err);
}

/* The BeginStep reply from out (cleared). */
static err_code reply_begin(rpc_call *c, coord_begin_result *out, err_t *err) {
  Idem__V1__BeginStepResponse resp = IDEM__V1__BEGIN_STEP_RESPONSE__INIT;
  Idem__V1__StepResult result = IDEM__V1__STEP_RESULT__INIT;
  resp.decision = (Idem__V1__Decision)out->decision;
  resp.attempt = out->attempt;
  resp.lease_expires_unix_ms = out->lease_expires_ms;
  resp.takeover = out->takeover;
  resp.expires_unix_ms = out->expires_ms;
  resp.result_expired = out->result_expired;
  resp.result_expires_unix_ms = out->result_expires_ms;
  resp.failure_mode = (Idem__V1__FailureMode)out->mode;
  metrics_decision((int)out->decision, out->takeover);
  if (out->has_result) {
    result.outcome = (Idem__V1__Outcome)out->outcome;
    result.code = out->code;
    result.body.len = out->body_len;
    result.body.data = out->body_len ? out->body : NULL;
    result.completed_unix_ms = out->completed_ms;
    resp.result = &result;
  }
  err_code rc = rpc__call_reply(c, &resp.base, err);
  coord_begin_result_clear(out);
  return rc;
}

err_code rpc__begin_step(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c, err_t *err) {
  const Idem__V1__BeginStepRequest *req = (const Idem__V1__BeginStepRequest *)in;
  coord_key_in key = rpc__key_in(req->key);
  key.trace_id = rq->trace_id;
  coord_begin_result out = {0};
  /* on a worker nothing waits (that would hold the thread): wait_ms is checked, then the
   * answer is as with 0 */
  err_code rc = coord_check_wait_ms(req->wait_ms, err);
  if (rc != ERR_OK) return rc;
  rc = coord_begin_step(rq->coord, rq->st, rq->tenant, &key, req->fingerprint.data,
                        req->fingerprint.len, req->lease_ms, rq->deadline, &out, err);
  if (rc != ERR_OK) {
    coord_begin_result_clear(&out);
    return rc;
  }
  return reply_begin(c, &out, err);
}

/* BeginStep without a worker (coord_begin_step_async). */
static void begin_step_done(void *arg, err_code rc, coord_begin_result *out, err_t *err) {
  rpc_call *c = arg;
  if (rc == ERR_OK) rc = reply_begin(c, out, err);
  rpc__async_done(c, rc, err);
}

void rpc__begin_step_async(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c) {
  const Idem__V1__BeginStepRequest *req = (const Idem__V1__BeginStepRequest *)in;
  coord_key_in key = rpc__key_in(req->key);
  key.trace_id = rq->trace_id;
  /* a call without a deadline of its own may wait its whole wait_ms (the server's default
   * deadline then counts from the end of the wait) */
  int64_t deadline = rq->deadline;
  if (rq->no_deadline && req->wait_ms <= REC_WAIT_MS_MAX) deadline += req->wait_ms;
  /* a call that may park learns at once of its client going away, which frees its place */
  coord_wait_cell *cell = NULL;
  if (req->wait_ms > 0 && rq->coord->waiters && rpc__call_watch_close(c)) cell = &c->cell;
  coord_begin_step_wait_async(rq->coord, rq->st, rq->tenant, &key, req->fingerprint.data,
                              req->fingerprint.len, req->lease_ms, req->wait_ms, deadline, cell,
                              begin_step_done, c);
}

/* The CompleteStep reply from the record after the call. */
static err_code reply_complete(rpc_call *c, const step_rec *out, err_t *err) {
  rpc_rec_pb rec;
  rpc__rec_to_pb(out, &rec);
  Idem__V1__CompleteStepResponse resp = IDEM__V1__COMPLETE_STEP_RESPONSE__INIT;
  resp.record = &rec.rec;
  return rpc__call_reply(c, &resp.base, err);
}

err_code rpc__complete_step(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c,
                            err_t *err) {
  const Idem__V1__CompleteStepRequest *req = (const Idem__V1__CompleteStepRequest *)in;
  coord_key_in key = rpc__key_in(req->key);
  key.trace_id = rq->trace_id;
  step_rec out = {0};
  err_code rc =
      coord_complete_step(rq->coord, rq->st, rq->tenant, &key, req->attempt, (int)req->outcome,
                          req->code, req->body.data, req->body.len, rq->deadline, &out, err);
  if (rc == ERR_OK) rc = reply_complete(c, &out, err);
  step_rec_clear(&out);
  return rc;
}

/* CompleteStep without a worker (coord_complete_step_async). */
static void complete_step_done(void *arg, err_code rc, step_rec *out, err_t *err) {
  rpc_call *c = arg;
  if (rc == ERR_OK) rc = reply_complete(c, out, err);
  rpc__async_done(c, rc, err);
}

void rpc__complete_step_async(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c) {
  const Idem__V1__CompleteStepRequest *req = (const Idem__V1__CompleteStepRequest *)in;
  coord_key_in key = rpc__key_in(req->key);
  key.trace_id = rq->trace_id;
  coord_complete_step_async(rq->coord, rq->st, rq->tenant, &key, req->attempt, (int)req->outcome,
                            req->code, req->body.data, req->body.len, rq->deadline,
                            complete_step_done, c);
}

err_code rpc__extend_lease(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c, err_t *err) {
  const Idem__V1__ExtendLeaseRequest *req = (const Idem__V1__ExtendLeaseRequest *)in;
  coord_key_in key = rpc__key_in(req->key);
  int64_t lease_expires = 0;
  err_code rc = coord_extend_lease(rq->coord, rq->st, rq->tenant, &key, req->attempt, req->lease_ms,
                                   rq->deadline, &lease_expires, err);
  if (rc != ERR_OK) return rc;
  Idem__V1__ExtendLeaseResponse resp = IDEM__V1__EXTEND_LEASE_RESPONSE__INIT;
  resp.lease_expires_unix_ms = lease_expires;
  return rpc__call_reply(c, &resp.base, err);
}

err_code rpc__reply_record(rpc_call *c, err_code rc, step_rec *out, err_t *err) {
  if (rc == ERR_OK) {
    rpc_rec_pb rec;
    rpc__rec_to_pb(out, &rec);
    rc = rpc__call_reply(c, &rec.rec.base, err);
  }
  step_rec_clear(out);
  return rc;
}

err_code rpc__lookup_step(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c, err_t *err) {
  const Idem__V1__LookupStepRequest *req = (const Idem__V1__LookupStepRequest *)in;
  coord_key_in key = rpc__key_in(req->key);
  step_rec out = {0};
  err_code rc = coord_lookup_step(rq->coord, rq->st, rq->tenant, &key, rq->deadline, &out, err);
  return rpc__reply_record(c, rc, &out, err);
}

err_code rpc__get_saga(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c, err_t *err) {
  const Idem__V1__GetSagaRequest *req = (const Idem__V1__GetSagaRequest *)in;
  saga_view v = {0};
  coord_saga_in si = {
      .global_id = req->global_id, .page_token = req->page_token, .rec_size = rpc__rec_size};
  char next[COORD_TOKEN_MAX];
  err_code rc = coord_get_saga(rq->coord, rq->st, rq->tenant, &si, rq->deadline, &v, next, err);
  if (rc != ERR_OK) {
    saga_view_clear(&v);
    return rc;
  }
  /* one allocation each for the repeated fields, freed once the reply is encoded */
  rpc_recs_pb recs;
  bool recs_ok = rpc__recs_to_pb(v.steps, v.n_steps, &recs);
  Idem__V1__GetSagaResponse__LabelsEntry *labels =
      v.n_labels ? calloc(v.n_labels, sizeof *labels) : NULL;
  Idem__V1__GetSagaResponse__LabelsEntry **label_ptrs =
      v.n_labels ? calloc(v.n_labels, sizeof *label_ptrs) : NULL;
  if (!recs_ok || (v.n_labels && (!labels || !label_ptrs))) {
    rc = err_oom(err);
  } else {
    for (size_t i = 0; i < v.n_labels; i++) {
      labels[i] =
          (Idem__V1__GetSagaResponse__LabelsEntry)IDEM__V1__GET_SAGA_RESPONSE__LABELS_ENTRY__INIT;
      labels[i].key = v.labels[i].key;
      labels[i].value = v.labels[i].value ? v.labels[i].value : (char *)"";
      label_ptrs[i] = &labels[i];
    }
    Idem__V1__GetSagaResponse resp = IDEM__V1__GET_SAGA_RESPONSE__INIT;
    resp.global_id = v.global_id;
    resp.saga_type = v.saga_type;
    resp.created_unix_ms = v.created_ms;
    resp.n_steps = v.n_steps;
    resp.steps = recs.ptrs;
    resp.n_labels = v.n_labels;
    resp.labels = label_ptrs;
    resp.next_page_token = next;
    rc = rpc__call_reply(c, &resp.base, err);
  }
  rpc__recs_pb_free(&recs);
  free(labels);
  free(label_ptrs);
  saga_view_clear(&v);
  return rc;
}

err_code rpc__get_policy(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c, err_t *err) {
  const Idem__V1__GetPolicyRequest *req = (const Idem__V1__GetPolicyRequest *)in;
  policy pol;
  err_code rc = coord_get_policy(rq->coord, rq->tenant, req->service, req->operation, &pol, err);
  if (rc != ERR_OK) return rc;
  Idem__V1__Policy resp = IDEM__V1__POLICY__INIT;
  resp.service = pol.service;
  resp.operation = pol.operation;
  resp.failure_mode = (Idem__V1__FailureMode)pol.mode;
  resp.retention_s = pol.retention_s;
  resp.key_retention_s = policy_key_retention(&pol); /* in effect: never below retention_s */
  resp.lease_ms = pol.lease_ms;
  resp.updated_unix_ms = pol.updated_ms;
  return rpc__call_reply(c, &resp.base, err);
}
