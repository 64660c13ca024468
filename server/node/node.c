/* node.c — see node.h. */
#include "node.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../auth/auth.h"
#include "../auth/tls_files.h"
#include "../cache/replay_cache.h"
#include "../console/console.h"
#include "../coord/coord.h"
#include "../metrics/metrics.h"
#include "../policy/policy_cache.h"
#include "../reaper/reaper.h"
#include "../rpc/rpc.h"
#include "../store/store.h"
#include "../store/store_pool.h"
#include "../util/clock.h"
#include "../util/log.h"
#include "node_elect.h"
#include "../metrics_http/metrics_endpoint.h"
#include "../move/balance.h"
#include "node_sec.h"
#include "../move/slotfill.h"
#include "../move/mover.h"
#include "node_owner.h"
#include "node_slots.h"
#include "../elect/etcd_kv.h"

#include "idem_build_version.h"

#define MIGRATE_PATIENCE_MS 60000 /* keep trying to reach Postgres this long at start-up */
#define MIGRATE_RETRY_MS 1000
#define MAX_RECV_BYTES (256 * 1024) /* docs/api.md §9 */
#define DEFAULT_DEADLINE_MS 2000    /* for calls that come without one */
#define STEPS_MAX 16
/* A node that resigned keeps answering (not-leader, the new leader named) until no call came
 * for DRAIN_QUIET_MS and no no-leader answer went out for DRAIN_BACKOFF_MS, at most
 * DRAIN_QUIET_MAX_MS, before gRPC's shutdown (rpc_server_quiesce) */
#define DRAIN_QUIET_MS 150
/* after a no-leader answer (none named): the clients' longest backoff (500 ms in libidem and
 * every SDK) and a try */
#define DRAIN_BACKOFF_MS 600
#define DRAIN_QUIET_MAX_MS 1000
/* A group's term that ends on purpose (resign, yield) first lets the calls admitted in it be
 * answered, at most this long, before its key goes (stepping_down) */
#define STEP_DOWN_WAIT_MS 1000

typedef void (*node_undo_fn)(node *nd);

/* The store backend every group runs on (store.h): chosen here, once. */
static const store_backend *const db = &store_postgres;

/* One store group (docs/api.md §17): its store, election, fence and the leader's modules. */
typedef struct node_group {
  node *nd;
  size_t index;
  const char *name, *conninfo;
  char prefix[512];       /* its election */
  char elect_id[320];     /* the node id its election logs */
  _Atomic uint64_t epoch; /* every fenced store of the group writes under it (node_elect.h) */
  replay_cache *cache;    /* the leader's replay cache, filled by the batcher's commits */
  coord_waiters *waiters; /* BeginStep calls parked on a step in progress, woken by commits */
  store_batcher *batcher; /* group commit of every step transaction */
  node_fence fence;       /* the elector's callback raises the fence through it */
  elect *el;              /* single node or etcd */
  coord_ctx coord;
  reaper *reaper;
  policy_cache *policies; /* the group's own policies, read from its store */
  store_pool *plain;      /* with several groups: one unfenced store kept open, for the policy
                             changes any node writes in every group (rpc and console share it) */
} node_group;

struct node {
  const idem_options *o;
  const sigset_t *sigs;
  char *msg; /* a usage error during start (node_start's msg) */
  size_t msg_n;
  char advertise[256];
  /* the modules, in order of start */
  auth_keyring *tokens; /* NULL: no --tokens */
  tls_files tls;        /* wiped once the server holds its credentials */
  auth_config auth;
  etcd_kv *kv;             /* with etcd: the process's one etcd client (the map, the moves) */
  slot_service *slots;     /* the slot map: which group serves each slot */
  slotfill *slotfill;      /* rows written before slot groups get their slot */
  node_group groups[OPT_LIST_MAX];
  size_t n_groups;
  int schema_version; /* the lowest of the groups' schema versions, read at start (GetStatus) */
  node_owner owner;   /* this node's cluster: each group's database must belong to it */
  balance *balance;   /* with etcd and several groups: at most ceil(G/N) groups led here */
  mover *mover;       /* with etcd and several groups: moves of slots (docs/api.md §18) */
  pthread_rwlock_t mover_lock; /* MoveSlots's calls into the mover (read) and its stop (write) */
  pthread_rwlock_t rpc_lock;   /* an elector's stepping_down on rpc (read) and its free (write) */
  rpc_server *rpc;
  metrics_endpoint *metrics;
  console *console;
  /* what started, to be undone backwards */
  node_undo_fn undo[STEPS_MAX];
  int n_undo;
};

void node_signals(sigset_t *set) {
  sigemptyset(set);
  sigaddset(set, SIGTERM);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGPIPE);
  sigaddset(set, SIGHUP);
}

/* Waits up to ms for one of the blocked signals (SIGHUP reloads, SIGPIPE is ignored). True
 * when a stop signal came. ms < 0: no limit. */
static bool wait_signal(node *nd, int64_t ms) {
  struct timespec ts = clock_span_timespec(ms < 0 ? 0 : ms);
  for (;;) {
    int sig = 0;
    if (ms >= 0)
      sig = sigtimedwait(nd->sigs, NULL, &ts);
    else if (sigwait(nd->sigs, &sig) != 0)
      continue;
    if (sig == SIGPIPE) continue;
    if (sig == SIGHUP) {
      node_sec_reload(nd->tokens);
      continue;
    }
    if (sig > 0) {
      log_kv(LOG_INFO, "draining", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT",
             (const char *)NULL);
      return true;
    }
    if (errno == EINTR) continue;
    return false; /* EAGAIN: the time is up */
  }
}

void node_wait(node *nd) {
  wait_signal(nd, -1);
}

/* --- the steps of start-up, each with its undo --- */

