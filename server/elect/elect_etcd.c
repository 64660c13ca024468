/* elect_etcd.c — the etcd elector (see elect.h for the contract and the serving rule).
 *
 * Threads, each with its own etcd_conn (curl handles):
 *   campaign  — one term after another: grant a lease, campaign (blocks until this node's key
 *               is the oldest under the prefix), fence (on_elected), hold while the term is
 *               valid, then end the term: revoke the lease (its key goes with it).
 *   keepalive — renews the current lease every TTL/3 (sooner after a failure), also while the
 *               campaign blocks; records the SEND time of every acknowledged renewal.
 *   observer  — reads the election leader and the candidates' count, then watches the election
 *               prefix from the revision it read and reads again on the first change (or when a
 *               watch breaks: etcd compacted past it, or the stream was lost): the leader's
 *               address for standbys' idem-leader answers, and whether the leader is still this
 *               node.
 * No thread polls: the holder waits on the condition variable until its serving deadline or a
 * flag that ends the term (every setter broadcasts it), and an etcd call waiting in
 * curl_multi_poll is woken by etcd__conn_wake when its abort flag is set (wake()). The only timed
 * retries are the backoff after a failed call (RETRY_MS).
 * A term ends when any of these holds: the serving deadline (last ack + TTL − margin) passed,
 * etcd says the lease is gone, the observer sees another leader at a revision after ours,
 * resign, or free.
 *
 * Writes whose outcome is unknown: a grant that timed out leaves at most an orphan lease that
 * expires by itself (nothing is attached to it); a campaign that failed or was abandoned ends
 * the term, whose lease is then revoked (revoke is idempotent: "not found" means done) and
 * retried before the next grant until etcd answers — never a second campaign on a lease whose
 * state is unknown.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/clock.h"
#include "../util/log.h"
#include "elect.h"
#include "elect_etcd_http.h"
#include "elect_etcd_parse.h"

#define GRANT_TIMEOUT_MS 1000
#define REVOKE_TIMEOUT_MS 1000
#define OBSERVE_TIMEOUT_MS 1000
#define RETRY_MS 250 /* backoff before a failed etcd call (or fence) is tried again */

typedef struct etcd_elect {
  elect base;
  char *endpoints, *prefix, *node_id, *advertise;
  int ttl_s;
  int64_t ttl_ms, margin_ms;
  elect_elected_fn on_elected;
  void *on_elected_arg;
  void (*on_serving)(void *arg);
  void *on_serving_arg;
  void (*on_stepping_down)(void *arg);
  void *on_stepping_down_arg;

  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t th_campaign, th_keepalive, th_observe;
  etcd_conn *c_campaign, *c_keepalive, *c_observe; /* each thread's own (see wake) */
  bool started;
  bool freed_resign_done;

  atomic_bool stop;      /* free: every thread ends */
  atomic_bool resigning; /* resign began (its calls may still be finishing): no new term */
  atomic_bool resigned;  /* no more campaigning */
  atomic_bool term_over; /* abort flag of the current term's campaign */
  atomic_bool yield_req; /* end this term and campaign again, behind the others */
  atomic_bool reread;    /* abort flag of the observer's watch: read the leader again now */
  atomic_int candidates; /* keys under the election (live candidates), 0: not known yet */

  /* the current term (mu) */
  int64_t lease;          /* 0: none */
  int64_t pending_revoke; /* a lease of an ended term not yet revoked (0: none) */
  char *my_key;           /* base64 key of this node's candidacy once elected */
  int64_t my_rev;
  char leader_addr[ELECT_ADDR_MAX];

  atomic_int_least64_t last_ack_ms; /* send time of the last acknowledged grant/keep-alive */
  atomic_bool lease_lost;
  atomic_bool not_me;
  atomic_bool serving; /* elected and fenced */
  atomic_uint_least64_t epoch;
  atomic_int_least64_t etcd_ok_ms; /* last time etcd answered anything (0: never) */
  atomic_uint_least64_t keepalives;
} etcd_elect;

