/* idem-bench — a closed-loop load generator for idem-coordinator (api.md §11).
 *
 *   idem-bench --addr HOST:PORT [--tenant T] --workload pairs|replay|storm|saga
 *              [--concurrency 64] [--channels 4] [--duration 10 | --count N] [--keys N] [--json]
 *
 * --concurrency callers each keep one operation in flight (closed loop) through --channels
 * libidem clients (one gRPC channel each). An operation is:
 *   pairs   BeginStep + CompleteStep on a fresh key (the pair counts once)
 *   replay  BeginStep on a key finished beforehand (--keys of them, set up before timing)
 *   storm   all callers BeginStep the same key at once; the one that proceeds completes it;
 *           then the next key (each caller's Begin counts once; ABORTED is the expected answer)
 *   saga    BeginSaga + three steps (begin + complete each)
 * Prints operations, seconds, throughput, latency p50/p90/p99/max (ms) and errors by gRPC code;
 * --json prints one object with workload, ops, seconds, throughput, p50_ms, p90_ms, p99_ms,
 * max_ms, errors.
 */
#include <getopt.h>
#include <idem/idem.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define MAX_CODES 17

typedef enum workload { W_PAIRS, W_REPLAY, W_STORM, W_SAGA } workload;
static const char *const workload_names[] = {"pairs", "replay", "storm", "saga"};

typedef struct conf {
  const char *addr;
  const char *tenant;
  workload w;
  int concurrency;
  int channels;
  double duration_s;
  long count; /* 0: run for duration_s */
  int keys;
  bool json;
} conf;

typedef struct lat_buf {
  double *v; /* milliseconds */
  size_t n, cap;
} lat_buf;

typedef struct shared {
  const conf *cf;
  idem_client **clients;
  char run_id[40];
  atomic_long issued; /* operations started (for --count) */
  atomic_bool stop;
  atomic_long errors[MAX_CODES + 1]; /* index MAX_CODES: library codes */
  /* storm */
  pthread_barrier_t storm_go, storm_done;
  bool storm_run; /* written by worker 0 before storm_go, read by all after it */
} shared;

typedef struct worker {
  shared *sh;
  int id;
  pthread_t th;
  lat_buf lat;
  long ops;
} worker;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void lat_add(lat_buf *b, double ms) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 4096;
    double *v = realloc(b->v, cap * sizeof *v);
    if (!v) return;
    b->v = v;
    b->cap = cap;
  }
  b->v[b->n++] = ms;
}

static void count_error(shared *sh, int code) {
  atomic_fetch_add(&sh->errors[(code >= 0 && code < MAX_CODES) ? code : MAX_CODES], 1);
}

/* Claims the next operation; false when the run is over. */
static bool next_op(shared *sh) {
  if (atomic_load(&sh->stop)) return false;
  if (sh->cf->count > 0 && atomic_fetch_add(&sh->issued, 1) >= sh->cf->count) return false;
  return true;
}

static int begin_complete(idem_client *c, const idem_step_key *k, shared *sh) {
  idem_begin b = {0};
  idem_error e = {0};
  int rc = idem_step_begin(c, k, NULL, 0, 0, &b, &e);
  if (rc != IDEM_OK) return rc;
  if (b.decision == IDEM_DECISION_PROCEED)
    rc = idem_step_complete(c, k, b.attempt, IDEM_OUTCOME_SUCCEEDED, 200, "ok", 2, NULL, &e);
  idem_begin_clear(&b);
  (void)sh;
  return rc;
}

static void key_name(shared *sh, const char *kind, long a, long b, char *out, size_t n) {
  snprintf(out, n, "%s-%s-%ld-%ld", sh->run_id, kind, a, b);
}

static int op_pairs(worker *w, long seq) {
  char gid[128];
  key_name(w->sh, "p", w->id, seq, gid, sizeof gid);
  idem_step_key k = {gid, "bench", "pair", IDEM_FORWARD};
  return begin_complete(w->sh->clients[w->id % w->sh->cf->channels], &k, w->sh);
}