/* A step that could not start: logged with the error's reason and hint; NODE_FAILED. */
static node_result failed(const char *what, const err_t *err) {
  log_kv(LOG_ERROR, what, "error", err->msg, "reason", err_reason_word(err->reason), "hint",
         err->hint[0] ? err->hint : NULL, (const char *)NULL);
  return NODE_FAILED;
}

static void undo_security(node *nd) {
  tls_files_clear(&nd->tls);
  auth_keyring_free(nd->tokens);
  nd->tokens = NULL;
}

/* The TLS and tokens files, read and checked before anything starts. */
static node_result start_security(node *nd, char *msg, size_t n) {
  const idem_options *o = nd->o;
  node_sec_paths p = {o->tls_cert, o->tls_key, o->tls_client_ca, o->tokens};
  if (node_sec_setup(&p, &nd->tls, &nd->tokens, msg, n) != 0) return NODE_USAGE;
  bool bad_form;
  bool local = options_listen_is_local(o->listen, &bad_form);
  node_sec_log(&p, nd->tokens, local);
  nd->auth = (auth_config){
      .tokens = nd->tokens, .mtls = o->tls_client_ca != NULL, .operators = o->operators};
  if (!local && !o->tls_cert)
    log_kv(LOG_WARN, "serving plaintext on a non-loopback address", "address", o->listen,
           (const char *)NULL);
  return NODE_RUNNING;
}

/* Every client connection holds a descriptor: lift the soft limit to the hard one so that a
 * thousand idle connections cannot starve the listener of accept() (docs/api.md §9, limits). */
static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max) return;
  rl.rlim_cur = rl.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
    log_kv(LOG_WARN, "cannot raise the open-files limit", "error", strerror(errno),
           (const char *)NULL);
}

/* docs/api.md §17: the store keeps the cluster's slot count; a node with another refuses to
 * start (exit 2) naming both. NODE_FAILED with err set when the store did not answer: the
 * caller retries (another node that becomes a leader meanwhile ends this node's transaction
 * on the store: its fence). */
static node_result check_slots(node *nd, const node_group *g, err_t *err) {
  err_clear(err);
  if (db->slots_check(g->conninfo, (uint32_t)nd->o->slots,
                      clock_mono_ms() + nd->o->store_timeout_ms, err) == ERR_OK)
    return NODE_RUNNING;
  if (err->code == ERR_INVALID) {
    snprintf(nd->msg, nd->msg_n,
             "--slots %d: group %s: %s; start every node with the slot count "
             "the cluster was created with",
             nd->o->slots, g->name, err->msg);
    return NODE_USAGE;
  }
  return NODE_FAILED;
}

/* docs/upgrading.md: a schema that needs a newer node than this one (a contraction recorded by
 * a newer release) stops the start (exit 2) naming both versions; one that is only newer (an
 * expansion) is run on, with a warning. NODE_FAILED with err set when the store did not answer. */
static node_result check_schema(node *nd, const node_group *g, err_t *err) {
  store_schema sc;
  err_clear(err);
  err_code rc = db->schema_check(g->conninfo, clock_mono_ms() + nd->o->store_timeout_ms, &sc, err);
  if (rc == ERR_INVALID) {
    char have[16], need[16], know[16];
    snprintf(have, sizeof have, "%d", sc.version);
    snprintf(need, sizeof need, "%d", sc.needs);
    snprintf(know, sizeof know, "%d", db->schema_newest());
    log_kv(LOG_ERROR, "the schema is newer than this node can run on; not starting", "group",
           g->name, "schema_version", have, "needs_schema", need, "node_schema", know,
           "node_version", IDEM_VERSION, "error", err->msg, "hint",
           "upgrade this node's binary to the release that migrated the schema "
           "(docs/upgrading.md)",
           (const char *)NULL);
    return NODE_REFUSED;
  }
  if (rc != ERR_OK) return NODE_FAILED;
  if (sc.version > db->schema_newest()) {
    char have[16], know[16];
    snprintf(have, sizeof have, "%d", sc.version);
    snprintf(know, sizeof know, "%d", db->schema_newest());
    log_kv(LOG_WARN, "the schema is newer than this node knows; running on it (an expansion)",
           "group", g->name, "schema_version", have, "node_schema", know, (const char *)NULL);
  }
  if (nd->schema_version == 0 || sc.version < nd->schema_version)
    nd->schema_version = sc.version;
  return NODE_RUNNING;
}

/* Creates or migrates the schema, retrying while Postgres may still come (a refused connection,
 * a timeout) until it answers, MIGRATE_PATIENCE_MS pass or a stop signal comes. Every failure
 * names where it tried; one no retry can fix (a malformed --pg, authentication, a missing
 * database) stops the start at once. */
