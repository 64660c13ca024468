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
} conf;

/* Latencies of one kind, in milliseconds; each worker has its own (no locking). */
typedef struct lat_buf {
  double *v;
  size_t n, cap;
} lat_buf;

void lat_add(lat_buf *b, double ms);

typedef struct lat_summary {
  size_t n;
  double p50, p90, p99, max;
} lat_summary;

/* Moves from's values to the end of into (from is left empty); false when out of memory. */
bool lat_merge(lat_buf *into, lat_buf *from);

/* Sorts b and returns its count and percentiles (all 0 when empty). */
lat_summary lat_summarize(lat_buf *b);

void lat_free(lat_buf *b);

typedef struct shared {
  const conf *cf;
  idem_client **clients;
  char run_id[40];
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
} shared;

typedef struct worker {
  shared *sh;
  int id;
  pthread_t th;
  lat_buf lat;   /* whole operations */
  lat_buf begin; /* each BeginStep RPC on its own */
  long ops;
} worker;

double now_s(void);

/* Claims `n` operation tickets; false when the run is over (--count reached, --duration
 * passed, or the next paced start would fall after it). With --rate, sleeps until the
 * ticket's start time t0 + ticket / rate. */
bool bench_next_op(shared *sh, long n);

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
