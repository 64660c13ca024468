/* slotfill.h — gives rows written before slot groups their slot (docs/api.md §17), in the
 * background: batches of each group's store (store.h slots_fill) until none is left, so that a
 * large store upgrades without holding up the start. New rows get their slot from the writer.
 */
#ifndef IDEM_MOVE_SLOTFILL_H
#define IDEM_MOVE_SLOTFILL_H

#include <stddef.h>
#include <stdint.h>

#include "../slots/slotmap.h"
#include "../store/store.h"

typedef struct slotfill slotfill;

/* A store group to fill (strings borrowed: they must outlive the thread). */
typedef struct slotfill_group {
  const char *name, *conninfo;
} slotfill_group;

/* Starts the thread over n groups (at most SLOTMAP_GROUPS_MAX; copied) of a cluster of slots
 * slots, through the backend db. NULL when it cannot start (logged; the rows keep no slot until
 * a later start). */
slotfill *slotfill_start(const store_backend *db, uint32_t slots, const slotfill_group *g,
                         size_t n);

/* Stops the thread (a batch in flight ends first). NULL is fine. */
void slotfill_stop(slotfill *f);

#endif