static node_result migrate_group(node *nd, const node_group *g) {
  char target[512];
  err_t err;
  const char *opt = nd->o->groups_from_pg ? "--pg" : "--store";
  if (db->target(g->conninfo, target, sizeof target, &err) != ERR_OK) {
    log_kv(LOG_ERROR, nd->o->groups_from_pg ? "cannot use --pg" : "cannot use --store", "group",
           g->name, "error", err.msg, (const char *)NULL);
    return NODE_REFUSED;
  }
  (void)opt;
  int64_t give_up = clock_mono_ms() + MIGRATE_PATIENCE_MS;
  for (int attempt = 1;; attempt++) {
    err_clear(&err);
    int64_t deadline = clock_mono_ms() + nd->o->store_timeout_ms;
    if (deadline > give_up) deadline = give_up;
    /* one cluster per database: checked before anything is written (the migration included),
     * settled (claimed, taken over) once the schema has the owner's table */
    node_result r = node_owner_check(&nd->owner, g->name, g->conninfo, deadline, &err);
    if (r == NODE_RUNNING) {
      r = db->migrate(g->conninfo, deadline, &err) == ERR_OK ? NODE_RUNNING : NODE_FAILED;
      if (r == NODE_RUNNING) r = check_schema(nd, g, &err);
      if (r == NODE_RUNNING) r = node_owner_settle(&nd->owner, g->name, g->conninfo, deadline, &err);
      if (r == NODE_RUNNING) r = check_slots(nd, g, &err);
    }
    if (r != NODE_FAILED) return r;
    if (err.permanent) { /* PostgreSQL refused for good (store_pg.h) */
      log_kv(LOG_ERROR, "postgres refused the connection; not retrying", "group", g->name, "target",
             target, "error", err.msg, (const char *)NULL);
      return NODE_REFUSED;
    }
    char num[16], left_s[24];
    snprintf(num, sizeof num, "%d", attempt);
    int64_t left = give_up - clock_mono_ms();
    snprintf(left_s, sizeof left_s, "%llds", (long long)(left > 0 ? (left + 999) / 1000 : 0));
    log_kv(LOG_WARN, left > 0 ? "cannot reach postgres, retrying" : "cannot reach postgres",
           "group", g->name, "target", target, "attempt", num, "retrying_for",
           left > 0 ? left_s : NULL, "error", err.msg, "reason", err_reason_word(err.reason),
           "hint", err.hint[0] ? err.hint : NULL, (const char *)NULL);
    if (left <= 0) {
      log_kv(LOG_ERROR, "postgres did not answer, giving up", "group", g->name, "target", target,
             (const char *)NULL);
      return NODE_FAILED;
    }
    if (wait_signal(nd, left < MIGRATE_RETRY_MS ? left : MIGRATE_RETRY_MS)) {
      log_kv(LOG_INFO, "stopped before start-up finished", (const char *)NULL);
      return NODE_STOPPED;
    }
  }
}

static bool owner_wait(void *arg, int64_t ms) {
  return wait_signal(arg, ms);
}

/* Every group's schema, in order (docs/api.md §17: a group that cannot be used stops the
 * start before anything is written to etcd). */
static node_result migrate(node *nd) {
  const idem_options *o = nd->o;
  db->set_slots((uint32_t)o->slots); /* before any store opens: the slot of every row */
  nd->n_groups = o->n_groups;
  for (size_t i = 0; i < o->n_groups; i++) {
    node_group *g = &nd->groups[i];
    g->nd = nd;
    g->index = i;
    g->name = o->groups[i].name;
    g->conninfo = o->groups[i].conninfo;
    const char *id = o->node_id ? o->node_id : o->advertise ? o->advertise : o->listen;
    if (o->groups_from_pg) { /* one group: the election of a cluster without groups */
      snprintf(g->prefix, sizeof g->prefix, "%s", o->election_prefix);
      snprintf(g->elect_id, sizeof g->elect_id, "%s", id);
    } else {
      snprintf(g->prefix, sizeof g->prefix, "%s/groups/%s/leader", o->election_prefix, g->name);
      snprintf(g->elect_id, sizeof g->elect_id, "%s group=%s", id, g->name);
    }
  }
  /* a --store no connection can use stops the start before etcd is asked (or written: a new
   * cluster's id) */
  for (size_t i = 0; i < o->n_groups; i++) {
    char target[512];
    err_t err;
    if (db->target(o->groups[i].conninfo, target, sizeof target, &err) != ERR_OK) {
      log_kv(LOG_ERROR, o->groups_from_pg ? "cannot use --pg" : "cannot use --store", "group",
             o->groups[i].name, "error", err.msg, (const char *)NULL);
      return NODE_REFUSED;
    }
  }
  node_result own = node_owner_init(&nd->owner, o, db, MIGRATE_PATIENCE_MS, owner_wait, nd);
  if (own != NODE_RUNNING) return own;
  for (size_t i = 0; i < nd->n_groups; i++) {
    node_result rc = migrate_group(nd, &nd->groups[i]);
    if (rc != NODE_RUNNING) return rc;
  }
  return NODE_RUNNING;
}

static void undo_slots(node *nd) {
  slotfill_stop(nd->slotfill);
  nd->slotfill = NULL;
  slot_service_stop(nd->slots);
  nd->slots = NULL;
  etcd_kv_close(nd->kv);
  nd->kv = NULL;
}

/* The slot map: from etcd (created there by the cluster's first node), or the equal split. */
static node_result start_slots(node *nd) {
  if (nd->o->etcd && !nd->o->groups_from_pg && !(nd->kv = etcd_kv_open(nd->o->etcd))) {
    snprintf(nd->msg, nd->msg_n, "out of memory");
    return NODE_FAILED;
  }
  slots_result rc = node_slots_start(nd->o, nd->kv, &nd->slots, nd->msg, nd->msg_n);
  if (rc != SLOTS_OK) {
    undo_slots(nd); /* the etcd connection opened above */
    return rc == SLOTS_USAGE ? NODE_USAGE : NODE_FAILED;
  }
  slotfill_group fill[OPT_LIST_MAX];
  for (size_t i = 0; i < nd->n_groups; i++)
    fill[i] = (slotfill_group){nd->groups[i].name, nd->groups[i].conninfo};
  nd->slotfill = slotfill_start(db, (uint32_t)nd->o->slots, fill, nd->n_groups);
  if (nd->n_groups > 1) {
    slots_view *v = slot_service_hold(nd->slots);
    for (size_t i = 0; i < nd->n_groups; i++) {
      char count[16];
      snprintf(count, sizeof count, "%u", slotmap_count(slots_view_map(v), nd->groups[i].name));
      log_kv(LOG_INFO, "store group", "group", nd->groups[i].name, "slots", count,
             (const char *)NULL);
    }
    slots_view_release(v);
  }
  return NODE_RUNNING;
}

