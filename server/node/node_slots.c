/* node_slots.c — see node_slots.h. */
#include "node_slots.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../domain/slot.h"
#include "../elect/etcd_kv.h"
#include "../util/clock.h"
#include "../util/log.h"
#include "../util/ticker.h"
#include "../slots/slotmove.h"

#define MAP_PATIENCE_MS 30000 /* keep trying to read or create the map this long */
#define MAP_CALL_MS 2000
#define MAP_RETRY_MS 500
#define WATCH_EVERY_MS 1000 /* the map in etcd is read this often */
#define WATCH_MOVING_MS 50  /* and this often while a move is under way */
#define RETIRED_MAX 256     /* maps replaced while running */
#define RETIRED_KEEP_MS 60000 /* a replaced map is freed this long after (a reader is long done) */

/* One version of the map with its slot -> group table; immutable once published. */
typedef struct map_rt {
  slotmap *map;
  uint16_t *owner; /* per slot: the index of its group in o->groups */
} map_rt;

struct node_slots {
  const idem_options *o;
  _Atomic(map_rt *) cur;
  map_rt *retired[RETIRED_MAX]; /* earlier versions: a reader may still hold one */
  int64_t retired_at[RETIRED_MAX];
  size_t n_retired;
  pthread_mutex_t mu; /* publishing (the watch, a move's driver) */
  char key[512]; /* <prefix>/slotmap */
  ticker *watch; /* etcd and --store only */
  int64_t watched_ms; /* the watch's last read */
};

static void map_rt_free(map_rt *m) {
  if (!m) return;
  slotmap_free(m->map);
  free(m->owner);
  free(m);
}

static map_rt *cur_of(const node_slots *s) {
  return atomic_load(&((node_slots *)s)->cur);
}

/* Builds rt's slot -> group table; NODE_SLOTS_USAGE when the map has another slot count or
 * names a group o lacks. */
static node_slots_result index_map(const node_slots *s, map_rt *rt, char *msg, size_t cap) {
  const slotmap *m = rt->map;
  if (m->slots != (uint32_t)s->o->slots) {
    snprintf(msg, cap,
             "--slots %d: the cluster was created with %u slots (the slot map in etcd at "
             "%s/slotmap); start every node with --slots %u",
             s->o->slots, m->slots, s->o->election_prefix, m->slots);
    return NODE_SLOTS_USAGE;
  }
  rt->owner = calloc(m->slots, sizeof *rt->owner);
  if (!rt->owner) {
    snprintf(msg, cap, "out of memory");
    return NODE_SLOTS_FAILED;
  }
  for (size_t i = 0; i < m->n_ranges; i++) {
    const slot_range *r = &m->ranges[i];
    size_t g = 0;
    while (g < s->o->n_groups && strcmp(s->o->groups[g].name, r->group) != 0) g++;
    if (g == s->o->n_groups) {
      snprintf(msg, cap,
               "--store: the slot map serves slots %u-%u from group %s, which this node is not "
               "given: start every node with the same --store groups",
               r->from, r->to, r->group);
      return NODE_SLOTS_USAGE;
    }
    for (uint32_t x = r->from; x <= r->to; x++) rt->owner[x] = (uint16_t)g;
  }
  return NODE_SLOTS_OK;
}

