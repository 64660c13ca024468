/* coord_wait.h — BeginStep calls parked on a step in progress (docs/api.md §12, wait_ms).
 *
 * Where BeginStep would answer ABORTED because the step (or a compensation's forward) is
 * IN_PROGRESS under a running lease, a call with wait_ms > 0 is parked here instead of being
 * answered: no thread and no store connection is held for it, only its small record in this
 * table. It is taken out again, exactly once, by whichever comes first:
 *   - a committed write to its step pair (coord_waiters_changed, the store's commit hook): the
 *     call runs BeginStep again through the normal path, and is parked again if that answers
 *     "in progress" once more (another caller took the step over);
 *   - its lease's end (the table's timer): the same, so that exactly one waiter takes over;
 *   - the end of its wait (wait_ms, or just before the call's deadline): answered ABORTED as
 *     without waiting (counted by metrics_wait_timed_out);
 *   - this node no longer leading (cfg.leading): answered UNAVAILABLE "not the leader" with the
 *     leader's address;
 *   - coord_waiters_close (shutdown): answered UNAVAILABLE "server stopping";
 *   - its caller going away (coord_waiters_cancel, through the call's coord_wait_cell): answered
 *     ABORTED "cancelled by the caller" at once, its place freed for the next call.
 * A call whose twin (same key, phase and fingerprint) is parked joins it without asking the
 * store (coord__wait_join): the store's answer could only be the twin's.
 * A write that commits while a call's BeginStep is on its way to the store is not lost: each
 * evaluation notes a change counter of the pair (coord__wait_mark) before it is submitted, and a
 * call whose counter moved since is run again instead of being parked.
 *
 * At most cfg.max_waiters calls wait at once (from their first park until answered); the next
 * one is answered ABORTED at once. The timer and the re-runs are serviced by one thread
 * (coord_waiters_start), or by the caller of coord_waiters_poll (tests).
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef IDEM_COORD_WAIT_H
#define IDEM_COORD_WAIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../domain/record.h"
#include "../util/err.h"

#define COORD_WAITERS_DEFAULT 10000

typedef struct coord_waiters coord_waiters;

typedef struct coord_waiters_cfg {
  size_t max_waiters; /* 0 = COORD_WAITERS_DEFAULT */
  /* Whether this node leads (NULL: always). When it does not, fills leader (the leader's
   * address, "" unknown) and returns false: every parked call is then answered UNAVAILABLE. */
  bool (*leading)(void *arg, char *leader, size_t cap);
  void *leading_arg;
} coord_waiters_cfg;

/* NULL on allocation failure. Nothing runs until coord_waiters_start (or polls). */
coord_waiters *coord_waiters_new(const coord_waiters_cfg *cfg);

/* Starts the table's thread (timers, re-runs, the leadership check). */
err_code coord_waiters_start(coord_waiters *w, err_t *err);

/* The store's commit hook: a step transaction that wrote to key's pair (tenant, global_id,
 * service, operation; the phase is ignored) has committed. Cheap: never blocks on anything but
 * the table's mutex. */
void coord_waiters_changed(coord_waiters *w, const step_key *key);

/* Does what is due at now_ms (monotonic): re-runs woken calls, answers the timed-out ones,
 * checks leadership. Returns when the next timer is due (INT64_MAX: none). For a table without
 * a thread (tests); callbacks run on the caller's thread. */
int64_t coord_waiters_poll(coord_waiters *w, int64_t now_ms);

/* Stops the thread, answers every parked call UNAVAILABLE "server stopping", and answers any
 * call that tries to park from now on the same way. Idempotent. */
void coord_waiters_close(coord_waiters *w);

/* Frees a closed table (closes it first if needed). No call may still be waiting: the store
 * that runs re-evaluations must have stopped. NULL is fine. */
void coord_waiters_free(coord_waiters *w);

/* Calls waiting now (parked, or being run again between parks). */
size_t coord_waiters_count(coord_waiters *w);

typedef struct coord__waiter coord__waiter;