static void wait_ms(etcd_elect *e, int64_t ms) {
  struct timespec ts = clock_after_us(CLOCK_MONOTONIC, ms * 1000);
  pthread_mutex_lock(&e->mu);
  if (!atomic_load(&e->stop)) pthread_cond_timedwait(&e->cv, &e->mu, &ts);
  pthread_mutex_unlock(&e->mu);
}

/* After a flag was set: wakes every wait on cv and every etcd call in progress (each looks at
 * its flags again). */
static void wake(etcd_elect *e) {
  pthread_mutex_lock(&e->mu);
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
  etcd__conn_wake(e->c_campaign);
  etcd__conn_wake(e->c_keepalive);
  etcd__conn_wake(e->c_observe);
}

static void etcd_answered(etcd_elect *e) {
  atomic_store(&e->etcd_ok_ms, clock_mono_ms());
}

static bool within_deadline(etcd_elect *e, int64_t now) {
  return now < atomic_load(&e->last_ack_ms) + e->ttl_ms - e->margin_ms;
}

#define YIELDED "yielded the group to another node" /* term_end_reason's word for a yield */

/* A term this node served ends on purpose: serving has stopped; the calls admitted in it are
 * let finish before the key goes (elect_etcd_config.on_stepping_down). */
static void stepping_down(etcd_elect *e) {
  if (e->on_stepping_down) e->on_stepping_down(e->on_stepping_down_arg);
}

/* Why the current term cannot go on (NULL: it can). */
static const char *term_end_reason(etcd_elect *e) {
  if (atomic_load(&e->stop)) return "stopping";
  if (atomic_load(&e->resigned)) return "resigned";
  /* resign lets the term's calls finish (serving stopped already): the term ends after that */
  if (atomic_load(&e->resigning)) return NULL;
  if (atomic_load(&e->lease_lost)) return "lease gone at etcd";
  if (atomic_load(&e->not_me)) return "another node leads";
  if (atomic_load(&e->yield_req)) return YIELDED;
  if (!within_deadline(e, clock_mono_ms())) return "no keep-alive acknowledged in time";
  return NULL;
}

/* --- etcd calls --- */

static cJSON *obj(void) {
  return cJSON_CreateObject();
}

/* Revokes lease (idempotent at etcd). true when done: revoked, or etcd says it does not exist. */
static bool revoke(etcd_conn *c, int64_t lease, const atomic_bool *abort) {
  cJSON *b = obj(), *r = NULL;
  err_t err;
  err_clear(&err);
  etcd_fail f = ETCD_NOT_SENT;
  if (b && etcd__add_i64(b, "ID", lease))
    f = etcd__post(c, "/v3/lease/revoke", b, REVOKE_TIMEOUT_MS, abort, &r, &err);
  cJSON_Delete(b);
  cJSON_Delete(r);
  return f == ETCD_OK || f == ETCD_REFUSED;
}

/* Ends the current term: stops serving, forgets the key, revokes the lease (or leaves it for
 * the next try when etcd does not answer). */
static void end_term(etcd_elect *e, etcd_conn *c, const char *why) {
  bool was = atomic_exchange(&e->serving, false);
  if (was && strcmp(why, YIELDED) == 0) stepping_down(e); /* the key is still ours meanwhile */
  atomic_store(&e->term_over, true);
  pthread_mutex_lock(&e->mu);
  int64_t lease = e->lease;
  e->lease = 0;
  free(e->my_key);
  e->my_key = NULL;
  e->my_rev = 0;
  pthread_mutex_unlock(&e->mu);
  if (was) {
    char num[24];
    snprintf(num, sizeof num, "%" PRIu64, (uint64_t)atomic_load(&e->epoch));
    log_kv(LOG_WARN, "stepped down", "node", e->node_id, "epoch", num, "reason", why,
           (const char *)NULL);
  }
  atomic_store(&e->epoch, 0);
  if (lease && !revoke(c, lease, NULL)) {
    pthread_mutex_lock(&e->mu);
    e->pending_revoke = lease;
    pthread_mutex_unlock(&e->mu);
  } else if (lease) {
    etcd_answered(e);
  }
}

