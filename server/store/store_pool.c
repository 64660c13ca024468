/* store_pool.c — see store_pool.h. */
#include "store_pool.h"

#include <pthread.h>
#include <stdlib.h>

struct store_pool {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  store *(*open)(void *);
  void *arg;
  store **idle; /* opened and not lent */
  int n_idle;
  int places; /* how many more may be lent (idle or not opened yet) */
};

store_pool *store_pool_new(int n, store *(*open)(void *), void *arg) {
  if (n < 1) return NULL;
  store_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->idle = calloc((size_t)n, sizeof *p->idle);
  if (!p->idle) {
    free(p);
    return NULL;
  }
  p->open = open;
  p->arg = arg;
  p->places = n;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  return p;
}

void store_pool_free(store_pool *p) {
  if (!p) return;
  for (int i = 0; i < p->n_idle; i++) store_close(p->idle[i]);
  free(p->idle);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

store *store_pool_get(store_pool *p) {
  pthread_mutex_lock(&p->mu);
  while (p->places == 0) pthread_cond_wait(&p->cv, &p->mu);
  p->places--;
  store *st = p->n_idle > 0 ? p->idle[--p->n_idle] : NULL;
  pthread_mutex_unlock(&p->mu);
  if (!st) st = p->open(p->arg); /* outside the lock: a connect may take a while */
  if (!st) store_pool_put(p, NULL);
  return st;
}

void store_pool_put(store_pool *p, store *st) {
  pthread_mutex_lock(&p->mu);
  if (st) p->idle[p->n_idle++] = st;
  p->places++;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}
