/* node_slotfill.c — see node_slotfill.h. */
#include "node_slotfill.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "../store/store_pg.h"
#include "../util/clock.h"
#include "../util/log.h"

#define FILL_BATCH 2000
#define FILL_CALL_MS 10000
#define FILL_PAUSE_MS 20   /* between batches: leave the store to the calls */
#define FILL_RETRY_MS 1000 /* after a failed batch */

struct node_slotfill {
  const idem_options *o;
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
};

/* Waits ms or until stopped; true when stopped. */
static bool pause_ms(node_slotfill *f, int64_t ms) {
  struct timespec ts = clock_after_us(CLOCK_MONOTONIC, ms * 1000);
  pthread_mutex_lock(&f->mu);
  if (!f->stop) pthread_cond_timedwait(&f->cv, &f->mu, &ts);
  bool stop = f->stop;
  pthread_mutex_unlock(&f->mu);
  return stop;
}

static void *fill_main(void *arg) {
  node_slotfill *f = arg;
  const idem_options *o = f->o;
  for (size_t g = 0; g < o->n_groups; g++) {
    long total = 0;
    for (;;) {
      long n = 0;
      err_t err;
      err_clear(&err);
      if (store_pg_slots_fill(o->groups[g].conninfo, (uint32_t)o->slots, FILL_BATCH,
                              clock_mono_ms() + FILL_CALL_MS, &n, &err) != ERR_OK) {
        if (pause_ms(f, FILL_RETRY_MS)) return NULL;
        continue;
      }
      total += n;
      if (n == 0) break;
      if (pause_ms(f, FILL_PAUSE_MS)) return NULL;
    }
    if (total > 0) {
      char num[24];
      snprintf(num, sizeof num, "%ld", total);
      log_kv(LOG_INFO, "gave rows written before slot groups their slot", "group",
             o->groups[g].name, "rows", num, (const char *)NULL);
    }
  }
  return NULL;
}

node_slotfill *node_slotfill_start(const idem_options *o) {
  node_slotfill *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->o = o;
  pthread_mutex_init(&f->mu, NULL);
  clock_cond_init(&f->cv);
  if (pthread_create(&f->th, NULL, fill_main, f) != 0) {
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
    log_kv(LOG_ERROR, "cannot start giving old rows their slot", (const char *)NULL);
    return NULL;
  }
  return f;
}

void node_slotfill_stop(node_slotfill *f) {
  if (!f) return;
  pthread_mutex_lock(&f->mu);
  f->stop = true;
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
  pthread_join(f->th, NULL);
  pthread_cond_destroy(&f->cv);
  pthread_mutex_destroy(&f->mu);
  free(f);
}
