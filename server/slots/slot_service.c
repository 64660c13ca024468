/* slot_service.c — see slot_service.h. The watch's thread and the views; the map's keeping in
 * etcd at start is slot_service_etcd.c's. */
#include "slot_service.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../domain/slot.h"
#include "../util/clock.h"
#include "../util/log.h"
#include "slot_service_internal.h"
#include "slotmove.h"

#define WATCH_RETRY_MS 500 /* after a lost watch (etcd down), before reading the map again */

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

/* A result seen by the watch, kept for waiters (the oldest goes when the ring is full). */
static void remember_result(slot_service *s, const char *rid, const char *json, size_t len) {
  char *copy = malloc(len + 1);
  if (!copy) return;
  memcpy(copy, json, len);
  copy[len] = '\0';
  pthread_mutex_lock(&s->mu);
  ss_result *r = &s->results[s->next_result++ % SS_RESULTS];
  free(r->json);
  snprintf(r->rid, sizeof r->rid, "%s", rid);
  r->json = copy;
  r->len = len;
  pthread_mutex_unlock(&s->mu);
}

static bool on_change(void *arg, const char *key, const char *value, size_t len, int64_t rev) {
  slot_service *s = arg;
  (void)rev;
  size_t rp = strlen(s->results_prefix);
  if (strcmp(key, s->map_key) == 0) {
    char why[256] = "";
    slotmap *m = value ? slotmap_parse(value, len, why, sizeof why) : NULL;
    if (!m)
      log_kv(LOG_ERROR, "the slot map in etcd is not valid; keeping the one followed", "key", key,
             "error", value ? why : "deleted", (const char *)NULL);
    else
      ss__follow(s, m);
  } else if (strncmp(key, s->results_prefix, rp) == 0 && value) {
    remember_result(s, key + rp, value, len);
    ss__changed(s);
  } else if (strcmp(key, s->progress_key) == 0 && value) {
    cJSON *j = cJSON_ParseWithLength(value, len);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "rows");
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(j, "lag");
    if (cJSON_IsNumber(r) && cJSON_IsNumber(l)) {
      atomic_store(&s->rows, (uint64_t)r->valuedouble);
      atomic_store(&s->lag, (int64_t)l->valuedouble);
      atomic_store(&s->have_progress, true);
    }
    cJSON_Delete(j);
  }
  return !atomic_load(&s->stop);
}

/* Waits up to ms unless the service is stopping; true when it is. */
static bool pause_ms(slot_service *s, int64_t ms) {
  struct timespec ts = clock_after_us(CLOCK_MONOTONIC, ms * 1000);
  pthread_mutex_lock(&s->mu);
  if (!atomic_load(&s->stop)) pthread_cond_timedwait(&s->cv, &s->mu, &ts);
  pthread_mutex_unlock(&s->mu);
  return atomic_load(&s->stop);
}

/* The map read again (after a lost or compacted watch: a change may have been missed). */
static void read_again(slot_service *s) {
  slotmap *m = NULL;
  int64_t rev = 0;
  err_t err;
  err_clear(&err);
  if (slot_service_read(s, &m, &rev, &err) == ERR_OK && m) ss__follow(s, m);
}

static void *watch_main(void *arg) {
  slot_service *s = arg;
  int64_t from = s->watch_from;
  bool lost = false;
  while (!atomic_load(&s->stop)) {
    int64_t next = from, compacted = 0;
    err_t err;
    err_clear(&err);
    err_code rc = s->etcd.watch(s->etcd.arg, s->watch_prefix, from, on_change, s, &s->stop, &next,
                                &compacted, &err);
    if (atomic_load(&s->stop)) break;
    if (compacted) {
      char c[24];
      snprintf(c, sizeof c, "%lld", (long long)compacted);
      log_kv(LOG_INFO, "slot map watch: etcd compacted past it; reading the map again",
             "compact_revision", c, (const char *)NULL);
      from = compacted;
      read_again(s);
      continue;
    }
    from = next;
    if (rc != ERR_OK) {
      if (!lost)
        log_kv(LOG_WARN, "slot map watch lost; watching again once etcd answers", "error",
               err.msg, (const char *)NULL);
      lost = true;
      if (pause_ms(s, WATCH_RETRY_MS)) break;
      read_again(s);
      continue;
    }
    if (lost) log_kv(LOG_INFO, "slot map watch back", (const char *)NULL);
    lost = false;
  }
  return NULL;
}

bool ss__watch_start(slot_service *s) {
  s->watching = pthread_create(&s->watcher, NULL, watch_main, s) == 0;
  return s->watching;
}

void slot_service_stop(slot_service *s) {
  if (!s) return;
  atomic_store(&s->stop, true);
  slot_service_kick(s);
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
