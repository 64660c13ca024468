/* mover_map.c — the mover's small parts (mover_internal.h): groups by name, the drive's
 * pauses and the test hook. */
#include <string.h>

#include "../util/clock.h"
#include "mover_internal.h"

int mover__group(const mover *m, const char *name) {
  for (size_t i = 0; i < m->n; i++)
    if (strcmp(m->g[i].name, name) == 0) return (int)i;
  return -1;
}

bool mover__pause(mover *m, int64_t ms) {
  int64_t until = clock_mono_ms() + ms;
  struct timespec ts = clock_after_us(CLOCK_MONOTONIC, ms * 1000);
  pthread_mutex_lock(&m->mu);
  while (!atomic_load(&m->stopping) && clock_mono_ms() < until)
    if (pthread_cond_timedwait(&m->cv, &m->mu, &ts) != 0) break;
  pthread_mutex_unlock(&m->mu);
  return atomic_load(&m->stopping);
}

bool mover__hold(mover *m, slot_move_phase p) {
  if (m->hold_phase != (int)p || m->hold_ms <= 0) return false;
  return mover__pause(m, m->hold_ms);
}
