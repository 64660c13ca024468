/* cmd_slots.c — idemctl slots (docs/api.md §17): the slot map (ranges → group, a range being
 * moved with its target) and each group's leader, epoch, store health and slot count, from
 * Coordinator.GetTopology as the node at --addr sees them. */
#include <stdio.h>

#include "idemctl.h"

static cJSON *json_topology(const idem_topology *t) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "slots", t->slots);
  cJSON_AddNumberToObject(o, "version", (double)t->version);
  cJSON *ranges = cJSON_AddArrayToObject(o, "ranges");
  for (size_t i = 0; i < t->n_ranges; i++) {
    const idem_slot_range *r = &t->ranges[i];
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "from", r->from);
    cJSON_AddNumberToObject(x, "to", r->to);
    cJSON_AddStringToObject(x, "group", r->group);
    cJSON_AddBoolToObject(x, "moving", r->moving);
    if (r->moving) cJSON_AddStringToObject(x, "to_group", r->to_group);
    cJSON_AddItemToArray(ranges, x);
  }
  cJSON *groups = cJSON_AddArrayToObject(o, "groups");
  for (size_t i = 0; i < t->n_groups; i++) {
    const idem_group_status *g = &t->groups[i];
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "name", g->name);
    cJSON_AddStringToObject(x, "leader_address", g->leader_address);
    cJSON_AddNumberToObject(x, "epoch", (double)g->epoch);
    cJSON_AddBoolToObject(x, "store_ok", g->store_ok);
    cJSON_AddNumberToObject(x, "slot_count", g->slot_count);
    cJSON_AddBoolToObject(x, "led_here", g->led_here);
    cJSON_AddItemToArray(groups, x);
  }
  return o;
}

static void print_topology(const ctl *c, const idem_topology *t) {
  printf("%u slots, map version %llu (as %s sees it)\n\n", t->slots,
         (unsigned long long)t->version, c->addr);
  const char *rh[] = {"SLOTS", "GROUP", "MOVING TO"};
  table *rt = table_new(3, rh);
  for (size_t i = 0; i < t->n_ranges; i++) {
    const idem_slot_range *r = &t->ranges[i];
    char span[32];
    snprintf(span, sizeof span, "%u-%u", r->from, r->to);
    const char *row[] = {span, r->group, r->moving ? r->to_group : "-"};
    table_row(rt, row);
  }
  table_print(rt);
  table_free(rt);
  putchar('\n');
  const char *gh[] = {"GROUP", "LEADER", "EPOCH", "STORE", "SLOTS", "LED HERE"};
  table *gt = table_new(6, gh);
  for (size_t i = 0; i < t->n_groups; i++) {
    const idem_group_status *g = &t->groups[i];
    char epoch[24], count[16];
    /* the epoch is known where the group is led (elect.h): "-" elsewhere (a single node
     * without etcd leads under its store's fence, 0 on a new store) */
    snprintf(epoch, sizeof epoch, g->epoch || g->led_here ? "%llu" : "-",
             (unsigned long long)g->epoch);
    snprintf(count, sizeof count, "%u", g->slot_count);
    const char *row[] = {g->name,
                         g->leader_address[0] ? g->leader_address : "(none)",
                         epoch,
                         g->store_ok ? "ok" : "unreachable",
                         count,
                         g->led_here ? "yes" : "no"};
    table_row(gt, row);
  }
  table_print(gt);
  table_free(gt);
}

int cmd_slots(ctl *c) {
  idem_topology t;
  idem_error e = {0};
  if (idem_get_topology(ctl_client(c), &t, &e) != IDEM_OK) return ctl_fail("slots", &e);
  if (c->json)
    json_print(json_topology(&t));
  else
    print_topology(c, &t);
  /* as status: 3 when a group cannot serve now (no leader, or its store unreachable) */
  bool healthy = true;
  for (size_t i = 0; i < t.n_groups; i++)
    healthy = healthy && t.groups[i].store_ok && t.groups[i].leader_address[0];
  idem_topology_clear(&t);
  return healthy ? EXIT_OK : EXIT_UNAVAILABLE;
}
