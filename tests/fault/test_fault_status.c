/* GetStatus tells what the refusals tell (docs/api.md §7, "What a node says of the leader"). Two
 * real nodes, a real etcd and Postgres. etcd is killed: within the election TTL (+ a margin for
 * the polls) every node's GetStatus stops naming a leader, and all along each node's own
 * refusal of a BeginStep (a raw call: libidem would follow idem-leader to another node) names
 * the same leader as its GetStatus before and after it (none: no-leader). etcd comes back: a
 * leader is elected and every node names it again, in GetStatus and in its refusals. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "fault.h"
#include "idem/v1/coordinator.pb-c.h"

#define STATUS_MARGIN_MS 3000 /* beyond the TTL: the polls' own time (each call up to 1 s) */

/* A node's own answer to a BeginStep: the gRPC status, idem-reason and idem-leader. */
typedef struct refusal {
  int status;
  char reason[64], leader[128], details[256];
} refusal;

static void refuse(cluster *cl, int i, const char *tenant, refusal *r) {
  char gid[80];
  h_unique("st", gid, sizeof gid);
  Idem__V1__StepKey key = IDEM__V1__STEP_KEY__INIT;
  key.global_id = gid;
  key.service = "payment";
  key.operation = "charge";
  key.phase = IDEM__V1__PHASE__PHASE_FORWARD;
  Idem__V1__BeginStepRequest req = IDEM__V1__BEGIN_STEP_REQUEST__INIT;
  req.key = &key;
  req.lease_ms = 60000;
  uint8_t buf[512];
  size_t len = idem__v1__begin_step_request__pack(&req, buf);
  char trailers[2048] = "";
  h_raw_opts o = {.trailers = trailers, .trailers_len = sizeof trailers, .deadline_ms = 1000};
  memset(r, 0, sizeof *r);
  r->status = h_raw_call_opts(cl->nodes[i].addr, "/idem.v1.Coordinator/BeginStep", tenant, buf, len,
                              r->details, sizeof r->details, &o);
  h_trailer_of(trailers, "idem-reason", r->reason, sizeof r->reason);
  h_trailer_of(trailers, "idem-leader", r->leader, sizeof r->leader);
}

/* Whether the refusal names the leader st names: not-leader with that leader, or no-leader with
 * none. */
static bool agrees(const idem_status *st, const refusal *r) {
  if (r->status != 14 /* UNAVAILABLE */ || strcmp(r->leader, st->leader_address) != 0) return false;
  return strcmp(r->reason, st->leader_address[0] ? "not-leader" : "no-leader") == 0;
}

/* One look at standby i: GetStatus, its refusal, GetStatus again. When the two statuses name the
 * same leader (nothing changed between), the refusal must name it too. True when i names no
 * leader in either status. *last gets the second status. */
static bool look(cluster *cl, int i, const char *tenant, idem_status *last, refusal *r) {
  idem_status before;
  cr_assert(f_status(cl, i, &before), "node %d answers GetStatus", i + 1);
  refuse(cl, i, tenant, r);
  cr_assert(f_status(cl, i, last), "node %d answers GetStatus", i + 1);
  if (before.leader || last->leader) return false; /* it leads (and served the step) */
  if (strcmp(before.leader_address, last->leader_address) == 0)
    cr_assert(agrees(last, r),
              "node %d: GetStatus names leader '%s' but its refusal says %d %s, idem-leader '%s' "
              "(%s)",
              i + 1, last->leader_address, r->status, r->reason, r->leader, r->details);
  return !before.leader_address[0] && !last->leader_address[0];
}