/* The map in etcd into *out, created there with equal ranges (fresh) when there is none. */
static node_slots_result etcd_map(node_slots *s, const slotmap *fresh, slotmap **out, char *msg,
                                  size_t cap) {
  const idem_options *o = s->o;
  const char *key = s->key;
  char *json = slotmap_json(fresh);
  if (!json) {
    snprintf(msg, cap, "out of memory");
    return NODE_SLOTS_FAILED;
  }
  int64_t give_up = clock_mono_ms() + MAP_PATIENCE_MS;
  err_t err;
  for (;;) {
    err_clear(&err);
    char *value = NULL;
    size_t len = 0;
    int64_t rev = 0;
    if (etcd_kv_get(o->etcd, key, MAP_CALL_MS, &value, &len, &rev, &err) == ERR_OK) {
      if (value) {
        char why[256];
        *out = slotmap_parse(value, len, why, sizeof why);
        free(value);
        free(json);
        if (!*out) {
          snprintf(msg, cap, "the slot map in etcd at %s is not valid: %s", key, why);
          return NODE_SLOTS_USAGE;
        }
        return NODE_SLOTS_OK;
      }
      bool created = false;
      if (etcd_kv_create(o->etcd, key, json, MAP_CALL_MS, &created, &err) == ERR_OK && created) {
        log_kv(LOG_INFO, "created the slot map", "key", key, "map", json, (const char *)NULL);
        *out = slotmap_parse(json, strlen(json), NULL, 0);
        free(json);
        return *out ? NODE_SLOTS_OK : NODE_SLOTS_FAILED;
      }
      if (err.code == ERR_OK) continue; /* another node created it first: read theirs */
    }
    if (clock_mono_ms() >= give_up) break;
    log_kv(LOG_WARN, "cannot read the slot map yet, retrying", "key", key, "error", err.msg,
           (const char *)NULL);
    struct timespec ts = clock_span_timespec(MAP_RETRY_MS);
    nanosleep(&ts, NULL);
  }
  free(json);
  snprintf(msg, cap, "cannot read the slot map at %s from etcd: %s", key, err.msg);
  log_kv(LOG_ERROR, "cannot read the slot map", "key", key, "error", err.msg, (const char *)NULL);
  return NODE_SLOTS_FAILED;
}

/* Frees retired maps replaced long enough ago; true when there is room for one more. */
static bool retire_room(node_slots *s) {
  int64_t now = clock_mono_ms();
  size_t k = 0;
  for (size_t i = 0; i < s->n_retired; i++) {
    if (now - s->retired_at[i] >= RETIRED_KEEP_MS) {
      map_rt_free(s->retired[i]);
    } else {
      s->retired[k] = s->retired[i];
      s->retired_at[k++] = s->retired_at[i];
    }
  }
  s->n_retired = k;
  return k < RETIRED_MAX;
}

/* Publishes next (indexed) in place of the current map when it is newer; takes next either way.
 * Under s->mu. */
static void publish(node_slots *s, map_rt *next) {
  map_rt *cur = cur_of(s);
  if (next->map->version <= cur->map->version || !retire_room(s)) {
    if (next->map->version > cur->map->version)
      log_kv(LOG_ERROR, "cannot follow the new slot map", "error", "too many versions in a minute",
             (const char *)NULL);
    map_rt_free(next);
    return;
  }
  char v[24];
  snprintf(v, sizeof v, "%llu", (unsigned long long)next->map->version);
  log_kv(LOG_INFO, "following a new slot map", "version", v, (const char *)NULL);
  s->retired_at[s->n_retired] = clock_mono_ms();
  s->retired[s->n_retired++] = cur;
  atomic_store(&s->cur, next);
}

bool node_slots_follow(node_slots *s, slotmap *m) {
  map_rt *next = calloc(1, sizeof *next);
  char why[256] = "";
  if (!next) {
    slotmap_free(m);
    return false;
  }
  next->map = m;
  if (index_map(s, next, why, sizeof why) != NODE_SLOTS_OK) {
    log_kv(LOG_ERROR, "cannot follow the new slot map", "error", why, (const char *)NULL);
    map_rt_free(next);
    return false;
  }
  pthread_mutex_lock(&s->mu);
  publish(s, next);
  pthread_mutex_unlock(&s->mu);
  return true;
}

/* One look at the map in etcd: a newer version this node can serve (the same slot count, only
 * groups it has) is published; one it cannot is logged and not followed. */
