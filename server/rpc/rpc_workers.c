/* rpc_workers.c — the worker pool: a FIFO of calls, and threads that each own one store.
 * Workers are where store calls (and so all waiting on Postgres) happen. */
#include <stdlib.h>
#include <string.h>

#include "../util/log.h"
#include "rpc_internal.h"

static void *worker_main(void *arg) {
  rpc_worker *w = arg;
  rpc_pool *p = &w->srv->pool;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    while (!p->head && !p->stopping) pthread_cond_wait(&p->cv, &p->mu);
    rpc_call *c = p->head;
    if (!c) { /* stopping and nothing left */
      pthread_mutex_unlock(&p->mu);
      break;
    }
    p->head = c->next;
    if (!p->head) p->tail = NULL;
    p->len--;
    pthread_mutex_unlock(&p->mu);
    c->next = NULL;
    rpc__call_handle(c, w->st);
  }
  return NULL;
}

err_code rpc__pool_start(rpc_pool *p, rpc_server *srv, int n, err_t *err) {
  memset(p, 0, sizeof *p);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  p->workers = calloc((size_t)n, sizeof *p->workers);
  if (!p->workers) {
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    return err_oom(err);
  }
  p->n = n;
  for (int i = 0; i < n; i++) {
    rpc_worker *w = &p->workers[i];
    w->srv = srv;
    w->st = calloc(srv->n_groups, sizeof *w->st);
    if (!w->st) {
      err_oom(err);
      goto fail;
    }
    for (size_t g = 0; g < srv->n_groups; g++) {
      const rpc_group *grp = &srv->groups[g].g;
      if (!(w->st[g] = grp->open_store(grp->open_store_arg))) {
        err_set(err, ERR_INTERNAL, "cannot open store for worker %d of group %s", i, grp->name);
        goto fail;
      }
    }
  }
  for (int i = 0; i < n; i++) {
    rpc_worker *w = &p->workers[i];
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
      err_set(err, ERR_INTERNAL, "cannot start worker thread %d", i);
      goto fail;
    }
    w->started = true;
  }
  return ERR_OK;
fail:
  rpc__pool_stop(p);
  return err->code;
}

bool rpc__pool_push(rpc_pool *p, rpc_call *c) {
  c->next = NULL;
  pthread_mutex_lock(&p->mu);
  if (p->stopping || p->len >= RPC_QUEUE_MAX) {
    pthread_mutex_unlock(&p->mu);
    return false;
  }
  if (p->tail)
    p->tail->next = c;
  else
    p->head = c;
  p->tail = c;
  p->len++;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return true;
}

void rpc__pool_stop(rpc_pool *p) {
  if (!p->workers) return;
  pthread_mutex_lock(&p->mu);
  p->stopping = true;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n; i++) {
    if (p->workers[i].started) pthread_join(p->workers[i].thread, NULL);
  }
  /* Only reachable when no worker ever started: nothing can be queued then, but stay safe. */
  err_t err;
  err_fail(&err, ERR_UNAVAILABLE, ERR_R_SHUTTING_DOWN, "server stopping");
  while (p->head) {
    rpc_call *c = p->head;
    p->head = c->next;
    rpc__call_finish(c, &err);
  }
  p->tail = NULL;
  p->len = 0;
  for (int i = 0; i < p->n; i++) {
    for (size_t g = 0; p->workers[i].st && g < p->workers[i].srv->n_groups; g++)
      store_close(p->workers[i].st[g]);
    free(p->workers[i].st);
  }
  free(p->workers);
  p->workers = NULL;
  p->n = 0;
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
}