static store *open_pg(void *conninfo) {
  return db->open(conninfo);
}

static void undo_policies(node *nd) {
  for (size_t i = 0; i < nd->n_groups; i++) {
    policy_cache_free(nd->groups[i].policies);
    nd->groups[i].policies = NULL;
  }
}

/* One group's policies: the config file's seeds written to its store (a row already stored is
 * kept: changes made with Admin.SetPolicy survive restarts), every row loaded, the refresh
 * thread started. Each group's rules read their own store's (docs/api.md §17). */
static node_result start_group_policies(node *nd, node_group *g) {
  const idem_options *o = nd->o;
  g->policies = policy_cache_new();
  store *st = g->policies ? db->open(g->conninfo) : NULL;
  if (!st) {
    log_kv(LOG_ERROR, "out of memory", (const char *)NULL);
    return NODE_FAILED;
  }
  err_t err;
  err_clear(&err);
  for (size_t i = 0; i < o->seeds.n; i++) {
    const policy_row *r = &o->seeds.rows[i];
    bool written = false;
    if (store_policy_put(st, r->tenant, &r->p, true, clock_mono_ms() + o->store_timeout_ms,
                         &written, NULL, &err) != ERR_OK) {
      log_kv(LOG_ERROR, "cannot seed a policy from the config file", "group", g->name, "service",
             r->p.service, "operation", r->p.operation, "error", err.msg, (const char *)NULL);
      store_close(st);
      return NODE_FAILED;
    }
    log_kv(LOG_INFO,
           written ? "policy seeded from the config file"
                   : "policy in the config file already stored, kept the stored one",
           "group", nd->n_groups > 1 ? g->name : NULL, "tenant", r->tenant, "service", r->p.service,
           "operation", r->p.operation, "mode", policy_mode_name(r->p.mode), (const char *)NULL);
  }
  if (policy_cache_reload(g->policies, st, clock_mono_ms() + o->store_timeout_ms, &err) != ERR_OK)
    log_kv(LOG_WARN, "cannot load policies yet, will retry", "group", g->name, "error", err.msg,
           (const char *)NULL);
  store_close(st);
  if (!policy_cache_start(g->policies, open_pg, (void *)g->conninfo,
                          POLICY_CACHE_REFRESH_MS_DEFAULT, o->store_timeout_ms)) {
    log_kv(LOG_ERROR, "cannot start the policy refresh", (const char *)NULL);
    return NODE_FAILED;
  }
  return NODE_RUNNING;
}

static node_result start_policies(node *nd) {
  for (size_t i = 0; i < nd->n_groups; i++) {
    node_result rc = start_group_policies(nd, &nd->groups[i]);
    if (rc != NODE_RUNNING) {
      undo_policies(nd);
      return rc;
    }
  }
  return NODE_RUNNING;
}

static void undo_plain(node *nd) {
  for (size_t i = 0; i < nd->n_groups; i++) {
    store_pool_free(nd->groups[i].plain);
    nd->groups[i].plain = NULL;
  }
}

/* With several groups, each group's pool of one unfenced store (opened on first use, then kept:
 * a policy change is no new connection). */
static node_result start_plain(node *nd) {
  for (size_t i = 0; nd->n_groups > 1 && i < nd->n_groups; i++) {
    node_group *g = &nd->groups[i];
    if (!(g->plain = store_pool_new(1, open_pg, (void *)g->conninfo))) {
      log_kv(LOG_ERROR, "out of memory", (const char *)NULL);
      undo_plain(nd);
      return NODE_FAILED;
    }
  }
  return NODE_RUNNING;
}

static void undo_cache(node *nd) {
  for (size_t i = 0; i < nd->n_groups; i++) {
    replay_cache_free(nd->groups[i].cache);
    nd->groups[i].cache = NULL;
  }
}

/* The leader's replay cache, keyed to the epoch (dropped whole when it changes). Only with an
 * elector that fences the store (--etcd): the cache holds only this node's own commits, which
 * is every commit only while the fence keeps every other process out. Without etcd any number
 * of processes may write to one database, so none keeps a cache (README "Replay cache"). */
static node_result start_cache(node *nd) {
  if (!nd->o->etcd) return NODE_RUNNING;
  for (size_t i = 0; i < nd->n_groups; i++) {
    replay_cache_cfg rc = {.epoch = &nd->groups[i].epoch};
    if (!(nd->groups[i].cache = replay_cache_new(&rc))) {
      log_kv(LOG_ERROR, "cannot start the replay cache", "error", "out of memory",
             (const char *)NULL);
      undo_cache(nd);
      return NODE_FAILED;
    }
  }
  return NODE_RUNNING;
}

/* Whether this node leads (the waiters' check); the leader's address when it does not. */
static bool leading(void *arg, char *leader, size_t cap) {
  node_group *g = arg;
  if (!g->el || elect_is_leader(g->el, NULL)) return true;
  elect_status es;
  elect_status_get(g->el, &es);
  snprintf(leader, cap, "%s", es.leader_addr);
  return false;
}

static void undo_waiters(node *nd) {
  for (size_t i = 0; i < nd->n_groups; i++) {
    coord_waiters_free(nd->groups[i].waiters);
    nd->groups[i].waiters = NULL;
  }
}

/* The table of BeginStep calls waiting on a step in progress (--max-waiters; 0: none waits). */
static node_result start_waiters(node *nd) {
  if (nd->o->max_waiters <= 0) return NODE_RUNNING;
  for (size_t i = 0; i < nd->n_groups; i++) {
    node_group *g = &nd->groups[i];
    coord_waiters_cfg wc = {
        .max_waiters = (size_t)nd->o->max_waiters, .leading = leading, .leading_arg = g};
    g->waiters = coord_waiters_new(&wc);
    err_t err;
    err_clear(&err);
    if (!g->waiters) err_oom(&err);
    if (!g->waiters || coord_waiters_start(g->waiters, &err) != ERR_OK) {
      undo_waiters(nd);
      return failed("cannot start the waiters", &err);
    }
  }
  return NODE_RUNNING;
}

