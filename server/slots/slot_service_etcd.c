/* slot_service_etcd.c — the service's etcd side (slot_service.h): the start (the map read, or
 * created), the watch's thread, and the moves' calls: the map's compare-and-swap, the results,
 * the progress. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/clock.h"
#include "../util/log.h"
#include "slot_service_internal.h"

#define MAP_PATIENCE_MS 30000 /* keep trying to read or create the map this long at start */
#define MAP_RETRY_MS 500
#define WATCH_RETRY_MS 500 /* after a lost watch (etcd down), before reading the map again */

/* Waits ms before the start's next try (nothing else runs yet: the watch has not started). */
static void retry_after(slot_service *s, int64_t ms) {
  struct timespec ts = clock_after_us(CLOCK_MONOTONIC, ms * 1000);
  pthread_mutex_lock(&s->mu);
  pthread_cond_timedwait(&s->cv, &s->mu, &ts);
  pthread_mutex_unlock(&s->mu);
}

/* The map in etcd into *out (its revision *rev), created there as fresh when there is none. */
static slots_result etcd_map(slot_service *s, const slotmap *fresh, slotmap **out, int64_t *rev,
                             char *msg, size_t cap) {
  char *json = slotmap_json(fresh);
  if (!json) {
    snprintf(msg, cap, "out of memory");
    return SLOTS_FAILED;
  }
  int64_t give_up = clock_mono_ms() + MAP_PATIENCE_MS;
  err_t err;
  for (;;) {
    err_clear(&err);
    char *value = NULL;
    size_t len = 0;
    if (s->etcd.get(s->etcd.arg, s->map_key, SS_ETCD_MS, &value, &len, rev, &err) == ERR_OK) {
      if (value) {
        char why[256];
        *out = slotmap_parse(value, len, why, sizeof why);
        free(value);
        free(json);
        if (!*out) {
          snprintf(msg, cap, "the slot map in etcd at %s is not valid: %s", s->map_key, why);
          return SLOTS_USAGE;
        }
        return SLOTS_OK;
      }
      bool created = false;
      if (s->etcd.create(s->etcd.arg, s->map_key, json, SS_ETCD_MS, &created, &err) == ERR_OK &&
          created) {
        log_kv(LOG_INFO, "created the slot map", "key", s->map_key, "map", json,
               (const char *)NULL);
        continue; /* read it back, with its revision */
      }
      if (err.code == ERR_OK) continue; /* another node created it first: read theirs */
    }
    if (clock_mono_ms() >= give_up) break;
    log_kv(LOG_WARN, "cannot read the slot map yet, retrying", "key", s->map_key, "error",
           err.msg, (const char *)NULL);
    retry_after(s, MAP_RETRY_MS);
  }
  free(json);
  snprintf(msg, cap, "cannot read the slot map at %s from etcd: %s", s->map_key, err.msg);
  log_kv(LOG_ERROR, "cannot read the slot map", "key", s->map_key, "error", err.msg,
         (const char *)NULL);
  return SLOTS_FAILED;
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

slots_result slot_service_start(const slots_config *c, slot_service **out, char *msg,
                                size_t cap) {
  *out = NULL;
  if (cap) msg[0] = '\0';
  slot_service *s = calloc(1, sizeof *s);
  slotmap *fresh = s ? slotmap_equal(c->slots, c->groups, c->n_groups) : NULL;
  if (s && fresh) s->groups = calloc(c->n_groups, sizeof *s->groups);
  if (!s || !fresh || !s->groups) {
    slotmap_free(fresh);
    free(s);
    snprintf(msg, cap, "out of memory");
    return SLOTS_FAILED;
  }
  s->slots = c->slots;
  for (size_t i = 0; i < c->n_groups; i++) s->groups[i] = strdup(c->groups[i]);
  s->n_groups = c->n_groups;
  s->in_etcd = c->etcd != NULL;
  if (c->etcd) s->etcd = *c->etcd;
  snprintf(s->map_key, sizeof s->map_key, "%s/slotmap", c->prefix);
  snprintf(s->results_prefix, sizeof s->results_prefix, "%s/moves/", c->prefix);
  snprintf(s->progress_key, sizeof s->progress_key, "%s/slotmove.progress", c->prefix);
  snprintf(s->watch_prefix, sizeof s->watch_prefix, "%s/", c->prefix);
  pthread_mutex_init(&s->cur_mu, NULL);
  pthread_mutex_init(&s->mu, NULL);
  clock_cond_init(&s->cv);
  slots_result rc = SLOTS_OK;
  slotmap *m = fresh;
  int64_t rev = 0;
  for (size_t i = 0; i < c->n_groups; i++)
    if (!s->groups[i]) rc = SLOTS_FAILED;
  if (rc == SLOTS_OK && s->in_etcd) {
    m = NULL;
    rc = etcd_map(s, fresh, &m, &rev, msg, cap);
    slotmap_free(fresh);
  }
  if (rc == SLOTS_OK) {
    if (!(s->cur = ss__view(m))) rc = SLOTS_FAILED; /* m freed */
  } else if (!s->in_etcd) {
    slotmap_free(m); /* fresh */
  }
  if (rc == SLOTS_OK) rc = ss__index(s, s->cur, msg, cap);
  s->watch_from = rev + 1;
  if (rc == SLOTS_OK && s->in_etcd && !ss__watch_start(s)) {
    snprintf(msg, cap, "cannot start the slot map's watch");
    rc = SLOTS_FAILED;
  }
  if (rc != SLOTS_OK) {
    if (!msg[0]) snprintf(msg, cap, "out of memory");
    slot_service_stop(s);
    return rc;
  }
  *out = s;
  return SLOTS_OK;
}

err_code slot_service_read(slot_service *s, slotmap **out, int64_t *rev, err_t *err) {
  *out = NULL;
  *rev = 0;
  if (!s->in_etcd) return err_set(err, ERR_PRECONDITION, "the slot map is not in etcd");
  char *value = NULL, why[256];
  size_t len = 0;
  err_code rc = s->etcd.get(s->etcd.arg, s->map_key, SS_ETCD_MS, &value, &len, rev, err);
  if (rc != ERR_OK || !value) return rc;
  *out = slotmap_parse(value, len, why, sizeof why);
  free(value);
  if (!*out) return err_set(err, ERR_INTERNAL, "the slot map in etcd is not valid: %s", why);
  return ERR_OK;
}

err_code slot_service_swap(slot_service *s, const slotmap *next, int64_t rev, bool *swapped,
                           err_t *err) {
  *swapped = false;
  if (!s->in_etcd) return err_set(err, ERR_PRECONDITION, "the slot map is not in etcd");
  char *json = slotmap_json(next);
  if (!json) return err_oom(err);
  err_code rc = s->etcd.swap(s->etcd.arg, s->map_key, json, rev, SS_ETCD_MS, swapped, err);
  free(json);
  if (rc == ERR_OK && *swapped) {
    slotmap *mine = slotmap_copy(next);
    if (mine) ss__follow(s, mine);
  }
  return rc;
}

err_code slot_service_keep_result(slot_service *s, const char *rid, const char *json, err_t *err) {
  char key[640];
  snprintf(key, sizeof key, "%s%s", s->results_prefix, rid);
  bool created = false;
  return s->etcd.create(s->etcd.arg, key, json, SS_ETCD_MS, &created, err);
}

err_code slot_service_result(slot_service *s, const char *rid, char **json, size_t *len,
                             err_t *err) {
  *json = NULL;
  *len = 0;
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < SS_RESULTS && !*json; i++)
    if (s->results[i].json && strcmp(s->results[i].rid, rid) == 0 &&
        (*json = malloc(s->results[i].len + 1))) {
      memcpy(*json, s->results[i].json, s->results[i].len + 1);
      *len = s->results[i].len;
    }
  pthread_mutex_unlock(&s->mu);
  if (*json) return ERR_OK;
  char key[640];
  int64_t rev = 0;
  snprintf(key, sizeof key, "%s%s", s->results_prefix, rid);
  return s->etcd.get(s->etcd.arg, key, SS_ETCD_MS, json, len, &rev, err);
}

void slot_service_put_progress(slot_service *s, uint64_t rows, int64_t lag) {
  atomic_store(&s->rows, rows);
  atomic_store(&s->lag, lag);
  atomic_store(&s->have_progress, true);
  char v[96];
  snprintf(v, sizeof v, "{\"rows\":%llu,\"lag\":%lld}", (unsigned long long)rows, (long long)lag);
  err_t err;
  err_clear(&err);
  s->etcd.put(s->etcd.arg, s->progress_key, v, SS_ETCD_MS, &err);
}
