/* rpc_admin_bulk.c — idem.v1.Admin ResolveSteps (docs/api.md §12) over coord_resolve_steps. */
#include "../coord/coord_admin.h"
#include "idem/v1/coordinator.pb-c.h"
#include "rpc_convert.h"
#include "rpc_internal.h"

err_code rpc__resolve_steps(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c,
                            err_t *err) {
  const Idem__V1__ResolveStepsRequest *req = (const Idem__V1__ResolveStepsRequest *)in;
  coord_bulk_in bi = {
      .filter = rpc__list_in(req->filter), /* its page fields are not read */
      RPC_RESOLUTION_FIELDS(req),
      .dry_run = req->dry_run,
      .max_steps = req->max_steps,
      .request_id = req->request_id,
      .trace_id = rq->trace_id,
  };
  coord_bulk_out out;
  err_code rc = coord_resolve_steps(rq->coord, rq->st, rq->tenant, &bi, rq->deadline, &out, err);
  if (rc != ERR_OK) return rc;
  Idem__V1__StepKey keys[BULK_SAMPLE_MAX];
  Idem__V1__StepKey *ptrs[BULK_SAMPLE_MAX];
  for (size_t i = 0; i < out.rec.n_sample; i++) {
    keys[i] = rpc__key_to_pb(&out.rec.sample[i]);
    ptrs[i] = &keys[i];
  }
  Idem__V1__ResolveStepsResponse resp = IDEM__V1__RESOLVE_STEPS_RESPONSE__INIT;
  resp.matched = out.rec.matched;
  resp.resolved = out.rec.resolved;
  resp.n_sample = out.rec.n_sample;
  resp.sample = out.rec.n_sample ? ptrs : NULL;
  resp.batch_id = out.rec.batch_id;
  resp.dry_run = out.dry_run;
  resp.replayed = out.replayed;
  return rpc__call_reply(c, &resp.base, err);
}
