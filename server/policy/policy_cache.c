/* policy_cache.c — the server's copy of the policy rows (see policy_cache.h): a sorted array
 * under a read-write lock, searched with bsearch for each precedence level. */
#include "policy_cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/clock.h"
#include "../util/log.h"

struct policy_cache {
  pthread_rwlock_t rw; /* guards rows, n */
  policy_row *rows;    /* sorted by (tenant, service, operation), strcmp order */
  size_t n;
  uint64_t loads;

  pthread_mutex_t reload_mu; /* serializes reloads (load + swap) */

  /* the refresh thread */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool running, stopping, kick;
  pthread_t thread;
  store *st;
  int64_t refresh_ms, store_timeout_ms;
};

static int row_cmp3(const char *t, const char *s, const char *o, const policy_row *r) {
  int c = strcmp(t, r->tenant);
  if (c == 0) c = strcmp(s, r->p.service);
  if (c == 0) c = strcmp(o, r->p.operation);
  return c;
}

static int row_qsort_cmp(const void *a, const void *b) {
  const policy_row *x = a, *y = b;
  return row_cmp3(x->tenant, x->p.service, x->p.operation, y);
}

policy_cache *policy_cache_new(void) {
  policy_cache *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  pthread_rwlock_init(&c->rw, NULL);
  pthread_mutex_init(&c->reload_mu, NULL);
  pthread_mutex_init(&c->mu, NULL);
  clock_cond_init(&c->cv);
  return c;
}

void policy_cache_free(policy_cache *c) {
  if (!c) return;
  policy_cache_stop(c);
  free(c->rows);
  pthread_rwlock_destroy(&c->rw);
  pthread_mutex_destroy(&c->reload_mu);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  free(c);
}

/* Takes ownership of rows (sorted here). */
static void swap_in(policy_cache *c, policy_row *rows, size_t n) {
  if (n > 1) qsort(rows, n, sizeof *rows, row_qsort_cmp);
  pthread_rwlock_wrlock(&c->rw);
  policy_row *old = c->rows;
  c->rows = rows;
  c->n = n;
  c->loads++;
  pthread_rwlock_unlock(&c->rw);
  free(old);
}

bool policy_cache_set_rows(policy_cache *c, const policy_row *rows, size_t n) {
  policy_row *copy = NULL;
  if (n > 0) {
    if (!(copy = malloc(n * sizeof *copy))) return false;
    memcpy(copy, rows, n * sizeof *copy);
  }
  pthread_mutex_lock(&c->reload_mu);
  swap_in(c, copy, n);
  pthread_mutex_unlock(&c->reload_mu);
  return true;
}

err_code policy_cache_reload(policy_cache *c, store *st, int64_t deadline, err_t *err) {
  pthread_mutex_lock(&c->reload_mu);
  policy_row *rows = NULL;
  size_t n = 0;
  err_code rc = store_policy_list(st, NULL, deadline, &rows, &n, err);
  if (rc == ERR_OK) swap_in(c, rows, n);
  pthread_mutex_unlock(&c->reload_mu);
  return rc;
}

/* Under the read lock. */
static const policy_row *find(const policy_cache *c, const char *t, const char *s,
                              const char *o) {
  size_t lo = 0, hi = c->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int cmp = row_cmp3(t, s, o, &c->rows[mid]);
    if (cmp == 0) return &c->rows[mid];
    if (cmp < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

void policy_cache_resolve(void *arg, const char *tenant, const char *service,
                          const char *operation, policy *out) {
  policy_cache *c = arg;
  if (!tenant) tenant = "";
  if (!service) service = "";
  if (!operation) operation = "";
  const char *const levels[6][3] = {
      {tenant, service, operation},     {tenant, service, POLICY_ANY},
      {tenant, POLICY_ANY, POLICY_ANY}, {POLICY_ANY, service, operation},
      {POLICY_ANY, service, POLICY_ANY}, {POLICY_ANY, POLICY_ANY, POLICY_ANY},
  };
  pthread_rwlock_rdlock(&c->rw);
  const policy_row *hit = NULL;
  for (int i = 0; i < 6 && !hit && c->n > 0; i++)
    hit = find(c, levels[i][0], levels[i][1], levels[i][2]);
  if (hit)
    *out = hit->p;
  else
    policy_default(service, operation, out);
  pthread_rwlock_unlock(&c->rw);
}

void policy_cache_changed(void *arg, store *st, int64_t deadline) {
  policy_cache *c = arg;
  err_t err;
  err_clear(&err);
  if (policy_cache_reload(c, st, deadline, &err) != ERR_OK)
    log_kv(LOG_WARN, "cannot reload policies after a change, the refresh will", "error", err.msg,
           (const char *)NULL);
}

/* --- the refresh thread --- */

static void *refresh_main(void *arg) {
  policy_cache *c = arg;
  bool failing = false;
  pthread_mutex_lock(&c->mu);
  while (!c->stopping) {
    c->kick = false;
    pthread_mutex_unlock(&c->mu);
    err_t err;
    err_clear(&err);
    err_code rc = policy_cache_reload(c, c->st, clock_mono_ms() + c->store_timeout_ms, &err);
    if (rc != ERR_OK && !failing)
      log_kv(LOG_WARN, "cannot load policies, keeping the last known ones", "error", err.msg,
             (const char *)NULL);
    else if (rc == ERR_OK && failing)
      log_kv(LOG_INFO, "policies loaded again", (const char *)NULL);
    failing = rc != ERR_OK;
    pthread_mutex_lock(&c->mu);
    struct timespec until = clock_after_us(CLOCK_MONOTONIC, c->refresh_ms * 1000);
    while (!c->stopping && !c->kick)
      if (pthread_cond_timedwait(&c->cv, &c->mu, &until) == ETIMEDOUT) break;
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

bool policy_cache_start(policy_cache *c, store *(*open_store)(void *), void *open_arg,
                        int64_t refresh_ms, int64_t store_timeout_ms) {
  if (c->running) return true;
  c->st = open_store(open_arg);
  if (!c->st) return false;
  c->refresh_ms = refresh_ms > 0 ? refresh_ms : POLICY_CACHE_REFRESH_MS_DEFAULT;
  c->store_timeout_ms = store_timeout_ms > 0 ? store_timeout_ms : 2000;
  c->stopping = false;
  if (pthread_create(&c->thread, NULL, refresh_main, c) != 0) {
    store_close(c->st);
    c->st = NULL;
    return false;
  }
  c->running = true;
  return true;
}

void policy_cache_invalidate(policy_cache *c) {
  pthread_mutex_lock(&c->mu);
  c->kick = true;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

void policy_cache_stop(policy_cache *c) {
  if (!c->running) return;
  pthread_mutex_lock(&c->mu);
  c->stopping = true;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  pthread_join(c->thread, NULL);
  c->running = false;
  store_close(c->st);
  c->st = NULL;
}

size_t policy_cache_size(policy_cache *c) {
  pthread_rwlock_rdlock(&c->rw);
  size_t n = c->n;
  pthread_rwlock_unlock(&c->rw);
  return n;
}

uint64_t policy_cache_loads(policy_cache *c) {
  pthread_rwlock_rdlock(&c->rw);
  uint64_t n = c->loads;
  pthread_rwlock_unlock(&c->rw);
  return n;
}
