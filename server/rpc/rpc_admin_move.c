/* rpc_admin_move.c — idem.v1.Admin MoveSlots (docs/api.md §18): the wire to the node's mover
 * (rpc_config.move_slots). Any node takes the call; the move runs on the source group's leader.
 * The request's checks and the move's planning run on a worker; while the move goes on the call
 * is kept by the mover (no worker, no store connection) and answered from its thread, or at
 * once when the client goes away (the early close batch: the move goes on). */
#include "idem/v1/coordinator.pb-c.h"
#include "rpc_internal.h"

/* The reply of a move's result, set on c. */
static err_code reply(rpc_call *c, const slot_move_res *res, err_t *err) {
  Idem__V1__MoveSlotsResponse resp = IDEM__V1__MOVE_SLOTS_RESPONSE__INIT;
  resp.version = res->version;
  resp.steps_moved = res->steps_moved;
  resp.sagas_moved = res->sagas_moved;
  resp.paused_ms = res->paused_ms;
  resp.replayed = res->replayed;
  return rpc__call_reply(c, &resp.base, err);
}

/* A kept call's answer (slot_move_wait.done): the mover's thread, or the cq thread's cancel. */
static void kept_done(void *call, err_code rc, const slot_move_res *res, err_t *err) {
  rpc_call *c = call;
  if (rc == ERR_OK) rc = reply(c, res, err);
  rpc__async_done(c, rc, err);
}

/* The client went away (cq thread): a kept call is answered now, its move goes on. */
static void client_gone(rpc_call *c) {
  uint64_t id = atomic_load(&c->cancel_id);
  if (id && c->srv->move_cancel) c->srv->move_cancel(c->srv->move_arg, id);
}

err_code rpc__move_slots(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c, err_t *err) {
  const Idem__V1__MoveSlotsRequest *req = (const Idem__V1__MoveSlotsRequest *)in;
  rpc_server *srv = rq->srv;
  if (!srv->move_slots)
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
  /* a call the mover may keep: counted as pending, and watching for its client going away */
  slot_move_wait w = {.done = kept_done, .call = c, .id = (uint64_t)(uintptr_t)c};
  bool may_keep = rq->kept && srv->move_cancel && !req->dry_run;
  if (may_keep) {
    rpc__call_keep(c);
    atomic_store(&c->cancel_id, w.id); /* the call's own while it lives */
    c->on_cancel = client_gone;        /* a cancel before the mover keeps it finds nothing */
    if (!c->close_early) rpc__call_watch_close(c);
  }
  bool parked = false;
  err_code rc = srv->move_slots(srv->move_arg, &mr, rq->deadline, &res, err,
                                may_keep ? &w : NULL, &parked);
  if (parked) {
    *rq->kept = true;
    return ERR_OK; /* c may be answered, even freed, by now */
  }
  if (may_keep) rpc__call_unkeep(c);
  if (rc != ERR_OK) return rc;
  return reply(c, &res, err);
}