/* Holds the term until it cannot go on; the reason. Waits on cv until the serving deadline
 * (which a keep-alive moves on: the wait is taken again) or a broadcast: every flag of
 * term_end_reason is set before a broadcast under mu, and checked here under mu. */
static const char *hold(etcd_elect *e) {
  const char *why;
  pthread_mutex_lock(&e->mu);
  while (!(why = term_end_reason(e))) {
    int64_t left = atomic_load(&e->last_ack_ms) + e->ttl_ms - e->margin_ms - clock_mono_ms();
    struct timespec ts = clock_after_us(CLOCK_MONOTONIC, (left > 0 ? left : 1) * 1000);
    pthread_cond_timedwait(&e->cv, &e->mu, &ts);
  }
  pthread_mutex_unlock(&e->mu);
  return why;
}

static void *campaign_main(void *arg) {
  etcd_elect *e = arg;
  etcd_conn *c = e->c_campaign;
  while (!atomic_load(&e->stop) && !atomic_load(&e->resigned) && !atomic_load(&e->resigning)) {
    err_t err;
    err_clear(&err);
    /* an ended term's lease first: while its key lives, it may still hold the election */
    pthread_mutex_lock(&e->mu);
    int64_t pending = e->pending_revoke;
    pthread_mutex_unlock(&e->mu);
    if (pending) {
      if (!revoke(c, pending, &e->stop)) {
        wait_ms(e, RETRY_MS); /* backoff: the revoke failed, try it again */
        continue;
      }
      etcd_answered(e);
      pthread_mutex_lock(&e->mu);
      if (e->pending_revoke == pending) e->pending_revoke = 0;
      pthread_mutex_unlock(&e->mu);
    }

    /* 1. a lease */
    cJSON *b = obj(), *r = NULL;
    int64_t t0 = clock_mono_ms();
    etcd_fail f = ETCD_NOT_SENT;
    if (b && etcd__add_i64(b, "TTL", e->ttl_s))
      f = etcd__post(c, "/v3/lease/grant", b, GRANT_TIMEOUT_MS, &e->stop, &r, &err);
    cJSON_Delete(b);
    int64_t lease = f == ETCD_OK ? etcd__grant_id(r) : 0;
    cJSON_Delete(r);
    if (!lease) { /* unknown outcome: an orphan lease expires by itself, nothing is on it */
      wait_ms(e, RETRY_MS); /* backoff: the grant failed, try it again */
      continue;
    }
    etcd_answered(e);
    atomic_store(&e->last_ack_ms, t0);
    atomic_store(&e->lease_lost, false);
    atomic_store(&e->not_me, false);
    atomic_store(&e->term_over, false);
    atomic_store(&e->yield_req, false);
    pthread_mutex_lock(&e->mu);
    e->lease = lease;
    pthread_cond_broadcast(&e->cv); /* the keep-alive thread takes it up */
    pthread_mutex_unlock(&e->mu);
    if (atomic_load(&e->resigned) || atomic_load(&e->resigning) || atomic_load(&e->stop)) {
      end_term(e, c, "resigned");
      break;
    }

    /* 2. campaign: blocks until elected; abandoned when the term ends meanwhile */
    b = obj();
    r = NULL;
    f = ETCD_NOT_SENT;
    if (b && etcd__add_b64(b, "name", e->prefix) && etcd__add_i64(b, "lease", lease) &&
        etcd__add_b64(b, "value", e->advertise))
      f = etcd__post(c, "/v3/election/campaign", b, -1, &e->term_over, &r, &err);
    cJSON_Delete(b);
    const char *key = NULL;
    int64_t rev = 0;
    if (f != ETCD_OK || !etcd__campaign_key(r, &key, &rev)) {
      if (f != ETCD_ABORTED && !atomic_load(&e->stop))
        log_kv(LOG_WARN, "election: campaign failed", "node", e->node_id, "error", err.msg,
               (const char *)NULL);
      cJSON_Delete(r);
      end_term(e, c, "campaign failed");
      continue;
    }
    etcd_answered(e);
    char *mine = strdup(key);
    cJSON_Delete(r);
    if (!mine) { /* without its key this node could not see itself superseded: no term */
      log_kv(LOG_ERROR, "election: out of memory", "node", e->node_id, (const char *)NULL);
      end_term(e, c, "out of memory");
      continue;
    }
    pthread_mutex_lock(&e->mu);
    free(e->my_key);
    e->my_key = mine;
    e->my_rev = rev;
    pthread_mutex_unlock(&e->mu);
    /* the observer reads the leader again now that it knows this node's key: a change it read
     * before could have superseded this key already */
    atomic_store(&e->reread, true);
    etcd__conn_wake(e->c_observe);

    /* 3. fence: the store must refuse the previous epoch before this node serves */
    bool fenced = false;
    while (!term_end_reason(e)) {
      bool superseded = false;
      if (!e->on_elected || e->on_elected(e->on_elected_arg, (uint64_t)rev, &superseded)) {
        fenced = true;
        break;
      }
      if (superseded) {
        log_kv(LOG_WARN, "election: fence is past this epoch, campaigning again", "node",
               e->node_id, (const char *)NULL);
        break;
      }
      wait_ms(e, RETRY_MS); /* backoff: the fence failed, try it again */
    }
    const char *why = term_end_reason(e);
    if (fenced && !why) {
      atomic_store(&e->epoch, (uint64_t)rev);
      atomic_store(&e->serving, true);
      if (e->on_serving) e->on_serving(e->on_serving_arg);
      char num[24];
      snprintf(num, sizeof num, "%" PRId64, rev);
      log_kv(LOG_INFO, "elected leader", "node", e->node_id, "epoch", num, (const char *)NULL);
      /* 4. hold the term while it is valid */
      why = hold(e);
    }
    end_term(e, c, why ? why : "fence refused");
  }
  return NULL;
}

