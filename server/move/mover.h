/* mover.h — moving slots between groups (docs/api.md §18): Admin.MoveSlots, and the driver
 * that runs a move on the leader of its source group, finishes or rolls back one cut short.
 *
 * The move's record is in the slot map (slotmove.h), so each phase is one compare-and-swap of
 * the map in etcd. A thread on every node looks at the map when the slot map service (its etcd
 * watch) sees a change, or when this node begins leading a group; on the node that leads the
 * move's source group it drives the move:
 *   planned       it takes the move (copying) and runs it to its end in one go: publication,
 *                 subscription, catch-up, then the handoff: blocked (this node refuses those
 *                 slots; the source store refuses writes to them, fenced by the group's epoch),
 *                 the move's mark replicated, the subscription dropped, the target's store
 *                 opened to them, switched (the commit point: the map gives the range to the
 *                 target), the source's rows deleted, the result kept at <prefix>/moves/<rid>;
 *   copying       found, not being run here (its driver died or lost the source group, or this
 *                 node's drive stopped after an etcd call that failed): resumed from where the
 *                 subscription stands, by this node as its driver; rolled back only when either
 *                 store failed over since the copy began (the record keeps their servers) or the
 *                 target or its replication cannot be set up again;
 *   blocked       found, not being run here: cut short; rolled back, with why in the record's
 *                 note;
 *   switched      finished; rolling_back  rolled back (both idempotent, repeated until done).
 * A failover of either store's PostgreSQL (another system identifier or timeline), a lost
 * replication slot, or a copy that does not catch up rolls the move back.
 */
#ifndef IDEM_MOVE_MOVER_H
#define IDEM_MOVE_MOVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../elect/elect.h"
#include "../slots/slotmove.h"
#include "../store/store.h"
#include "../util/err.h"
#include "../slots/slot_service.h"

typedef struct mover mover;

/* A store group as the mover sees it (borrowed: must outlive the mover). */
typedef struct mover_group {
  const char *name, *conninfo;
  elect *el;
  _Atomic uint64_t *epoch; /* the group's fencing epoch while this node leads it */
} mover_group;

typedef struct mover_cfg {
  const char *node_id;         /* this process, in the record of a move it drives (NULL: node) */
  uint32_t max_rows_per_s;     /* a move's copy rate when its request names none (0: no limit) */
  const store_move_ops *store; /* the store backend's move calls (store.h) */
} mover_cfg;

/* Starts the driver thread over n groups (two or more, at most SLOTMAP_GROUPS_MAX; else NULL,
 * and MoveSlots is refused). The caller starts it only with etcd: the move's record lives in
 * the slot map there. */
mover *mover_start(const mover_cfg *cfg, slot_service *slots, const mover_group *g, size_t n);

/* Admin.MoveSlots: checks the request, writes the move (planned) and waits for its result until
 * deadline (absolute, monotonic ms). A request_id already used answers that move's result
 * (replayed) when rq asks the same slots and target group, else FAILED_PRECONDITION
 * request-mismatch (nothing is moved). With w, the call does not wait on the calling thread:
 * when the move goes on it is kept (ERR_OK with *parked, nothing in out) and answered later
 * through w->done, once (mover_wait.c); without, it waits here. */
err_code mover_request(mover *m, const slot_move_req *rq, int64_t deadline, slot_move_res *out,
                       err_t *err, slot_move_wait *w, bool *parked);

/* The caller of the call kept as id went away: it is answered now (ABORTED); its move goes on.
 * Nothing when it was answered already. */
void mover_cancel(mover *m, uint64_t id);

/* The index of the group this node is driving a move out of now, -1 when none (the balancer
 * keeps that group: yielding it would roll the move back). NULL reads -1. */
int mover_driving(mover *m);

void mover_stop(mover *m);

#endif
