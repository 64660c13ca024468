/* cmd_slots.c — idemctl slots (docs/api.md §17): the slot map (ranges → group, a range being
 * moved with its target), the move under way (§18: phase, rows copied, lag) and each group's
 * leader, epoch, store health and slot count, from Coordinator.GetTopology as the node at --addr
 * sees them. */
#include <stdio.h>

#include "idemctl.h"

cJSON *ctl_json_move(const idem_slot_move *m) {
  if (!m->active) return cJSON_CreateNull();
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "request_id", m->request_id);
  cJSON_AddNumberToObject(o, "from", m->from);
  cJSON_AddNumberToObject(o, "to", m->to);
  cJSON_AddStringToObject(o, "source", m->source);
  cJSON_AddStringToObject(o, "target", m->target);
  cJSON_AddStringToObject(o, "phase", m->phase);
  cJSON_AddNumberToObject(o, "rows_copied", (double)m->rows_copied);
  if (m->lag_bytes >= 0) /* null: no progress read yet (the subscription may not exist) */
    cJSON_AddNumberToObject(o, "lag_bytes", (double)m->lag_bytes);
  else
    cJSON_AddNullToObject(o, "lag_bytes");
  cJSON_AddNumberToObject(o, "started_unix_ms", (double)m->started_unix_ms);
  cJSON_AddStringToObject(o, "note", m->note);
  return o;
}

/* "512 B", "3.2 KiB", "4.0 MiB", "1.5 GiB" */
static const char *fmt_bytes(int64_t n, char *buf, size_t cap) {
  static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB"};
  if (n < 1024) {
    snprintf(buf, cap, "%lld B", (long long)n);
    return buf;
  }
  double v = (double)n / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) v /= 1024, u++;
  snprintf(buf, cap, "%.1f %s", v, unit[u]);
  return buf;
}

void ctl_print_move(const idem_slot_move *m) {
  if (!m->active) return;
  char span[32], lag[32], age[32];
  snprintf(span, sizeof span, m->from == m->to ? "slot %u" : "slots %u-%u", m->from, m->to);
  char progress[96] = "nothing copied yet"; /* no progress read: the copy may not have begun */
  if (m->lag_bytes >= 0)
    snprintf(progress, sizeof progress, "%llu rows copied, lag %s",
             (unsigned long long)m->rows_copied, fmt_bytes(m->lag_bytes, lag, sizeof lag));
  printf("moving %s from %s to %s: %s, %s (started %s; request %s)\n", span, m->source, m->target,
         m->phase[0] ? m->phase : "?", progress, fmt_age(m->started_unix_ms, age, sizeof age),
         m->request_id);
  if (m->note[0]) printf("  %s\n", m->note);
}

static cJSON *json_topology(const idem_topology *t, const idem_slot_move *mv) {
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
  cJSON_AddItemToObject(o, "move", ctl_json_move(mv)); /* null when none */
  return o;
}

static void print_topology(const ctl *c, const idem_topology *t, const idem_slot_move *mv) {
  printf("%u slots, map version %llu (as %s sees it)\n", t->slots, (unsigned long long)t->version,
         c->addr);
  ctl_print_move(mv);
  putchar('\n');
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
    const char *row[] = {g->name, g->leader_address[0] ? g->leader_address : "(none)",
                         epoch,   g->store_ok ? "ok" : "unreachable",
                         count,   g->led_here ? "yes" : "no"};
    table_row(gt, row);
  }
  table_print(gt);
  table_free(gt);
}

int cmd_slots(ctl *c) {
  idem_topology t;
  idem_slot_move mv;
  idem_error e = {0};
  if (idem_get_topology_move(ctl_client(c), &t, &mv, &e) != IDEM_OK) return ctl_fail("slots", &e);
  if (c->json)
    json_print(json_topology(&t, &mv));
  else
    print_topology(c, &t, &mv);
  /* as status: 3 when a group cannot serve now (no leader, or its store unreachable) */
  bool healthy = true;
  for (size_t i = 0; i < t.n_groups; i++)
    healthy = healthy && t.groups[i].store_ok && t.groups[i].leader_address[0];
  idem_topology_clear(&t);
  return healthy ? EXIT_OK : EXIT_UNAVAILABLE;
}
