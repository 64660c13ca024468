/* rpc_admin_policy.c — Admin.SetPolicy / DeletePolicy / ListPolicies (docs/api.md §6) over
 * coord_policy.h. Coordinator.GetPolicy is in rpc_handlers.c. All act on the caller's tenant. */
#include <stdio.h>
#include <stdlib.h>

#include "../coord/coord_policy.h"
#include "../validate/validate.h"
#include "idem/v1/coordinator.pb-c.h"
#include "rpc_internal.h"

static void policy_to_pb(const policy *p, Idem__V1__Policy *o) {
  *o = (Idem__V1__Policy)IDEM__V1__POLICY__INIT;
  o->service = (char *)p->service;
  o->operation = (char *)p->operation;
  o->failure_mode = (Idem__V1__FailureMode)p->mode;
  o->retention_s = p->retention_s;
  o->lease_ms = p->lease_ms;
  o->key_retention_s = p->key_retention_s;
  o->updated_unix_ms = p->updated_ms;
}

/* Copies a name into a fixed field; one too long gets validation's own message for it. */
static err_code copy_name(const char *field, const char *v, char *dst, size_t cap, err_t *err) {
  size_t n = 0;
  if (v)
    while (v[n] && n < cap) n++;
  if (n >= cap) return validate_name(field, v, err);
  for (size_t i = 0; i < n; i++) dst[i] = v[i];
  dst[n] = '\0';
  return ERR_OK;
}

/* docs/api.md §17: a policy change made in the first group (checked there) is written to every
 * other group's store too (coord_set_policy_groups), through the group's pooled unfenced store
 * (rpc_group.plain: kept open, shared by the workers). Set: p; delete: del. */
static err_code everywhere(const rpc_req *rq, const policy *p,
                           const Idem__V1__DeletePolicyRequest *del, policy *out, bool *deleted,
                           err_t *err) {
  const rpc_server *srv = rq->srv;
  coord_group_view g[RPC_GROUPS_MAX];
  store_pool *from[RPC_GROUPS_MAX];
  size_t n = 0;
  g[n] = (coord_group_view){srv->n_groups ? srv->groups[0].g.name : "", rq->coord, rq->st};
  from[n++] = NULL;
  for (size_t i = 1; i < srv->n_groups && n < RPC_GROUPS_MAX; i++) {
    const rpc_group *grp = &srv->groups[i].g;
    if (!grp->plain) continue;
    from[n] = grp->plain;
    g[n++] = (coord_group_view){grp->name, grp->coord, store_pool_get(grp->plain)};
  }
  err_code rc = p ? coord_set_policy_groups(g, n, rq->tenant, p, rq->deadline, out, err)
                  : coord_delete_policy_groups(g, n, rq->tenant, del->service, del->operation,
                                               rq->deadline, deleted, err);
  for (size_t i = 1; i < n; i++) store_pool_put(from[i], g[i].st);
  return rc;
}

err_code rpc__set_policy(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c, err_t *err) {
  const Idem__V1__Policy *req = (const Idem__V1__Policy *)in;
  policy p = {0};
  err_code rc;
  if ((rc = copy_name("service", req->service, p.service, sizeof p.service, err)) != ERR_OK)
    return rc;
  if ((rc = copy_name("operation", req->operation, p.operation, sizeof p.operation, err)) != ERR_OK)
    return rc;
  p.mode = (failure_mode)req->failure_mode;
  p.retention_s = req->retention_s;
  p.lease_ms = req->lease_ms;
  p.key_retention_s = req->key_retention_s;
  policy out;
  bool unused = false;
  if ((rc = everywhere(rq, &p, NULL, &out, &unused, err)) != ERR_OK) return rc;
  Idem__V1__Policy resp;
  policy_to_pb(&out, &resp);
  return rpc__call_reply(c, &resp.base, err);
}

err_code rpc__delete_policy(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c,
                            err_t *err) {
  const Idem__V1__DeletePolicyRequest *req = (const Idem__V1__DeletePolicyRequest *)in;
  bool deleted = false;
  policy unused;
  err_code rc = everywhere(rq, NULL, req, &unused, &deleted, err);
  if (rc != ERR_OK) return rc;
  Idem__V1__DeletePolicyResponse resp = IDEM__V1__DELETE_POLICY_RESPONSE__INIT;
  resp.deleted = deleted;
  return rpc__call_reply(c, &resp.base, err);
}

err_code rpc__list_policies(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c,
                            err_t *err) {
  (void)in;
  policy_row *rows = NULL;
  size_t n = 0;
  err_code rc = coord_list_policies(rq->coord, rq->st, rq->tenant, rq->deadline, &rows, &n, err);
  if (rc != ERR_OK) return rc;
  Idem__V1__Policy *pbs = n ? calloc(n, sizeof *pbs) : NULL;
  Idem__V1__Policy **ptrs = n ? calloc(n, sizeof *ptrs) : NULL;
  if (n && (!pbs || !ptrs)) {
    rc = err_oom(err);
  } else {
    for (size_t i = 0; i < n; i++) {
      policy_to_pb(&rows[i].p, &pbs[i]);
      ptrs[i] = &pbs[i];
    }
    Idem__V1__ListPoliciesResponse resp = IDEM__V1__LIST_POLICIES_RESPONSE__INIT;
    resp.n_policies = n;
    resp.policies = ptrs;
    rc = rpc__call_reply(c, &resp.base, err);
  }
  free(pbs);
  free(ptrs);
  free(rows);
  return rc;
}
