/* node_owner.c — see node_owner.h. */
#include "node_owner.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../elect/etcd_kv.h"
#include "../util/clock.h"
#include "../util/log.h"
#include "../util/uuidv7.h"

#define ETCD_CALL_MS 2000
#define ETCD_RETRY_MS 1000

static void copy(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src ? src : "");
}

/* The endpoints as people may read them: any user:password@ of a URL left out. */
static void endpoints_shown(const char *etcd, char *out, size_t cap) {
  size_t n = 0;
  out[0] = '\0';
  for (const char *p = etcd; *p && n + 1 < cap;) {
    size_t len = strcspn(p, ",");
    const char *scheme = strstr(p, "://");
    const char *host = scheme && (size_t)(scheme - p) < len ? scheme + 3 : p;
    const char *at = memchr(host, '@', len - (size_t)(host - p));
    const char *slash = memchr(host, '/', len - (size_t)(host - p));
    int w;
    if (at && (!slash || at < slash))
      w = snprintf(out + n, cap - n, "%s%.*s%.*s", n ? "," : "", (int)(host - p), p,
                   (int)(len - (size_t)(at + 1 - p)), at + 1);
    else
      w = snprintf(out + n, cap - n, "%s%.*s", n ? "," : "", (int)len, p);
    if (w < 0 || (size_t)w >= cap - n) break;
    n += (size_t)w;
    p += len;
    if (*p == ',') p++;
  }
}

static void actor_of(const idem_options *o, char *out, size_t cap) {
  char host[256] = "?";
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "?");
  host[sizeof host - 1] = '\0';
  struct passwd *pw = getpwuid(geteuid());
  const char *id = o->node_id ? o->node_id : o->advertise ? o->advertise : o->listen;
  snprintf(out, cap, "node %s (user %s on host %s, pid %ld)", id, pw ? pw->pw_name : "?", host,
           (long)getpid());
}

/* The cluster id at key: read, or made here when absent (a create is a transaction on the
 * key's absence: when two nodes race, both read the winner's). ERR_OK with id filled;
 * ERR_INVALID when etcd holds something else. */
static err_code cluster_id(etcd_kv *kv, const char *key, char *id, size_t cap, bool *made,
                           err_t *err) {
  for (int round = 0; round < 3; round++) {
    char *value = NULL;
    size_t len = 0;
    int64_t rev = 0;
    err_code rc = etcd_kv_get(kv, key, ETCD_CALL_MS, &value, &len, &rev, err);
    if (rc != ERR_OK) return rc;
    if (value) {
      char v[OWNER_ID_MAX];
      snprintf(v, sizeof v, "%.*s", (int)(len < sizeof v - 1 ? len : sizeof v - 1), value);
      free(value);
      if (len >= sizeof v || !owner_id_valid(v) || strcmp(v, OWNER_STANDALONE) == 0)
        return err_set(err, ERR_INVALID,
                       "etcd key %s holds \"%s\", not a cluster id (a UUID); delete the key only "
                       "if no cluster uses it (a new id makes every database refuse this "
                       "cluster until it takes them over)",
                       key, v);
      snprintf(id, cap, "%s", v);
      return ERR_OK;
    }
    char fresh[UUIDV7_STR_LEN + 1];
    if (!uuidv7_new(clock_wall_ms(), fresh))
      return err_set(err, ERR_INTERNAL, "cannot make a cluster id: the random source failed");
    bool created = false;
    rc = etcd_kv_create(kv, key, fresh, ETCD_CALL_MS, &created, err);
    if (rc != ERR_OK) return rc;
    if (created) *made = true; /* read it back: the value etcd holds is the one to use */
  }
  return err_set(err, ERR_UNAVAILABLE, "the cluster id at %s changed while read", key);
}

node_result node_owner_init(node_owner *no, const idem_options *o, const store_backend *db,
                            int64_t patience_ms, node_owner_wait_fn wait, void *wait_arg) {
  memset(no, 0, sizeof *no);
  no->db = db;
  no->take_over = o->take_over;
  actor_of(o, no->actor, sizeof no->actor);
  copy(no->mine.node, sizeof no->mine.node,
       o->node_id ? o->node_id : o->advertise ? o->advertise : o->listen);
  if (!o->etcd) {
    copy(no->mine.cluster_id, sizeof no->mine.cluster_id, OWNER_STANDALONE);
    return NODE_RUNNING;
  }
  copy(no->mine.prefix, sizeof no->mine.prefix, o->election_prefix);
  endpoints_shown(o->etcd, no->mine.etcd, sizeof no->mine.etcd);
  char key[OWNER_TEXT_MAX + 16];
  snprintf(key, sizeof key, "%s" NODE_OWNER_KEY_SUFFIX, o->election_prefix);
  etcd_kv *kv = etcd_kv_open(o->etcd);
  if (!kv) {
    log_kv(LOG_ERROR, "out of memory", (const char *)NULL);
    return NODE_FAILED;
  }
  int64_t give_up = clock_mono_ms() + patience_ms;
  node_result r = NODE_FAILED;
  for (;;) {
    err_t err;
    err_clear(&err);
    bool made = false;
    err_code rc = cluster_id(kv, key, no->mine.cluster_id, sizeof no->mine.cluster_id, &made,
                             &err);
    if (rc == ERR_OK) {
      log_kv(LOG_INFO, made ? "made the cluster's id" : "cluster", "cluster_id",
             no->mine.cluster_id, "key", key, (const char *)NULL);
      r = NODE_RUNNING;
      break;
    }
    if (rc == ERR_INVALID) {
      log_kv(LOG_ERROR, "cannot use the cluster id in etcd; not starting", "key", key, "error",
             err.msg, (const char *)NULL);
      r = NODE_REFUSED;
      break;
    }
    int64_t left = give_up - clock_mono_ms();
    log_kv(LOG_WARN, left > 0 ? "cannot read the cluster id from etcd, retrying"
                              : "cannot read the cluster id from etcd, giving up",
           "key", key, "etcd", no->mine.etcd, "error", err.msg, (const char *)NULL);
    if (left <= 0) break;
    if (wait(wait_arg, left < ETCD_RETRY_MS ? left : ETCD_RETRY_MS)) {
      log_kv(LOG_INFO, "stopped before start-up finished", (const char *)NULL);
      r = NODE_STOPPED;
      break;
    }
  }
  etcd_kv_close(kv);
  return r;
}

