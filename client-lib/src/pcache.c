/* pcache.c — the client's policy cache: (service, operation) → the failure mode last fetched
 * and when; thread-safe. policies.c fetches into it, idem_step_run reads it (idem_internal.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "idem_internal.h"

typedef struct pentry {
  char service[IDEM_NAME_MAX + 1];
  char operation[IDEM_NAME_MAX + 1];
  int mode;           /* 0 = never fetched successfully */
  int64_t fetched_ms; /* monotonic, last success */
  int64_t tried_ms;   /* monotonic, last attempt */
} pentry;

struct idem__pcache {
  pthread_mutex_t mu;
  pentry *e;
  size_t n, cap;
};

idem__pcache *idem__pcache_new(void) {
  idem__pcache *p = calloc(1, sizeof *p);
  if (p) pthread_mutex_init(&p->mu, NULL);
  return p;
}

void idem__pcache_free(idem__pcache *p) {
  if (!p) return;
  pthread_mutex_destroy(&p->mu);
  free(p->e);
  free(p);
}

/* Under mu. NULL when absent and create is false, or on allocation failure. */
static pentry *lookup(idem__pcache *p, const char *svc, const char *op, bool create) {
  for (size_t i = 0; i < p->n; i++)
    if (strcmp(p->e[i].service, svc) == 0 && strcmp(p->e[i].operation, op) == 0) return &p->e[i];
  if (!create || strlen(svc) > IDEM_NAME_MAX || strlen(op) > IDEM_NAME_MAX) return NULL;
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 8;
    pentry *grown = realloc(p->e, cap * sizeof *grown);
    if (!grown) return NULL;
    p->e = grown;
    p->cap = cap;
  }
  pentry *e = &p->e[p->n++];
  memset(e, 0, sizeof *e);
  memcpy(e->service, svc, strlen(svc) + 1);
  memcpy(e->operation, op, strlen(op) + 1);
  return e;
}

bool idem__pcache_note(idem__pcache *p, const char *svc, const char *op, int64_t now_ms, int mode) {
  pthread_mutex_lock(&p->mu);
  pentry *e = lookup(p, svc, op, true);
  if (e) {
    e->tried_ms = now_ms;
    if (mode) {
      e->mode = mode;
      e->fetched_ms = now_ms;
    }
  }
  pthread_mutex_unlock(&p->mu);
  return e != NULL;
}

bool idem__pcache_claim(idem__pcache *p, const char *svc, const char *op, int64_t now_ms,
                        int64_t every_ms) {
  bool stale = true;
  pthread_mutex_lock(&p->mu);
  pentry *e = lookup(p, svc, op, false);
  if (e && now_ms - e->tried_ms < every_ms) stale = false;
  if (e && stale) e->tried_ms = now_ms; /* one fetch per period, even with many threads */
  pthread_mutex_unlock(&p->mu);
  return stale;
}

int idem__pcache_mode(idem__pcache *p, const char *svc, const char *op) {
  pthread_mutex_lock(&p->mu);
  pentry *e = lookup(p, svc, op, false);
  int mode = e ? e->mode : 0;
  pthread_mutex_unlock(&p->mu);
  return mode;
}
