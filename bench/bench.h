/* bench.h — idem-bench's parts: the run's configuration, latency buffers, the shared state of
 * one run, and the workloads (bench_ops.c). idem_bench.c parses, runs and prints. */
#ifndef IDEM_BENCH_H
#define IDEM_BENCH_H

#include <idem/idem.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_route.h"

#define BENCH_MAX_CODES 17 /* gRPC codes 0-16; index BENCH_MAX_CODES: library errors */

#define BENCH_MAX_SWEEP 16

typedef enum workload { W_PAIRS, W_REPLAY, W_STORM, W_SAGA, W_DUPS } workload;

typedef struct conf {
  const char *addr;
  const char *tenant;
  workload w;
  int concurrency;
  int channels;
  double duration_s;
  long count;  /* 0: run for duration_s */
  int keys;    /* replay: keys finished before timing starts */
  double rate; /* 0: closed loop; else operations started per second, all slots together */
  uint32_t wait_ms; /* storm: BeginStep's wait_ms; dups: > 0 = idem_step_run waits */
  int action_ms;    /* dups: how long the step's action takes */
  bool json;
  bool topology; /* --topology: print the topology and exit */
  bool by_group; /* pairs: --concurrency callers per slot group, each call to its group's leader */
  bool stall_probe; /* --stall-probe: measure the machine's stalls during each timed run */
  /* --sweep: rates to run one after another; a percentage is of the maximum throughput, which
   * a closed-loop run measures first (sweep_n 0: one run) */
  int sweep_n;
  double sweep_v[BENCH_MAX_SWEEP];
  bool sweep_pct[BENCH_MAX_SWEEP];
} conf;

/* Latencies of one kind, kept as a high-dynamic-range histogram (bench_hist.c): microseconds
 * from 1 us to about 19 h in log-linear buckets, every value within 0.1 % of what was recorded,
 * in fixed memory however long the run. Each worker has its own (no locking). */
#define LAT_SUB_BITS 10                      /* 1024 linear sub-buckets per power of two */
#define LAT_MAX_EXP 36                       /* values up to 2^36 us; larger ones count there */
#define LAT_SLOTS ((1 << LAT_SUB_BITS) + (LAT_MAX_EXP - LAT_SUB_BITS) * (1 << (LAT_SUB_BITS - 1)))
typedef struct lat_buf {
  uint32_t *counts; /* LAT_SLOTS, allocated by the first lat_add or lat_merge */
  size_t n;
  int64_t max_us;
} lat_buf;

void lat_add(lat_buf *b, double ms);

typedef struct lat_summary {
  size_t n;
  double p50, p90, p99, p999, max;
} lat_summary;

/* Adds from's counts into into (from is left empty); false when out of memory. */
bool lat_merge(lat_buf *into, lat_buf *from);

/* Its count and percentiles in ms (all 0 when empty); a percentile is the upper edge of the
 * bucket holding the value of that rank (at most 0.1 % above it), max the largest recorded. */
lat_summary lat_summarize(const lat_buf *b);

void lat_free(lat_buf *b);

/* How many values were recorded above ms (to the bucket: within 0.1 %). */
long lat_count_over(const lat_buf *b, double ms);

typedef struct shared {
  const conf *cf;
  idem_client **clients;
  char run_id[40];
  int round; /* the run's number in a sweep (0: the first) */
  double t0;          /* monotonic start of the timed run (now_s) */
  atomic_long issued; /* operation tickets handed out (for --count and --rate) */
  atomic_bool stop;
  atomic_long errors[BENCH_MAX_CODES + 1];
  atomic_long calls; /* storm and dups: BeginStep and CompleteStep RPCs made */
  const bench_route *route; /* --by-group: the topology; else NULL */
  atomic_long group_ops[BENCH_MAX_GROUPS]; /* --by-group: operations finished per group */
  /* storm: rounds in lock step */
  pthread_barrier_t storm_go, storm_done;
  bool storm_run; /* written by worker 0 before storm_go, read by all after it */
  double storm_at; /* the round's intended start, likewise */
} shared;

typedef struct worker {
  shared *sh;
  int id;
  pthread_t th;
  lat_buf lat;   /* whole operations */
  lat_buf begin; /* each BeginStep: from its operation's intended start (--rate) to its answer */
  lat_buf begin_rpc; /* each BeginStep RPC on its own, from the call's start */
  lat_buf late; /* --rate, pairs and replay: how late each operation that waited for its time
                 * started (the load generator's own lag; not a slot still busy) */
  long ops;
} worker;

double now_s(void);

/* --stall-probe: the machine's stalls during a run (bench_stall.c). A thread wakes every 2 ms
 * to an absolute deadline and records in late how late each wake-up came (ms). */
typedef struct stall_probe {
  pthread_t th;
  atomic_bool stop;
  bool running;
  lat_buf late;
} stall_probe;

/* Starts the probe's thread (false when it cannot: then nothing is recorded). */
bool stall_probe_start(stall_probe *p);

/* Stops and joins it; p->late keeps what it recorded (lat_free it). */
void stall_probe_stop(stall_probe *p);

/* Claims `n` operation tickets; false when the run is over (--count reached, --duration
 * passed, or the next paced start would fall after it). With --rate, sleeps until the
 * ticket's start time t0 + ticket / rate. *intended is when the operation should have started:
 * that time with --rate (earlier than now when the caller was late: the wait is part of the
 * operation's latency, no coordinated omission), else now. */
bool bench_next_op(shared *sh, long n, double *intended);

/* bench_next_op without the sleep: *at is when the ticket may start (0: at once). */
bool bench_claim_op(shared *sh, long n, double *at);

/* Runs one operation of the configured workload; returns an IDEM_* code. */
int bench_op(worker *w, long seq);

/* Counts an error by IDEM_* / gRPC code (anything else: "library"). */
void bench_count_error(shared *sh, int code);

/* The key of a workload's operation: run id, kind, caller, sequence. */
void bench_key_name(const shared *sh, const char *kind, long a, long b, char *out, size_t n);

/* pairs and replay: all --concurrency slots (--by-group: that many per group) driven by the
 * calling thread on one completion queue (bench_async.c), paced by --rate when set; results into
 * w. 0, or 3 when it cannot start. */
int bench_run_async(shared *sh, worker *w);

/* replay: finishes the --keys keys (in parallel, --concurrency callers) before timing. */
int bench_setup_replay(shared *sh);

#endif
