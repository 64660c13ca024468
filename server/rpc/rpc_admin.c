/* rpc_admin.c — idem.v1.Admin (GetStatus so far) and grpc.health.v1.Health/Check.
 * Both answer from this node's view of the election (without an elector: always the
 * leader, epoch 0), on every node, leader or not. */
#include <string.h>

#include "../util/clock.h"
#include "grpc/health/v1/health.pb-c.h"
#include "idem/v1/coordinator.pb-c.h"
#include "rpc_internal.h"

#include "idem_build_version.h"

/* A store round trip bounded like any store call: min(call deadline, now + store timeout). */
static bool store_ok(const rpc_req *rq) {
  int64_t deadline = clock_mono_ms() + rq->coord->store_timeout_ms;
  if (rq->deadline < deadline) deadline = rq->deadline;
  err_t err;
  err_clear(&err);
  return store_ping(rq->st, deadline, &err) == ERR_OK;
}

err_code rpc__get_status(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c, err_t *err) {
  (void)in;
  Idem__V1__GetStatusResponse resp = IDEM__V1__GET_STATUS_RESPONSE__INIT;
  resp.node_id = rq->srv->node_id;
  elect_status es = {.leader = true, .election_ok = true};
  if (rq->srv->elector) elect_status_get(rq->srv->elector, &es);
  resp.leader = es.leader;
  resp.leader_address = rq->srv->elector ? es.leader_addr : rq->srv->address;
  resp.epoch = es.epoch;
  resp.store_ok = store_ok(rq);
  resp.election_ok = es.election_ok;
  resp.version = (char *)IDEM_VERSION;
  resp.started_unix_ms = rq->srv->started_unix_ms;
  resp.schema_version = (uint32_t)rq->srv->schema_version;
  resp.schema_newest = (uint32_t)rq->srv->schema_newest;
  rpc_groups_view v = {0};
  if (rq->srv->n_groups > 1) { /* docs/api.md §17: each group as this node sees it */
    err_code rc = rpc__groups_view(rq, &v, err);
    if (rc != ERR_OK) return rc;
    resp.n_groups = v.n;
    resp.groups = v.ptrs;
  }
  err_code rc = rpc__call_reply(c, &resp.base, err);
  rpc__groups_view_free(&v);
  return rc;
}

err_code rpc__health_check(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c, err_t *err) {
  const Grpc__Health__V1__HealthCheckRequest *req =
      (const Grpc__Health__V1__HealthCheckRequest *)in;
  Grpc__Health__V1__HealthCheckResponse resp = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
  /* idem.v1.Admin (GetStatus) is served by every node, leader or standby: SERVING while this
   * process answers at all (a liveness probe; a standby is live) */
  if (strcmp(req->service, "idem.v1.Admin") == 0) {
    resp.status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
    return rpc__call_reply(c, &resp.base, err);
  }
  if (req->service[0] && strcmp(req->service, "idem.v1.Coordinator") != 0)
    /* the name is not echoed: it is the caller's text, control bytes and all */
    return err_set(err, ERR_NOT_FOUND, "service: unknown (this server reports \"\", "
                                       "\"idem.v1.Coordinator\" and \"idem.v1.Admin\")");
  bool leader = !rq->srv->elector || elect_is_leader(rq->srv->elector, NULL);
  for (size_t i = 1; !leader && i < rq->srv->n_groups; i++) /* with groups: leads any */
    leader = elect_is_leader(rq->srv->groups[i].g.elector, NULL);
  resp.status = leader && store_ok(rq)
                    ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                    : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
  return rpc__call_reply(c, &resp.base, err);
}
