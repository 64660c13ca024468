/* replay_cache.c — see replay_cache.h. A chained hash table keyed by the pair's
 * "tenant\x1fglobal_id\x1fservice\x1foperation", plus a list in write order for eviction.
 * Records are stored compactly (the key once per entry, not in every record). */
#include "replay_cache.h"

#include "../metrics/metrics.h"
#include "../util/clock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RC_DEFAULT_ENTRIES 100000
#define RC_DEFAULT_BYTES (64u * 1024 * 1024)

typedef struct crec {
  bool present;
  uint8_t state, outcome, fp_len;
  uint8_t fp[REC_FP_MAX];
  uint64_t attempt;
  int32_t code;
  uint32_t body_len;
  uint8_t *body;
  int64_t completed_ms, created_ms, updated_ms, lease_expires_ms, expires_ms;
  int64_t result_expires_ms;
  bool result_expired;
} crec;

typedef struct entry {
  struct entry *chain;      /* same bucket */
  struct entry *older, *newer; /* write order */
  uint64_t hash;
  size_t bytes;
  int64_t db_now_ms; /* the database's clock when the pair was read for its commit */
  int64_t mono_ms;   /* this node's monotonic clock when the commit was reported */
  crec rec[2]; /* forward, compensation */
  char key[];  /* tenant \x1f global_id \x1f service \x1f operation */
} entry;

struct replay_cache {
  pthread_mutex_t mu;
  entry **buckets;
  size_t n_buckets; /* a power of two */
  entry *oldest, *newest;
  size_t entries, bytes, max_entries, max_bytes;
  const _Atomic uint64_t *epoch;
  uint64_t filled_epoch;
  _Atomic uint64_t hits, misses;
  uint64_t dropped_epochs;
};

static size_t key_str(const step_key *k, char *out, size_t cap) {
  int n = snprintf(out, cap, "%s\x1f%s\x1f%s\x1f%s", k->tenant, k->global_id, k->service,
                   k->operation);
  return n < 0 ? 0 : (size_t)n;
}

static uint64_t fnv1a(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
  return h;
}

replay_cache *replay_cache_new(const replay_cache_cfg *cfg) {
  replay_cache *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->max_entries = cfg && cfg->max_entries ? cfg->max_entries : RC_DEFAULT_ENTRIES;
  c->max_bytes = cfg && cfg->max_bytes ? cfg->max_bytes : RC_DEFAULT_BYTES;
  c->epoch = cfg ? cfg->epoch : NULL;
  c->filled_epoch = c->epoch ? atomic_load(c->epoch) : 0;
  c->n_buckets = 1024;
  while (c->n_buckets < c->max_entries) c->n_buckets <<= 1;
  c->buckets = calloc(c->n_buckets, sizeof *c->buckets);
  if (!c->buckets) {
    free(c);
    return NULL;
  }
  pthread_mutex_init(&c->mu, NULL);
  return c;
}

static void entry_free(entry *e) {
  free(e->rec[0].body);
  free(e->rec[1].body);
  free(e);
}

/* Unlinks e from its bucket and the write-order list, and frees it. */
static void remove_entry(replay_cache *c, entry *e) {
  entry **pp = &c->buckets[e->hash & (c->n_buckets - 1)];
  while (*pp != e) pp = &(*pp)->chain;
  *pp = e->chain;
  if (e->older) e->older->newer = e->newer;
  else c->oldest = e->newer;
  if (e->newer) e->newer->older = e->older;
  else c->newest = e->older;
  c->entries--;
  c->bytes -= e->bytes;
  entry_free(e);
}

static void clear_all(replay_cache *c) {
  while (c->oldest) remove_entry(c, c->oldest);
}

