/* rpc_admin_move.c — idem.v1.Admin MoveSlots (docs/api.md §18): the wire to the node's mover
 * (rpc_config.move_slots). Any node takes the call; the move runs on the source group's leader. */
#include "idem/v1/coordinator.pb-c.h"
#include "rpc_internal.h"

err_code rpc__move_slots(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c, err_t *err) {
  const Idem__V1__MoveSlotsRequest *req = (const Idem__V1__MoveSlotsRequest *)in;
  if (!rq->srv->move_slots)
    return err_set(err, ERR_PRECONDITION,
                   "this node has one store group: start the nodes with --etcd and two or more "
                   "--store groups to move slots");
  slot_move_req mr = {.from = req->from,
                      .to = req->to,
                      .group = req->group,
                      .request_id = req->request_id,
                      .dry_run = req->dry_run,
                      .max_rows_per_s = req->max_rows_per_s};
  slot_move_res res = {0};
  err_code rc = rq->srv->move_slots(rq->srv->move_arg, &mr, rq->deadline, &res, err);
  if (rc != ERR_OK) return rc;
  Idem__V1__MoveSlotsResponse resp = IDEM__V1__MOVE_SLOTS_RESPONSE__INIT;
  resp.version = res.version;
  resp.steps_moved = res.steps_moved;
  resp.sagas_moved = res.sagas_moved;
  resp.paused_ms = res.paused_ms;
  resp.replayed = res.replayed;
  return rpc__call_reply(c, &resp.base, err);
}
