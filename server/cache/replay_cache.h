/* replay_cache.h — the leader's replay cache: step pairs the leader's own step
 * transactions committed, kept in memory so a BeginStep that only replays a finished result
 * (or skips, or refuses a different fingerprint) is answered without a database round trip.
 *
 * Plain C (no gRPC, no libpq). Filled only from the store's commit hook (store_commit_fn: the
 * pair as committed, under the pair's lock, on this leader's fenced connection), so it never
 * holds a record another writer could have changed since: every step write of this epoch goes
 * through that hook, older leaders are fenced off by the database, and on an epoch change the
 * whole cache is dropped. A pair is kept only while one of its records is finished; any other
 * commit on the pair removes it. Records close to the end of their retention are not answered
 * from the cache (the reaper may delete them); coord decides what a cached pair may answer.
 *
 * Expiry is the database's clock's to decide, never this node's wall clock (which may be
 * skewed): each entry keeps the database's clock at its commit (the pair's now_ms, read in the
 * commit's transaction) and this node's monotonic clock when the commit was reported, and
 * replay_cache_get gives the database's clock carried forward on the monotonic clock
 * (db_now + monotonic time since). It lags the database's real clock by the commit's own
 * duration at most, which coord's retention margin covers. A pair without the database's clock
 * (now_ms 0) is not kept.
 *
 * Bounded: at most max_entries pairs and max_bytes (entries plus result bodies); the oldest
 * written entry goes first. Thread-safe (one mutex).
 */
#ifndef IDEM_REPLAY_CACHE_H
#define IDEM_REPLAY_CACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../domain/record.h"

typedef struct replay_cache replay_cache;

typedef struct replay_cache_cfg {
  size_t max_entries;            /* 0 = 100000 */
  size_t max_bytes;              /* 0 = 64 MiB */
  const _Atomic uint64_t *epoch; /* the leader's epoch (borrowed); NULL = never changes */
} replay_cache_cfg;

replay_cache *replay_cache_new(const replay_cache_cfg *cfg); /* NULL on allocation failure */
void replay_cache_free(replay_cache *c);

/* The store's commit hook (a store_commit_fn; arg is the cache): records the pair as
 * committed under epoch, or removes it when none of its records is finished. Ignored when
 * epoch is not the current one. */
void replay_cache_committed(void *cache, uint64_t epoch, const step_pair *after);

/* Copies the cached pair of key's (tenant, global_id, service, operation) into *out as owned
 * records (free with step_rec_clear on out->fwd and out->comp); out->now_ms is the database's
 * clock now as the entry tells it (see the top of this file): judge every expiry by it. */
bool replay_cache_get(replay_cache *c, const step_key *key, step_pair *out);

typedef struct replay_cache_stats {
  uint64_t hits, misses, entries, bytes, dropped_epochs;
} replay_cache_stats;
void replay_cache_stats_get(replay_cache *c, replay_cache_stats *out);
/* coord counts a lookup that answered (hit) or went on to the store (miss). */
void replay_cache_count(replay_cache *c, bool hit);

#endif
