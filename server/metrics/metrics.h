/* metrics.h — process-wide counters, gauges and latency histograms (no per-key labels),
 * rendered as Prometheus text at /metrics. Every function is thread-safe and lock-free on the
 * hot path; calling them before the node serves /metrics (metrics_http/metrics_http.c) is fine.
 *
 * No label ever carries a key, a global id or a tenant: label values come from small fixed
 * sets (method names, gRPC code names, decision names, store error kinds).
 */
#ifndef IDEM_METRICS_H
#define IDEM_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A BeginStep for a fail-open operation answered PROCEED_UNGUARDED (store unreachable). */
void metrics_unguarded(void);

/* The reaper deleted n rows of kind ("steps" or "sagas"), or dropped n bodies ("bodies"). */
void metrics_reaped(const char *kind, uint64_t n);

/* A call carried a traceparent that is not a valid W3C one (docs/api.md §22): ignored, counted. */
void metrics_traceparent_invalid(void);
uint64_t metrics_traceparent_invalid_total(void);

/* Current counts (for tests and GetStatus); the /metrics text is the public interface. */
uint64_t metrics_unguarded_total(void);
uint64_t metrics_reaped_total(const char *kind);

/* --- throughput --- */

/* A group commit committed a batch of n step transactions. */
void metrics_batch(uint64_t n);
/* A BeginStep looked in the leader's replay cache: answered from it (hit) or not. */
void metrics_replay_cache(bool hit);
uint64_t metrics_replay_cache_total(bool hit);

/* --- BeginStep calls waiting on a step in progress (wait_ms) --- */

/* How many calls wait now (the gauge idem_begin_step_waiters). */
void metrics_set_waiting(uint64_t n);
/* A waiting call's wait ran out and it was answered ABORTED. */
void metrics_wait_timed_out(void);
uint64_t metrics_waiting(void);
uint64_t metrics_wait_timed_out_total(void);

/* --- incident response --- */

#define METRICS_METHODS_MAX 32
#define METRICS_CODES 17 /* gRPC status codes 0..16 */

/* Names method index i ("BeginStep"); name must outlive the process (a string literal or a
 * static table). Unnamed methods are not rendered. */
void metrics_rpc_name(int method, const char *name);

/* One finished call of method with gRPC status code, handled in micros microseconds (from
 * arrival to the reply being queued). Out-of-range arguments are ignored. */
void metrics_rpc_done(int method, int grpc_code, int64_t micros);

/* metrics_rpc_done for a call that carried a W3C trace id (32 lower-case hex; NULL or "" =
 * none): the call also becomes the latest exemplar of its latency bucket (docs/api.md §22). */
#define METRICS_TRACE_ID_MAX 32
void metrics_rpc_done_traced(int method, int grpc_code, int64_t micros, const char *trace_id);

/* A call answered with an error carrying reason (its idem-reason word, a static string):
 * idem_rpc_errors_total{reason}. */
void metrics_rpc_error(const char *reason);

/* The reaper of group finished a round (ok: without a store error):
 * idem_reaper_last_round_timestamp_seconds{group} becomes now. */
void metrics_reaper_round_g(int group, bool ok);

/* A BeginStep answered with decision (record.h step_decision values 1..5); takeover when it
 * was a PROCEED after an expired lease. */
void metrics_decision(int decision, bool takeover);

/* A step was resolved by hand (Admin.ResolveStep) with outcome (1 succeeded, 2 failed,
 * 3 retryable). */
void metrics_resolved(int outcome);

/* A store call failed: kind "unavailable" (cannot reach or lost the database), "timeout",
 * "conflict" (retries exhausted) or "error" (an SQL error). */
void metrics_store_error(const char *kind);

/* A store opened a PostgreSQL connection (idem_store_connects_total). */
void metrics_store_connected(void);

/* The leader/epoch gauges (single node: leader, epoch 0). */
void metrics_set_leader(bool leader, uint64_t epoch);

/* --- slot groups (docs/api.md §17) ---
 * With more than one store group, the store, batch, reaper and election series carry a group
 * label: idem_store_errors_total{group="g1",kind="timeout"}, idem_store_batches_total{group=..},
 * idem_reaped_rows_total{group=..,kind=..}, idem_leader{group=..}, idem_epoch{group=..}. With
 * one group they are rendered without it, as before. Group indexes are those of names. */
#define METRICS_GROUPS_MAX 64
/* Called at each scrape for each group: whether this node leads it, under which epoch. */
typedef void (*metrics_leader_fn)(void *arg, int group, bool *leader, uint64_t *epoch);
/* Registers the groups (names outlive the process's metrics; n <= METRICS_GROUPS_MAX). */
void metrics_set_groups(size_t n, const char *const *names, metrics_leader_fn fn, void *arg);
/* Where the time goes in the group commit (per group): the histograms
 * idem_store_queue_wait_seconds (a transaction's wait in the queue), idem_store_batch_size,
 * idem_store_round_trips (per committed batch) and idem_store_commit_seconds (a batch's start to
 * its commit). v in seconds, or a count. */
