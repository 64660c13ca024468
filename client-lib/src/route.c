/* route.c — where a call goes, and the one retry loop of libidem (idem__call): the slot map
 * that sends a saga's calls to its group's leader (docs/api.md §17), the client's endpoints (a
 * channel per coordinator address; the current one), and what each address was last heard say
 * (the fail-open rule, docs/api.md §20). Each try is transport.c's, which knows nothing of the
 * others. See idem_internal.h for the contracts. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/v1/slot.h"
#include "idem_internal.h"

#define EP_NOMEM (-2)
#define ADDR_CAP 128 /* an address's size in the slot map */
#define TOPO_GROUPS_MAX 64
#define FETCH_EVERY_MS 1000 /* at most one GetTopology a second */

/* --- the slot map (docs/api.md §17) -------------------------------------------------------- */
/* What the client knows of the cluster's groups: the slot map (from GetTopology) and each
 * group's leader (from the map and from redirects: idem-leader + idem-group). */
typedef struct topo {
  pthread_mutex_t mu;
  uint32_t slots; /* 0: no map yet */
  uint64_t version;
  uint8_t *owner; /* per slot: index into groups */
  size_t n_groups;
  struct {
    char name[IDEM_GROUP_NAME_MAX + 1];
    char leader[ADDR_CAP];
  } groups[TOPO_GROUPS_MAX];
  bool stale;         /* a redirect disagreed with the map, or named a group: fetch */
  int64_t fetched_ms; /* last fetch started */
} topo;

static int group_index(const topo *t, const char *name) {
  for (size_t i = 0; i < t->n_groups; i++)
    if (strcmp(t->groups[i].name, name) == 0) return (int)i;
  return -1;
}