static void *keepalive_main(void *arg) {
  etcd_elect *e = arg;
  etcd_conn *c = e->c_keepalive;
  int64_t every = e->ttl_ms / 3;
  while (!atomic_load(&e->stop)) {
    /* a lease to keep: the campaign broadcasts cv when it sets one */
    pthread_mutex_lock(&e->mu);
    while (!atomic_load(&e->stop) && (!e->lease || atomic_load(&e->lease_lost)))
      pthread_cond_wait(&e->cv, &e->mu);
    int64_t lease = e->lease;
    pthread_mutex_unlock(&e->mu);
    if (atomic_load(&e->stop)) break;
    int64_t t0 = clock_mono_ms();
    cJSON *b = obj(), *r = NULL;
    err_t err;
    err_clear(&err);
    etcd_fail f = ETCD_NOT_SENT;
    if (b && etcd__add_i64(b, "ID", lease))
      f = etcd__post(c, "/v3/lease/keepalive", b, every, &e->stop, &r, &err);
    cJSON_Delete(b);
    int64_t next = every;
    if (f == ETCD_OK) {
      etcd_answered(e);
      int64_t ttl = etcd__keepalive_ttl(r);
      pthread_mutex_lock(&e->mu);
      bool same = e->lease == lease;
      pthread_mutex_unlock(&e->mu);
      if (same && ttl > 0) {
        if (atomic_load(&e->last_ack_ms) < t0) atomic_store(&e->last_ack_ms, t0);
        atomic_fetch_add(&e->keepalives, 1);
      } else if (same) { /* TTL omitted: the lease expired or was revoked at etcd */
        atomic_store(&e->lease_lost, true);
        atomic_store(&e->term_over, true);
        wake(e);
      }
    } else {
      next = RETRY_MS; /* backoff: the keep-alive failed; it is idempotent, try again soon */
    }
    cJSON_Delete(r);
    /* the next renewal's time; sooner when the lease changes or the elector stops */
    struct timespec ts = clock_after_us(CLOCK_MONOTONIC, (t0 + next - clock_mono_ms()) * 1000);
    pthread_mutex_lock(&e->mu);
    while (!atomic_load(&e->stop) && e->lease == lease &&
           pthread_cond_timedwait(&e->cv, &e->mu, &ts) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&e->mu);
  }
  return NULL;
}

