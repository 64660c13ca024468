/* bench_stall.c — the machine's own stalls during a timed run (bench.h, stall_probe): a thread
 * of its own sleeps STALL_PERIOD_US at a time to an absolute monotonic deadline with 1 us timer
 * slack and records how late each wake-up came. A thread that is runnable but not run (both
 * cores busy, the host taking the virtual CPU away: "steal") wakes late by that long, and so
 * would any thread of the coordinator, PostgreSQL or the load generator waiting on an answer:
 * a request's latency cannot be shorter than the stall it met. */
#include <sys/prctl.h>
#include <time.h>

#include "bench.h"

#define STALL_PERIOD_US 2000 /* 500 wake-ups a second: stalls of a few ms and more are seen */

static void *probe_main(void *arg) {
  stall_probe *p = arg;
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  struct timespec at;
  clock_gettime(CLOCK_MONOTONIC, &at);
  while (!atomic_load(&p->stop)) {
    at.tv_nsec += STALL_PERIOD_US * 1000L;
    if (at.tv_nsec >= 1000000000L) {
      at.tv_sec++;
      at.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) != 0) {
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double late_ms = (double)(now.tv_sec - at.tv_sec) * 1e3 + (double)(now.tv_nsec - at.tv_nsec) / 1e6;
    lat_add(&p->late, late_ms);
    if (late_ms * 1000 > STALL_PERIOD_US) at = now; /* a long stall: the next period from now */
  }
  return NULL;
}

bool stall_probe_start(stall_probe *p) {
  *p = (stall_probe){0};
  atomic_store(&p->stop, false);
  p->running = pthread_create(&p->th, NULL, probe_main, p) == 0;
  return p->running;
}

void stall_probe_stop(stall_probe *p) {
  if (!p->running) return;
  atomic_store(&p->stop, true);
  pthread_join(p->th, NULL);
  p->running = false;
}