static int op_replay(worker *w, long seq) {
  char gid[128];
  key_name(w->sh, "r", 0, (seq * w->sh->cf->concurrency + w->id) % w->sh->cf->keys, gid,
           sizeof gid);
  idem_step_key k = {gid, "bench", "replay", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  int rc = idem_step_begin(w->sh->clients[w->id % w->sh->cf->channels], &k, NULL, 0, 0, &b, &e);
  if (rc == IDEM_OK && b.decision != IDEM_DECISION_REPLAY) rc = IDEM_UNKNOWN;
  idem_begin_clear(&b);
  return rc;
}

static int op_saga(worker *w, long seq) {
  idem_client *c = w->sh->clients[w->id % w->sh->cf->channels];
  char rid[128], gid[IDEM_GLOBAL_ID_MAX + 1];
  key_name(w->sh, "s", w->id, seq, rid, sizeof rid);
  idem_error e = {0};
  int rc = idem_saga_begin(c, rid, "bench", NULL, 0, gid, NULL, NULL, &e);
  const char *ops[] = {"create", "charge", "reserve"};
  for (int i = 0; rc == IDEM_OK && i < 3; i++) {
    idem_step_key k = {gid, "bench", ops[i], IDEM_FORWARD};
    rc = begin_complete(c, &k, w->sh);
  }
  return rc;
}

/* storm: every worker begins the same key; the one that proceeds completes it. ABORTED is the
 * expected answer for all but one and is not an error. */
static int op_storm(worker *w, long round) {
  char gid[128];
  key_name(w->sh, "storm", 0, round, gid, sizeof gid);
  idem_step_key k = {gid, "bench", "storm", IDEM_FORWARD};
  int rc = begin_complete(w->sh->clients[w->id % w->sh->cf->channels], &k, w->sh);
  return rc == IDEM_ABORTED ? IDEM_OK : rc;
}

static void *worker_main(void *p) {
  worker *w = p;
  shared *sh = w->sh;
  bool storm = sh->cf->w == W_STORM;
  for (long seq = 0;; seq++) {
    if (storm) {
      /* rounds in lock step: worker 0 decides before the barrier whether a round runs, and
       * everyone reads that decision after it */
      if (w->id == 0) sh->storm_run = next_op(sh);
      pthread_barrier_wait(&sh->storm_go);
      if (!sh->storm_run) break;
    } else if (!next_op(sh)) {
      break;
    }
    double t0 = now_s();
    int rc = IDEM_OK;
    switch (sh->cf->w) {
      case W_PAIRS: rc = op_pairs(w, seq); break;
      case W_REPLAY: rc = op_replay(w, seq); break;
      case W_STORM: rc = op_storm(w, seq); break;
      case W_SAGA: rc = op_saga(w, seq); break;
    }
    lat_add(&w->lat, (now_s() - t0) * 1000.0);
    if (rc != IDEM_OK) count_error(sh, rc);
    w->ops++;
    if (storm) pthread_barrier_wait(&sh->storm_done);
  }
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double pct(const double *v, size_t n, double p) {
  if (n == 0) return 0;
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: idem-bench --addr HOST:PORT [--tenant T] --workload pairs|replay|storm|saga\n"
          "                  [--concurrency 64] [--channels 4] [--duration 10 | --count N]\n"
          "                  [--keys N] [--json]\n");
}

static int parse(int argc, char **argv, conf *cf) {
  *cf = (conf){.tenant = "bench", .w = -1, .concurrency = 64, .channels = 4, .duration_s = 10,
               .keys = 10000};
  static const struct option opts[] = {
      {"addr", required_argument, 0, 'a'},     {"tenant", required_argument, 0, 't'},
      {"workload", required_argument, 0, 'w'}, {"concurrency", required_argument, 0, 'c'},
      {"channels", required_argument, 0, 'm'}, {"duration", required_argument, 0, 'd'},
      {"count", required_argument, 0, 'n'},    {"keys", required_argument, 0, 'k'},
      {"json", no_argument, 0, 'j'},           {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  int o;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
      case 'a': cf->addr = optarg; break;
      case 't': cf->tenant = optarg; break;
      case 'w':
        for (int i = 0; i < 4; i++)
          if (strcmp(optarg, workload_names[i]) == 0) cf->w = (workload)i;
        if ((int)cf->w < 0) {
          fprintf(stderr, "idem-bench: --workload: unknown workload \"%s\"\n", optarg);
          return 2;
        }
        break;
      case 'c': cf->concurrency = atoi(optarg); break;
      case 'm': cf->channels = atoi(optarg); break;
      case 'd': cf->duration_s = atof(optarg); break;
      case 'n': cf->count = atol(optarg); break;
      case 'k': cf->keys = atoi(optarg); break;
      case 'j': cf->json = true; break;
      case 'h': usage(stdout); exit(0);
      default: usage(stderr); return 2;
    }
  }
  if (!cf->addr || (int)cf->w < 0) {
    fprintf(stderr, "idem-bench: --addr and --workload are required\n");
    usage(stderr);
    return 2;
  }
  if (cf->concurrency < 1 || cf->concurrency > 4096 || cf->channels < 1 ||
      cf->channels > 256 || cf->duration_s <= 0 || cf->count < 0 || cf->keys < 1) {
    fprintf(stderr, "idem-bench: --concurrency 1-4096, --channels 1-256, --duration > 0, "
                    "--keys >= 1\n");
    return 2;
  }
  return 0;
}

/* replay: finish --keys keys before timing starts */
static int setup_replay(shared *sh) {
  for (int i = 0; i < sh->cf->keys; i++) {
    char gid[128];
    key_name(sh, "r", 0, i, gid, sizeof gid);
    idem_step_key k = {gid, "bench", "replay", IDEM_FORWARD};
    int rc = begin_complete(sh->clients[i % sh->cf->channels], &k, sh);
    if (rc != IDEM_OK) {
      fprintf(stderr, "idem-bench: setting up replay keys: %s\n", idem_strerror(rc));
      return 1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  conf cf;
  int prc = parse(argc, argv, &cf);
  if (prc) return prc;

  shared *sh = calloc(1, sizeof *sh);
  sh->cf = &cf;
  uint32_t r = 0;
  if (getrandom(&r, sizeof r, 0) != sizeof r) r = (uint32_t)getpid();
  snprintf(sh->run_id, sizeof sh->run_id, "b%ld-%08x", (long)time(NULL), r);
  sh->clients = calloc((size_t)cf.channels, sizeof *sh->clients);
  for (int i = 0; i < cf.channels; i++) {
    idem_options o = {.address = cf.addr, .tenant = cf.tenant, .deadline_ms = 10000};
    idem_error e = {0};
    if (idem_connect(&o, &sh->clients[i], &e) != IDEM_OK) {
      fprintf(stderr, "idem-bench: connect %s: %s\n", cf.addr, e.message);
      return 3;
    }
  }
  if (cf.w == W_REPLAY && setup_replay(sh)) return 3;
  if (cf.w == W_STORM) {
    pthread_barrier_init(&sh->storm_go, NULL, (unsigned)cf.concurrency);
    pthread_barrier_init(&sh->storm_done, NULL, (unsigned)cf.concurrency);
  }

  worker *ws = calloc((size_t)cf.concurrency, sizeof *ws);
  double t0 = now_s();
  for (int i = 0; i < cf.concurrency; i++) {
    ws[i].sh = sh;
    ws[i].id = i;
    pthread_create(&ws[i].th, NULL, worker_main, &ws[i]);
  }
  if (cf.count == 0) {
    while (now_s() - t0 < cf.duration_s) usleep(10000);
    atomic_store(&sh->stop, true);
  }
  for (int i = 0; i < cf.concurrency; i++) pthread_join(ws[i].th, NULL);
  double secs = now_s() - t0;

  size_t n = 0;
  long ops = 0;
  for (int i = 0; i < cf.concurrency; i++) {
    n += ws[i].lat.n;
    ops += ws[i].ops;
  }
  double *all = malloc((n ? n : 1) * sizeof *all);
  size_t k = 0;
  for (int i = 0; i < cf.concurrency; i++) {
    memcpy(all + k, ws[i].lat.v, ws[i].lat.n * sizeof *all);
    k += ws[i].lat.n;
    free(ws[i].lat.v);
  }
  qsort(all, n, sizeof *all, cmp_double);
  double p50 = pct(all, n, .50), p90 = pct(all, n, .90), p99 = pct(all, n, .99),
         mx = n ? all[n - 1] : 0, tput = secs > 0 ? (double)ops / secs : 0;
  long total_err = 0;
  for (int i = 0; i <= MAX_CODES; i++) total_err += atomic_load(&sh->errors[i]);

  if (cf.json) {
    printf("{\"workload\":\"%s\",\"ops\":%ld,\"seconds\":%.3f,\"throughput\":%.1f,"
           "\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,\"errors\":{",
           workload_names[cf.w], ops, secs, tput, p50, p90, p99, mx);
    bool first = true;
    for (int i = 0; i <= MAX_CODES; i++) {
      long v = atomic_load(&sh->errors[i]);
      if (!v) continue;
      printf("%s\"%s\":%ld", first ? "" : ",", i < MAX_CODES ? idem_strerror(i) : "library", v);
      first = false;
    }
    printf("}}\n");
  } else {
    printf("workload     %s (concurrency %d, channels %d)\n", workload_names[cf.w],
           cf.concurrency, cf.channels);
    printf("operations   %ld in %.2f s\n", ops, secs);
    printf("throughput   %.1f /s\n", tput);
    printf("latency ms   p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", p50, p90, p99, mx);
    printf("errors       %ld\n", total_err);
    for (int i = 0; i <= MAX_CODES; i++) {
      long v = atomic_load(&sh->errors[i]);
      if (v) printf("  %-22s %ld\n", i < MAX_CODES ? idem_strerror(i) : "library", v);
    }
  }
  for (int i = 0; i < cf.channels; i++) idem_close(sh->clients[i]);
  if (cf.w == W_STORM) {
    pthread_barrier_destroy(&sh->storm_go);
    pthread_barrier_destroy(&sh->storm_done);
  }
  free(all);
  free(ws);
  free(sh->clients);
  free(sh);
  return total_err ? 1 : 0;
}
