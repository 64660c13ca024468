/* bench_route.h — idem-bench --by-group: the pairs workload spread over slot groups
 * (docs/api.md §17) the way libidem routes, for bench_async.c's own gRPC driver.
 *
 * At start idem-bench fetches the topology once (idem_get_topology through any node): the slot
 * map and each group's leader. Each of the --concurrency callers of a group keeps its
 * operations in that group: a caller's keys are drawn (a counter appended to the usual key name)
 * until idem_slot_of puts them in its group's range, so every group gets exactly --concurrency
 * callers. Calls go straight to the group's leader over channels of its own (--channels per
 * group). The topology is not refreshed: a leader change during the run shows as UNAVAILABLE
 * errors, as it should in a benchmark that assumes a stable cluster.
 */
#ifndef IDEM_BENCH_ROUTE_H
#define IDEM_BENCH_ROUTE_H

#include <idem/idem.h>
#include <stddef.h>
#include <stdint.h>

#define BENCH_MAX_GROUPS 16

typedef struct bench_route {
  uint32_t slots;
  int n_groups;
  char name[BENCH_MAX_GROUPS][IDEM_GROUP_NAME_MAX + 1];
  char leader[BENCH_MAX_GROUPS][128];
  uint8_t *group_of_slot; /* slots entries: an index into name/leader */
} bench_route;

/* Fetches the topology through c into r. 0, or 3 with a message in err when it cannot be read,
 * has more than BENCH_MAX_GROUPS groups, or a group has no leader. */
int bench_route_fetch(idem_client *c, bench_route *r, char *err, size_t n);

/* The group (index) of global id `id` of tenant. */
int bench_route_group(const bench_route *r, const char *tenant, const char *id);

/* out = base + "-" + the smallest counter that puts the id in group g. */
void bench_route_key(const bench_route *r, const char *tenant, int g, const char *base, char *out,
                     size_t n);

void bench_route_free(bench_route *r);

/* idem-bench --topology: prints the topology read through c as one JSON line,
 * {"slots":S,"version":V,"groups":[{"name":N,"leader":"HOST:PORT" or ""},...]}; 0, or 3 with a
 * message on stderr. */
int bench_route_print(idem_client *c);

#endif
