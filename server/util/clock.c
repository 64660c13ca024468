/* clock.c — the wall and monotonic clocks in ms, deadlines, monotonic condition variables (clock.h). */
#include "clock.h"

#include <pthread.h>
#include <time.h>

static int64_t ms_of(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_wall_ms(void) { return ms_of(CLOCK_REALTIME); }
int64_t clock_mono_ms(void) { return ms_of(CLOCK_MONOTONIC); }

int64_t clock_mono_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct timespec clock_after_us(clockid_t id, int64_t us) {
  struct timespec ts;
  clock_gettime(id, &ts);
  if (us <= 0) return ts;
  ts.tv_sec += (time_t)(us / 1000000);
  ts.tv_nsec += (long)(us % 1000000) * 1000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

struct timespec clock_span_timespec(int64_t ms) {
  if (ms < 0) ms = 0;
  return (struct timespec){.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
}

int clock_cond_init(pthread_cond_t *cv) {
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (rc != 0) return rc;
  rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (rc == 0) rc = pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
  return rc;
}
