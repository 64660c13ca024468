/* node_slots.c — see node_slots.h. */
#include "node_slots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../domain/slot.h"
#include "../elect/etcd_kv.h"
#include "../util/clock.h"
#include "../util/log.h"

#define MAP_PATIENCE_MS 30000 /* keep trying to read or create the map this long */
#define MAP_CALL_MS 2000
#define MAP_RETRY_MS 500

struct node_slots {
  const idem_options *o;
  slotmap *map;
  uint16_t *owner; /* per slot: the index of its group in o->groups */
};

/* Builds the slot -> group table; NODE_SLOTS_USAGE when the map names a group o lacks. */
static node_slots_result index_map(node_slots *s, char *msg, size_t cap) {
  const slotmap *m = s->map;
  if (m->slots != (uint32_t)s->o->slots) {
    snprintf(msg, cap,
             "--slots %d: the cluster was created with %u slots (the slot map in etcd at "
             "%s/slotmap); start every node with --slots %u",
             s->o->slots, m->slots, s->o->election_prefix, m->slots);
    return NODE_SLOTS_USAGE;
  }
  s->owner = calloc(m->slots, sizeof *s->owner);
  if (!s->owner) {
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
    for (uint32_t x = r->from; x <= r->to; x++) s->owner[x] = (uint16_t)g;
  }
  return NODE_SLOTS_OK;
}

/* The map in etcd, created with equal ranges when there is none. */
static node_slots_result etcd_map(node_slots *s, const slotmap *fresh, char *msg, size_t cap) {
  const idem_options *o = s->o;
  char key[512];
  snprintf(key, sizeof key, "%s/slotmap", o->election_prefix);
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
        s->map = slotmap_parse(value, len, why, sizeof why);
        free(value);
        free(json);
        if (!s->map) {
          snprintf(msg, cap, "the slot map in etcd at %s is not valid: %s", key, why);
          return NODE_SLOTS_USAGE;
        }
        return NODE_SLOTS_OK;
      }
      bool created = false;
      if (etcd_kv_create(o->etcd, key, json, MAP_CALL_MS, &created, &err) == ERR_OK && created) {
        log_kv(LOG_INFO, "created the slot map", "key", key, "map", json, (const char *)NULL);
        s->map = slotmap_parse(json, strlen(json), NULL, 0);
        free(json);
        return s->map ? NODE_SLOTS_OK : NODE_SLOTS_FAILED;
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

node_slots_result node_slots_start(const idem_options *o, node_slots **out, char *msg, size_t cap) {
  *out = NULL;
  node_slots *s = calloc(1, sizeof *s);
  const char *names[OPT_LIST_MAX];
  for (size_t i = 0; i < o->n_groups; i++) names[i] = o->groups[i].name;
  slotmap *fresh = s ? slotmap_equal((uint32_t)o->slots, names, o->n_groups) : NULL;
  if (!fresh) {
    free(s);
    snprintf(msg, cap, "out of memory");
    return NODE_SLOTS_FAILED;
  }
  s->o = o;
  node_slots_result rc = NODE_SLOTS_OK;
  if (o->etcd && !o->groups_from_pg) {
    rc = etcd_map(s, fresh, msg, cap);
    slotmap_free(fresh);
  } else {
    s->map = fresh;
  }
  if (rc == NODE_SLOTS_OK) rc = index_map(s, msg, cap);
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
  return s->owner[slot_of(tenant, id, s->map->slots)];
}

bool node_slots_owns(const node_slots *s, size_t group, uint32_t slot) {
  return slot < s->map->slots && s->owner[slot] == group;
}

const slotmap *node_slots_map(const node_slots *s) {
  return s->map;
}

void node_slots_stop(node_slots *s) {
  if (!s) return;
  slotmap_free(s->map);
  free(s->owner);
  free(s);
}
