/* node_slotfill.h — gives rows written before slot groups their slot (docs/api.md §17), in the
 * background: batches of each group's store (store_pg_slots_fill) until none is left, so that a
 * large store upgrades without holding up the start. New rows get their slot from the writer.
 */
#ifndef IDEM_NODE_SLOTFILL_H
#define IDEM_NODE_SLOTFILL_H

#include <stddef.h>
#include <stdint.h>

#include "options.h"

typedef struct node_slotfill node_slotfill;

/* Starts the thread over o's groups (o borrowed: must outlive it). NULL when it cannot start
 * (logged; the rows keep no slot until a later start). */
node_slotfill *node_slotfill_start(const idem_options *o);

/* Stops the thread (a batch in flight ends first). NULL is fine. */
void node_slotfill_stop(node_slotfill *f);

#endif
