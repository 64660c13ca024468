/* slotmap.h — the slot map of a cluster (docs/api.md §17): which store group serves each slot.
 *
 * Stored in etcd at <election prefix>/slotmap as JSON
 *   {"version":N,"slots":S,"ranges":[{"from":0,"to":127,"group":"g1"},…]}
 * whose ranges cover 0..S-1 exactly once, in order. At a cluster's first start the map is
 * slotmap_equal: equal contiguous ranges in the order the groups are named. A range that is
 * being moved (§18) carries "moving":true and "to_group", and the map the move's record
 * ("move", slotmove.h): one key holds both, so one compare-and-swap changes them together.
 *
 * Pure data: no etcd, no threads. A slotmap is immutable once built; readers share it.
 */
#ifndef IDEM_SLOTS_SLOTMAP_H
#define IDEM_SLOTS_SLOTMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SLOTMAP_GROUPS_MAX 64
#define SLOTMAP_NAME_MAX 64 /* a group name: the tenant rule, at most 63 bytes */

typedef struct slot_range {
  uint32_t from, to; /* inclusive */
  char group[SLOTMAP_NAME_MAX];
  bool moving;
  char to_group[SLOTMAP_NAME_MAX];
} slot_range;

struct slot_move; /* slotmove.h: a move under way (docs/api.md §18), kept in the map */

typedef struct slotmap {
  uint64_t version;
  uint32_t slots;
  size_t n_ranges;
  slot_range *ranges;
  struct slot_move *move; /* NULL when no move is under way ("move" in the JSON) */
} slotmap;

/* Whether name is a usable group name (the tenant rule: 1..63 bytes of [A-Za-z0-9._-]);
 * false with why filled. */
bool slotmap_name_ok(const char *name, char *why, size_t cap);

/* The first map of a cluster: version 1, slots split into n equal contiguous ranges (the first
 * slots % n ranges one longer), in the order of names. NULL on allocation failure or when n is
 * 0 or more than slots. */
slotmap *slotmap_equal(uint32_t slots, const char *const *names, size_t n);

/* Parses and checks the JSON form: NULL with why filled ("ranges: slot 12 is covered twice")
 * when it is not a map covering 0..slots-1 exactly once. */
slotmap *slotmap_parse(const char *json, size_t len, char *why, size_t cap);

/* The JSON form (malloc'd, NUL-terminated); NULL on allocation failure. */
char *slotmap_json(const slotmap *m);

/* The range holding slot (NULL when slot >= m->slots). */
const slot_range *slotmap_range_of(const slotmap *m, uint32_t slot);

/* How many slots name serves. */
uint32_t slotmap_count(const slotmap *m, const char *name);

/* A deep copy (NULL on allocation failure). */
slotmap *slotmap_copy(const slotmap *m);

void slotmap_free(slotmap *m);

#endif