static void undo_batcher(node *nd) {
  for (size_t i = 0; i < nd->n_groups; i++) {
    db->batcher_stop(nd->groups[i].batcher);
    nd->groups[i].batcher = NULL;
  }
}

/* A committed write to a step pair wakes the calls waiting on it. */
static void changed(void *waiters, const step_key *key) {
  coord_waiters_changed(waiters, key);
}

/* Group commit: the batcher's own connections write every step transaction under the epoch,
 * and hand each committed pair to the replay cache. */
static node_result start_batcher(node *nd) {
  for (size_t i = 0; i < nd->n_groups; i++) {
    node_group *g = &nd->groups[i];
    store_batcher_cfg bc = {.conninfo = g->conninfo,
                            .epoch = &g->epoch,
                            .on_commit = g->cache ? replay_cache_committed : NULL,
                            .on_commit_arg = g->cache,
                            .on_change = changed,
                            .on_change_arg = g->waiters,
                            .metrics_group = (int)i};
    err_t err;
    err_clear(&err);
    if (!(g->batcher = db->batcher_start(&bc, &err))) {
      undo_batcher(nd);
      return failed("cannot start group commit", &err);
    }
  }
  return NODE_RUNNING;
}

static void undo_elector(node *nd) {
  for (size_t i = 0; i < nd->n_groups; i++) {
    elect_free(nd->groups[i].el);
    nd->groups[i].el = NULL;
  }
}

/* A group's term began here: whatever waits for a leadership (a move's driver, docs/api.md §18)
 * looks again now. */
static void leading_now(void *arg) {
  node *nd = arg;
  if (nd->slots) slot_service_kick(nd->slots);
}

/* A group's term here ends on purpose (SIGTERM's resign, the balancer's yield) and serving has
 * stopped: the calls admitted in it are answered, their store transactions committed, before
 * its key goes, at most STEP_DOWN_WAIT_MS. So the next leader's fence finds none of them open,
 * whatever its release (0.1.0's ends a former leader's open transactions at once). */
static void stepping_down(void *arg) {
  node_group *g = arg;
  node *nd = g->nd;
  int64_t t0 = clock_mono_ms();
  pthread_rwlock_rdlock(&nd->rpc_lock);
  bool settled = !nd->rpc || rpc_server_settle(nd->rpc, g->index, STEP_DOWN_WAIT_MS);
  pthread_rwlock_unlock(&nd->rpc_lock);
  char ms[24];
  snprintf(ms, sizeof ms, "%lld", (long long)(clock_mono_ms() - t0));
  log_kv(settled ? LOG_INFO : LOG_WARN,
         settled ? "stepping down: every call of the term answered"
                 : "stepping down with calls of the term still unanswered",
         "group", g->name, "waited_ms", ms, (const char *)NULL);
}

/* The elector (single node or etcd), not yet campaigning. */
static node_result start_elector(node *nd) {
  const idem_options *o = nd->o;
  snprintf(nd->advertise, sizeof nd->advertise, "%s", o->advertise ? o->advertise : o->listen);
  for (size_t i = 0; i < nd->n_groups; i++) {
    node_group *g = &nd->groups[i];
    node_elect_cfg ec = {.etcd = o->etcd,
                         .node_id = g->elect_id,
                         .advertise = nd->advertise,
                         .prefix = g->prefix,
                         .ttl_s = o->election_ttl_s,
                         .store_timeout_ms = o->store_timeout_ms};
    g->fence = (node_fence){.db = db,
                            .pg = g->conninfo,
                            .epoch = &g->epoch,
                            .on_serving = leading_now,
                            .on_serving_arg = nd,
                            .on_stepping_down = stepping_down,
                            .on_stepping_down_arg = g};
    err_t err;
    err_clear(&err);
    if (!(g->el = node_elect_new(&ec, &g->fence, &err))) {
      undo_elector(nd);
      return failed("cannot set up leader election", &err);
    }
  }
  return NODE_RUNNING;
}

/* The stores of the workers and the reaper: PostgreSQL connections that write under the epoch
 * (fenced), their step transactions group-committed by the batcher. */
static store *open_fenced(void *arg) {
  node_group *g = arg;
  store *st = db->open(g->conninfo);
  if (st) {
    db->set_epoch_source(st, &g->epoch);
    db->set_batcher(st, g->batcher);
    db->set_metrics_group(st, (int)g->index);
  }
  return st;
}

static bool is_leader(void *arg) {
  return elect_is_leader(((node_group *)arg)->el, NULL);
}

/* docs/api.md §17: the group of a call's saga (rpc.h rpc_route_fn). */
static bool leads_group(void *arg, size_t group) {
  node *nd = arg;
  return group < nd->n_groups && is_leader(&nd->groups[group]);
}

static int route(void *arg, const char *tenant, const char *id, bool new_saga) {
  node *nd = arg;
  return slot_service_route(nd->slots, tenant, id, new_saga, leads_group, nd);
}

/* The console's saga pages: the group of a saga, as route answers GetSaga (console.h). */
static int console_route(void *arg, const char *tenant, const char *global_id) {
  int g = route(arg, tenant, global_id, false);
  return g == RPC_ROUTE_MOVING ? CONSOLE_ROUTE_MOVING : g;
}

static slots_view *slots_hold(void *arg) {
  return slot_service_hold(((node *)arg)->slots);
}

static bool owns_slot(void *arg, uint32_t slot) {
  node_group *g = arg;
  return slot_service_owns(g->nd->slots, g->index, slot);
}

