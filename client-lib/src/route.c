/* route.c — slot-group routing (docs/api.md §17): the saga a request names, and which node
 * leads its group, from the topology the client fetched (GetTopology) and the redirects it was
 * given (idem-leader + idem-group). See idem_internal.h. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/v1/slot.h"
#include "idem_internal.h"

#define TOPO_GROUPS_MAX 64
#define FETCH_EVERY_MS 1000 /* at most one GetTopology a second */

struct idem__topo {
  pthread_mutex_t mu;
  uint32_t slots; /* 0: no map yet */
  uint64_t version;
  uint8_t *owner; /* per slot: index into groups */
  size_t n_groups;
  struct {
    char name[IDEM_GROUP_NAME_MAX + 1];
    char leader[128];
  } groups[TOPO_GROUPS_MAX];
  bool stale;         /* a redirect disagreed with the map, or named a group: fetch */
  int64_t fetched_ms; /* last fetch started */
};

idem__topo *idem__topo_new(void) {
  idem__topo *t = calloc(1, sizeof *t);
  if (t) pthread_mutex_init(&t->mu, NULL);
  return t;
}

void idem__topo_free(idem__topo *t) {
  if (!t) return;
  pthread_mutex_destroy(&t->mu);
  free(t->owner);
  free(t);
}

static const char *key_id(const Idem__V1__StepKey *k) {
  return k && k->global_id ? k->global_id : "";
}

const char *idem__route_id(idem__method m, const ProtobufCMessage *req) {
  const char *id = NULL;
  switch (m) {
    case IDEM__M_BEGIN_SAGA:
      id = ((const Idem__V1__BeginSagaRequest *)req)->request_id;
      break;
    case IDEM__M_BEGIN_STEP:
      return key_id(((const Idem__V1__BeginStepRequest *)req)->key);
    case IDEM__M_COMPLETE_STEP:
      return key_id(((const Idem__V1__CompleteStepRequest *)req)->key);
    case IDEM__M_EXTEND_LEASE:
      return key_id(((const Idem__V1__ExtendLeaseRequest *)req)->key);
    case IDEM__M_LOOKUP_STEP:
      return key_id(((const Idem__V1__LookupStepRequest *)req)->key);
    case IDEM__M_RESOLVE_STEP:
      return key_id(((const Idem__V1__ResolveStepRequest *)req)->key);
    case IDEM__M_GET_SAGA:
      id = ((const Idem__V1__GetSagaRequest *)req)->global_id;
      break;
    case IDEM__M_LIST_STEPS:
      id = ((const Idem__V1__ListStepsRequest *)req)->global_id;
      break;
    case IDEM__M_LIST_AUDIT:
      id = ((const Idem__V1__ListAuditRequest *)req)->global_id;
      break;
    default:
      break;
  }
  return id ? id : "";
}

static int group_index(const idem__topo *t, const char *name) {
  for (size_t i = 0; i < t->n_groups; i++)
    if (strcmp(t->groups[i].name, name) == 0) return (int)i;
  return -1;
}

bool idem__topo_leader(idem__topo *t, const char *tenant, const char *id, char *addr, size_t cap) {
  if (!t || !id || !id[0]) return false;
  pthread_mutex_lock(&t->mu);
  bool found = false;
  if (t->slots) {
    int g = t->owner[idem_v1_slot_of(tenant, id, t->slots)];
    if (t->groups[g].leader[0]) {
      snprintf(addr, cap, "%s", t->groups[g].leader);
      found = true;
    }
  }
  pthread_mutex_unlock(&t->mu);
  return found;
}

bool idem__topo_group_leader(idem__topo *t, const char *group, char *addr, size_t cap) {
  if (!t || !group) return false;
  pthread_mutex_lock(&t->mu);
  int g = group_index(t, group);
  bool found = g >= 0 && t->groups[g].leader[0];
  if (found) snprintf(addr, cap, "%s", t->groups[g].leader);
  pthread_mutex_unlock(&t->mu);
  return found;
}

bool idem__topo_redirect(idem__topo *t, const char *tenant, const char *id, const char *group,
                         const char *leader) {
  if (!t || !group || !group[0]) return false;
  pthread_mutex_lock(&t->mu);
  int g = group_index(t, group);
  if (g >= 0) snprintf(t->groups[g].leader, sizeof t->groups[g].leader, "%s", leader);
  /* no map yet, a group the map does not know, or one other than the map's for this saga:
   * the map is behind (a new cluster, or slots moved) */
  if (!t->slots || g < 0 || (id && id[0] && t->owner[idem_v1_slot_of(tenant, id, t->slots)] != g))
    t->stale = true;
  bool fetch = t->stale && idem__now_ms() - t->fetched_ms >= FETCH_EVERY_MS;
  if (fetch) t->fetched_ms = idem__now_ms();
  pthread_mutex_unlock(&t->mu);
  return fetch;
}

void idem__topo_unreachable(idem__topo *t, const char *addr) {
  if (!t || !addr || !addr[0]) return;
  pthread_mutex_lock(&t->mu);
  for (size_t g = 0; g < t->n_groups; g++)
    if (!strcmp(t->groups[g].leader, addr)) t->groups[g].leader[0] = '\0';
  pthread_mutex_unlock(&t->mu);
}

void idem__topo_set(idem__topo *t, const Idem__V1__Topology *pb) {
  if (!t || !pb || !pb->slots || pb->n_groups == 0 || pb->n_groups > TOPO_GROUPS_MAX) return;
  uint8_t *owner = calloc(pb->slots, 1);
  if (!owner) return;
  idem__topo next = {0};
  next.n_groups = pb->n_groups;
  for (size_t i = 0; i < pb->n_groups; i++) {
    snprintf(next.groups[i].name, sizeof next.groups[i].name, "%s",
             pb->groups[i]->name ? pb->groups[i]->name : "");
    snprintf(next.groups[i].leader, sizeof next.groups[i].leader, "%s",
             pb->groups[i]->leader_address ? pb->groups[i]->leader_address : "");
  }
  for (size_t i = 0; i < pb->n_ranges; i++) { /* a range of an unknown group: map refused */
    const Idem__V1__SlotRange *r = pb->ranges[i];
    int g = group_index(&next, r->group ? r->group : "");
    if (g < 0 || r->from > r->to || r->to >= pb->slots) {
      free(owner);
      return;
    }
    memset(owner + r->from, g, (size_t)(r->to - r->from) + 1);
  }
  pthread_mutex_lock(&t->mu);
  if (!t->slots || pb->version >= t->version) {
    free(t->owner);
    t->owner = owner;
    owner = NULL;
    t->slots = pb->slots;
    t->version = pb->version;
    t->n_groups = next.n_groups;
    memcpy(t->groups, next.groups, sizeof t->groups);
    t->stale = false;
  }
  pthread_mutex_unlock(&t->mu);
  free(owner);
}
