/* rpc_convert.c — protobuf <-> coord/record conversions (rpc_convert.h); the outgoing messages
 * borrow from the record they were built from. */
#include "rpc_convert.h"

#include <stdlib.h>

Idem__V1__StepKey rpc__key_to_pb(const step_key *k) {
  Idem__V1__StepKey pb = IDEM__V1__STEP_KEY__INIT;
  pb.global_id = (char *)k->global_id;
  pb.service = (char *)k->service;
  pb.operation = (char *)k->operation;
  pb.phase = (Idem__V1__Phase)k->phase;
  return pb;
}

void rpc__rec_to_pb(const step_rec *r, rpc_rec_pb *o) {
  o->key = rpc__key_to_pb(&r->key);

  o->rec = (Idem__V1__StepRecord)IDEM__V1__STEP_RECORD__INIT;
  o->rec.key = &o->key;
  o->rec.state = (Idem__V1__StepState)r->state;
  o->rec.attempt = r->attempt;
  o->rec.fingerprint.len = r->fp_len;
  o->rec.fingerprint.data = r->fp_len ? (uint8_t *)r->fp : NULL;
  o->rec.created_unix_ms = r->created_ms;
  o->rec.updated_unix_ms = r->updated_ms;
  o->rec.lease_expires_unix_ms = r->lease_expires_ms;
  o->rec.expires_unix_ms = r->expires_ms;
  o->rec.result_expired = r->result_expired; /* the store read it past result retention */
  o->rec.tenant = (char *)r->key.tenant;
  o->rec.begin_trace_id = (char *)r->begin_trace_id;
  o->rec.complete_trace_id = (char *)r->complete_trace_id;

  if (r->outcome != OUTCOME_UNSPECIFIED) {
    o->result = (Idem__V1__StepResult)IDEM__V1__STEP_RESULT__INIT;
    o->result.outcome = (Idem__V1__Outcome)r->outcome;
    o->result.code = r->code;
    o->result.body.len = r->body_len;
    o->result.body.data = r->body_len ? r->body : NULL;
    o->result.completed_unix_ms = r->completed_ms;
    o->rec.result = &o->result;
  }
}

coord_key_in rpc__key_in(const Idem__V1__StepKey *k) {
  coord_key_in out = {NULL, NULL, NULL, 0, NULL};
  if (k) {
    out.global_id = k->global_id;
    out.service = k->service;
    out.operation = k->operation;
    out.phase = (int)k->phase;
  }
  return out;
}

/* The bytes r takes in a reply's repeated StepRecord field: tag, length, message. */
size_t rpc__rec_size(const step_rec *r) {
  rpc_rec_pb pb;
  rpc__rec_to_pb(r, &pb);
  size_t n = protobuf_c_message_get_packed_size(&pb.rec.base), len_bytes = 1;
  for (size_t v = n; v >= 0x80; v >>= 7) len_bytes++;
  return 1 + len_bytes + n;
}

bool rpc__recs_to_pb(const step_rec *recs, size_t n, rpc_recs_pb *out) {
  *out = (rpc_recs_pb){0};
  if (n == 0) return true;
  out->items = calloc(n, sizeof *out->items);
  out->ptrs = calloc(n, sizeof *out->ptrs);
  if (!out->items || !out->ptrs) {
    rpc__recs_pb_free(out);
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    rpc__rec_to_pb(&recs[i], &out->items[i]);
    out->ptrs[i] = &out->items[i].rec;
  }
  return true;
}

void rpc__recs_pb_free(rpc_recs_pb *p) {
  free(p->items);
  free(p->ptrs);
  *p = (rpc_recs_pb){0};
}