static void watch_once(node_slots *s, const char *key) {
  char *value = NULL, why[256] = "";
  size_t len = 0;
  int64_t rev = 0;
  err_t err;
  err_clear(&err);
  map_rt *cur = cur_of(s), *next = NULL;
  if (etcd_kv_get(s->o->etcd, key, WATCH_EVERY_MS, &value, &len, &rev, &err) != ERR_OK || !value)
    goto done;
  if (!(next = calloc(1, sizeof *next))) goto done;
  if (!(next->map = slotmap_parse(value, len, why, sizeof why))) {
    log_kv(LOG_ERROR, "the slot map in etcd is not valid; keeping the one followed", "key", key,
           "error", why, (const char *)NULL);
  } else if (next->map->version > cur->map->version) {
    if (index_map(s, next, why, sizeof why) != NODE_SLOTS_OK) {
      log_kv(LOG_ERROR, "cannot follow the new slot map", "error", why, (const char *)NULL);
    } else {
      pthread_mutex_lock(&s->mu);
      publish(s, next);
      pthread_mutex_unlock(&s->mu);
      next = NULL;
    }
  }
done:
  map_rt_free(next);
  free(value);
}

/* Every WATCH_EVERY_MS; every WATCH_MOVING_MS while a move is under way (docs/api.md §18: the
 * nodes follow its handoff sooner, so the moving slots pause less). */
static bool watch_tick(void *arg) {
  node_slots *s = arg;
  int64_t now = clock_mono_ms();
  if (!cur_of(s)->map->move && now - s->watched_ms < WATCH_EVERY_MS - WATCH_MOVING_MS / 2)
    return true;
  s->watched_ms = now;
  watch_once(s, s->key);
  return true;
}

node_slots_result node_slots_start(const idem_options *o, node_slots **out, char *msg, size_t cap) {
  *out = NULL;
  node_slots *s = calloc(1, sizeof *s);
  map_rt *rt = s ? calloc(1, sizeof *rt) : NULL;
  const char *names[OPT_LIST_MAX];
  for (size_t i = 0; i < o->n_groups; i++) names[i] = o->groups[i].name;
  slotmap *fresh = rt ? slotmap_equal((uint32_t)o->slots, names, o->n_groups) : NULL;
  if (!fresh) {
    free(rt);
    free(s);
    snprintf(msg, cap, "out of memory");
    return NODE_SLOTS_FAILED;
  }
  s->o = o;
  pthread_mutex_init(&s->mu, NULL);
  snprintf(s->key, sizeof s->key, "%s/slotmap", o->election_prefix);
  atomic_store(&s->cur, rt);
  bool in_etcd = o->etcd && !o->groups_from_pg;
  node_slots_result rc = NODE_SLOTS_OK;
  if (in_etcd) {
    rc = etcd_map(s, fresh, &rt->map, msg, cap);
    slotmap_free(fresh);
  } else {
    rt->map = fresh;
  }
  if (rc == NODE_SLOTS_OK) rc = index_map(s, rt, msg, cap);
  if (rc == NODE_SLOTS_OK && in_etcd && !(s->watch = ticker_start(WATCH_MOVING_MS, watch_tick, s)))
    log_kv(LOG_ERROR, "cannot watch the slot map", (const char *)NULL);
  if (rc != NODE_SLOTS_OK) {
    node_slots_stop(s);
    return rc;
  }
  *out = s;
  return NODE_SLOTS_OK;
}

int node_slots_route(const node_slots *s, const char *tenant, const char *id, bool new_saga,
                     node_slots_leads_fn leads, void *leads_arg) {
  if (new_saga && (!id || !id[0])) {
    for (size_t g = 0; leads && g < s->o->n_groups; g++)
      if (leads(leads_arg, g)) return (int)g;
    return 0;
  }
  const map_rt *m = cur_of(s);
  uint32_t slot = slot_of(tenant, id, m->map->slots);
  const struct slot_move *mv = m->map->move;
  if (mv && mv->phase == MOVE_BLOCKED && slot >= mv->from && slot <= mv->to)
    return NODE_SLOTS_MOVING;
  return m->owner[slot];
}

bool node_slots_owns(const node_slots *s, size_t group, uint32_t slot) {
  const map_rt *m = cur_of(s);
  return slot < m->map->slots && m->owner[slot] == group;
}

const slotmap *node_slots_map(const node_slots *s) {
  return cur_of(s)->map;
}

void node_slots_stop(node_slots *s) {
  if (!s) return;
  ticker_stop(s->watch);
  map_rt_free(cur_of(s));
  for (size_t i = 0; i < s->n_retired; i++) map_rt_free(s->retired[i]);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
