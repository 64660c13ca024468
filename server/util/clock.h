/* clock.h — the two clocks. Wall time (Unix ms) is what records carry; the monotonic clock
 * is what deadlines and timeouts use, so a wall-clock jump never stretches or cuts a wait. */
#ifndef IDEM_CLOCK_H
#define IDEM_CLOCK_H

#include <stdint.h>

int64_t clock_wall_ms(void); /* CLOCK_REALTIME, milliseconds since the Unix epoch */
int64_t clock_mono_ms(void); /* CLOCK_MONOTONIC, milliseconds; only differences mean anything */
int64_t clock_mono_us(void); /* the same clock in microseconds */

#endif