typedef enum metrics_store_hist {
  METRICS_QUEUE_WAIT,
  METRICS_BATCH_SIZE,
  METRICS_ROUND_TRIPS,
  METRICS_COMMIT,
  METRICS_STORE_HIST__COUNT
} metrics_store_hist;
void metrics_store_observe_g(int group, metrics_store_hist h, double v);

/* --- stages of a step call (docs/observability.md "Stages of a step call") ---
 * idem_stage_seconds{method,stage}: a BeginStep or CompleteStep answered by the group commit,
 * split at the points below on one monotonic clock (microseconds), each stage ending where the
 * next begins, so that for one call arrive..reply add up to its time in
 * idem_stage_call_seconds{method} (arrival to the reply handed to gRPC, as
 * idem_rpc_duration_seconds measures it). send comes after: until gRPC reports the reply sent.
 * A stage a call did not pass through (a replay from the cache has no queue) is not counted. */
typedef enum metrics_stage {
  METRICS_STAGE_ARRIVE,  /* taken from the completion queue: checks, decoding, routing */
  METRICS_STAGE_HANDLER, /* its handler: validation, caches, up to the batcher's queue */
  METRICS_STAGE_QUEUE,   /* in the batcher's queue until its batch starts */
  METRICS_STAGE_READ,    /* BEGIN, the pair locks and reads: the batch's first round trip */
  METRICS_STAGE_WRITE,   /* the decisions, then the writes until their results came back */
  METRICS_STAGE_COMMIT,  /* COMMIT and its WAL flush */
  METRICS_STAGE_ANSWER,  /* committed until the store's answer thread calls back */
  METRICS_STAGE_REPLY,   /* the callback until the reply is encoded and handed to gRPC */
  METRICS_STAGE_SEND,    /* handed to gRPC until gRPC reports the reply batch done */
  METRICS_STAGE__COUNT
} metrics_stage;
/* One call of method (the index of metrics_rpc_name) spent micros in stage s. */
void metrics_stage_observe(int method, metrics_stage s, int64_t micros);
/* One staged call's whole time (idem_stage_call_seconds). */
void metrics_stage_call(int method, int64_t micros);
/* Hand-offs within one thread, so that a stage may begin in one layer and end in another
 * without either knowing the other's types. The rpc layer sets the handler mark (method, and
 * when its handler started; method -1 clears it) around a handler it runs on this thread; the
 * store reads it when that handler queues its step transaction, on the same thread. The store
 * sets the answer mark around the callback of its answer; the rpc layer reads it when that
 * callback replies, on the same thread (get is false for another method or no mark). */
void metrics_stage_handler_set(int method, int64_t at_us);
bool metrics_stage_handler_get(int *method, int64_t *at_us);
void metrics_stage_answer_set(int method, int64_t at_us);
bool metrics_stage_answer_get(int method, int64_t *at_us);

/* The group-aware forms of metrics_store_error, metrics_batch and metrics_reaped (which count
 * for group 0). An out-of-range group counts for group 0. */
void metrics_store_error_g(int group, const char *kind);
void metrics_batch_g(int group, uint64_t n);
void metrics_reaped_g(int group, const char *kind, uint64_t n);

/* The source of the step gauges, called on each scrape (from the HTTP thread): fills the
 * live IN_PROGRESS and UNKNOWN step counts, and of the IN_PROGRESS ones those whose lease has
 * run out (idem_steps_lease_expired) and returns true, or false when they cannot be
 * read now (the scrape then reports idem_steps_scrape_ok 0 and omits the gauges). */
typedef bool (*metrics_counts_fn)(void *arg, uint64_t *in_progress, uint64_t *unknown,
                                  uint64_t *lease_expired);
void metrics_set_counts_fn(metrics_counts_fn fn, void *arg);

/* --- moving slots (docs/api.md §18) ---
 * idem_slot_move_phase{phase=".."} (1 for the phase of the move under way, as this node's map
 * says), idem_slot_move_rows_copied and idem_slot_move_lag_bytes (the target's rows in the
 * range, the source's WAL it has not confirmed; -1 unknown), and idem_slot_moves_total{result=
 * "finished"|"rolled_back"} (moves this node ended). The source is called at each scrape: false
 * when no move is under way. */
typedef bool (*metrics_move_fn)(void *arg, const char **phase, uint64_t *rows, int64_t *lag);
void metrics_set_move_fn(metrics_move_fn fn, void *arg);
void metrics_move_ended(bool finished);

/* The whole Prometheus text exposition (format 0.0.4). Returns a malloc'd NUL-terminated
 * string the caller frees, or NULL on allocation failure. Calls the counts function. */
char *metrics_render(void);

/* The same as OpenMetrics 1.0 text (application/openmetrics-text; version=1.0.0): counter
 * families named without _total, the latency buckets with their trace-id exemplars
 * (` # {trace_id="…"} seconds unix-seconds`), and `# EOF` last. Same ownership. */
char *metrics_render_openmetrics(void);

#endif
