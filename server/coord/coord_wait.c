/* coord_wait.c — the table of parked BeginStep calls (see coord_wait.h).
 *
 * Parked calls sit in two places at once: a bucket chosen by a hash of their step pair (so a
 * commit finds the calls of its pair) and a min-heap ordered by their next timer (the lease's
 * end, or the end of the wait). A call taken out of both under the mutex belongs to whoever
 * took it; it is run again or answered only after the mutex is released. Each bucket has a
 * change counter that every commit to a pair of the bucket raises: an evaluation notes it
 * before it is submitted, and parking compares.
 */
#include "coord_wait.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../metrics/metrics.h"
#include "../util/clock.h"
#include "../util/log.h"

#define SLOTS 16384u /* buckets and change counters (a power of two) */
/* the lease's end on the database clock, seen as time left from here: wake a little after it,
 * so that the re-run finds it expired */
#define LEASE_SLACK_MS 2
/* how often the thread checks leadership when no timer is due sooner */
#define LEADER_CHECK_MS 100

enum { W_NONE, W_PARKED, W_READY };

struct coord_waiters {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* monotonic: a timer moved earlier, a call is ready, or stopping */
  size_t max, count;
  bool closed, stop;
  bool (*leading)(void *arg, char *leader, size_t cap);
  void *leading_arg;
  uint64_t changes[SLOTS];
  coord__waiter *buckets[SLOTS];
  coord__waiter **heap;
  size_t n_heap, cap_heap;
  coord__waiter *ready_head, *ready_tail;
  pthread_t thread;
  bool started;
};

static uint32_t slot_of(const step_key *k) {
  uint64_t h = 1469598103934665603ull;
  const char *parts[4] = {k->tenant, k->global_id, k->service, k->operation};
  for (int i = 0; i < 4; i++) {
    for (const char *p = parts[i]; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    h = (h ^ 0x1f) * 1099511628211ull;
  }
  return (uint32_t)(h & (SLOTS - 1));
}

static bool same_pair(const step_key *a, const step_key *b) {
  return strcmp(a->global_id, b->global_id) == 0 && strcmp(a->operation, b->operation) == 0 &&
         strcmp(a->service, b->service) == 0 && strcmp(a->tenant, b->tenant) == 0;
}

/* --- the heap (under mu) --- */

static void heap_set(coord_waiters *w, size_t i, coord__waiter *wt) {
  w->heap[i] = wt;
  wt->heap_i = i;
}

static void heap_up(coord_waiters *w, size_t i) {
  coord__waiter *wt = w->heap[i];
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (w->heap[p]->wake_ms <= wt->wake_ms) break;
    heap_set(w, i, w->heap[p]);
    i = p;
  }
  heap_set(w, i, wt);
}

static void heap_down(coord_waiters *w, size_t i) {
  coord__waiter *wt = w->heap[i];
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= w->n_heap) break;
    if (c + 1 < w->n_heap && w->heap[c + 1]->wake_ms < w->heap[c]->wake_ms) c++;
    if (w->heap[c]->wake_ms >= wt->wake_ms) break;
    heap_set(w, i, w->heap[c]);
    i = c;
  }
  heap_set(w, i, wt);
}

static bool heap_push(coord_waiters *w, coord__waiter *wt) {
  if (w->n_heap == w->cap_heap) {
    size_t cap = w->cap_heap ? 2 * w->cap_heap : 64;
    coord__waiter **h = realloc(w->heap, cap * sizeof *h);
    if (!h) return false;
    w->heap = h;
    w->cap_heap = cap;
  }
  heap_set(w, w->n_heap++, wt);
  heap_up(w, wt->heap_i);
  return true;
}

static void heap_remove(coord_waiters *w, coord__waiter *wt) {
  size_t i = wt->heap_i;
  coord__waiter *last = w->heap[--w->n_heap];
  if (last != wt) {
    heap_set(w, i, last);
    heap_up(w, i);
    heap_down(w, last->heap_i);
  }
}

/* --- parked calls (under mu) --- */