static err_code move_slots(void *arg, const slot_move_req *rq, int64_t deadline,
                           slot_move_res *out, err_t *err, slot_move_wait *w, bool *parked) {
  node *nd = arg;
  if (!nd->o->etcd || nd->n_groups < 2 || nd->o->groups_from_pg)
    return err_set(err, ERR_PRECONDITION,
                   "moving slots needs --etcd and two or more --store groups on every node");
  /* the calls are served before the mover starts (and when it could not): another node, or
   * this one in a moment, answers */
  *parked = false;
  pthread_rwlock_rdlock(&nd->mover_lock);
  mover *m = __atomic_load_n(&nd->mover, __ATOMIC_ACQUIRE);
  err_code rc = m ? mover_request(m, rq, deadline, out, err, w, parked)
                  : err_set(err, ERR_UNAVAILABLE, "this node's slot mover is not running (yet)");
  pthread_rwlock_unlock(&nd->mover_lock);
  return rc;
}

/* A kept MoveSlots call's client went away (the cq thread). */
static void move_cancel(void *arg, uint64_t id) {
  node *nd = arg;
  pthread_rwlock_rdlock(&nd->mover_lock);
  mover_cancel(__atomic_load_n(&nd->mover, __ATOMIC_ACQUIRE), id);
  pthread_rwlock_unlock(&nd->mover_lock);
}

static bool move_progress(void *arg, uint64_t *rows, int64_t *lag) {
  return slot_service_progress(((node *)arg)->slots, rows, lag);
}

/* The console's slots page: the move under way as this node's map says (docs/api.md §18). */
static bool console_move_now(void *arg, console_move *out) {
  node *nd = arg;
  slots_view *v = slot_service_hold(nd->slots);
  const slot_move *mv = slots_view_map(v)->move;
  if (!mv) {
    slots_view_release(v);
    return false;
  }
  memset(out, 0, sizeof *out);
  snprintf(out->request_id, sizeof out->request_id, "%s", mv->request_id);
  out->from = mv->from;
  out->to = mv->to;
  snprintf(out->source, sizeof out->source, "%s", mv->source);
  snprintf(out->target, sizeof out->target, "%s", mv->target);
  snprintf(out->phase, sizeof out->phase, "%s", slot_move_phase_word(mv->phase));
  out->started_unix_ms = mv->started_ms;
  snprintf(out->note, sizeof out->note, "%s", mv->note);
  slots_view_release(v);
  if (!slot_service_progress(nd->slots, &out->rows_copied, &out->lag_bytes)) out->lag_bytes = -1;
  return true;
}

/* /metrics: the move under way as this node's map says (docs/api.md §18). */
static bool move_metrics(void *arg, const char **phase, uint64_t *rows, int64_t *lag) {
  node *nd = arg;
  slots_view *v = slot_service_hold(nd->slots);
  const slot_move *mv = slots_view_map(v)->move;
  if (mv) *phase = slot_move_phase_word(mv->phase); /* a static word */
  slots_view_release(v);
  if (!mv) return false;
  if (!slot_service_progress(nd->slots, rows, lag)) *lag = -1;
  return true;
}

static void undo_rpc(node *nd) {
  if (nd->o->etcd) { /* it resigned (undo_campaign): its clients follow the not-leader answers */
    int64_t ms =
        rpc_server_quiesce(nd->rpc, DRAIN_QUIET_MS, DRAIN_BACKOFF_MS, DRAIN_QUIET_MAX_MS);
    char waited[24];
    snprintf(waited, sizeof waited, "%lld", (long long)ms);
    log_kv(LOG_INFO, ms >= DRAIN_QUIET_MAX_MS ? "draining with calls still arriving" : "quiet",
           "waited_ms", waited, (const char *)NULL);
  }
  for (size_t i = 0; i < nd->n_groups; i++) /* waiting calls are answered before the drain */
    coord_waiters_close(nd->groups[i].waiters);
  rpc_server_stop(nd->rpc); /* drain: finish the calls in flight */
  pthread_rwlock_wrlock(&nd->rpc_lock); /* no elector's stepping_down is in it now */
  rpc_server_free(nd->rpc);
  nd->rpc = NULL;
  pthread_rwlock_unlock(&nd->rpc_lock);
  rpc_shutdown();
}

static node_result start_rpc(node *nd) {
  const idem_options *o = nd->o;
  rpc_group groups[OPT_LIST_MAX];
  for (size_t i = 0; i < nd->n_groups; i++) {
    node_group *g = &nd->groups[i];
    coord_ctx_init(&g->coord);
    g->coord.store_timeout_ms = o->store_timeout_ms;
    g->coord.resolve_policy = policy_cache_resolve;
    g->coord.resolve_arg = g->policies;
    g->coord.policies_changed = policy_cache_changed;
    g->coord.cache = g->cache;
    g->coord.waiters = g->waiters;
    if (nd->n_groups > 1) { /* BeginSaga's global id in its group's slots */
      g->coord.slots = (uint32_t)o->slots;
      g->coord.owns_slot = owns_slot;
      g->coord.owns_arg = g;
    }
    groups[i] = (rpc_group){g->name, &g->coord, g->el, open_fenced, g, g->plain};
  }
  rpc_config rc = {
      .listen = o->listen,
      .workers = o->workers,
      .groups = groups,
      .n_groups = nd->n_groups,
      .route = route,
      .route_arg = nd,
      .slots_hold = slots_hold,
      .slotmap_arg = nd,
      .move_slots = move_slots,
      .move_cancel = move_cancel,
      .move_progress = move_progress,
      .move_arg = nd,
      .submit_steps = true, /* BeginStep and CompleteStep are answered by the batcher */
      .node_id = o->node_id,
      .schema_version = nd->schema_version,
      .schema_newest = db->schema_newest(),
      .max_recv_bytes = MAX_RECV_BYTES,
      .default_deadline_ms = DEFAULT_DEADLINE_MS,
      .drain_timeout_ms = o->drain_timeout_ms,
      .tls_cert_pem = nd->tls.cert_pem,
      .tls_key_pem = nd->tls.key_pem,
      .tls_client_ca_pem = nd->tls.client_ca_pem,
      .auth = &nd->auth,
      .require_tenant = o->require_tenant,
  };
  err_t err;
  err_clear(&err);
  rpc_init();
  nd->rpc = rpc_server_start(&rc, &err);
  tls_files_clear(&nd->tls); /* grpc keeps its own copy; wipe ours of the key */
  if (!nd->rpc) {
    rpc_shutdown();
    return failed("cannot start the server", &err);
  }
  return NODE_RUNNING;
}

