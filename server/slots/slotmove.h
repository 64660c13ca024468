/* slotmove.h — a move of slots between groups (docs/api.md §18) as data: its record, kept in the
 * slot map ("move" in the map's JSON, so that one compare-and-swap in etcd changes the ranges
 * and the record together), the checks of a request against a map, and the maps of each phase.
 *
 * Phases, in order (each one a new map version):
 *   planned      the record is written (Admin.MoveSlots); the range is marked moving
 *   copying      the source group's leader drives it: publication, subscription, catch-up
 *   blocked      the source refuses those slots while the last changes drain to the target
 *   switched     the range belongs to the target (the commit point); source rows are deleted
 * and rolling_back (anything before switched, undone). The record leaves the map when the move
 * ends (finished or rolled back); its result is kept elsewhere for a repeated request_id.
 * Pure data: no etcd, no store.
 */
#ifndef IDEM_SLOTS_SLOTMOVE_H
#define IDEM_SLOTS_SLOTMOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "slotmap.h"
#include "slotmove_record.h"

/* Admin.MoveSlots's request and answer (docs/api.md §18), free of the wire's types. */
typedef struct slot_move_req {
  uint32_t from, to;
  const char *group, *request_id;
  bool dry_run;
  uint32_t max_rows_per_s; /* the copy's throttle; 0 = the server's --move-max-rate */
} slot_move_req;

typedef struct slot_move_res {
  uint64_t version, steps_moved, sagas_moved;
  int64_t paused_ms;
  bool replayed;
} slot_move_res;

/* A MoveSlots call that does not wait on its own thread (docs/api.md §18): when its move goes
 * on, the mover keeps the call and answers it later with done (from the mover's answering
 * thread, or the thread that cancels it), exactly once; id names it for a cancel (unique among
 * the calls kept at once). */
typedef struct slot_move_wait {
  void (*done)(void *call, err_code code, const slot_move_res *res, err_t *err);
  void *call;
  uint64_t id;
} slot_move_wait;

typedef enum slot_move_check_result {
  MOVE_CHECK_OK,
  MOVE_CHECK_INVALID, /* why names the field: from, to, group */
  MOVE_CHECK_BUSY,    /* another move is under way */
} slot_move_check_result;

/* Checks moving slots from..to to group target in m: in range, all in one group (its name into
 * source), target another group that is_group knows. */
slot_move_check_result slotmap_move_check(const slotmap *m, uint32_t from, uint32_t to,
                                          const char *target,
                                          bool (*is_group)(void *arg, const char *name),
                                          void *arg, char *source, char *why, size_t cap);

/* The next map (version + 1), or NULL on allocation failure:
 *  begin   the range from..to split out and marked moving to mv->target; the record mv
 *  phase   the record replaced by mv (ranges unchanged)
 *  switch  the range now the target's, not moving; the record mv
 *  end     no range moving, neighbours of one group merged, no record */
slotmap *slotmap_move_begin(const slotmap *m, const slot_move *mv);
slotmap *slotmap_move_phase(const slotmap *m, const slot_move *mv);
slotmap *slotmap_move_switch(const slotmap *m, const slot_move *mv);
slotmap *slotmap_move_end(const slotmap *m);

#endif