static bool topo_leader(topo *t, const char *tenant, const char *id, char *addr, size_t cap) {
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

static bool topo_group_leader(topo *t, const char *group, char *addr, size_t cap) {
  if (!t || !group) return false;
  pthread_mutex_lock(&t->mu);
  int g = group_index(t, group);
  bool found = g >= 0 && t->groups[g].leader[0];
  if (found) snprintf(addr, cap, "%s", t->groups[g].leader);
  pthread_mutex_unlock(&t->mu);
  return found;
}

static bool topo_redirect(topo *t, const char *tenant, const char *id, const char *group,
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

static void topo_unreachable(topo *t, const char *addr) {
  if (!t || !addr || !addr[0]) return;
  pthread_mutex_lock(&t->mu);
  for (size_t g = 0; g < t->n_groups; g++)
    if (!strcmp(t->groups[g].leader, addr)) t->groups[g].leader[0] = '\0';
  pthread_mutex_unlock(&t->mu);
}

static void topo_set(topo *t, const Idem__V1__Topology *pb) {
  if (!t || !pb || !pb->slots || pb->n_groups == 0 || pb->n_groups > TOPO_GROUPS_MAX) return;
  uint8_t *owner = calloc(pb->slots, 1);
  if (!owner) return;
  topo next = {0};
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

/* --- endpoints ---------------------------------------------------------------------------- */

struct idem__route {
  pthread_mutex_t mu; /* eps[] only grows; an entry's addr never changes once added */
  idem__transport *tp;
  int n_eps, cur;
  struct idem__ep {
    char *addr;
    idem__chan *chan; /* made by idem__route_add_list, or at the first try here */
    /* the last call here (docs/api.md §20): when (monotonic ms, 0 = never) and what it heard */
    int64_t heard_ms;
    idem__heard heard;
    int sent_to; /* heard IDEM__HEARD_SENT: the endpoint of the leader it named, -1 unknown */
  } eps[IDEM__MAX_ENDPOINTS];
  int64_t lost_ms; /* monotonic ms of the last lost try on any address, 0 = none */
  topo topo;       /* slot groups: where each saga's group is led */
};

idem__route *idem__route_new(idem__transport *tp) {
  idem__route *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  pthread_mutex_init(&r->mu, NULL);
  pthread_mutex_init(&r->topo.mu, NULL);
  r->tp = tp;
  return r;
}

void idem__route_free(idem__route *r) {
  if (!r) return;
  for (int i = 0; i < r->n_eps; i++) {
    idem__chan_free(r->eps[i].chan);
    free(r->eps[i].addr);
  }
  pthread_mutex_destroy(&r->mu);
  pthread_mutex_destroy(&r->topo.mu);
  free(r->topo.owner);
  free(r);
}

/* The endpoint for addr[0..len) (added, without a channel, if new); -1 when the list is full or
 * addr is blank, EP_NOMEM when there is no memory for it. */
static int ep_add(idem__route *r, const char *addr, size_t len) {
  while (len > 0 && addr[0] == ' ') addr++, len--;
  while (len > 0 && addr[len - 1] == ' ') len--;
  if (len == 0) return -1;
  pthread_mutex_lock(&r->mu);
  int found = -1;
  for (int i = 0; i < r->n_eps && found < 0; i++)
    if (strlen(r->eps[i].addr) == len && memcmp(r->eps[i].addr, addr, len) == 0) found = i;
  if (found < 0 && r->n_eps < IDEM__MAX_ENDPOINTS) {
    struct idem__ep *e = &r->eps[r->n_eps];
    if (!(e->addr = malloc(len + 1))) {
      found = EP_NOMEM;
    } else {
      memcpy(e->addr, addr, len);
      e->addr[len] = '\0';
      found = r->n_eps++;
    }
  }
  pthread_mutex_unlock(&r->mu);
  return found;
}

int idem__route_add_list(idem__route *r, const char *list, idem_error *err) {
  int bad = 0;
  for (const char *p = list; *p && !bad;) {
    size_t len = strcspn(p, ",");
    int i = len > 0 ? ep_add(r, p, len) : 0;
    if (i < 0) bad = i;
    p += len;
    if (*p == ',') p++;
  }
  for (int i = 0; i < r->n_eps && !bad; i++) /* every address given gets its channel now */
    if (!r->eps[i].chan) bad = idem__chan_new(r->tp, r->eps[i].addr, &r->eps[i].chan);
  if (bad == EP_NOMEM || bad == IDEM_NOMEM) return idem__fail(err, IDEM_NOMEM, "out of memory");
  if (bad || r->n_eps == 0)
    return idem__fail(err, IDEM_INTERNAL, "cannot create a channel to %s", list);
  return IDEM_OK;
}

void idem__route_topology(idem__route *r, const Idem__V1__Topology *t) {
  topo_set(&r->topo, t);
}

/* --- what each address was heard say (docs/api.md §20) ------------------------------------ */

static idem__heard heard_of(int rc, const idem_error *err) {
  if (rc == IDEM_OK) return IDEM__HEARD_DECIDER;
  if (rc == IDEM_DEADLINE_EXCEEDED) return IDEM__HEARD_NOTHING; /* no answer in time */
  if (!err->reason[0]) /* connection refused, reset: gRPC's, not a coordinator's */
    return rc == IDEM_UNAVAILABLE ? IDEM__HEARD_NOTHING : IDEM__HEARD_DECIDER;
  if (!strcmp(err->reason, IDEM_REASON_STORE_UNAVAILABLE) ||
      !strcmp(err->reason, IDEM_REASON_STORE_TIMEOUT) ||
      !strcmp(err->reason, IDEM_REASON_NO_LEADER))
    return IDEM__HEARD_UNDECIDED;
  if (!strcmp(err->reason, IDEM_REASON_NOT_LEADER) && err->leader[0]) return IDEM__HEARD_SENT;
  return IDEM__HEARD_DECIDER; /* an answer, shutting-down, ...: this or another node decides */
}

/* The endpoint of address addr, -1 when the client does not know it (under r->mu). */
static int ep_find(const idem__route *r, const char *addr) {
  for (int i = 0; i < r->n_eps; i++)
    if (!strcmp(r->eps[i].addr, addr)) return i;
  return -1;
}

bool idem__lost_since(idem__route *r, int64_t since_ms) {
  pthread_mutex_lock(&r->mu);
  bool lost = r->lost_ms > 0 && r->lost_ms >= since_ms;
  pthread_mutex_unlock(&r->mu);
  return lost;
}

bool idem__unreachable(idem__route *r, const idem_error *err, int64_t since_ms) {
  if (!err || (err->code != IDEM_DEADLINE_EXCEEDED && err->code != IDEM_UNAVAILABLE)) return false;
  if (idem__lost_since(r, since_ms)) return false; /* that node was up and may have decided */
  /* every known address called since since_ms, and none of them could decide */
  pthread_mutex_lock(&r->mu);
  bool none = r->n_eps > 0;
  for (int i = 0; i < r->n_eps && none; i++) {
    /* a standby's "not-leader" counts as what the node it names said (followed at most
     * n_eps times: a loop of standbys naming each other decides nothing either) */
    int j = i;
    for (int hops = 0; hops < r->n_eps && r->eps[j].heard == IDEM__HEARD_SENT; hops++) {
      if (r->eps[j].heard_ms < since_ms || r->eps[j].sent_to < 0) break;
      j = r->eps[j].sent_to;
    }
    none = r->eps[j].heard_ms >= since_ms &&
           (r->eps[j].heard == IDEM__HEARD_NOTHING || r->eps[j].heard == IDEM__HEARD_UNDECIDED);
  }
  pthread_mutex_unlock(&r->mu);
  return none;
}

/* --- one try ------------------------------------------------------------------------------- */

/* The tenant whose slots the client can compute: the one it sends, unless a token decides
 * (then only redirects route its calls). */
static const char *route_tenant(const idem_client *c) {
  if (c->auth) return NULL;
  return c->tenant ? c->tenant : "default";
}

/* With slot groups: the endpoint of the leader of the group of saga id, or of the named group;
 * -1 when the client does not know it (no topology yet, or no leader). */
static int routed_ep(idem_client *c, const char *id, const char *group) {
  char leader[ADDR_CAP];
  const char *t = route_tenant(c);
  topo *map = &c->route->topo;
  bool known = group ? topo_group_leader(map, group, leader, sizeof leader)
                     : t && id[0] && topo_leader(map, t, id, leader, sizeof leader);
  return known ? ep_add(c->route, leader, strlen(leader)) : -1;
}

/* One try on endpoint ep (its channel made first if it has none); what it heard is noted. */
static int try_at(idem_client *c, int ep, idem__method m, const ProtobufCMessage *req,
                  const char *group, const ProtobufCMessageDescriptor *resp_desc,
                  int64_t timeout_ms, ProtobufCMessage **resp, idem_error *err, char *heard_group) {
  idem__route *r = c->route;
  pthread_mutex_lock(&r->mu);
  int rc = r->eps[ep].chan ? IDEM_OK : idem__chan_new(r->tp, r->eps[ep].addr, &r->eps[ep].chan);
  idem__chan *ch = r->eps[ep].chan;
  pthread_mutex_unlock(&r->mu);
  if (rc != IDEM_OK) {
    *resp = NULL;
    return rc == IDEM_NOMEM ? idem__fail(err, IDEM_NOMEM, "out of memory")
                            : idem__fail(err, IDEM_INTERNAL, "cannot create a channel");
  }
  /* the client's strings outlive every call (idem_close requires that none is in flight) */
  idem__md md = {.tenant = c->tenant, .auth = c->auth, .group = group};
  rc = idem__send(ch, m, req, &md, resp_desc, timeout_ms, resp, err, heard_group);
  idem__heard h = heard_of(rc, err);
  pthread_mutex_lock(&r->mu);
  if (idem__lost_try(rc, err)) r->lost_ms = idem__now_ms();
  r->eps[ep].heard_ms = idem__now_ms();
  r->eps[ep].heard = h;
  r->eps[ep].sent_to = h == IDEM__HEARD_SENT ? ep_find(r, err->leader) : -1;
  pthread_mutex_unlock(&r->mu);
  return rc;
}

/* Fetches the topology from endpoint ep into the slot map (best effort). */
static void fetch_topology(idem_client *c, int ep) {
  Idem__V1__GetTopologyRequest req = IDEM__V1__GET_TOPOLOGY_REQUEST__INIT;
  ProtobufCMessage *resp = NULL;
  idem_error e;
  if (try_at(c, ep, IDEM__M_GET_TOPOLOGY, &req.base, NULL, &idem__v1__topology__descriptor,
             c->deadline_ms, &resp, &e, NULL) == IDEM_OK)
    topo_set(&c->route->topo, (const Idem__V1__Topology *)resp);
  if (resp) protobuf_c_message_free_unpacked(resp, NULL);
}

/* Whether repeating m after an unknown outcome is harmless: the coordinator's own idempotency
 * makes a repeated request with the same key (or request id) answer as the first did, or refuse
 * it (a BeginStep whose first try did begin the step gets ABORTED "in progress"). Not so for:
 * - a BeginSaga without a request id: a repeat would create a second saga;
 * - a ResolveStep with RETRYABLE: a lost try that released the step lets a new participant begin
 *   the next attempt, and the repeat (no attempt in the request to fence it) would meet that
 *   attempt in progress and release it while its caller still runs;
 * - a ResolveSteps with RETRYABLE (not a dry run): its request id replays only an answer already
 *   stored, and the answer is stored after the resolutions, so a repeat that comes while a lost
 *   try is still resolving, or after one cut short, matches again and can release an attempt
 *   begun since. docs/api.md §20. */
static bool repeatable(idem__method m, const ProtobufCMessage *req) {
  const Idem__V1__Outcome releases = IDEM__V1__OUTCOME__OUTCOME_RETRYABLE;
  if (m == IDEM__M_RESOLVE_STEP)
    return ((const Idem__V1__ResolveStepRequest *)req)->outcome != releases;
  if (m == IDEM__M_RESOLVE_STEPS) {
    const Idem__V1__ResolveStepsRequest *r = (const Idem__V1__ResolveStepsRequest *)req;
    return r->dry_run || r->outcome != releases;
  }
  if (m != IDEM__M_BEGIN_SAGA) return true;
  const Idem__V1__BeginSagaRequest *r = (const Idem__V1__BeginSagaRequest *)req;
  return r->request_id && r->request_id[0];
}

/* --- the retry loop ------------------------------------------------------------------------ */

idem__retry idem__retry_call(const idem_client *c, int64_t timeout_ms) {
  if (timeout_ms <= 0) timeout_ms = c->deadline_ms;
  return (idem__retry){.end_ms = idem__now_ms() + timeout_ms, .base_ms = 25, .max_ms = 500};
}

int idem__unary(idem_client *c, idem__method m, const ProtobufCMessage *req, const char *saga_id,
                const ProtobufCMessageDescriptor *resp_desc, int64_t timeout_ms,
                ProtobufCMessage **resp, idem_error *err) {
  *resp = NULL;
  if (!c) return idem__fail(err, IDEM_INVALID_ARGUMENT, "client is null");
  idem__retry how = idem__retry_call(c, timeout_ms);
  return idem__call(c, m, req, saga_id, NULL, resp_desc, &how, resp, err);
}

/* The loop ended with rc. A refusal after a try that may have acted does not prove nothing
 * happened: outcome_unknown, unless the refusal itself proves it (idem__refusal_settles). With
 * how->lost_since_ms, a code the loop retries (or a deadline) after a lost try since then is
 * IDEM_STEP_UNKNOWN: the request may have been acted on. */
static int ended(idem__route *r, idem__method m, const ProtobufCMessage *req,
                 const idem__retry *how, int rc, bool unknown, idem_error *err) {
  if (rc != IDEM_OK && unknown && !idem__refusal_settles(m, req, err)) err->outcome_unknown = true;
  bool retried = rc == IDEM_UNAVAILABLE || rc == IDEM_DEADLINE_EXCEEDED ||
                 (rc == IDEM_ABORTED && (how->also & IDEM__RETRY_ABORTED)) ||
                 (idem__lost_try(rc, err) && err->outcome_unknown);
  if (how->lost_since_ms <= 0 || !retried || !idem__lost_since(r, how->lost_since_ms)) return rc;
  const char *path = idem__method_path(m), *name = strrchr(path, '/');
  int last = err->code;
  char reason[sizeof err->reason];
  snprintf(reason, sizeof reason, "%s", err->reason);
  idem__err_reset(err);
  idem__fail(err, IDEM_STEP_UNKNOWN,
             "%s: a try was lost and the run's deadline passed before an answer said what it did "
             "(last: %s%s%s)",
             name ? name + 1 : path, idem_strerror(last), reason[0] ? " " : "", reason);
  err->outcome_unknown = true; /* after idem__fail, which clears the error */
  return IDEM_STEP_UNKNOWN;
}

int idem__call(idem_client *c, idem__method m, const ProtobufCMessage *req, const char *saga_id,
               const char *group, const ProtobufCMessageDescriptor *resp_desc, idem__retry *how,
               ProtobufCMessage **resp, idem_error *err) {
  idem_error scratch;
  if (!err) err = &scratch;
  *resp = NULL;
  if (!c) return idem__fail(err, IDEM_INVALID_ARGUMENT, "client is null");
  if ((unsigned)m >= IDEM__M_COUNT) return idem__fail(err, IDEM_INVALID_ARGUMENT, "unknown method");
  idem__retry dflt;
  if (!how) how = (dflt = idem__retry_call(c, 0), &dflt);
  idem__route *r = c->route;
  const char *id = saga_id ? saga_id : "";
  int64_t end = how->end_ms;
  if (how->first_full && idem__now_ms() + how->try_ms > end) end = idem__now_ms() + how->try_ms;
  bool unknown = false; /* an earlier try may have acted */
  bool reroute = true;  /* the next try goes to the saga's (or group's) leader when known */
  bool done = false;    /* the last try settled the call, or no other fits before the end */
  int want = -1;        /* the endpoint of a leader a standby named: the next try goes there */
  int fetch_from = -1;  /* a redirect named a group: fetch the topology from there */
  idem_error said;      /* the last UNAVAILABLE a coordinator answered (reason set) */
  bool have_said = false;
  int rc = IDEM_OK;
  for (int tries = 0;; tries++) {
    /* the topology a redirect made stale: fetched before the next routed try, or at the end */
    if (fetch_from >= 0 && (reroute || done)) fetch_topology(c, fetch_from), fetch_from = -1;
    if (done) return ended(r, m, req, how, rc, unknown, err);
    if (reroute && want < 0) want = routed_ep(c, id, group);
    reroute = false;
    pthread_mutex_lock(&r->mu);
    int ep = want >= 0 ? want : r->cur, n = r->n_eps;
    pthread_mutex_unlock(&r->mu);
    want = -1;
    int64_t t0 = idem__now_ms(), left = end - t0;
    if (left < 1) left = 1;
    int64_t timeout = how->try_ms > 0 ? how->try_ms : left;
    if (how->poll_ms) { /* the coordinator answers when the step changes, within what is left */
      *how->poll_ms = (uint32_t)(left < IDEM__WAIT_MS_MAX ? left : IDEM__WAIT_MS_MAX);
      timeout += *how->poll_ms;
    }
    if (timeout > left) timeout = left;
    char heard[IDEM__GROUP_CAP] = ""; /* the group a redirect names (idem-group) */
    rc = try_at(c, ep, m, req, group, resp_desc, timeout, resp, err, heard);
    int64_t try_ms = idem__now_ms() - t0; /* a try that cannot fit is not started */
    if (rc == IDEM_DEADLINE_EXCEEDED && have_said) {
      /* the try ran out of time: answer with what a coordinator last said, not a bare timeout
       * (its outcome is unknown, so this one's is too) */
      *err = said;
      err->outcome_unknown = true;
      rc = err->code;
    }
    int next = ep;
    if (rc == IDEM_DEADLINE_EXCEEDED && n > 1) next = (ep + 1) % n; /* the next call starts there */
    bool failover = rc == IDEM_UNAVAILABLE || idem__lost_try(rc, err);
    bool standby = rc == IDEM_UNAVAILABLE && !err->outcome_unknown; /* idem-leader: none acted */
    done = !failover && !(rc == IDEM_ABORTED && (how->also & IDEM__RETRY_ABORTED)) &&
           !(rc == IDEM_DEADLINE_EXCEEDED && ((how->also & IDEM__RETRY_DEADLINE) ||
                                              ((how->also & IDEM__RETRY_ELSEWHERE) && n > 1)));
    if (failover && err->reason[0]) said = *err, have_said = true;
    if (!done && err->outcome_unknown) {
      unknown = true;
      if (!repeatable(m, req)) done = true;
    }
    bool gone = failover && !err->reason[0]; /* gRPC's: none answered, or no connection */
    char addr[ADDR_CAP] = "";
    if (!done && standby && err->leader[0]) {
      int i = ep_add(r, err->leader, strlen(err->leader));
      if (i >= 0) next = want = i;
      const char *t = route_tenant(c);
      if (heard[0] && topo_redirect(&r->topo, t ? t : "", id, heard, err->leader)) fetch_from = ep;
    } else if (!done && failover && n > 1) {
      next = (ep + 1) % n; /* no leader named, or this node is unreachable: the next one */
    } else if (!done && !failover) {
      reroute = true; /* ABORTED, DEADLINE_EXCEEDED: the next try is routed as a new call is */
    }
    pthread_mutex_lock(&r->mu);
    if (r->cur == ep) r->cur = next;
    if (gone) snprintf(addr, sizeof addr, "%s", r->eps[ep].addr);
    pthread_mutex_unlock(&r->mu);
    if (gone) topo_unreachable(&r->topo, addr); /* its groups' next calls go elsewhere */
    if (done) continue;
    /* straight to a named leader; otherwise back off (full jitter), at least the server's hint */
    bool hop = standby && err->leader[0] && next != ep;
    int64_t wait = hop ? 0 : idem__backoff_ms(how->base_ms, how->max_ms, tries);
    if (rc == IDEM_ABORTED && err->retry_after_ms > 0) {
      int64_t floor = err->retry_after_ms < how->max_ms ? err->retry_after_ms : how->max_ms;
      if (wait < floor) wait = floor;
    }
    int64_t need = 0; /* a failover try is as long as the last one; a poll's length is its wait */
    if (failover) need = !how->poll_ms && try_ms > IDEM__MIN_TRY_MS ? try_ms : IDEM__MIN_TRY_MS;
    done = idem__now_ms() + wait + need >= end;
    if (!done) idem__sleep_ms(wait);
    if (!done && !hop) how->retries++;
  }
}
