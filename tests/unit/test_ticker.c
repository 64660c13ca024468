/* test_ticker.c — util/ticker.h: the function runs each period until it says it is done, and a
 * stop ends a long pause at once. */
#include <criterion/criterion.h>
#include <stdatomic.h>

#include "testutil.h"
#include "util/clock.h"
#include "util/ticker.h"

static atomic_int calls;

static bool three_times(void *arg) {
  (void)arg;
  return atomic_fetch_add(&calls, 1) + 1 < 3;
}

Test(ticker, runs_until_the_job_is_done) {
  atomic_store(&calls, 0);
  ticker *t = ticker_start(5, three_times, NULL);
  cr_assert_not_null(t);
  H_WAIT(atomic_load(&calls) >= 3, 5000, "the job ran 3 times: %d", atomic_load(&calls));
  ticker_stop(t); /* the thread ended by itself: stop only joins it */
  cr_expect_eq(atomic_load(&calls), 3, "no call after the job said it was done");
}

static bool forever(void *arg) {
  (void)arg;
  atomic_fetch_add(&calls, 1);
  return true;
}

Test(ticker, a_stop_ends_a_long_wait_at_once) {
  atomic_store(&calls, 0);
  ticker *t = ticker_start(60000, forever, NULL);
  cr_assert_not_null(t);
  int64_t t0 = clock_mono_ms();
  ticker_stop(t);
  cr_expect_lt(clock_mono_ms() - t0, 1000, "stopped within a second, not after the period");
  cr_expect_eq(atomic_load(&calls), 0);
}
