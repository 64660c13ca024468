/* rpc_topology.c — Coordinator.GetTopology and the groups of Admin.GetStatus (docs/api.md §17):
 * the slot map this node follows and each group's leader, epoch and store health as this node
 * sees them. Any node answers, leader or not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/clock.h"
#include "idem/v1/coordinator.pb-c.h"
#include "rpc_internal.h"

#define PING_BUDGET_MS 500 /* a group's store that takes longer is reported unhealthy */
#define PING_FRESH_MS 500 /* a ping's answer is reported this long */

/* Group i's store health: the last ping's answer while fresh, else a ping on this worker's
 * store (one caller at a time; the others report the last answer). Every client fetches the
 * topology when slots move, and a ping per call opened a connection per worker and group at
 * once: a burst of connects that stalled the stores (docs/api.md §18, BENCHMARKS.md). */
static bool store_health(const rpc_req *rq, size_t i) {
  rpc_group_rt *g = &rq->srv->groups[i];
  int64_t now = clock_mono_ms();
  int64_t at = atomic_load(&g->ping_ms);
  if ((at && now - at < PING_FRESH_MS) || !rq->stores || atomic_flag_test_and_set(&g->pinging))
    return atomic_load(&g->ping_ok);
  int64_t deadline = now + PING_BUDGET_MS;
  if (rq->deadline < deadline) deadline = rq->deadline;
  err_t perr;
  err_clear(&perr);
  bool ok = store_ping(rq->stores[i], deadline, &perr) == ERR_OK;
  atomic_store(&g->ping_ok, ok);
  atomic_store(&g->ping_ms, clock_mono_ms());
  atomic_flag_clear(&g->pinging);
  return ok;
}

void rpc__groups_view_free(rpc_groups_view *v) {
  free(v->gs);
  free(v->ptrs);
  free(v->addrs);
  memset(v, 0, sizeof *v);
}

err_code rpc__groups_view(const rpc_req *rq, rpc_groups_view *v, err_t *err) {
  rpc_server *srv = rq->srv;
  size_t n = srv->n_groups;
  slots_view *held = srv->slots_hold ? srv->slots_hold(srv->slotmap_arg) : NULL;
  const slotmap *m = held ? slots_view_map(held) : NULL;
  memset(v, 0, sizeof *v);
  v->gs = calloc(n, sizeof *v->gs);
  v->ptrs = calloc(n, sizeof *v->ptrs);
  v->addrs = calloc(n, sizeof *v->addrs);
  if (!v->gs || !v->ptrs || !v->addrs) {
    slots_view_release(held);
    rpc__groups_view_free(v);
    return err_oom(err);
  }
  v->n = n;
  for (size_t i = 0; i < n; i++) {
    const rpc_group *g = &srv->groups[i].g;
    Idem__V1__GroupStatus *s = &v->gs[i];
    idem__v1__group_status__init(s);
    v->ptrs[i] = s;
    elect_status es = {.leader = true};
    if (g->elector) elect_status_get(g->elector, &es);
    snprintf(v->addrs[i], sizeof v->addrs[i], "%s",
             g->elector     ? es.leader_addr
             : srv->address ? srv->address
                            : "");
    s->name = (char *)g->name;
    s->leader_address = v->addrs[i];
    s->epoch = es.epoch;
    s->led_here = es.leader;
    s->slot_count = m ? slotmap_count(m, g->name) : 0;
    s->store_ok = store_health(rq, i);
  }
  slots_view_release(held);
  return ERR_OK;
}

err_code rpc__get_topology(const rpc_req *rq, const ProtobufCMessage *in, rpc_call *c, err_t *err) {
  (void)in;
  rpc_server *srv = rq->srv;
  slots_view *held = srv->slots_hold ? srv->slots_hold(srv->slotmap_arg) : NULL;
  if (!held) return err_fail(err, ERR_UNAVAILABLE, ERR_R_NONE, "no slot map yet");
  const slotmap *m = slots_view_map(held);
  rpc_groups_view v;
  err_code rc = rpc__groups_view(rq, &v, err);
  if (rc != ERR_OK) {
    slots_view_release(held);
    return rc;
  }
  Idem__V1__SlotRange *r = calloc(m->n_ranges, sizeof *r);
  Idem__V1__SlotRange **rp = calloc(m->n_ranges, sizeof *rp);
  if (!r || !rp) {
    rc = err_oom(err);
  } else {
    for (size_t i = 0; i < m->n_ranges; i++) {
      idem__v1__slot_range__init(&r[i]);
      r[i].from = m->ranges[i].from;
      r[i].to = m->ranges[i].to;
      r[i].group = (char *)m->ranges[i].group;
      r[i].moving = m->ranges[i].moving;
      r[i].to_group = (char *)m->ranges[i].to_group;
      rp[i] = &r[i];
    }
    Idem__V1__Topology t = IDEM__V1__TOPOLOGY__INIT;
    t.slots = m->slots;
    t.version = m->version;
    t.n_ranges = m->n_ranges;
    t.ranges = rp;
    t.n_groups = v.n;
    t.groups = v.ptrs;
    Idem__V1__SlotMove mv = IDEM__V1__SLOT_MOVE__INIT;
    const slot_move *sm = m->move;
    if (sm) { /* docs/api.md §18: the move under way */
      mv.request_id = (char *)sm->request_id;
      mv.from = sm->from;
      mv.to = sm->to;
      mv.source = (char *)sm->source;
      mv.target = (char *)sm->target;
      mv.phase = (char *)slot_move_phase_word(sm->phase);
      mv.started_unix_ms = sm->started_ms;
      mv.note = (char *)sm->note;
      mv.lag_bytes = -1;
      if (srv->move_progress) srv->move_progress(srv->move_arg, &mv.rows_copied, &mv.lag_bytes);
      t.move = &mv;
    }
    rc = rpc__call_reply(c, &t.base, err);
  }
  free(r);
  free(rp);
  rpc__groups_view_free(&v);
  slots_view_release(held);
  return rc;
}
