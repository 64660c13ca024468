/* ha.h — store high availability under load (docs/api.md §14): a private etcd, a Patroni pair
 * (scripts/lib/patroni.sh, found through $IDEM_SOURCE_DIR: two Postgres 15 nodes, synchronous
 * mode, the etcd3 DCS on that etcd), two idem-coordinator nodes with the multi-host --pg, and
 * load from client threads through libidem, while a scenario breaks the Postgres side.
 *
 * Every wait polls a condition against a deadline. Every process is stopped by PID; the Patroni
 * pair also by a watcher of the test process (patroni_start's OWNER_PID), so a test killed by
 * its timeout leaves nothing running. Skips (cr_skip_test) only when patroni is not installed,
 * and then fails instead under CI=true (tests/ha/ci_skip_test.sh).
 */
#ifndef IDEM_TEST_HA_H
#define IDEM_TEST_HA_H

#include <idem/idem.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "etcd_proc.h"
#include "harness.h"

#define HA_COORDS 2
#define HA_NODES 2 /* Postgres nodes: "pg1", "pg2" */

typedef struct ha_cluster {
  etcd_proc etcd;
  char dir[128]; /* the Patroni pair's configs, data and logs (patroni.sh) */
  int pg_port[HA_NODES], api_port[HA_NODES];
  int ttl, loop_wait, retry_timeout; /* Patroni's settings, as written into the DCS */
  char pg_url[256];                  /* multi-host, target_session_attrs=read-write */
  srv coords[HA_COORDS];
  char addrs[HA_COORDS * 64]; /* every coordinator, for clients */
} ha_cluster;

/* Skips the test when patroni is not installed; otherwise starts etcd, the Patroni pair (waits
 * for a primary and a streaming synchronous standby), the database and the coordinators. */
void ha_start(ha_cluster *cl);
/* Stops the coordinators, the pair and etcd (by PID), removes the temporary directories. */
void ha_stop(ha_cluster *cl);
/* Criterion .fini: stops what a failed assertion left running. */
void ha_fini(void);

/* Runs `patroni_FN ARGS...` of scripts/lib/patroni.sh on the cluster's directory; its stdout
 * (trimmed) into out (may be NULL). The exit status; -1 after timeout_ms. */
int ha_lib(ha_cluster *cl, char *out, size_t n, int64_t timeout_ms, const char *fn,
           const char *arg);

/* The node (0: pg1, 1: pg2) whose Patroni REST API answers GET /primary with 200; -1: none. */
int ha_primary(ha_cluster *cl);
/* Polls until node answers /primary 200 (and, with not_pid > 0, its postmaster's PID is not
 * not_pid: a restarted postmaster), or within_ms passes: the time it took, -1 on timeout. */
int64_t ha_wait_primary(ha_cluster *cl, int node, pid_t not_pid, int64_t within_ms);
/* The node's Patroni agent / postmaster PID (0: not running). */
pid_t ha_agent_pid(ha_cluster *cl, int node);
pid_t ha_postmaster_pid(ha_cluster *cl, int node);
/* kill -9 by PID (when running). */
void ha_kill(pid_t pid);
/* A dead host: kill -9 of the node's Patroni agent, then of its postmaster and every process
 * the postmaster forked (stopped first, so none escapes): no backend of it commits anything
 * afterwards. The PIDs killed into *agent and *postmaster. */
void ha_kill_host(ha_cluster *cl, int node, pid_t *agent, pid_t *postmaster);
/* Prints the Patroni settings the bounds are computed from. */
void ha_print_settings(const ha_cluster *cl, const char *scenario);

/* --- load (support_load.c): client threads of fresh-key pairs plus replays --- */

#define HA_THREADS 12
#define HA_MAX_OPS 60000
#define HA_BUCKET_MS 100
#define HA_MAX_BUCKETS 1200 /* 120 s of acknowledged pairs, per 100 ms */

typedef struct ha_op {
  char gid[64];
  int64_t begun_ms;  /* when the first BeginStep was sent */
  uint64_t attempt;  /* the attempt of the PROCEED delivered to us (0: none) */
  int proceeds;      /* PROCEEDs delivered for this key (more than one attempt: each once) */
  bool dup_proceed;  /* one attempt PROCEEDed twice, or a completed key PROCEEDed again */
  bool acked;        /* CompleteStep answered OK */
  int64_t acked_ms;  /* when */
  int final_rc;      /* the last error (IDEM_OK when acked) */
  bool unknown;      /* an answer of this key's calls was lost (outcome_unknown) */
  bool bad_error;    /* an error other than UNAVAILABLE or one with an unknown outcome */
  char bad_msg[160]; /* that error */
} ha_op;

typedef struct ha_load {
  ha_cluster *cl;
  char tenant[64];
  atomic_bool stop;
  atomic_int n_ops;
  ha_op *ops;
  atomic_int replays, replay_bad;
  atomic_int acked_per_bucket[HA_MAX_BUCKETS];
  int64_t t_start, t_stop;
  pthread_t th[HA_THREADS];
} ha_load;

/* Starts HA_THREADS client threads (every coordinator's address). */
void ha_load_start(ha_load *L, ha_cluster *cl);
/* Stops and joins them. */
void ha_load_stop(ha_load *L);
/* Acknowledged pairs per second over [from_ms, to_ms) (monotonic ms). */
double ha_load_rate(const ha_load *L, int64_t from_ms, int64_t to_ms);

/* What a scenario measured after its fault at t0 (monotonic ms). */
typedef struct ha_report {
  int64_t t0;
  int64_t first_served_ms; /* first pair begun after t0 and acknowledged: its ack - t0 */
  int64_t full_rate_ms;    /* first 1 s window after t0 at >= 80% of the rate before (or of
                              rate_end when lower): its start - t0; -1 never */
  int64_t pause_ms;        /* the longest pause in acknowledgements around or after t0 */
  int64_t served_again_ms; /* the first acknowledgement after that pause - t0 */
  double rate_before;
  double rate_end; /* over the last 2 s of load */
  int acked_before, acked_after;
  int lost_acked; /* acknowledged completes LookupStep does not return as acknowledged */
  int dup_proceeds;
  int bad_errors;
  int unknown; /* keys with an unknown outcome on the way */
} ha_report;

/* When the acknowledged rate over a 1 s window starting after t0 first reached 80% of
 * rate_before: that window's start - t0; -1 not yet. ha_load_wait_full polls it until it is
 * found or within_ms after t0 passed. */
int64_t ha_load_full_at(const ha_load *L, int64_t t0, double rate_before);
int64_t ha_load_wait_full(const ha_load *L, int64_t t0, double rate_before, int64_t within_ms);

/* Reads every acknowledged complete back (LookupStep: SUCCEEDED, the attempt, code, body),
 * counts duplicate PROCEEDs and unexpected errors, and measures the times around t0. Call
 * after ha_load_stop. */
void ha_check(ha_load *L, int64_t t0, ha_report *r);
/* Prints the report's line (scenario name first). */
void ha_print(const char *scenario, const ha_report *r, const ha_load *L);
/* The invariants every scenario asserts: >= 200 pairs/s before the fault
 * ($IDEM_FAULT_MIN_RATE lowers it), no lost acknowledged complete, no duplicate PROCEED, no
 * error but UNAVAILABLE or an unknown outcome, every replay the stored result, and pairs
 * acknowledged after the fault. */
void ha_assert(const ha_report *r, const ha_load *L);
/* How many lines of the coordinators' logs hold needle. */
int ha_coord_log_count(const ha_cluster *cl, const char *needle);

#endif
