/* slot_service.c — see slot_service.h: the views, the route, the waiters. etcd (the start, the
 * watch's thread, the moves' calls) is slot_service_etcd.c's. */
#include "slot_service.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../domain/slot.h"
#include "../util/clock.h"
#include "../util/log.h"
#include "slot_service_internal.h"
#include "slotmove.h"

void slots_view_release(slots_view *v) {
  if (!v || atomic_fetch_sub(&v->refs, 1) != 1) return;
  slotmap_free(v->map);
  free(v->owner);
  free(v);
}

slots_view *slot_service_hold(slot_service *s) {
  pthread_mutex_lock(&s->cur_mu);
  slots_view *v = s->cur;
  atomic_fetch_add(&v->refs, 1);
  pthread_mutex_unlock(&s->cur_mu);
  return v;
}

const slotmap *slots_view_map(const slots_view *v) {
  return v->map;
}

slots_result ss__index(const slot_service *s, slots_view *v, char *msg, size_t cap) {
  const slotmap *m = v->map;
  if (m->slots != s->slots) {
    snprintf(msg, cap,
             "--slots %u: the cluster was created with %u slots (the slot map in etcd at "
             "%s); start every node with --slots %u",
             s->slots, m->slots, s->map_key, m->slots);
    return SLOTS_USAGE;
  }
  if (!(v->owner = calloc(m->slots, sizeof *v->owner))) {
    snprintf(msg, cap, "out of memory");
    return SLOTS_FAILED;
  }
  for (size_t i = 0; i < m->n_ranges; i++) {
    const slot_range *r = &m->ranges[i];
    size_t g = 0;
    while (g < s->n_groups && strcmp(s->groups[g], r->group) != 0) g++;
    if (g == s->n_groups) {
      snprintf(msg, cap,
               "--store: the slot map serves slots %u-%u from group %s, which this node is not "
               "given: start every node with the same --store groups",
               r->from, r->to, r->group);
      return SLOTS_USAGE;
    }
    for (uint32_t x = r->from; x <= r->to; x++) v->owner[x] = (uint16_t)g;
  }
  return SLOTS_OK;
}

slots_view *ss__view(slotmap *m) {
  slots_view *v = m ? calloc(1, sizeof *v) : NULL;
  if (!v) {
    slotmap_free(m);
    return NULL;
  }
  v->map = m;
  atomic_init(&v->refs, 1);
  return v;
}

void ss__changed(slot_service *s) {
  pthread_mutex_lock(&s->mu);
  s->changes++;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

bool ss__follow(slot_service *s, slotmap *m) {
  char why[320] = "";
  slots_view *next = ss__view(m);
  if (!next) return false;
  if (ss__index(s, next, why, sizeof why) != SLOTS_OK) {
    log_kv(LOG_ERROR, "cannot follow the new slot map", "error", why, (const char *)NULL);
    slots_view_release(next);
    return false;
  }
  pthread_mutex_lock(&s->cur_mu);
  slots_view *old = s->cur;
  bool newer = next->map->version > old->map->version;
  if (newer) s->cur = next;
  pthread_mutex_unlock(&s->cur_mu);
  if (!newer) {
    slots_view_release(next);
    return true;
  }
  char v[24];
  snprintf(v, sizeof v, "%llu", (unsigned long long)next->map->version);
  log_kv(LOG_INFO, "following a new slot map", "version", v, (const char *)NULL);
  if (!next->map->move) atomic_store(&s->have_progress, false);
  slots_view_release(old); /* freed when its last reader lets go */
  ss__changed(s);
  return true;
}

void slot_service_stop(slot_service *s) {
  if (!s) return;
  atomic_store(&s->stop, true);
  slot_service_kick(s);
  if (s->etcd.wake) s->etcd.wake(s->etcd.arg);
  if (s->watching) pthread_join(s->watcher, NULL);
  slots_view_release(s->cur);
  for (size_t i = 0; i < SS_RESULTS; i++) free(s->results[i].json);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->cur_mu);
  for (size_t i = 0; i < s->n_groups; i++) free(s->groups[i]);
  free(s->groups);
  free(s);
}

int slot_service_route(slot_service *s, const char *tenant, const char *id, bool new_saga,
                       slots_leads_fn leads, void *leads_arg) {
  if (new_saga && (!id || !id[0])) {
    for (size_t g = 0; leads && g < s->n_groups; g++)
      if (leads(leads_arg, g)) return (int)g;
    return 0;
  }
  slots_view *v = slot_service_hold(s);
  uint32_t slot = slot_of(tenant, id, v->map->slots);
  const struct slot_move *mv = v->map->move;
  int g = mv && mv->phase == MOVE_BLOCKED && slot >= mv->from && slot <= mv->to
              ? SLOTS_ROUTE_MOVING
              : v->owner[slot];
  slots_view_release(v);
  return g;
}

bool slot_service_owns(slot_service *s, size_t group, uint32_t slot) {
  slots_view *v = slot_service_hold(s);
  bool owns = slot < v->map->slots && v->owner[slot] == group;
  slots_view_release(v);
  return owns;
}

uint64_t slot_service_changes(slot_service *s) {
  pthread_mutex_lock(&s->mu);
  uint64_t n = s->changes;
  pthread_mutex_unlock(&s->mu);
  return n;
}

uint64_t slot_service_wait(slot_service *s, uint64_t seen, int64_t deadline) {
  struct timespec ts = clock_after_us(CLOCK_MONOTONIC, (deadline - clock_mono_ms()) * 1000);
  pthread_mutex_lock(&s->mu);
  while (s->changes == seen && !atomic_load(&s->stop) && clock_mono_ms() < deadline)
    if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0) break;
  uint64_t n = s->changes;
  pthread_mutex_unlock(&s->mu);
  return n;
}

void slot_service_kick(slot_service *s) {
  ss__changed(s);
}

bool slot_service_progress(slot_service *s, uint64_t *rows, int64_t *lag) {
  if (!s || !atomic_load(&s->have_progress)) return false;
  *rows = atomic_load(&s->rows);
  *lag = atomic_load(&s->lag);
  return true;
}