/* How many candidates' keys are under the election now (-1: etcd did not answer), *rev the
 * revision of the answer. */
static int count_candidates(etcd_elect *e, etcd_conn *c, int64_t *rev) {
  *rev = 0;
  char *key = malloc(strlen(e->prefix) + 2);
  if (!key) return -1;
  sprintf(key, "%s/", e->prefix);
  char *end = etcd__prefix_end(key);
  cJSON *b = obj(), *r = NULL;
  err_t err;
  err_clear(&err);
  etcd_fail f = ETCD_NOT_SENT;
  if (end && b && etcd__add_b64(b, "key", key) && etcd__add_b64(b, "range_end", end) &&
      cJSON_AddTrueToObject(b, "count_only"))
    f = etcd__post(c, "/v3/kv/range", b, OBSERVE_TIMEOUT_MS, &e->stop, &r, &err);
  int n = f == ETCD_OK ? (int)etcd__i64(r, "count") : -1;
  if (f == ETCD_OK) *rev = etcd__i64(cJSON_GetObjectItemCaseSensitive(r, "header"), "revision");
  cJSON_Delete(b);
  cJSON_Delete(r);
  free(end);
  free(key);
  return n;
}

/* Reads the leader, then the candidates' count: the revision to watch from (the leader's
 * answer's; without a leader the count's, when it found no candidate either), 0 when etcd did
 * not answer or a candidate came between the two reads (read again). */
static int64_t read_leader(etcd_elect *e, etcd_conn *c) {
  cJSON *b = obj(), *r = NULL;
  err_t err;
  err_clear(&err);
  etcd_fail f = ETCD_NOT_SENT;
  if (b && etcd__add_b64(b, "name", e->prefix))
    f = etcd__post(c, "/v3/election/leader", b, OBSERVE_TIMEOUT_MS, &e->stop, &r, &err);
  cJSON_Delete(b);
  int64_t rev = 0;
  if (f == ETCD_OK) {
    etcd_answered(e);
    etcd_leader ld;
    etcd__leader(r, &ld);
    rev = ld.at_rev;
    pthread_mutex_lock(&e->mu);
    snprintf(e->leader_addr, sizeof e->leader_addr, "%s", ld.addr ? ld.addr : "");
    /* another key leads at a revision after we were elected: we are not the leader */
    if (e->my_key && ld.at_rev >= e->my_rev && ld.key && strcmp(ld.key, e->my_key) != 0) {
      atomic_store(&e->not_me, true);
      pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    free(ld.addr);
  } else if (f == ETCD_REFUSED) { /* "election: no leader" */
    etcd_answered(e);
    rev = -1; /* the count's below */
    pthread_mutex_lock(&e->mu);
    e->leader_addr[0] = '\0';
    pthread_mutex_unlock(&e->mu);
  }
  cJSON_Delete(r);
  if (rev == 0) return 0;
  int64_t count_rev = 0;
  int n = count_candidates(e, c, &count_rev);
  if (n >= 0) atomic_store(&e->candidates, n);
  if (rev < 0) return n == 0 ? count_rev : 0;
  return rev;
}

/* The observer's watch while it runs. */
typedef struct watching {
  etcd_elect *e;
  bool failed; /* etcd answered an error, or cancelled the watch for another reason than a
                * compaction */
} watching;

/* A message of the observer's watch: false (end the watch, read again) on a change under the
 * prefix, a cancel (a compaction past the revision watched from: read again) or an error. */
static bool on_watch(void *arg, const cJSON *m) {
  watching *w = arg;
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "result");
  if (!cJSON_IsObject(r)) {
    w->failed = true;
    return false;
  }
  etcd_answered(w->e);
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "canceled"))) {
    w->failed = etcd__i64(r, "compact_revision") <= 0;
    return false;
  }
  return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "events")) == 0;
}

