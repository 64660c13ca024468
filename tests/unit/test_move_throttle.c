/* test_move_throttle.c — the move's throttle (slots/move_throttle.h): a budget of rows per second
 * over the initial copy, paid for by pauses; a growing apply lag lowers it; a synced copy and
 * a throttle of 0 never pause; no state flaps faster than the hold. */
#include <criterion/criterion.h>

#include "slots/move_throttle.h"

static uint64_t one_burst(int64_t t) { /* a table's COPY: 5,000 rows at once at 200 ms */
  return t >= 200 ? 5000 : 0;
}

Test(move_throttle, no_limit_never_pauses) {
  move_throttle t;
  move_throttle_init(&t, 0, 1);
  for (int64_t now = 1; now < 10000; now += 200)
    cr_assert_not(move_throttle_step(&t, now, (uint64_t)now * 100, 1 << 30, false));
  cr_assert_eq(move_throttle_rate(&t), 0);
}

Test(move_throttle, a_burst_is_paid_for_by_a_pause_that_keeps_the_average) {
  move_throttle t;
  move_throttle_init(&t, 1000, 1);
  int64_t paused_at = -1, resumed_at = -1;
  for (int64_t now = 1; now <= 8001; now += 200) {
    bool p = move_throttle_step(&t, now, one_burst(now), 0, false);
    if (p && paused_at < 0) paused_at = now;
    if (!p && paused_at >= 0 && resumed_at < 0) resumed_at = now;
  }
  /* paused at the first reading past the budget, until 5,000 rows at 1,000/s are earned */
  cr_assert_eq(paused_at, 201, "paused at %lld", (long long)paused_at);
  cr_assert(resumed_at >= 5001 && resumed_at <= 5201, "resumed at %lld", (long long)resumed_at);
  cr_assert(t.paused_total_ms >= 4600 && t.paused_total_ms <= 5000, "paused %lld ms",
            (long long)t.paused_total_ms);
}

Test(move_throttle, a_copy_within_its_budget_runs_throughout) {
  move_throttle t;
  move_throttle_init(&t, 1000, 1);
  for (int64_t now = 1; now <= 10001; now += 200) /* 900 rows/s */
    cr_assert_not(move_throttle_step(&t, now, (uint64_t)(now - 1) * 9 / 10, 0, false), "at %lld",
                  (long long)now);
}

Test(move_throttle, a_synced_copy_is_never_paused) {
  move_throttle t;
  move_throttle_init(&t, 10, 1);
  for (int64_t now = 1; now <= 5001; now += 200)
    cr_assert_not(move_throttle_step(&t, now, (uint64_t)now * 1000, 0, true));
}

Test(move_throttle, no_state_is_kept_shorter_than_the_hold_and_the_average_holds) {
  move_throttle t;
  move_throttle_init(&t, 100, 1);
  bool last = false;
  int64_t changed = 1 - MOVE_THROTTLE_HOLD_MS; /* the first pause may come at once */
  uint64_t rows = 0;
  for (int64_t now = 1; now <= 30001; now += 200) {
    bool p = move_throttle_step(&t, now, rows, 0, false);
    if (!p) rows += 200; /* 1,000 rows/s while it runs */
    if (p != last) {
      cr_assert(now - changed >= MOVE_THROTTLE_HOLD_MS, "flapped after %lld ms",
                (long long)(now - changed));
      changed = now;
      last = p;
    }
  }
  /* the budget (100 rows/s), give or take one hold's worth of the offered rate */
  cr_assert(rows >= 2000 && rows <= 3000 + 1000, "%llu rows in 30 s", (unsigned long long)rows);
  cr_assert(t.paused_total_ms > 20000, "paused only %lld ms", (long long)t.paused_total_ms);
}

Test(move_throttle, a_growing_lag_lowers_the_rate_to_its_floor_and_a_steady_one_restores_it) {
  move_throttle t;
  move_throttle_init(&t, 800, 1);
  int64_t now = 1, lag = 2 * MOVE_THROTTLE_LAG_HIGH;
  move_throttle_step(&t, now, 0, lag, false);
  for (int i = 0; i < 10; i++) { /* growing above the threshold while running */
    now += 200;
    lag += 100000;
    move_throttle_step(&t, now, 0, lag, false);
  }
  cr_assert_float_eq(move_throttle_rate(&t), 100.0, 0.001, "rate %f", move_throttle_rate(&t));
  for (int i = 0; i < 3; i++) { /* shrinking */
    now += 200;
    lag -= 100000;
    move_throttle_step(&t, now, 0, lag, false);
  }
  cr_assert_float_eq(move_throttle_rate(&t), 400.0, 0.001, "rate %f", move_throttle_rate(&t));
  for (int i = 0; i < 20; i++) {
    now += 200;
    move_throttle_step(&t, now, 0, lag, false);
  }
  cr_assert_float_eq(move_throttle_rate(&t), 800.0, 0.001);
}

Test(move_throttle, a_small_lag_does_not_slow_the_copy) {
  move_throttle t;
  move_throttle_init(&t, 800, 1);
  int64_t lag = 1000;
  for (int64_t now = 1; now <= 3001; now += 200, lag += 1000)
    move_throttle_step(&t, now, 0, lag, false);
  cr_assert_float_eq(move_throttle_rate(&t), 800.0, 0.001);
}
