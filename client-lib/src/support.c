/* support.c — what every file of libidem uses and that needs nothing of it: errors
 * (idem__fail), the monotonic clock, sleeping and full-jitter backoff. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "idem_internal.h"

/* --- errors ------------------------------------------------------------------------------ */

void idem__err_reset(idem_error *err) {
  if (err) memset(err, 0, sizeof *err);
}

int idem__fail(idem_error *err, int code, const char *fmt, ...) {
  if (err) {
    memset(err, 0, sizeof *err);
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* --- clock, sleep, randomness ------------------------------------------------------------ */

int64_t idem__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void idem__sleep_ms(int64_t ms) {
  if (ms <= 0) return;
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* splitmix64 on a per-thread state seeded from getrandom(); no locks, no shared state. */
static _Thread_local uint64_t rng_state;
static _Thread_local int rng_seeded;

static uint64_t rand_u64(void) {
  if (!rng_seeded) {
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)(uintptr_t)&seed;
    }
    rng_state = seed;
    rng_seeded = 1;
  }
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int64_t idem__rand_upto(int64_t bound) {
  if (bound <= 0) return 0;
  return (int64_t)(rand_u64() % ((uint64_t)bound + 1));
}

int64_t idem__backoff_ms(int64_t base_ms, int64_t max_ms, int n) {
  int64_t cap = base_ms;
  for (int i = 0; i < n && cap < max_ms; i++) cap *= 2;
  if (cap > max_ms) cap = max_ms;
  return idem__rand_upto(cap);
}