static void mine_for(const node_owner *no, const char *group, owner_rec *mine) {
  *mine = no->mine;
  copy(mine->group, sizeof mine->group, group);
}

/* Logs a refusal: both owners in fields, the whole sentence in error. */
static node_result refuse(owner_verdict v, const owner_rec *mine, const owner_rec *recorded,
                          const char *take_over) {
  char why[2048];
  owner_refusal(v, mine, recorded, take_over, why, sizeof why);
  const char *what = v == OWNER_FOREIGN       ? "the database belongs to another cluster; not starting"
                     : v == OWNER_OTHER_GROUP ? "the database serves another group of this "
                                                "cluster; not starting"
                                              : "--take-over names a cluster that does not own the "
                                                "database; not starting";
  log_kv(LOG_ERROR, what, "group", mine->group,
         "owner_cluster", recorded->cluster_id, "owner_prefix", recorded->prefix, "owner_group",
         recorded->group, "owner_node", recorded->node, "this_cluster", mine->cluster_id,
         "this_prefix", mine->prefix, "take_over", take_over, "error", why, (const char *)NULL);
  return NODE_REFUSED;
}

node_result node_owner_check(const node_owner *no, const char *group, const char *conninfo,
                             int64_t deadline, err_t *err) {
  owner_rec mine, recorded;
  mine_for(no, group, &mine);
  bool found = false;
  if (no->db->owner_read(conninfo, deadline, &recorded, &found, err) != ERR_OK) return NODE_FAILED;
  owner_verdict v = owner_decide(&mine, found ? &recorded : NULL, no->take_over);
  return owner_refused(v) ? refuse(v, &mine, &recorded, no->take_over) : NODE_RUNNING;
}

typedef struct decide_arg {
  const owner_rec *mine;
  const char *take_over;
} decide_arg;

static owner_verdict decide(void *arg, const owner_rec *recorded) {
  decide_arg *d = arg;
  return owner_decide(d->mine, recorded, d->take_over);
}

node_result node_owner_settle(const node_owner *no, const char *group, const char *conninfo,
                              int64_t deadline, err_t *err) {
  owner_rec mine;
  mine_for(no, group, &mine);
  decide_arg d = {&mine, no->take_over};
  store_owner_settled st;
  if (no->db->owner_settle(conninfo, &mine, no->actor, deadline, decide, &d, &st, err) != ERR_OK) {
    if (err->code != ERR_PRECONDITION) return NODE_FAILED;
    log_kv(LOG_ERROR, "cannot take the database over; not starting", "group", group,
           "owner_cluster", st.recorded.cluster_id, "take_over", no->take_over, "error", err->msg,
           (const char *)NULL);
    return NODE_REFUSED;
  }
  char desc[1024], from[1024], epoch[24];
  owner_describe(&mine, false, desc, sizeof desc);
  switch (st.verdict) {
    case OWNER_CLAIM:
      log_kv(LOG_INFO, "claimed the database for this cluster", "group", group, "owner", desc,
             "take_over", no->take_over ? "has no effect: nothing was recorded" : NULL,
             (const char *)NULL);
      return NODE_RUNNING;
    case OWNER_TAKE_OVER:
      owner_describe(&st.recorded, true, from, sizeof from);
      snprintf(epoch, sizeof epoch, "%lld", (long long)st.former_epoch);
      log_kv(LOG_WARN, "took the database over (--take-over): it now belongs to this cluster",
             "group", group, "owner", desc, "from", from, "actor", no->actor, "former_fence",
             epoch, (const char *)NULL);
      return NODE_RUNNING;
    case OWNER_SAME:
      if (no->take_over)
        log_kv(LOG_INFO,
               "--take-over has no effect: the database already belongs to this cluster; "
               "remove the option",
               "group", group, "take_over", no->take_over, (const char *)NULL);
      return NODE_RUNNING;
    default:
      return refuse(st.verdict, &mine, &st.recorded, no->take_over);
  }
}