Test(fault, etcd_gone_every_node_stops_naming_a_leader_as_its_refusals_do, .fini = f_fini,
     .timeout = 90) {
  static cluster cl; /* static: f_fini may stop it after a failed assertion */
  f_cluster_start(&cl, 2);
  char tenant[64];
  h_tenant(tenant);
  int leader = f_leader(&cl, NULL);
  cr_assert_geq(leader, 0);
  int standby = 1 - leader;
  idem_status st;
  refusal r;
  /* before: the standby names the leader, in GetStatus and in its refusal */
  H_WAIT(f_status(&cl, standby, &st) && !strcmp(st.leader_address, cl.nodes[leader].addr), 10000,
         "node %d names the leader %s (it names '%s')", standby + 1, cl.nodes[leader].addr,
         st.leader_address);
  refuse(&cl, standby, tenant, &r);
  cr_assert(agrees(&st, &r), "node %d's refusal: %d %s, idem-leader '%s' (%s)", standby + 1,
            r.status, r.reason, r.leader, r.details);

  etcd_kill(&cl.etcd);
  int64_t t0 = h_now_ms();
  int64_t until = t0 + F_TTL * 1000 + STATUS_MARGIN_MS;
  int64_t stopped[F_MAX_NODES] = {0};
  idem_status last[F_MAX_NODES];
  refusal lastr[F_MAX_NODES];
  int left = cl.n;
  while (left > 0) {
    for (int i = 0; i < cl.n; i++)
      if (!stopped[i] && look(&cl, i, tenant, &last[i], &lastr[i])) {
        stopped[i] = h_now_ms() - t0;
        left--;
        printf("status: node %d (%s) stopped naming a leader %lld ms after etcd died\n", i + 1,
               i == leader ? "the leader" : "a standby", (long long)stopped[i]);
        fflush(stdout);
      }
    if (left == 0) break;
    if (h_now_ms() > until) {
      for (int i = 0; i < cl.n; i++)
        if (!stopped[i])
          printf(
              "status: node %d still names leader '%s' (leader %d, election_ok %d) %lld ms "
              "after etcd died; its refusal: %d %s, idem-leader '%s' (%s)\n",
              i + 1, last[i].leader_address, last[i].leader, last[i].election_ok,
              (long long)(h_now_ms() - t0), lastr[i].status, lastr[i].reason, lastr[i].leader,
              lastr[i].details);
      fflush(stdout);
      cr_assert_fail("a node still names a leader %d ms after etcd died (TTL %d s)",
                     F_TTL * 1000 + STATUS_MARGIN_MS, F_TTL);
    }
    h_sleep_ms(50); /* between two rounds of looks, each of which is 3 calls a node */
  }
  for (int i = 0; i < cl.n; i++) { /* it stays so while etcd is away */
    cr_assert(look(&cl, i, tenant, &st, &r), "node %d names '%s' again", i + 1, st.leader_address);
    /* election_ok is "etcd answered within a TTL": the leader stops naming itself as soon as its
     * lease may have ended, which can come before a TTL has passed since etcd last answered it
     * (seen once: the leader named none 1,387 ms after etcd died, election_ok still set) */
    while (st.election_ok && h_now_ms() < until) {
      h_sleep_ms(50);
      cr_assert(look(&cl, i, tenant, &st, &r), "node %d names '%s' again", i + 1,
                st.leader_address);
    }
    cr_assert_not(st.election_ok, "node %d: election_ok %lld ms after etcd died (TTL %d s)", i + 1,
                  (long long)(h_now_ms() - t0), F_TTL);
  }
  /* idemctl status says so: each address once (its own row, no LEADER AT naming it), LEADER AT
   * "unknown", and a warning naming each node */
  h_ctl *ctl = calloc(1, sizeof *ctl);
  cr_assert_not_null(ctl);
  h_idemctl(ctl, cl.all_addrs, NULL, "status", NULL);
  printf("idemctl status with etcd gone (exit %d):\n%s%s", ctl->status, ctl->out, ctl->err);
  fflush(stdout);
  cr_assert_eq(ctl->status, 0, "%s", ctl->err);
  for (int i = 0; i < cl.n; i++) {
    int seen = 0;
    for (const char *p = ctl->out; (p = strstr(p, cl.nodes[i].addr)); p++) seen++;
    cr_assert_eq(seen, 1, "node %d's address named %d times:\n%s", i + 1, seen, ctl->out);
    char warn[128];
    snprintf(warn, sizeof warn, "warning: n%d (%s)", i + 1, cl.nodes[i].addr);
    cr_assert(strstr(ctl->err, warn), "no '%s' in:\n%s", warn, ctl->err);
  }
  cr_assert(strstr(ctl->out, "unknown"), "%s", ctl->out);
  free(ctl);

  /* etcd back: a leader, named by every node in GetStatus and in the standby's refusal */
  etcd_restart(&cl.etcd);
  int now = f_wait_leader(&cl, -1, 15000 + F_TTL * 1000, NULL);
  cr_assert_geq(now, 0, "no node leads after etcd came back");
  for (int i = 0; i < cl.n; i++)
    H_WAIT(
        f_status(&cl, i, &st) && !strcmp(st.leader_address, cl.nodes[now].addr) && st.election_ok,
        10000, "node %d names the new leader %s (it names '%s')", i + 1, cl.nodes[now].addr,
        st.leader_address);
  refuse(&cl, 1 - now, tenant, &r);
  cr_assert(f_status(&cl, 1 - now, &st));
  cr_assert(agrees(&st, &r), "node %d after etcd came back: %d %s, idem-leader '%s' (%s)", 2 - now,
            r.status, r.reason, r.leader, r.details);
  f_cluster_stop(&cl);
}
