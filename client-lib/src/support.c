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

/* The calling thread's last coordinator error (code, reason, message) and its detail and hint:
 * idem_error_detail finds them for that error or a copy of it. */
static _Thread_local struct {
  int code;
  char reason[sizeof((idem_error *)0)->reason];
  char message[sizeof((idem_error *)0)->message];
  char detail[IDEM__NOTE_MAX], hint[IDEM__NOTE_MAX];
} tl_notes;

void idem__err_notes(const idem_error *err, const char *detail, const char *hint) {
  tl_notes.code = err->code;
  memcpy(tl_notes.reason, err->reason, sizeof tl_notes.reason);
  memcpy(tl_notes.message, err->message, sizeof tl_notes.message);
  snprintf(tl_notes.detail, sizeof tl_notes.detail, "%s", detail ? detail : "");
  snprintf(tl_notes.hint, sizeof tl_notes.hint, "%s", hint ? hint : "");
}

/* Whether err is the thread's last coordinator error (or a copy of it): a coordinator's
 * answers carry a reason, the library's own errors none. */
static bool notes_of(const idem_error *err) {
  return err && err->code != IDEM_OK && err->reason[0] && err->code == tl_notes.code &&
         strncmp(err->reason, tl_notes.reason, sizeof tl_notes.reason) == 0 &&
         strncmp(err->message, tl_notes.message, sizeof tl_notes.message) == 0;
}

const char *idem_error_detail(const idem_error *err) {
  return notes_of(err) ? tl_notes.detail : "";
}

const char *idem_error_hint(const idem_error *err) {
  return notes_of(err) ? tl_notes.hint : "";
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
