/* mover_internal.h — what mover.c (the call, the thread, the map in etcd) and
 * mover_drive.c (the phases) share. */
#ifndef IDEM_MOVE_MOVER_INTERNAL_H
#define IDEM_MOVE_MOVER_INTERNAL_H

#include <pthread.h>

#include "mover.h"

#define MOVE_RETRY_MS 1000      /* a look that left its move's work undone is repeated after this */
#define MOVE_ETCD_MS 2000       /* one etcd call */
#define MOVE_STORE_MS 15000     /* one store operation */
#define MOVE_COPY_MAX_MS 600000 /* a copy that has not caught up by then is rolled back */
#define MOVE_ERRORS_MAX_MS 20000 /* store errors for this long in a row roll a copy back */
#define MOVE_LAG_OK 4194304      /* bytes of lag small enough to start the handoff */
#define MOVE_LAG_WAIT_MS 30000   /* after the initial copy, wait this long at most for that */
#define MOVE_MARK_MAX_MS 15000   /* the mark must arrive within this, or the move rolls back */

struct mover {
  const store_move_ops *st; /* the backend's move calls */
  uint32_t max_rows_per_s;  /* a move's copy rate when its request names none (0: no limit) */
  slot_service *slots;
  mover_group g[SLOTMAP_GROUPS_MAX];
  size_t n;
  char me[64]; /* this process, as a move's driver */
  pthread_t th;
  pthread_mutex_t mu; /* stopping, cv: the drive's pauses */
  pthread_cond_t cv;
  _Atomic bool stopping;
  _Atomic int driving; /* the source group's index while a drive runs here, else -1 */
  /* MoveSlots calls kept until their move's result (mover_wait.c), answered by their own
   * thread */
  struct mover_waiter *waiters; /* under wmu */
  pthread_mutex_t wmu;
  pthread_t answerer;
  bool answering;
  /* tests only (IDEM_TEST_MOVE_HOLD=PHASE:MS, read at start): the driver holds MS in PHASE
   * (copying: once subscribed; blocked: after the source's block; switched: before the
   * clean-up), so that a test can inject a failure there */
  int hold_phase; /* -1: none */
  int64_t hold_ms;
};

/* Holds the driver when a test asked for it in phase p; true when the node is stopping. */
bool mover__hold(mover *m, slot_move_phase p);

/* Waits ms (a retry's wait, a test's hold); true when the node is stopping. */
bool mover__pause(mover *m, int64_t ms);

/* The index of the group named name, -1 when none. */
int mover__group(const mover *m, const char *name);

/* FAILED_PRECONDITION request-mismatch when the move of rq's request id (slots from..to to
 * target) is not what rq asks (mover_wait.c, as the next). */
err_code mover__same_request(const slot_move_req *rq, uint32_t from, uint32_t to,
                             const char *target, err_t *err);

/* The result kept for rq's request id (mover_wait.c): ERR_OK with *found and *out; an ended
 * move's error (ERR_ABORTED), a result of other parameters (request-mismatch) as err. */
err_code mover__result_of(mover *m, const slot_move_req *rq, bool *found, slot_move_res *out,
                          err_t *err);

/* Keeps a MoveSlots call (w) until its move's result, its deadline or the node's stop. */
err_code mover__park(mover *m, const slot_move_req *rq, int64_t deadline, bool replayed,
                     slot_move_wait *w, err_t *err);
/* Starts / ends the answering thread (the end answers every call still kept). */
bool mover__answerer_start(mover *m);
void mover__answerer_stop(mover *m);

/* Drives the move in map (at rev) one step further (see mover.h). */
void mover__drive(mover *m, const slotmap *map, int64_t rev);

#endif
