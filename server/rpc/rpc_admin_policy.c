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
 * other group's store too, through an unfenced store (any node may: a policy is configuration,
 * last write wins). A group that cannot take it fails the call UNAVAILABLE naming it; the others
 * keep the change, and a repeat converges. Set: p; delete: del. */
static err_code to_other_groups(const rpc_req *rq, const policy *p,
                                const Idem__V1__DeletePolicyRequest *del, err_t *err) {
  const rpc_server *srv = rq->srv;
  char failed[160] = "";
  err_t first;
  err_clear(&first);
  for (size_t g = 1; g < srv->n_groups; g++) {
    const rpc_group *grp = &srv->groups[g].g;
    if (!grp->open_plain) continue;
    store *st = grp->open_plain(grp->open_plain_arg);
    err_t e;
    err_clear(&e);
    err_code rc;
    if (!st) {
      rc = err_oom(&e);
    } else if (p) {
      policy out;
      rc = coord_set_policy(grp->coord, st, rq->tenant, p, rq->deadline, &out, &e);
    } else {
      bool deleted = false;
      rc = coord_delete_policy(grp->coord, st, rq->tenant, del->service, del->operation,
                               rq->deadline, &deleted, &e);
    }
    store_close(st);
    if (rc != ERR_OK && !failed[0]) {
      snprintf(failed, sizeof failed, "%s", grp->name);
      first = e;
    }
  }
  if (!failed[0]) return ERR_OK;
  return err_fail(err, ERR_UNAVAILABLE, first.reason,
                  "group %s: %s (the other groups took the change: repeat it to converge)", failed,
                  first.msg);
}

/* After the first group answered rc: a refusal of the change itself ends the call; a first
 * group that is down does not stop the others taking it (the call then fails naming it). */
static err_code first_then_others(const rpc_req *rq, err_code rc, const policy *p,
                                  const Idem__V1__DeletePolicyRequest *del, err_t *err) {
  if (rq->srv->n_groups < 2 || (rc != ERR_OK && rc != ERR_UNAVAILABLE)) return rc;
  err_t first = *err;
  err_code orc = to_other_groups(rq, p, del, err);
  if (rc == ERR_OK) return orc;
  return err_fail(err, ERR_UNAVAILABLE, first.reason,
                  "group %s: %s (the other groups took the change: repeat it to converge)",
                  rq->srv->groups[0].g.name, first.msg);
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
  rc = coord_set_policy(rq->coord, rq->st, rq->tenant, &p, rq->deadline, &out, err);
  if ((rc = first_then_others(rq, rc, &p, NULL, err)) != ERR_OK) return rc;
  Idem__V1__Policy resp;
  policy_to_pb(&out, &resp);
  return rpc__call_reply(c, &resp.base, err);
}

err_code rpc__delete_policy(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c,
                            err_t *err) {
  const Idem__V1__DeletePolicyRequest *req = (const Idem__V1__DeletePolicyRequest *)in;
  bool deleted = false;
  err_code rc = coord_delete_policy(rq->coord, rq->st, rq->tenant, req->service, req->operation,
                                    rq->deadline, &deleted, err);
  if ((rc = first_then_others(rq, rc, NULL, req, err)) != ERR_OK) return rc;
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
