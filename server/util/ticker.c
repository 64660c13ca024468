/* ticker.c — see ticker.h. */
#include "ticker.h"

#include <pthread.h>
#include <stdlib.h>

#include "clock.h"

struct ticker {
  int64_t every_ms;
  ticker_fn fn;
  void *arg;
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
};

bool ticker_pause(ticker *t, int64_t ms) {
  struct timespec ts = clock_after_us(CLOCK_MONOTONIC, ms * 1000);
  pthread_mutex_lock(&t->mu);
  if (!t->stop) pthread_cond_timedwait(&t->cv, &t->mu, &ts);
  bool stop = t->stop;
  pthread_mutex_unlock(&t->mu);
  return stop;
}

static void *tick_main(void *arg) {
  ticker *t = arg;
  while (!ticker_pause(t, t->every_ms) && t->fn(t->arg)) {
  }
  return NULL;
}

ticker *ticker_start(int64_t every_ms, ticker_fn fn, void *arg) {
  ticker *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  *t = (ticker){.every_ms = every_ms, .fn = fn, .arg = arg};
  pthread_mutex_init(&t->mu, NULL);
  if (clock_cond_init(&t->cv) != 0) {
    pthread_mutex_destroy(&t->mu);
    free(t);
    return NULL;
  }
  if (pthread_create(&t->th, NULL, tick_main, t) != 0) {
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
    return NULL;
  }
  return t;
}

void ticker_stop(ticker *t) {
  if (!t) return;
  pthread_mutex_lock(&t->mu);
  t->stop = true;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
  pthread_join(t->th, NULL);
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
  free(t);
}
