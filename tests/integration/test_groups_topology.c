/* test_groups_topology.c — the topology of slot groups (docs/api.md §17) on a two-group cluster
 * (tests/support/groups.h):
 *  - GetTopology answers the map and each group's leader; libidem fetches it after its first
 *    redirect and then sends every call straight to its saga's group's leader (no redirect
 *    counted on either node's /metrics);
 *  - /metrics labels the election and batch series by group;
 *  - a newer slot map written to etcd is followed by both nodes (GetTopology, routing), and one
 *    naming a group the nodes lack is not.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "groups.h"
#include "harness.h"
#include "pbenc.h"

#define SLOTS H_GROUPS_SLOTS
#define COORD "/idem.v1.Coordinator/"

static void wait_balanced(const h_groups *cl) {
  h_groups_wait_balanced(cl, h_groups_answering_leader);
}

/* --- libidem's topology --- */

static double unavailable(const h_groups *cl, int i, const char *method) {
  char series[160];
  snprintf(series, sizeof series, "idem_rpc_calls_total{method=\"%s\",code=\"UNAVAILABLE\"}",
           method);
  double v = h_metric(cl->mport[i], series);
  return v < 0 ? 0 : v;
}

Test(groups, libidem_fetches_the_topology_and_goes_straight_to_each_leader, .timeout = 120) {
  h_groups cl;
  h_groups_start(&cl, false);
  wait_balanced(&cl);
  int l1 = h_groups_answering_leader(&cl, 0), l2 = h_groups_answering_leader(&cl, 1);
  idem_client *c = h_groups_client(&cl, cl.node[0].addr);
  idem_topology t;
  idem_error e = {0};
  cr_assert_eq(idem_get_topology(c, &t, &e), IDEM_OK, "%s", e.message);
  cr_expect_eq(t.slots, SLOTS);
  cr_assert_eq(t.n_ranges, 2);
  cr_expect_eq(t.ranges[0].from, 0);
  cr_expect_eq(t.ranges[0].to, 31);
  cr_expect_str_eq(t.ranges[0].group, "g1");
  cr_expect_str_eq(t.ranges[1].group, "g2");
  cr_assert_eq(t.n_groups, 2);
  cr_expect_str_eq(t.groups[0].leader_address, cl.node[l1].addr);
  cr_expect_str_eq(t.groups[1].leader_address, cl.node[l2].addr);
  cr_expect_eq(t.groups[0].slot_count, 32);
  cr_expect(t.groups[0].store_ok && t.groups[1].store_ok);
  cr_expect_eq(t.groups[0].led_here, l1 == 0);
  cr_expect_eq(t.groups[1].led_here, l2 == 0);
  cr_expect_eq(idem_slot_of(cl.t, "order-42", SLOTS), h_groups_slot_of(cl.t, "order-42"));
  idem_topology_clear(&t);
  idem_close(c);
  /* a fresh client learns the map from its first redirect, then never asks the wrong node */
  c = h_groups_client(&cl, cl.node[0].addr);
  char gid[64];
  h_groups_id_in_group(cl.t, l1 == 0 ? 1 : 0, "warm", gid, sizeof gid); /* led by node 1 */
  idem_step_key k = {gid, "payments", "charge", IDEM_FORWARD};
  idem_begin b = {0};
  cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);
  const char *m = "Coordinator/BeginStep";
  double before = unavailable(&cl, 0, m) + unavailable(&cl, 1, m);
  cr_expect_geq(before, 1, "the first call was redirected");
  for (int i = 0; i < 60; i++) {
    snprintf(gid, sizeof gid, "direct-%d", i);
    idem_step_key kk = {gid, "payments", "charge", IDEM_FORWARD};
    cr_assert_eq(idem_step_begin(c, &kk, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
    idem_begin_clear(&b);
  }
  double after = unavailable(&cl, 0, m) + unavailable(&cl, 1, m);
  cr_expect_eq(after, before, "60 calls over both groups, %g redirected", after - before);
  /* /metrics: the election and batch series carry the group */
  for (int g = 0; g < 2; g++) {
    int lead = g == 0 ? l1 : l2;
    char series[96];
    snprintf(series, sizeof series, "idem_leader{group=\"g%d\"}", g + 1);
    cr_expect_eq(h_metric(cl.mport[lead], series), 1, "%s on its leader", series);
    cr_expect_eq(h_metric(cl.mport[1 - lead], series), 0, "%s elsewhere", series);
    snprintf(series, sizeof series, "idem_store_batches_total{group=\"g%d\"}", g + 1);
    cr_expect_gt(h_metric(cl.mport[lead], series), 0, "%s on its leader", series);
    cr_expect_eq(h_metric(cl.mport[1 - lead], series), 0, "%s elsewhere", series);
  }
  cr_expect_eq(h_metric(cl.mport[0], "idem_store_batches_total"), -1,
               "with groups every batch series has its group");
  idem_close(c);
  h_groups_stop(&cl);
}

/* The map version node i follows (GetTopology), 0 when it does not answer. */
static uint64_t map_version(const h_groups *cl, int i) {
  idem_client *c = h_groups_client(cl, cl->node[i].addr);
  idem_topology t;
  idem_error e = {0};
  uint64_t v = idem_get_topology(c, &t, &e) == IDEM_OK ? t.version : 0;
  idem_topology_clear(&t);
  idem_close(c);
  return v;
}

Test(groups, a_newer_slot_map_in_etcd_is_followed, .timeout = 120) {
  h_groups cl;
  h_groups_start(&cl, false);
  wait_balanced(&cl);
  /* a slot that g1 serves in the first map (0-31) and g2 in the next (g1 0-15, g2 16-63) */
  char gid[64];
  for (int i = 0;; i++) {
    snprintf(gid, sizeof gid, "moved-%d", i);
    uint32_t slot = h_groups_slot_of(cl.t, gid);
    if (slot >= 16 && slot < 32) break;
  }
  int l1 = h_groups_answering_leader(&cl, 0), l2 = h_groups_answering_leader(&cl, 1);
  pbuf *req = pb_sub(pb_new(), 1, pb_key(gid, "svc", "op", 1));
  char details[256], grp[32];
  cr_expect_eq(h_raw_call_trailer(cl.node[l1].addr, COORD "LookupStep", cl.t, req->b, req->n,
                                  details, sizeof details, "idem-group", grp, sizeof grp),
               5, "g1's leader serves it under the first map: %s", details);
  cr_assert(etcd_put(&cl.etcd, "/idem/leader/slotmap",
                     "{\"version\":2,\"slots\":64,\"ranges\":[{\"from\":0,\"to\":15,"
                     "\"group\":\"g1\"},{\"from\":16,\"to\":63,\"group\":\"g2\"}]}"));
  for (int n = 0; n < 2; n++)
    H_WAIT(map_version(&cl, n) == 2, 10000, "node %d follows version 2", n);
  cr_expect_eq(h_raw_call_trailer(cl.node[l1].addr, COORD "LookupStep", cl.t, req->b, req->n,
                                  details, sizeof details, "idem-group", grp, sizeof grp),
               14, "g1's leader no longer serves it: %s", details);
  cr_expect_str_eq(grp, "g2");
  cr_expect_eq(h_raw_call_trailer(cl.node[l2].addr, COORD "LookupStep", cl.t, req->b, req->n,
                                  details, sizeof details, "idem-group", grp, sizeof grp),
               5, "g2's leader does: %s", details);
  /* a map this node cannot serve (a group it lacks) is not followed */
  cr_assert(etcd_put(&cl.etcd, "/idem/leader/slotmap",
                     "{\"version\":3,\"slots\":64,\"ranges\":[{\"from\":0,\"to\":63,"
                     "\"group\":\"g9\"}]}"));
  /* the node saw it and said why it does not follow it */
  H_WAIT(h_log_count(cl.node[0].log_path, "cannot follow the new slot map") > 0, 10000,
         "node 0 logs that it cannot follow the new slot map");
  cr_expect_eq(map_version(&cl, 0), 2);
  pb_free(req);
  h_groups_stop(&cl);
}