static void undo_campaign(node *nd) {
  balance_stop(nd->balance);
  nd->balance = NULL;
  for (size_t i = 0; i < nd->n_groups; i++) /* stop serving and hand over; the drain follows */
    elect_resign(nd->groups[i].el);
}

/* The balancer keeps the source group of a move driven here (balance.h). */
static int move_source(void *arg) {
  node *nd = arg;
  return mover_driving(__atomic_load_n(&nd->mover, __ATOMIC_ACQUIRE));
}

/* Campaigns once the port is bound, so the address it advertises answers; with etcd and
 * several groups, balances them among the nodes. */
static node_result start_campaign(node *nd) {
  for (size_t i = 0; i < nd->n_groups; i++) {
    err_t err;
    err_clear(&err);
    if (elect_start(nd->groups[i].el, &err) != ERR_OK) {
      undo_campaign(nd);
      return failed("cannot start leader election", &err);
    }
  }
  if (nd->o->etcd && nd->n_groups > 1) {
    elect *els[OPT_LIST_MAX];
    for (size_t i = 0; i < nd->n_groups; i++) els[i] = nd->groups[i].el;
    nd->balance =
        balance_start(els, nd->n_groups, (int64_t)nd->o->election_ttl_s * 500, move_source, nd);
    if (!nd->balance) log_kv(LOG_ERROR, "cannot balance the groups", (const char *)NULL);
  }
  return NODE_RUNNING;
}

static void undo_mover(node *nd) {
  balance_stop(nd->balance); /* it asks the mover (move_source) */
  nd->balance = NULL;
  metrics_set_move_fn(NULL, NULL);
  pthread_rwlock_wrlock(&nd->mover_lock); /* no MoveSlots (or cancel) is in the mover now */
  mover *m = nd->mover;
  __atomic_store_n(&nd->mover, NULL, __ATOMIC_RELEASE);
  pthread_rwlock_unlock(&nd->mover_lock);
  mover_stop(m); /* answers the MoveSlots calls it keeps */
}

/* With etcd and several groups: the thread that drives moves of slots led here. */
static node_result start_mover(node *nd) {
  if (!nd->o->etcd || nd->n_groups < 2 || nd->o->groups_from_pg) return NODE_RUNNING;
  mover_group g[OPT_LIST_MAX];
  for (size_t i = 0; i < nd->n_groups; i++)
    g[i] = (mover_group){nd->groups[i].name, nd->groups[i].conninfo, nd->groups[i].el,
                         &nd->groups[i].epoch};
  mover_cfg mc = {.node_id = nd->o->node_id,
                  .max_rows_per_s = (uint32_t)nd->o->move_max_rate,
                  .store = db->move};
  mover *m = mover_start(&mc, nd->slots, g, nd->n_groups);
  __atomic_store_n(&nd->mover, m, __ATOMIC_RELEASE);
  if (!m)
    log_kv(LOG_ERROR, "cannot start the slot mover", (const char *)NULL);
  else
    metrics_set_move_fn(move_metrics, nd);
  return NODE_RUNNING;
}

static void undo_reaper(node *nd) {
  for (size_t i = 0; i < nd->n_groups; i++) {
    reaper_stop(nd->groups[i].reaper);
    nd->groups[i].reaper = NULL;
  }
}

/* Only the leader reaps, through a fenced store. A reaper that cannot start is logged and the
 * node serves without it. */
static node_result start_reaper(node *nd) {
  const idem_options *o = nd->o;
  if (o->reaper_interval_s <= 0) {
    log_kv(LOG_INFO, "reaper disabled (--reaper-interval 0)", (const char *)NULL);
    return NODE_RUNNING;
  }
  for (size_t i = 0; i < nd->n_groups; i++) { /* each group's reaper runs on its leader */
    node_group *g = &nd->groups[i];
    reaper_config rc = {
        .open_store = open_fenced,
        .open_store_arg = g,
        .interval_ms = (int64_t)o->reaper_interval_s * 1000,
        .batch = REAPER_BATCH_DEFAULT,
        .pause_ms = 0,
        .store_timeout_ms = o->store_timeout_ms,
        .is_leader = is_leader,
        .is_leader_arg = g,
        .metrics_group = (int)i,
    };
    g->reaper = reaper_start(&rc);
    if (!g->reaper)
      log_kv(LOG_ERROR, "cannot start the reaper", "group", g->name, (const char *)NULL);
  }
  return NODE_RUNNING;
}

static void undo_metrics(node *nd) {
  metrics_endpoint_stop(nd->metrics);
  nd->metrics = NULL;
}

/* docs/api.md §17: each group's leader and epoch gauges, read at each scrape. */
static void group_leader(void *arg, int group, bool *leader, uint64_t *epoch) {
  node *nd = arg;
  *leader = elect_is_leader(nd->groups[group].el, epoch);
}

