/* move_throttle.c — see move_throttle.h. */
#include "move_throttle.h"

void move_throttle_init(move_throttle *t, uint32_t max_rows_per_s, int64_t now_ms) {
  *t = (move_throttle){.max_rows_per_s = max_rows_per_s,
                       .rate = max_rows_per_s,
                       .last_ms = now_ms,
                       .changed_ms = now_ms - MOVE_THROTTLE_HOLD_MS, /* the first may pause */
                       .lag_prev = -1};
}

double move_throttle_rate(const move_throttle *t) {
  return t->max_rows_per_s ? t->rate : 0;
}

/* While running: a lag above LAG_HIGH that grew since the last running reading halves the rate
 * (down to max / FLOOR_DIV); a lag that did not grow raises it by max / FLOOR_DIV (up to max). */
static void follow_lag(move_throttle *t, int64_t lag) {
  double max = t->max_rows_per_s, floor = max / MOVE_THROTTLE_FLOOR_DIV;
  if (lag < 0) return;
  if (t->lag_prev >= 0 && lag > MOVE_THROTTLE_LAG_HIGH && lag > t->lag_prev)
    t->rate = t->rate / 2 > floor ? t->rate / 2 : floor;
  else if (t->lag_prev >= 0 && lag <= t->lag_prev)
    t->rate = t->rate + floor < max ? t->rate + floor : max;
  t->lag_prev = lag;
}

static bool set(move_throttle *t, int64_t now_ms, bool paused) {
  if (paused != t->paused) {
    t->paused = paused;
    t->changed_ms = now_ms;
    t->lag_prev = -1; /* a lag read across a pause says nothing about the apply's pace */
  }
  return paused;
}

bool move_throttle_step(move_throttle *t, int64_t now_ms, uint64_t rows, int64_t lag, bool synced) {
  int64_t dt = now_ms > t->last_ms ? now_ms - t->last_ms : 0;
  if (t->paused) t->paused_total_ms += dt;
  t->last_ms = now_ms;
  if (!t->max_rows_per_s || synced) return set(t, now_ms, false);
  if (!t->paused) follow_lag(t, lag);
  double copied = (double)rows;
  t->allowed += t->rate * (double)dt / 1000.0;
  double cap = copied + t->rate * MOVE_THROTTLE_BURST_MS / 1000.0;
  if (t->allowed > cap) t->allowed = cap; /* no saving up while the copy is idle */
  if (now_ms - t->changed_ms < MOVE_THROTTLE_HOLD_MS) return t->paused;
  return set(t, now_ms, copied > t->allowed);
}