static void unpark(coord_waiters *w, coord__waiter *wt) {
  if (wt->prev)
    wt->prev->next = wt->next;
  else
    w->buckets[wt->slot] = wt->next;
  if (wt->next) wt->next->prev = wt->prev;
  wt->prev = wt->next = NULL;
  heap_remove(w, wt);
  wt->where = W_NONE;
}

static void make_ready(coord_waiters *w, coord__waiter *wt) {
  wt->where = W_READY;
  wt->next = wt->prev = NULL;
  if (w->ready_tail)
    w->ready_tail->next = wt;
  else
    w->ready_head = wt;
  w->ready_tail = wt;
}

/* Parks wt in its bucket and the heap (under mu); false when out of memory. */
static bool put_parked(coord_waiters *w, coord__waiter *wt) {
  wt->prev = wt->next = NULL;
  if (!heap_push(w, wt)) return false;
  wt->where = W_PARKED;
  wt->next = w->buckets[wt->slot];
  if (wt->next) wt->next->prev = wt;
  w->buckets[wt->slot] = wt;
  if (wt->heap_i == 0) pthread_cond_signal(&w->cv); /* the earliest timer now */
  return true;
}

/* Takes every waiting call (parked or ready) out of the table into a list. */
static coord__waiter *take_all(coord_waiters *w) {
  coord__waiter *list = w->ready_head;
  w->ready_head = w->ready_tail = NULL;
  while (w->n_heap > 0) {
    coord__waiter *wt = w->heap[0];
    unpark(w, wt);
    wt->next = list;
    list = wt;
  }
  for (coord__waiter *wt = list; wt; wt = wt->next) wt->where = W_NONE;
  return list;
}

/* Answers every call of list with err (outside mu). */
static void give_up_all(coord__waiter *list, const err_t *err) {
  while (list) {
    coord__waiter *next = list->next;
    list->next = NULL;
    err_t e = *err;
    list->give_up(list, e.code, &e);
    list = next;
  }
}

/* --- the API --- */

coord_waiters *coord_waiters_new(const coord_waiters_cfg *cfg) {
  coord_waiters *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->max = cfg && cfg->max_waiters ? cfg->max_waiters : COORD_WAITERS_DEFAULT;
  w->leading = cfg ? cfg->leading : NULL;
  w->leading_arg = cfg ? cfg->leading_arg : NULL;
  pthread_mutex_init(&w->mu, NULL);
  clock_cond_init(&w->cv);
  metrics_set_waiting(0);
  return w;
}

static void *waiters_main(void *arg) {
  coord_waiters *w = arg;
  for (;;) {
    int64_t now = clock_mono_ms();
    int64_t next = coord_waiters_poll(w, now);
    pthread_mutex_lock(&w->mu);
    if (w->stop) {
      pthread_mutex_unlock(&w->mu);
      break;
    }
    now = clock_mono_ms();
    if (!w->ready_head && (w->n_heap == 0 || w->heap[0]->wake_ms > now)) {
      int64_t until = now + LEADER_CHECK_MS;
      if (next < until) until = next;
      if (w->n_heap > 0 && w->heap[0]->wake_ms < until) until = w->heap[0]->wake_ms;
      struct timespec ts = clock_after_us(CLOCK_MONOTONIC, (until - now) * 1000);
      pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    }
    pthread_mutex_unlock(&w->mu);
  }
  return NULL;
}

err_code coord_waiters_start(coord_waiters *w, err_t *err) {
  if (pthread_create(&w->thread, NULL, waiters_main, w) != 0)
    return err_set(err, ERR_INTERNAL, "cannot start the waiters' thread");
  w->started = true;
  return ERR_OK;
}

