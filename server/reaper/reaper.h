/* reaper.h — deletes what retention has forgotten, in two stages for steps (docs/api.md §12): first
 * the bodies of finished steps past their result retention whose key is kept longer
 * (key_retention_s), then finished steps past their key's expiry (never IN_PROGRESS or UNKNOWN);
 * and saga rows (request ids) past theirs, with their labels.
 *
 * One thread with its own store. Every interval it asks is_leader (only the leader reaps; a
 * single node is always the leader) and then deletes in batches of at most batch rows, each
 * batch its own short transaction that skips rows a step transaction holds, until a batch
 * comes back short or the reaper is stopped. Deleted rows are counted with metrics_reaped().
 * A store error ends the round (logged once per outage); the next interval tries again.
 *
 * Reaping does not change any answer: decide.h already treats a record past its retention as
 * absent; the reaper only reclaims the space.
 */
#ifndef IDEM_REAPER_H
#define IDEM_REAPER_H

#include <stdbool.h>
#include <stdint.h>

#include "../store/store.h"

#define REAPER_INTERVAL_S_DEFAULT 60
#define REAPER_BATCH_DEFAULT 100
/* Between batches the reaper rests this many times as long as the batch took: at most 1/(1+4)
 * of its time deleting. */
#define REAPER_REST_FACTOR 4
/* The first stage (bodies) in batches of batch / REAPER_BODY_DIVISOR rows, resting
 * REAPER_BODY_REST_FACTOR times as long as each took: dropping a body rewrites the row (a new
 * row version and its index entries, unlike a delete), and nothing waits for it (reads already
 * hide an expired body), so it goes in shorter bursts and at a gentler pace
 * (bench/key-retention measures what it costs BeginStep's p99). */
#define REAPER_BODY_DIVISOR 4
#define REAPER_BODY_REST_FACTOR 9

typedef struct reaper_config {
  store *(*open_store)(void *arg); /* the reaper's own store */
  void *open_store_arg;
  int64_t interval_ms;          /* between rounds; > 0 */
  uint32_t batch;               /* rows per transaction; 0 = REAPER_BATCH_DEFAULT */
  int64_t pause_ms;             /* least rest between batches of one round; the rest is also at
                                 * least REAPER_REST_FACTOR times what the batch took */
  int64_t store_timeout_ms;     /* per batch; 0 = 2000 */
  bool (*is_leader)(void *arg); /* NULL = always */
  void *is_leader_arg;
  int metrics_group; /* the store group it reaps, for the metrics' group label (0 = the one) */
} reaper_config;

typedef struct reaper reaper;

/* Starts the thread (the first round runs after one interval). NULL if the store or the thread
 * cannot be created. The config is copied. */
reaper *reaper_start(const reaper_config *cfg);

/* Runs one round now on the calling thread with st (tests, tools). Returns rows deleted plus
 * bodies dropped. */
uint64_t reaper_round(store *st, const reaper_config *cfg, const bool *stop);

/* Stops (an ongoing round ends after its current batch), joins, closes the store, frees.
 * NULL is fine. */
void reaper_stop(reaper *r);

#endif