static node_result start_metrics(node *nd) {
  metrics_set_leader(true, 0); /* single node until the elector says otherwise */
  if (nd->n_groups > 1) {
    const char *names[OPT_LIST_MAX];
    for (size_t i = 0; i < nd->n_groups; i++) names[i] = nd->groups[i].name;
    metrics_set_groups(nd->n_groups, names, group_leader, nd);
  }
  if (!nd->o->metrics) return NODE_RUNNING;
  nd->metrics =
      metrics_endpoint_start(nd->o->metrics, db->open(nd->o->pg), nd->o->store_timeout_ms);
  return nd->metrics ? NODE_RUNNING : NODE_FAILED;
}

static void undo_console(node *nd) {
  console_stop(nd->console);
  nd->console = NULL;
}

/* The web console (--console): its own threads and its own fenced stores, the Admin API's
 * coord/ calls; with TLS the same certificate (read again: the server's copy is wiped). */
static node_result start_console(node *nd) {
  const idem_options *o = nd->o;
  if (!o->console) return NODE_RUNNING;
  tls_files tls = {0};
  tls_file_which which;
  char why[256];
  if (o->tls_cert &&
      tls_files_load(o->tls_cert, o->tls_key, NULL, &tls, &which, why, sizeof why) != 0) {
    log_kv(LOG_ERROR, "cannot serve the console", "error", why, (const char *)NULL);
    return NODE_FAILED;
  }
  console_group groups[OPT_LIST_MAX];
  for (size_t i = 0; i < nd->n_groups; i++) /* copied by console_start */
    groups[i] = (console_group){nd->groups[i].name, &nd->groups[i].coord, nd->groups[i].el,
                                open_fenced,        &nd->groups[i],       nd->groups[i].plain};
  console_config cc = {.address = o->console,
                       .coord = &nd->groups[0].coord,
                       .open_store = open_fenced,
                       .open_store_arg = &nd->groups[0],
                       .elector = nd->groups[0].el,
                       .node_id = o->node_id ? o->node_id : nd->advertise,
                       .advertise = nd->advertise,
                       .tokens = nd->tokens,
                       .tls_cert_pem = tls.cert_pem,
                       .tls_key_pem = tls.key_pem,
                       .started_ms = clock_wall_ms(),
                       .version = IDEM_VERSION,
                       .groups = groups,
                       .n_groups = nd->n_groups,
                       .route = console_route,
                       .route_arg = nd,
                       .slots_hold = slots_hold,
                       .slotmap_arg = nd,
                       .move_now = console_move_now,
                       .move_arg = nd,
                       .trace_url = o->trace_url};
  err_t err;
  err_clear(&err);
  int port = 0;
  nd->console = console_start(&cc, &port, &err);
  tls_files_clear(&tls);
  if (!nd->console) return failed("cannot serve the console", &err);
  char p[16];
  snprintf(p, sizeof p, "%d", port);
  log_kv(LOG_INFO, "serving the console", "address", o->console, "port", p, "tls",
         o->tls_cert ? "on" : "off", "auth", nd->tokens ? "tokens" : "off (development)",
         (const char *)NULL);
  return NODE_RUNNING;
}

/* --- start and stop --- */

node_result node_start(const idem_options *o, const sigset_t *sigs, node **out, char *msg,
                       size_t n) {
  *out = NULL;
  node *nd = calloc(1, sizeof *nd);
  if (!nd) {
    log_kv(LOG_ERROR, "out of memory", (const char *)NULL);
    return NODE_FAILED;
  }
  nd->o = o;
  pthread_rwlock_init(&nd->mover_lock, NULL);
  pthread_rwlock_init(&nd->rpc_lock, NULL);
  nd->sigs = sigs;
  nd->msg = msg;
  nd->msg_n = n;
  static const struct {
    node_result (*start)(node *);
    node_undo_fn undo;
  } steps[] = {
      {migrate, NULL},
      {start_slots, undo_slots},
      {start_policies, undo_policies},
      {start_plain, undo_plain},
      {start_cache, undo_cache},
      {start_waiters, undo_waiters},
      {start_batcher, undo_batcher},
      {start_elector, undo_elector},
      {start_rpc, undo_rpc},
      {start_campaign, undo_campaign},
      {start_mover, undo_mover},
      {start_reaper, undo_reaper},
      {start_metrics, undo_metrics},
      {start_console, undo_console},
  };
  _Static_assert(sizeof steps / sizeof steps[0] <= STEPS_MAX, "raise STEPS_MAX");
  /* the security files come first: a usage error (msg) before anything connects */
  node_result rc = start_security(nd, msg, n);
  if (rc == NODE_RUNNING) nd->undo[nd->n_undo++] = undo_security;
  raise_fd_limit();
  /* each step that fails undoes its own part; the steps before it are undone backwards */
  for (size_t i = 0; i < sizeof steps / sizeof steps[0] && rc == NODE_RUNNING; i++) {
    rc = steps[i].start(nd);
    if (rc == NODE_RUNNING && steps[i].undo) nd->undo[nd->n_undo++] = steps[i].undo;
  }
  if (rc != NODE_RUNNING) {
    node_stop(nd);
    return rc;
  }
  char port[16], workers[16];
  snprintf(port, sizeof port, "%d", rpc_server_port(nd->rpc));
  snprintf(workers, sizeof workers, "%d", o->workers);
  log_kv(LOG_INFO, "listening", "address", o->listen, "port", port, "workers", workers, "version",
         IDEM_VERSION, (const char *)NULL);
  *out = nd;
  return NODE_RUNNING;
}

void node_stop(node *nd) {
  if (!nd) return;
  while (nd->n_undo > 0) nd->undo[--nd->n_undo](nd);
  pthread_rwlock_destroy(&nd->mover_lock);
  pthread_rwlock_destroy(&nd->rpc_lock);
  free(nd);
}
