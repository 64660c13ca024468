/* clock.h — the two clocks. Wall time (Unix ms) is what records carry; the monotonic clock
 * is what deadlines and timeouts use, so a wall-clock jump never stretches or cuts a wait. */
#ifndef IDEM_CLOCK_H
#define IDEM_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

int64_t clock_wall_ms(void); /* CLOCK_REALTIME, milliseconds since the Unix epoch */
int64_t clock_mono_ms(void); /* CLOCK_MONOTONIC, milliseconds; only differences mean anything */
int64_t clock_mono_us(void); /* the same clock in microseconds */

/* The one deadline helper: the absolute time us microseconds from now on clock id (CLOCK_MONOTONIC
 * for condition variables set up with it, CLOCK_REALTIME for the others), normalized, as
 * pthread_cond_timedwait wants it. us <= 0: now. */
struct timespec clock_after_us(clockid_t id, int64_t us);

/* Initializes *cv as a condition variable whose timed waits use CLOCK_MONOTONIC (deadlines from
 * clock_after_us(CLOCK_MONOTONIC, ...)), so a wall-clock jump never stretches or cuts a wait.
 * Returns 0 or an errno (from pthread_condattr_init / _setclock / pthread_cond_init); on an error
 * *cv is not initialized. Destroy it with pthread_cond_destroy. */
int clock_cond_init(pthread_cond_t *cv);

/* A span of ms milliseconds as a relative timespec (sigtimedwait, nanosleep). */
struct timespec clock_span_timespec(int64_t ms);

#endif