/* Watches the election's keys from revision from until the first change: true when a change
 * (or a compaction, or reread) ended it, false when the stream failed, etcd refused the watch
 * or it ran out its time. */
static bool watch_election(etcd_elect *e, etcd_conn *c, int64_t from, int64_t timeout_ms) {
  char *key = malloc(strlen(e->prefix) + 2);
  if (!key) return false;
  sprintf(key, "%s/", e->prefix);
  char *end = etcd__prefix_end(key);
  cJSON *b = obj(), *cr = obj();
  bool ok = end && b && cr && etcd__add_b64(cr, "key", key) &&
            etcd__add_b64(cr, "range_end", end) && etcd__add_i64(cr, "start_revision", from);
  free(end);
  free(key);
  if (ok) {
    cJSON_AddItemToObject(b, "create_request", cr);
    cr = NULL;
  }
  cJSON_Delete(cr);
  err_t err;
  err_clear(&err);
  etcd_fail f = ETCD_NOT_SENT;
  watching w = {.e = e};
  if (ok) f = etcd__stream(c, "/v3/watch", b, timeout_ms, &e->reread, on_watch, &w, &err);
  cJSON_Delete(b);
  return f == ETCD_OK && !w.failed;
}

static void *observe_main(void *arg) {
  etcd_elect *e = arg;
  etcd_conn *c = e->c_observe;
  while (!atomic_load(&e->stop)) {
    atomic_store(&e->reread, false);
    int64_t rev = read_leader(e, c);
    if (rev <= 0) {
      wait_ms(e, RETRY_MS); /* backoff: a read failed (or raced a candidate), try it again */
      continue;
    }
    /* from the revision read on, so that no change is missed between the read and the watch.
     * Without a lease no keep-alive shows etcd answering: the watch then ends after TTL/3 and
     * the read again does (election_ok). */
    pthread_mutex_lock(&e->mu);
    bool leased = e->lease != 0;
    pthread_mutex_unlock(&e->mu);
    if (!watch_election(e, c, rev + 1, leased ? -1 : e->ttl_ms / 3) && !atomic_load(&e->stop))
      wait_ms(e, RETRY_MS); /* backoff: the watch failed or timed out, read and watch again */
  }
  return NULL;
}

/* --- ops --- */

static err_code etcd_start(elect *base, err_t *err) {
  etcd_elect *e = (etcd_elect *)base;
  if (e->started) return ERR_OK;
  if (!e->c_campaign) e->c_campaign = etcd__conn_new(e->endpoints);
  if (!e->c_keepalive) e->c_keepalive = etcd__conn_new(e->endpoints);
  if (!e->c_observe) e->c_observe = etcd__conn_new(e->endpoints);
  if (!e->c_campaign || !e->c_keepalive || !e->c_observe)
    return err_set(err, ERR_INTERNAL, "election: out of memory");
  if (pthread_create(&e->th_keepalive, NULL, keepalive_main, e) != 0)
    return err_set(err, ERR_INTERNAL, "cannot start the keep-alive thread");
  if (pthread_create(&e->th_observe, NULL, observe_main, e) != 0) {
    atomic_store(&e->stop, true);
    wake(e);
    pthread_join(e->th_keepalive, NULL);
    return err_set(err, ERR_INTERNAL, "cannot start the election observer thread");
  }
  if (pthread_create(&e->th_campaign, NULL, campaign_main, e) != 0) {
    atomic_store(&e->stop, true);
    wake(e);
    pthread_join(e->th_keepalive, NULL);
    pthread_join(e->th_observe, NULL);
    return err_set(err, ERR_INTERNAL, "cannot start the campaign thread");
  }
  e->started = true;
  return ERR_OK;
}