/* The link between a call that may wait and its caller's cancellation: the rpc layer keeps one,
 * zeroed, in each such call and hands it to coord_begin_step_wait_async; it must stay valid
 * until the call is answered and coord_waiters_cancel (if called) has returned. The table
 * touches it only under its mutex. */
typedef struct coord_wait_cell {
  coord__waiter *wt; /* internal: the waiting call, while it waits */
  bool cancelled;    /* internal: coord_waiters_cancel ran */
} coord_wait_cell;

/* The caller of the call linked to cell went away. A parked call is taken out of the table and
 * answered ABORTED "cancelled by the caller" at once, on this thread, which frees its place; a
 * call being run again (woken, or its BeginStep on its way to the store) is answered with its
 * store's answer, or so at its next park instead of parking. Exactly once, whatever it races
 * with (a commit waking it, its timer, leadership, close); nothing happens for a call already
 * answered or never linked. */
void coord_waiters_cancel(coord_waiters *w, coord_wait_cell *cell);

/* --- internal to coord/: the parked call --- */

struct coord__waiter {
  coord__waiter *prev, *next; /* in a bucket, or in the ready list */
  size_t heap_i;              /* in the timer heap while parked */
  int where;                  /* internal: none, parked, ready */
  bool counted;               /* holds one of the max_waiters places */
  uint32_t slot;              /* the pair's change counter */
  uint64_t seen;              /* its value when the last evaluation was submitted */
  const step_key *key;        /* with its phase */
  const uint8_t *fp;          /* the call's fingerprint (borrowed) */
  size_t fp_len;
  int64_t give_up_ms;   /* monotonic: the end of the wait */
  int64_t lease_end_ms; /* monotonic: when the lease waited on ends (as last seen) */
  int64_t wake_ms;      /* monotonic: the next timer (lease end or give_up_ms) */
  coord_wait_cell *cell; /* the caller's cancellation (NULL: none), under the table's mutex */
  /* Runs BeginStep again (on the table's thread or the poller's). */
  void (*retry)(coord__waiter *wt);
  /* Answers the call with rc / err (never ERR_OK); wt is not touched by the table after it. */
  void (*give_up)(coord__waiter *wt, err_code rc, err_t *err);
};

/* Notes the pair's change counter before an evaluation is submitted. */
void coord__wait_mark(coord_waiters *w, coord__waiter *wt);

typedef enum coord__park {
  COORD_PARKED,  /* the table owns wt now (it may already be queued to run again) */
  COORD_FULL,    /* max_waiters reached: answer the ABORTED */
  COORD_REFUSED, /* not leading, closed, or its caller went away: answer *err */
  COORD_NO_TWIN, /* coord__wait_join: nothing known, evaluate it */
} coord__park;

/* A call about to be evaluated joins the wait without a store round trip when a call of the
 * same key, phase and fingerprint is parked: nothing has been committed to the pair since that
 * one was evaluated (it would have been woken) and its lease has not ended, so the store would
 * answer "in progress" again. COORD_PARKED: the table owns wt; COORD_FULL: answer *err (ABORTED,
 * in progress, with retry_after_ms); COORD_REFUSED: answer *err; COORD_NO_TWIN: evaluate. */
coord__park coord__wait_join(coord_waiters *w, coord__waiter *wt, int64_t now_ms, err_t *err);

/* Parks wt, whose evaluation answered "in progress" with retry_after_ms left on the lease, at
 * monotonic time now_ms. wt->give_up_ms must be set and later than now_ms. */
coord__park coord__wait_park(coord_waiters *w, coord__waiter *wt, int64_t retry_after_ms,
                             int64_t now_ms, err_t *err);

/* Links wt to its caller's cancellation (cell may be NULL) before its first evaluation. False
 * when the caller went away already: answer it without waiting. */
bool coord__wait_link(coord_waiters *w, coord__waiter *wt, coord_wait_cell *cell);

/* A waiting call is answered (by its owner, after a re-run): gives back its place and unlinks
 * it from its cell. */
void coord__wait_done(coord_waiters *w, coord__waiter *wt);

#endif
