/* test_groups_ctl.c — `idemctl slots` (docs/api.md §17) through the real idemctl binary
 * (h_idemctl, tests/support/capture.h) against a real two-group cluster (groups.h):
 *  - --json: the map's 64 slots in two ranges, g1 0-31 and g2 32-63, and each group's leader (the
 *    node that leads it, as calls to it show), epoch, store health and slot count; exit 0;
 *  - the tables show the same ranges and leaders;
 *  - one group's database refusing connections (its sessions ended): that group's store is
 *    "unreachable", the other's "ok", exit 3; an unreachable node exits 3, an argument exits 2. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "groups.h"
#include "harness.h"

static cJSON *group_named(cJSON *groups, const char *name) {
  cJSON *g;
  cJSON_ArrayForEach(g, groups) {
    cJSON *n = cJSON_GetObjectItem(g, "name");
    if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0) return g;
  }
  return NULL;
}

static void check_range(cJSON *ranges, int i, double from, double to, const char *group) {
  cJSON *r = cJSON_GetArrayItem(ranges, i);
  cr_assert(r, "range %d", i);
  cr_expect_eq(cJSON_GetObjectItem(r, "from")->valuedouble, from);
  cr_expect_eq(cJSON_GetObjectItem(r, "to")->valuedouble, to);
  cr_expect_str_eq(cJSON_GetObjectItem(r, "group")->valuestring, group);
  cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(r, "moving")));
}

/* Ends every session of db and refuses new ones (on) or allows them again (off). */
static void db_refuse(const char *db, bool on) {
  char sql[200];
  snprintf(sql, sizeof sql, "ALTER DATABASE %s ALLOW_CONNECTIONS %s", db, on ? "false" : "true");
  pgx_sql(NULL, sql, 0, NULL);
  if (!on) return;
  const char *p[] = {db};
  pgx_sql(NULL, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1",
          1, p);
}

Test(groups_ctl, slots_shows_the_map_and_each_groups_leader, .timeout = 120) {
  h_groups cl;
  h_groups_start(&cl, false);
  h_groups_wait_balanced(&cl, NULL);
  int l1 = h_groups_leader_of(&cl, 0), l2 = h_groups_leader_of(&cl, 1);
  h_ctl *r = calloc(1, sizeof *r);

  /* a node's store handle of a group another node fenced meanwhile fails its first ping (then
   * reconnects): until then `slots` says so and exits 3 */
  H_WAIT((h_idemctl(r, cl.node[0].addr, NULL, "slots", "--json", NULL), r->status != 3), 10000,
         "node 0's stores answer (idemctl slots exits 3 while one does not): %s%s", r->out, r->err);
  cr_assert_eq(r->status, 0, "%s%s", r->out, r->err);
  cJSON *o = cJSON_Parse(r->out);
  cr_assert(cJSON_IsObject(o), "%s", r->out);
  cr_expect_eq(cJSON_GetObjectItem(o, "slots")->valuedouble, H_GROUPS_SLOTS);
  cr_expect_geq(cJSON_GetObjectItem(o, "version")->valuedouble, 1);
  cJSON *ranges = cJSON_GetObjectItem(o, "ranges"), *groups = cJSON_GetObjectItem(o, "groups");
  cr_assert_eq(cJSON_GetArraySize(ranges), 2, "%s", r->out);
  check_range(ranges, 0, 0, 31, "g1");
  check_range(ranges, 1, 32, 63, "g2");
  cr_assert_eq(cJSON_GetArraySize(groups), 2, "%s", r->out);
  const int leader[2] = {l1, l2};
  for (int g = 0; g < 2; g++) {
    const char *name = g ? "g2" : "g1";
    cJSON *x = group_named(groups, name);
    cr_assert(x, "group %s in %s", name, r->out);
    cr_expect_str_eq(cJSON_GetObjectItem(x, "leader_address")->valuestring,
                     cl.node[leader[g]].addr);
    /* the epoch is known where the group is led (elect.h), 0 elsewhere */
    double epoch = cJSON_GetObjectItem(x, "epoch")->valuedouble;
    if (leader[g] == 0)
      cr_expect_geq(epoch, 1, "%s", r->out);
    else
      cr_expect_eq(epoch, 0, "%s", r->out);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(x, "store_ok")));
    cr_expect_eq(cJSON_GetObjectItem(x, "slot_count")->valuedouble, 32);
    cr_expect_eq(cJSON_IsTrue(cJSON_GetObjectItem(x, "led_here")), leader[g] == 0, "%s", r->out);
  }
  cJSON_Delete(o);

  /* the tables, from the other node */
  H_WAIT((h_idemctl(r, cl.node[1].addr, NULL, "slots", NULL), r->status != 3), 10000,
         "node 1's stores answer (idemctl slots exits 3 while one does not): %s%s", r->out, r->err);
  cr_assert_eq(r->status, 0, "%s%s", r->out, r->err);
  cr_expect(strstr(r->out, "64 slots"), "%s", r->out);
  cr_expect(strstr(r->out, "MOVING TO") && strstr(r->out, "LEADER"), "%s", r->out);
  cr_expect(strstr(r->out, "0-31   g1"), "%s", r->out);
  cr_expect(strstr(r->out, "32-63  g2"), "%s", r->out);
  cr_expect(strstr(r->out, cl.node[l1].addr) && strstr(r->out, cl.node[l2].addr), "%s", r->out);
  cr_expect(!strstr(r->out, "unreachable"), "%s", r->out);

  /* g2's database refuses connections: g2 unreachable, g1 ok, exit 3 (a node reports a ping
   * of each store for half a second: within that, asked again) */
  db_refuse(cl.db[1], true);
  bool refused;
  H_WAITED(refused,
           (h_idemctl(r, cl.node[0].addr, NULL, "slots", "--json", NULL), r->status != 0), 5000);
  db_refuse(cl.db[1], false);
  cr_expect(refused && r->status == 3, "exit %d: %s%s", r->status, r->out, r->err);
  o = cJSON_Parse(r->out);
  cr_assert(cJSON_IsObject(o), "%s", r->out);
  groups = cJSON_GetObjectItem(o, "groups");
  cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(group_named(groups, "g1"), "store_ok")), "%s", r->out);
  cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(group_named(groups, "g2"), "store_ok")), "%s",
            r->out);
  cJSON_Delete(o);

  h_idemctl(r, "127.0.0.1:1", NULL, "slots", "--deadline-ms", "500", NULL);
  cr_expect_eq(r->status, 3, "no coordinator there: %s", r->err);
  h_idemctl(r, cl.node[0].addr, NULL, "slots", "extra", NULL);
  cr_expect_eq(r->status, 2, "%s", r->err);
  cr_expect(strstr(r->err, "unexpected argument extra"), "%s", r->err);
  free(r);
  h_groups_stop(&cl);
}