static void etcd_status(elect *base, elect_status *out) {
  etcd_elect *e = (etcd_elect *)base;
  int64_t now = clock_mono_ms();
  memset(out, 0, sizeof *out);
  out->leader = atomic_load(&e->serving) && !atomic_load(&e->lease_lost) &&
                !atomic_load(&e->not_me) && within_deadline(e, now);
  out->epoch = out->leader ? atomic_load(&e->epoch) : 0;
  int64_t ok = atomic_load(&e->etcd_ok_ms);
  out->election_ok = ok > 0 && now - ok < e->ttl_ms;
  if (out->leader) {
    snprintf(out->leader_addr, sizeof out->leader_addr, "%s", e->advertise);
  } else if (out->election_ok) {
    pthread_mutex_lock(&e->mu);
    snprintf(out->leader_addr, sizeof out->leader_addr, "%s", e->leader_addr);
    pthread_mutex_unlock(&e->mu);
    if (strcmp(out->leader_addr, e->advertise) == 0) out->leader_addr[0] = '\0'; /* stale: us */
  } /* else etcd has not answered for a TTL: the leader last read may have lost its lease since
     * (it stops serving by itself within one), so none is named */
  out->candidates = atomic_load(&e->candidates);
}

static void etcd_yield(elect *base) {
  etcd_elect *e = (etcd_elect *)base;
  if (!atomic_load(&e->serving)) return; /* only a term being served is yielded */
  atomic_store(&e->yield_req, true);
  wake(e);
}

static void etcd_resign(elect *base) {
  etcd_elect *e = (etcd_elect *)base;
  if (atomic_exchange(&e->resigning, true)) return;
  /* before anything else: no new call is served; then the calls admitted in the term finish
   * while the key is still ours, so that no other node is elected (and fences) meanwhile */
  if (atomic_exchange(&e->serving, false)) stepping_down(e);
  atomic_store(&e->resigned, true);
  atomic_store(&e->term_over, true);
  wake(e);
  pthread_mutex_lock(&e->mu);
  int64_t lease = e->lease;
  char *key = e->my_key ? strdup(e->my_key) : NULL; /* NULL (no memory): no hand-over below;
                                                     * the revoke still frees the key */
  int64_t rev = e->my_rev;
  pthread_mutex_unlock(&e->mu);
  if (!lease) {
    free(key);
    return;
  }
  etcd_conn *c = etcd__conn_new(e->endpoints);
  if (c) {
    if (key) { /* hand over at once: the next candidate's campaign returns */
      cJSON *b = obj(), *ld = obj(), *r = NULL;
      err_t err;
      err_clear(&err);
      if (b && ld && etcd__add_b64(ld, "name", e->prefix) &&
          cJSON_AddStringToObject(ld, "key", key) && etcd__add_i64(ld, "rev", rev) &&
          etcd__add_i64(ld, "lease", lease) && cJSON_AddItemToObject(b, "leader", ld)) {
        ld = NULL;
        etcd__post(c, "/v3/election/resign", b, REVOKE_TIMEOUT_MS, NULL, &r, &err);
      }
      cJSON_Delete(ld);
      cJSON_Delete(b);
      cJSON_Delete(r);
    }
    revoke(c, lease, NULL); /* the key goes with the lease whatever resign did */
    etcd__conn_free(c);
  }
  free(key);
  log_kv(LOG_INFO, "resigned leadership", "node", e->node_id, (const char *)NULL);
}