void coord_waiters_changed(coord_waiters *w, const step_key *key) {
  if (!w) return;
  uint32_t s = slot_of(key);
  bool woke = false;
  pthread_mutex_lock(&w->mu);
  w->changes[s]++;
  for (coord__waiter *wt = w->buckets[s], *next; wt; wt = next) {
    next = wt->next;
    if (!same_pair(wt->key, key)) continue;
    unpark(w, wt);
    make_ready(w, wt);
    woke = true;
  }
  if (woke) pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

void coord__wait_mark(coord_waiters *w, coord__waiter *wt) {
  wt->slot = slot_of(wt->key);
  pthread_mutex_lock(&w->mu);
  wt->seen = w->changes[wt->slot];
  pthread_mutex_unlock(&w->mu);
}

static bool still_leading(coord_waiters *w, err_t *err) {
  char leader[ERR_LEADER_MAX];
  leader[0] = '\0';
  if (!w->leading || w->leading(w->leading_arg, leader, sizeof leader)) return true;
  err_fail(err, ERR_UNAVAILABLE, ERR_R_NOT_LEADER, "not the leader");
  err_leader(err, leader);
  return false;
}

static void stopping(err_t *err) {
  err_fail(err, ERR_UNAVAILABLE, ERR_R_SHUTTING_DOWN, "server stopping");
}

static void cancelled(err_t *err) {
  err_set(err, ERR_ABORTED, "cancelled by the caller");
}

static bool gone(const coord__waiter *wt) { /* under mu */
  return wt->cell && wt->cell->cancelled;
}

coord__park coord__wait_park(coord_waiters *w, coord__waiter *wt, int64_t retry_after_ms,
                             int64_t now_ms, err_t *err) {
  if (!still_leading(w, err)) return COORD_REFUSED;
  pthread_mutex_lock(&w->mu);
  coord__park rc = COORD_PARKED;
  if (w->closed) {
    stopping(err);
    rc = COORD_REFUSED;
  } else if (gone(wt)) {
    cancelled(err);
    rc = COORD_REFUSED;
  } else if (!wt->counted && w->count >= w->max) {
    rc = COORD_FULL;
  } else {
    if (!wt->counted) {
      wt->counted = true;
      metrics_set_waiting(++w->count);
    }
    wt->lease_end_ms = now_ms + (retry_after_ms > 0 ? retry_after_ms : 1);
    wt->wake_ms = wt->lease_end_ms + LEASE_SLACK_MS;
    if (wt->wake_ms > wt->give_up_ms) wt->wake_ms = wt->give_up_ms;
    wt->prev = wt->next = NULL;
    if (w->changes[wt->slot] != wt->seen) { /* changed while it was being evaluated */
      make_ready(w, wt);
      pthread_cond_signal(&w->cv);
    } else if (!put_parked(w, wt)) {
      rc = COORD_FULL; /* out of memory: answer as without waiting */
    }
  }
  pthread_mutex_unlock(&w->mu);
  return rc;
}

static bool same_call(const coord__waiter *a, const coord__waiter *b) {
  return a->key->phase == b->key->phase && same_pair(a->key, b->key) && a->fp_len == b->fp_len &&
         (a->fp_len == 0 || memcmp(a->fp, b->fp, a->fp_len) == 0);
}

static void in_progress(err_t *err, int64_t left_ms) {
  err_fail(err, ERR_ABORTED, ERR_R_IN_PROGRESS, "step in progress");
  err->retry_after_ms = left_ms > 0 ? left_ms : 1;
}

coord__park coord__wait_join(coord_waiters *w, coord__waiter *wt, int64_t now_ms, err_t *err) {
  wt->slot = slot_of(wt->key);
  pthread_mutex_lock(&w->mu);
  const coord__waiter *twin = NULL;
  for (const coord__waiter *o = w->buckets[wt->slot]; o && !twin; o = o->next)
    if (o->where == W_PARKED && o->lease_end_ms > now_ms + LEASE_SLACK_MS && same_call(o, wt))
      twin = o;
  coord__park rc = COORD_NO_TWIN;
  if (gone(wt)) {
    cancelled(err);
    rc = COORD_REFUSED;
  } else if (twin && !w->closed) {
    if (!wt->counted && w->count >= w->max) {
      in_progress(err, twin->lease_end_ms - now_ms);
      rc = COORD_FULL;
    } else {
      wt->seen = w->changes[wt->slot];
      wt->lease_end_ms = twin->lease_end_ms;
      wt->wake_ms = wt->lease_end_ms + LEASE_SLACK_MS;
      if (wt->wake_ms > wt->give_up_ms) wt->wake_ms = wt->give_up_ms;
      if (put_parked(w, wt)) {
        if (!wt->counted) { /* a woken call that joins again keeps its place */
          wt->counted = true;
          metrics_set_waiting(++w->count);
        }
        rc = COORD_PARKED;
      }
    }
  }
  pthread_mutex_unlock(&w->mu);
  return rc;
}

bool coord__wait_link(coord_waiters *w, coord__waiter *wt, coord_wait_cell *cell) {
  if (!cell) return true;
  pthread_mutex_lock(&w->mu);
  bool ok = !cell->cancelled;
  if (ok) {
    wt->cell = cell;
    cell->wt = wt;
  }
  pthread_mutex_unlock(&w->mu);
  return ok;
}

void coord__wait_done(coord_waiters *w, coord__waiter *wt) {
  pthread_mutex_lock(&w->mu);
  if (wt->cell) {
    wt->cell->wt = NULL;
    wt->cell = NULL;
  }
  if (wt->counted) {
    wt->counted = false;
    metrics_set_waiting(--w->count);
  }
  pthread_mutex_unlock(&w->mu);
}

void coord_waiters_cancel(coord_waiters *w, coord_wait_cell *cell) {
  if (!w || !cell) return;
  coord__waiter *wt;
  pthread_mutex_lock(&w->mu);
  cell->cancelled = true;
  wt = cell->wt;
  if (wt && wt->where == W_PARKED)
    unpark(w, wt); /* ours now: no commit, timer or close can take it any more */
  else
    wt = NULL; /* not waiting (answered, or being run: its next park refuses it) */
  pthread_mutex_unlock(&w->mu);
  if (!wt) return;
  err_t e;
  cancelled(&e);
  wt->give_up(wt, e.code, &e);
}

int64_t coord_waiters_poll(coord_waiters *w, int64_t now_ms) {
  err_t lost;
  err_clear(&lost);
  bool leads = still_leading(w, &lost);
  coord__waiter *run = NULL, **run_tail = &run, *timed_out = NULL, *refused = NULL;
  pthread_mutex_lock(&w->mu);
  if (!leads) {
    refused = take_all(w);
  } else {
    run = w->ready_head;
    if (w->ready_tail) run_tail = &w->ready_tail->next;
    w->ready_head = w->ready_tail = NULL;
    for (coord__waiter *wt = run; wt; wt = wt->next) wt->where = W_NONE;
    while (w->n_heap > 0 && w->heap[0]->wake_ms <= now_ms) {
      coord__waiter *wt = w->heap[0];
      unpark(w, wt);
      if (now_ms >= wt->give_up_ms) {
        wt->next = timed_out;
        timed_out = wt;
      } else { /* the lease ran out: run again (one of them takes over) */
        *run_tail = wt;
        run_tail = &wt->next;
      }
    }
  }
  int64_t next = w->n_heap > 0 ? w->heap[0]->wake_ms : INT64_MAX;
  pthread_mutex_unlock(&w->mu);

  if (refused) give_up_all(refused, &lost);
  while (timed_out) {
    coord__waiter *wt = timed_out;
    timed_out = wt->next;
    wt->next = NULL;
    metrics_wait_timed_out();
    err_t e;
    in_progress(&e, wt->lease_end_ms - now_ms);
    wt->give_up(wt, ERR_ABORTED, &e);
  }
  while (run) {
    coord__waiter *wt = run;
    run = wt->next;
    wt->next = NULL;
    wt->retry(wt);
  }
  return next;
}

void coord_waiters_close(coord_waiters *w) {
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->closed = true;
  w->stop = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  if (w->started) {
    pthread_join(w->thread, NULL);
    w->started = false;
  }
  pthread_mutex_lock(&w->mu);
  coord__waiter *list = take_all(w);
  pthread_mutex_unlock(&w->mu);
  err_t err;
  stopping(&err);
  give_up_all(list, &err);
}

void coord_waiters_free(coord_waiters *w) {
  if (!w) return;
  coord_waiters_close(w);
  if (w->count > 0) log_kv(LOG_WARN, "waiters freed while calls still wait", (const char *)NULL);
  free(w->heap);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  free(w);
}

size_t coord_waiters_count(coord_waiters *w) {
  pthread_mutex_lock(&w->mu);
  size_t n = w->count;
  pthread_mutex_unlock(&w->mu);
  return n;
}
