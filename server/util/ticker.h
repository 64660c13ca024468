/* ticker.h — a background thread that calls one function every period until told to stop or
 * the function says it is done: the node's small periodic jobs (balancing groups, watching the
 * slot map, giving old rows their slot) share it instead of each keeping a thread, a mutex and
 * a condition variable of its own.
 */
#ifndef IDEM_TICKER_H
#define IDEM_TICKER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ticker ticker;

/* What runs each period; false ends the thread (the job is done). */
typedef bool (*ticker_fn)(void *arg);

/* Starts the thread: fn(arg) after every_ms, then again every_ms after each call returns. NULL
 * when it cannot start. */
ticker *ticker_start(int64_t every_ms, ticker_fn fn, void *arg);

/* Waits up to ms on t's stop (for a job that pauses inside fn); true when stopped. */
bool ticker_pause(ticker *t, int64_t ms);

/* Stops the thread (a call in progress finishes first), joins it and frees t. NULL is fine. */
void ticker_stop(ticker *t);

#endif
