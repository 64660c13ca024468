/* bench_route.c — see bench_route.h. */
#include "bench_route.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_route_fetch(idem_client *c, bench_route *r, char *err, size_t n) {
  memset(r, 0, sizeof *r);
  idem_topology t = {0};
  idem_error e = {0};
  if (idem_get_topology(c, &t, &e) != IDEM_OK) {
    snprintf(err, n, "GetTopology: %s", e.message);
    return 3;
  }
  int rc = 0;
  if (t.n_groups == 0 || t.n_groups > BENCH_MAX_GROUPS || t.slots == 0) {
    snprintf(err, n, "the topology has %zu groups and %u slots (1-%d groups needed)", t.n_groups,
             t.slots, BENCH_MAX_GROUPS);
    rc = 3;
    goto out;
  }
  r->slots = t.slots;
  r->n_groups = (int)t.n_groups;
  for (size_t g = 0; g < t.n_groups; g++) {
    if (!t.groups[g].leader_address[0]) {
      snprintf(err, n, "group %s has no leader", t.groups[g].name);
      rc = 3;
      goto out;
    }
    snprintf(r->name[g], sizeof r->name[g], "%s", t.groups[g].name);
    snprintf(r->leader[g], sizeof r->leader[g], "%s", t.groups[g].leader_address);
  }
  r->group_of_slot = malloc(t.slots);
  if (!r->group_of_slot) {
    snprintf(err, n, "out of memory");
    rc = 3;
    goto out;
  }
  memset(r->group_of_slot, 0xff, t.slots);
  for (size_t i = 0; i < t.n_ranges; i++) {
    int g = -1;
    for (int k = 0; k < r->n_groups; k++)
      if (strcmp(r->name[k], t.ranges[i].group) == 0) g = k;
    if (g < 0 || t.ranges[i].from > t.ranges[i].to || t.ranges[i].to >= t.slots) {
      snprintf(err, n, "slot range %u-%u names group \"%s\", not in the topology's groups",
               t.ranges[i].from, t.ranges[i].to, t.ranges[i].group);
      rc = 3;
      goto out;
    }
    for (uint32_t s = t.ranges[i].from; s <= t.ranges[i].to; s++) r->group_of_slot[s] = (uint8_t)g;
  }
  for (uint32_t s = 0; s < t.slots; s++)
    if (r->group_of_slot[s] == 0xff) {
      snprintf(err, n, "slot %u is in no range of the slot map", s);
      rc = 3;
      goto out;
    }
out:
  idem_topology_clear(&t);
  if (rc) bench_route_free(r);
  return rc;
}

int bench_route_group(const bench_route *r, const char *tenant, const char *id) {
  return r->group_of_slot[idem_slot_of(tenant, id, r->slots)];
}

void bench_route_key(const bench_route *r, const char *tenant, int g, const char *base, char *out,
                     size_t n) {
  /* a group holds about 1/G of the slots: G tries on average; a group without slots would
   * never match, so the count is bounded (fetch checked every slot has a group) */
  for (unsigned i = 0; i < 1000000; i++) {
    snprintf(out, n, "%s-%u", base, i);
    if (bench_route_group(r, tenant, out) == g) return;
  }
}

void bench_route_free(bench_route *r) {
  free(r->group_of_slot);
  r->group_of_slot = NULL;
}

int bench_route_print(idem_client *c) {
  idem_topology t = {0};
  idem_error e = {0};
  if (idem_get_topology(c, &t, &e) != IDEM_OK) {
    fprintf(stderr, "idem-bench: --topology: GetTopology: %s\n", e.message);
    return 3;
  }
  printf("{\"slots\":%u,\"version\":%llu,\"groups\":[", t.slots, (unsigned long long)t.version);
  for (size_t g = 0; g < t.n_groups; g++) /* names and addresses need no JSON escapes */
    printf("%s{\"name\":\"%s\",\"leader\":\"%s\"}", g ? "," : "", t.groups[g].name,
           t.groups[g].leader_address);
  printf("]}\n");
  idem_topology_clear(&t);
  return 0;
}