void replay_cache_free(replay_cache *c) {
  if (!c) return;
  clear_all(c);
  free(c->buckets);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* Drops everything when the epoch moved on (under mu). False when epoch is not current. */
static bool epoch_current(replay_cache *c, uint64_t epoch) {
  if (!c->epoch) return true;
  uint64_t now = atomic_load(c->epoch);
  if (now != c->filled_epoch) {
    clear_all(c);
    c->filled_epoch = now;
    c->dropped_epochs++;
  }
  return epoch == now;
}

static entry *find(replay_cache *c, uint64_t h, const char *key) {
  for (entry *e = c->buckets[h & (c->n_buckets - 1)]; e; e = e->chain)
    if (e->hash == h && strcmp(e->key, key) == 0) return e;
  return NULL;
}

static bool finished(const step_rec *r) {
  return r->present &&
         (r->state == STATE_SUCCEEDED || r->state == STATE_FAILED || r->state == STATE_UNKNOWN);
}

/* The fields a cached record keeps as they are (the rest are narrowed, or owned: fp, body). */
#define CREC_SAME_FIELDS(X)                                                                    \
  X(attempt) X(code) X(completed_ms) X(created_ms) X(updated_ms) X(lease_expires_ms)          \
  X(expires_ms) X(result_expires_ms) X(result_expired)
#define COPY_FIELD(f) d->f = s->f;

/* A copy of n body bytes into *dst (NULL when n == 0); false when out of memory. */
static bool copy_body(uint8_t **dst, const uint8_t *src, size_t n) {
  *dst = NULL;
  if (n == 0) return true;
  if (!(*dst = malloc(n))) return false;
  memcpy(*dst, src, n);
  return true;
}

static bool pack(crec *d, const step_rec *s) {
  memset(d, 0, sizeof *d);
  if (!s->present) return true;
  d->present = true;
  d->state = (uint8_t)s->state;
  d->outcome = (uint8_t)s->outcome;
  d->fp_len = (uint8_t)(s->fp_len > REC_FP_MAX ? REC_FP_MAX : s->fp_len);
  memcpy(d->fp, s->fp, d->fp_len);
  CREC_SAME_FIELDS(COPY_FIELD)
  if (!copy_body(&d->body, s->body, s->body_len)) return false;
  d->body_len = (uint32_t)s->body_len;
  return true;
}

static bool unpack(step_rec *d, const crec *s, const step_key *key, step_phase phase) {
  memset(d, 0, sizeof *d);
  d->key = *key;
  d->key.phase = phase;
  if (!s->present) return true;
  d->present = true;
  d->state = (step_state)s->state;
  d->outcome = (step_outcome)s->outcome;
  d->fp_len = s->fp_len;
  memcpy(d->fp, s->fp, s->fp_len);
  CREC_SAME_FIELDS(COPY_FIELD)
  if (!copy_body(&d->body, s->body, s->body_len)) return false;
  d->body_len = s->body_len;
  return true;
}

void replay_cache_committed(void *arg, uint64_t epoch, const step_pair *after) {
  replay_cache *c = arg;
  char key[4 * (REC_GLOBAL_ID_MAX + 2)];
  size_t kl = key_str(&after->fwd.key, key, sizeof key);
  uint64_t h = fnv1a(key, kl);
  /* without the database's clock nothing could say when the pair expires: not kept */
  bool keep = after->now_ms > 0 && (finished(&after->fwd) || finished(&after->comp));
  entry *e = NULL;
  if (keep) { /* built outside the lock */
    e = malloc(sizeof *e + kl + 1);
    if (e) {
      memset(e, 0, sizeof *e);
      e->hash = h;
      e->db_now_ms = after->now_ms;
      e->mono_ms = clock_mono_ms();
      memcpy(e->key, key, kl + 1);
      if (!pack(&e->rec[0], &after->fwd) || !pack(&e->rec[1], &after->comp)) {
        entry_free(e);
        e = NULL; /* out of memory: the old entry still goes below */
      } else {
        e->bytes = sizeof *e + kl + 1 + e->rec[0].body_len + e->rec[1].body_len;
      }
    }
  }
  pthread_mutex_lock(&c->mu);
  if (!epoch_current(c, epoch)) {
    pthread_mutex_unlock(&c->mu);
    if (e) entry_free(e);
    return;
  }
  entry *old = find(c, h, key);
  if (old) remove_entry(c, old);
  if (e && e->bytes <= c->max_bytes) {
    while (c->entries > 0 && (c->entries + 1 > c->max_entries || c->bytes + e->bytes > c->max_bytes))
      remove_entry(c, c->oldest);
    size_t b = h & (c->n_buckets - 1);
    e->chain = c->buckets[b];
    c->buckets[b] = e;
    e->older = c->newest;
    if (c->newest) c->newest->newer = e;
    else c->oldest = e;
    c->newest = e;
    c->entries++;
    c->bytes += e->bytes;
    e = NULL;
  }
  pthread_mutex_unlock(&c->mu);
  if (e) entry_free(e);
}

bool replay_cache_get(replay_cache *c, const step_key *key, step_pair *out) {
  memset(out, 0, sizeof *out);
  char ks[4 * (REC_GLOBAL_ID_MAX + 2)];
  size_t kl = key_str(key, ks, sizeof ks);
  uint64_t h = fnv1a(ks, kl);
  pthread_mutex_lock(&c->mu);
  entry *e = NULL;
  if (epoch_current(c, c->epoch ? atomic_load(c->epoch) : 0)) e = find(c, h, ks);
  bool ok = e && unpack(&out->fwd, &e->rec[0], key, PHASE_FORWARD) &&
            unpack(&out->comp, &e->rec[1], key, PHASE_COMPENSATION);
  /* the database's clock now, as carried forward from the commit on the monotonic clock */
  if (ok) out->now_ms = e->db_now_ms + (clock_mono_ms() - e->mono_ms);
  pthread_mutex_unlock(&c->mu);
  if (!ok) {
    step_rec_clear(&out->fwd);
    step_rec_clear(&out->comp);
    memset(out, 0, sizeof *out);
  }
  return ok;
}

void replay_cache_count(replay_cache *c, bool hit) {
  atomic_fetch_add(hit ? &c->hits : &c->misses, 1);
  metrics_replay_cache(hit);
}

void replay_cache_stats_get(replay_cache *c, replay_cache_stats *out) {
  pthread_mutex_lock(&c->mu);
  out->hits = atomic_load(&c->hits);
  out->misses = atomic_load(&c->misses);
  out->entries = c->entries;
  out->bytes = c->bytes;
  out->dropped_epochs = c->dropped_epochs;
  pthread_mutex_unlock(&c->mu);
}
