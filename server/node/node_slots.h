/* node_slots.h — the node's slot map (docs/api.md §17): which of its store groups serves each
 * slot, and the route of a call to its group.
 *
 * With --etcd and --store groups the map lives in etcd at <election prefix>/slotmap: read at
 * start, created there (equal ranges, in the order the groups are named) when the cluster is
 * new. A node whose --slots differs from the map's, or whose groups do not include every group
 * the map names, refuses to start (exit 2) and writes nothing. While it runs the node reads the
 * map every second (five times a second while a move is under way) and follows a newer version it can serve (the same slot count, only its
 * groups); readers get the map current when they ask (a replaced one stays valid until stop).
 * Without etcd, or with --pg (one group), the map is the equal split, kept in memory.
 */
#ifndef IDEM_NODE_SLOTS_H
#define IDEM_NODE_SLOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../slots/slotmap.h"
#include "options.h"

typedef struct node_slots node_slots;

typedef enum node_slots_result {
  NODE_SLOTS_OK = 0,
  NODE_SLOTS_FAILED = 1, /* logged: etcd did not answer in time */
  NODE_SLOTS_USAGE = 2,  /* msg says why: another slot count, a group this node lacks */
} node_slots_result;

/* Reads (or creates) the map for o's groups. *out on NODE_SLOTS_OK. */
node_slots_result node_slots_start(const idem_options *o, node_slots **out, char *msg, size_t cap);

/* Whether this node leads group (the route's choice for a saga without a request id). */
typedef bool (*node_slots_leads_fn)(void *arg, size_t group);

/* The group (index into o->groups) of the slot of (tenant, id); with new_saga and id "", a
 * group leads says this node leads (else the first group). -1 when the map names a group this
 * node does not have; NODE_SLOTS_MOVING while the slot's move is in its handoff (docs/api.md §18:
 * the source refuses it, UNAVAILABLE slot-moving, until the target serves it). */
#define NODE_SLOTS_MOVING (-2)
int node_slots_route(const node_slots *s, const char *tenant, const char *id, bool new_saga,
                     node_slots_leads_fn leads, void *leads_arg);

/* Whether slot belongs to group. */
bool node_slots_owns(const node_slots *s, size_t group, uint32_t slot);

/* Follows m (taken) at once when it is newer than the map followed: a move's driver wrote it
 * to etcd. False when it cannot be followed (logged). */
bool node_slots_follow(node_slots *s, slotmap *m);

/* The map now (borrowed: valid for a minute after a newer one replaces it, and until stop). */
const slotmap *node_slots_map(const node_slots *s);

void node_slots_stop(node_slots *s);

#endif