static void etcd_free(elect *base) {
  etcd_elect *e = (etcd_elect *)base;
  if (!e) return;
  etcd_resign(base);
  atomic_store(&e->stop, true);
  atomic_store(&e->term_over, true);
  atomic_store(&e->reread, true);
  wake(e);
  if (e->started) {
    pthread_join(e->th_campaign, NULL);
    pthread_join(e->th_keepalive, NULL);
    pthread_join(e->th_observe, NULL);
  }
  etcd__conn_free(e->c_campaign);
  etcd__conn_free(e->c_keepalive);
  etcd__conn_free(e->c_observe);
  pthread_cond_destroy(&e->cv);
  pthread_mutex_destroy(&e->mu);
  free(e->my_key);
  free(e->endpoints);
  free(e->prefix);
  free(e->node_id);
  free(e->advertise);
  free(e);
}

static const elect_ops etcd_ops = {
    .version = ELECT_OPS_VERSION,
    .start = etcd_start,
    .status = etcd_status,
    .resign = etcd_resign,
    .yield = etcd_yield,
    .free = etcd_free,
};

elect *elect_etcd_new(const elect_etcd_config *cfg, err_t *err) {
  if (!cfg || !cfg->endpoints || !*cfg->endpoints) {
    err_set(err, ERR_INVALID, "etcd: no endpoints");
    return NULL;
  }
  int ttl = cfg->ttl_s ? cfg->ttl_s : 5;
  if (ttl < 2 || ttl > 60) {
    err_set(err, ERR_INVALID, "election ttl: expected 2 to 60 seconds, got %d", ttl);
    return NULL;
  }
  etcd_elect *e = calloc(1, sizeof *e);
  if (!e) {
    err_oom(err);
    return NULL;
  }
  e->base.ops = &etcd_ops;
  pthread_mutex_init(&e->mu, NULL);
  clock_cond_init(&e->cv); /* waits never stretch with the wall clock */
  e->endpoints = strdup(cfg->endpoints);
  e->prefix = strdup(cfg->prefix && *cfg->prefix ? cfg->prefix : "/idem/leader");
  e->node_id = strdup(cfg->node_id ? cfg->node_id : "");
  e->advertise = strdup(cfg->advertise ? cfg->advertise : "");
  e->ttl_s = ttl;
  e->ttl_ms = (int64_t)ttl * 1000;
  e->margin_ms = cfg->margin_ms > 0 ? cfg->margin_ms : e->ttl_ms / 5;
  if (e->margin_ms < 200) e->margin_ms = 200;
  if (e->margin_ms >= e->ttl_ms / 2) e->margin_ms = e->ttl_ms / 2;
  e->on_elected = cfg->on_elected;
  e->on_elected_arg = cfg->on_elected_arg;
  e->on_serving = cfg->on_serving;
  e->on_serving_arg = cfg->on_serving_arg;
  e->on_stepping_down = cfg->on_stepping_down;
  e->on_stepping_down_arg = cfg->on_stepping_down_arg;
  if (!e->endpoints || !e->prefix || !e->node_id || !e->advertise) {
    etcd_free(&e->base);
    err_oom(err);
    return NULL;
  }
  /* validate the endpoints now (a bad list is a start-up error, not a silent retry loop) */
  etcd_conn *probe = etcd__conn_new(e->endpoints);
  if (!probe) {
    etcd_free(&e->base);
    err_set(err, ERR_INVALID, "etcd: bad endpoint list");
    return NULL;
  }
  etcd__conn_free(probe);
  return &e->base;
}

int64_t elect_etcd__lease(elect *base) {
  etcd_elect *e = (etcd_elect *)base;
  pthread_mutex_lock(&e->mu);
  int64_t l = e->lease;
  pthread_mutex_unlock(&e->mu);
  return l;
}

uint64_t elect_etcd__keepalives(elect *base) {
  return atomic_load(&((etcd_elect *)base)->keepalives);
}
