/* keeper.c — the step helper's lease keeper: while an action runs, a thread extends its
 * attempt's lease every third of what is left of it (as the Go, Node, Python and Java step
 * helpers do, docs/api.md §20), so a long action is not taken over while it works. A refused
 * extension (ABORTED or NOT_FOUND: another attempt holds the step) ends the keeping; the
 * CompleteStep that follows is then refused as lease-lost. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "idem_internal.h"

#define KEEPER_MIN_EVERY_MS 10

struct idem__keeper {
  idem_client *c;
  const idem_step_key *key; /* borrowed: outlives the keeper */
  uint64_t attempt;
  uint32_t lease_ms;
  int64_t expires_unix_ms;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* on CLOCK_MONOTONIC: signalled by idem__keeper_stop */
  bool done;
  bool lost;
  pthread_t th;
};

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct timespec mono_after(int64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

static void *keeper_main(void *arg) {
  idem__keeper *k = arg;
  pthread_mutex_lock(&k->mu);
  while (!k->done) {
    int64_t every = (k->expires_unix_ms - wall_ms()) / 3;
    if (every < KEEPER_MIN_EVERY_MS) every = KEEPER_MIN_EVERY_MS;
    struct timespec until = mono_after(every);
    int rc = 0;
    while (!k->done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&k->cv, &k->mu, &until);
    if (k->done) break;
    pthread_mutex_unlock(&k->mu);
    int64_t expires = 0;
    idem_error err;
    int erc = idem_step_extend(k->c, k->key, k->attempt, k->lease_ms, &expires, &err);
    pthread_mutex_lock(&k->mu);
    if (erc == IDEM_OK) {
      k->expires_unix_ms = expires;
    } else if (erc == IDEM_ABORTED || erc == IDEM_NOT_FOUND) {
      k->lost = true;
      break;
    }
    /* UNAVAILABLE and the like: try again while the lease may still run */
  }
  pthread_mutex_unlock(&k->mu);
  return NULL;
}

idem__keeper *idem__keeper_start(idem_client *c, const idem_step_key *key, uint64_t attempt,
                                 uint32_t lease_ms, int64_t expires_unix_ms) {
  idem__keeper *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  *k = (idem__keeper){.c = c, .key = key, .attempt = attempt, .lease_ms = lease_ms,
                      .expires_unix_ms = expires_unix_ms};
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&k->mu, NULL);
  pthread_cond_init(&k->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&k->th, NULL, keeper_main, k) != 0) {
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    free(k);
    return NULL;
  }
  return k;
}

bool idem__keeper_stop(idem__keeper *k) {
  if (!k) return false;
  pthread_mutex_lock(&k->mu);
  k->done = true;
  pthread_cond_signal(&k->cv);
  pthread_mutex_unlock(&k->mu);
  pthread_join(k->th, NULL);
  bool lost = k->lost;
  pthread_cond_destroy(&k->cv);
  pthread_mutex_destroy(&k->mu);
  free(k);
  return lost;
}
