/* rpc_admin_steps.c — idem.v1.Admin ListSteps, ResolveStep and ListAudit (incident response):
 * protobuf <-> coord_admin types. Replies are built on the stack and in short-lived heap
 * arrays, encoded before the coord outputs they borrow from are cleared. */
#include <stdlib.h>

#include "../coord/coord_admin.h"
#include "../coord/coord_groups.h"
#include "idem/v1/coordinator.pb-c.h"
#include "rpc_convert.h"
#include "rpc_internal.h"

coord_list_in rpc__list_in(const Idem__V1__ListStepsRequest *req) {
  coord_list_in li = {0};
  if (req)
    li = (coord_list_in){.state = (int)req->state,
                         .service = req->service,
                         .operation = req->operation,
                         .global_id = req->global_id,
                         .trace_id = req->trace_id,
                         .updated_before_ms = req->updated_before_unix_ms,
                         .lease_expired_only = req->lease_expired_only,
                         .page_size = req->page_size,
                         .page_token = req->page_token};
  return li;
}

/* docs/api.md §17: a listing without a global id spans every group; the serving node reads each
 * group's store (its worker holds one per group). False when the call is one group's. */
static bool across_groups(const rpc_req *rq, const char *global_id,
                          coord_group_view g[RPC_GROUPS_MAX]) {
  if (rq->srv->n_groups < 2 || (global_id && global_id[0]) || !rq->stores) return false;
  for (size_t i = 0; i < rq->srv->n_groups; i++)
    g[i] = (coord_group_view){rq->srv->groups[i].g.name, rq->srv->groups[i].g.coord, rq->stores[i]};
  return true;
}

err_code rpc__list_steps(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c, err_t *err) {
  coord_list_in li = rpc__list_in((const Idem__V1__ListStepsRequest *)in);
  li.rec_size = rpc__rec_size;
  step_list l = {0};
  char next[COORD_TOKEN_MAX];
  coord_group_view g[RPC_GROUPS_MAX];
  err_code rc =
      across_groups(rq, li.global_id, g)
          ? coord_list_steps_groups(g, rq->srv->n_groups, rq->tenant, &li, rq->deadline, &l, next,
                                    err)
          : coord_list_steps(rq->coord, rq->st, rq->tenant, &li, rq->deadline, &l, next, err);
  if (rc != ERR_OK) return rc;
  rpc_recs_pb recs;
  if (!rpc__recs_to_pb(l.recs, l.n, &recs)) {
    rc = err_oom(err);
  } else {
    Idem__V1__ListStepsResponse resp = IDEM__V1__LIST_STEPS_RESPONSE__INIT;
    resp.n_steps = l.n;
    resp.steps = recs.ptrs;
    resp.next_page_token = next;
    rc = rpc__call_reply(c, &resp.base, err);
    rpc__recs_pb_free(&recs);
  }
  step_list_clear(&l);
  return rc;
}

err_code rpc__resolve_step(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c, err_t *err) {
  const Idem__V1__ResolveStepRequest *req = (const Idem__V1__ResolveStepRequest *)in;
  coord_resolve_in ri = {
      .key = rpc__key_in(req->key),
      RPC_RESOLUTION_FIELDS(req),
  };
  ri.key.trace_id = rq->trace_id;
  step_rec out = {0};
  err_code rc = coord_resolve_step(rq->coord, rq->st, rq->tenant, &ri, rq->deadline, &out, err);
  return rpc__reply_record(c, rc, &out, err);
}

err_code rpc__list_audit(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c, err_t *err) {
  const Idem__V1__ListAuditRequest *req = (const Idem__V1__ListAuditRequest *)in;
  audit_list l = {0};
  char next[COORD_TOKEN_MAX];
  coord_group_view g[RPC_GROUPS_MAX];
  err_code rc =
      across_groups(rq, req->global_id, g)
          ? coord_list_audit_groups(g, rq->srv->n_groups, rq->tenant, req->page_size,
                                    req->page_token, rq->deadline, &l, next, err)
          : coord_list_audit(rq->coord, rq->st, rq->tenant, req->global_id, req->page_size,
                             req->page_token, rq->deadline, &l, next, err);
  if (rc != ERR_OK) return rc;
  Idem__V1__AuditEntry *entries = l.n ? calloc(l.n, sizeof *entries) : NULL;
  Idem__V1__StepKey *keys = l.n ? calloc(l.n, sizeof *keys) : NULL;
  Idem__V1__AuditEntry **ptrs = l.n ? calloc(l.n, sizeof *ptrs) : NULL;
  if (l.n && (!entries || !keys || !ptrs)) {
    rc = err_oom(err);
  } else {
    for (size_t i = 0; i < l.n; i++) {
      const audit_rec *a = &l.recs[i];
      keys[i] = rpc__key_to_pb(&a->key);
      entries[i] = (Idem__V1__AuditEntry)IDEM__V1__AUDIT_ENTRY__INIT;
      entries[i].at_unix_ms = a->at_ms;
      entries[i].actor = (char *)a->actor;
      entries[i].action = (char *)a->action;
      entries[i].key = &keys[i];
      entries[i].reason = (char *)a->reason;
      entries[i].from_state = (Idem__V1__StepState)a->from_state;
      entries[i].to_state = (Idem__V1__StepState)a->to_state;
      entries[i].tenant = (char *)a->key.tenant;
      entries[i].batch_id = (char *)a->batch_id;
      ptrs[i] = &entries[i];
    }
    Idem__V1__ListAuditResponse resp = IDEM__V1__LIST_AUDIT_RESPONSE__INIT;
    resp.n_entries = l.n;
    resp.entries = ptrs;
    resp.next_page_token = next;
    rc = rpc__call_reply(c, &resp.base, err);
  }
  free(entries);
  free(keys);
  free(ptrs);
  audit_list_clear(&l);
  return rc;
}
