/* move_throttle.h — how fast a move's copy may go (docs/api.md §18, docs/scaling-out.md "The
 * throttle"): a budget of rows per second over the copy, as CockroachDB's
 * kv.snapshot_rebalance.max_rate bounds a snapshot, lowered while the target's apply lag grows and
 * raised again while it does not, as Vitess pauses VReplication on lag.
 *
 * The copy is PostgreSQL's own subscription, which has no rate of its own: the driver feeds each
 * progress reading in and pauses or runs the subscription as the answer says (duty cycling;
 * ALTER SUBSCRIPTION … DISABLE / ENABLE). Only the initial copy is paced: once every table is
 * synced, the stream must keep pace with the source's own writes (pausing it would only move that
 * work into the handoff's drain), so the answer is always "run".
 *
 * Pure rules: no clock, no store; times and readings are the caller's. Not thread-safe (one per
 * drive). */
#ifndef IDEM_SLOTS_MOVE_THROTTLE_H
#define IDEM_SLOTS_MOVE_THROTTLE_H

#include <stdbool.h>
#include <stdint.h>

#define MOVE_MAX_RATE_DEFAULT 2000     /* --move-max-rate's default, rows/s (BENCHMARKS.md) */
#define MOVE_THROTTLE_HOLD_MS 1000      /* a pause or a run lasts at least this */
#define MOVE_THROTTLE_BURST_MS 1000     /* credit saved up is at most this much of the rate */
#define MOVE_THROTTLE_LAG_HIGH 1048576  /* bytes of lag above which a growing lag slows the copy */
#define MOVE_THROTTLE_FLOOR_DIV 8       /* the lag never lowers the rate below max / this */

typedef struct move_throttle {
  uint32_t max_rows_per_s; /* 0: no limit (never pauses) */
  double rate;             /* the budget now: max_rows_per_s, lowered by lag */
  double allowed;          /* rows the budget allows since the first reading */
  int64_t last_ms;         /* the last reading's time (at first, the start) */
  int64_t changed_ms;      /* when paused last changed */
  int64_t lag_prev;        /* the last lag read while running (-1: none) */
  bool paused;
  int64_t paused_total_ms; /* time spent paused, for the copy's own time limit */
} move_throttle;

/* Starts a throttle of max_rows_per_s (0 = no limit), running, at now_ms (monotonic): when the
 * subscription was made, the target holding none of the moving slots' rows yet. */
void move_throttle_init(move_throttle *t, uint32_t max_rows_per_s, int64_t now_ms);

/* One progress reading at now_ms (monotonic): rows the target holds of the moving slots, lag
 * bytes of the source's WAL it has not confirmed (-1: not known yet), and whether every table's
 * initial copy is done. Answers whether the subscription should be paused from now on (true) or
 * run (false). A pause or a run after one is kept at least MOVE_THROTTLE_HOLD_MS (each run
 * restarts PostgreSQL's workers), so the copy always progresses, and rows in one burst (a table's COPY) are paid for
 * by a longer pause after it. */
bool move_throttle_step(move_throttle *t, int64_t now_ms, uint64_t rows, int64_t lag, bool synced);

/* The rows per second the budget allows now (0: no limit). */
double move_throttle_rate(const move_throttle *t);

#endif
