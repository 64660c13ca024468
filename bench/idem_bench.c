/* idem-bench — a load generator for idem-coordinator (docs/api.md §11).
 *
 *   idem-bench --addr HOST:PORT [--tenant T] --workload pairs|replay|storm|saga|dups
 *              [--concurrency 64] [--channels 4] [--duration 10 | --count N] [--keys N]
 *              [--rate N] [--wait-ms MS] [--action-ms 50] [--by-group] [--json]
 *              [--sweep RATE|PCT%,...] [--stall-probe]
 *
 * --concurrency callers each keep one operation in flight (closed loop) through --channels
 * gRPC channels. `pairs` and `replay` run on one thread and one completion queue
 * (bench_async.c, so the load generator takes less of the CPU it shares with what it
 * measures); `storm` and `saga` run one thread per caller through libidem. An operation is:
 *   pairs   BeginStep + CompleteStep on a fresh key (the pair counts once)
 *   replay  BeginStep on a key finished beforehand (--keys of them, set up before timing)
 *   storm   all callers BeginStep the same key at once; the one that proceeds completes it;
 *           then the next key (each caller's Begin counts once; ABORTED is the expected answer;
 *           --count is rounded up to whole rounds of --concurrency)
 *           With --wait-ms MS each BeginStep waits (wait_ms) for the one that proceeds and
 *           replays its result instead of answering ABORTED.
 *   saga    BeginSaga + three steps (begin + complete each)
 *   dups    a saga's step retried by all callers at once: each runs idem_step_run on the same
 *           key (one key per round); the one that proceeds runs an action of --action-ms
 *           (default 50) and completes, the others get its result — waiting on the
 *           coordinator with --wait-ms > 0, else retrying ABORTED with libidem's backoff
 * --by-group (pairs only) spreads the load over slot groups (docs/api.md §17, bench_route.h):
 * it reads the topology through --addr, then runs --concurrency callers per group, each on keys
 * of its group, sending every call straight to that group's leader over --channels channels
 * per group; the report adds each group's leader and operations.
 * --topology prints the topology read through --addr as one JSON line and exits (no workload).
 * --duration S runs for S seconds (default 10); --count N runs exactly N operations instead.
 * --rate N paces the starts: operation i (over all callers) starts no earlier than i/N s after
 * the start, so at most N operations/s begin (still at most --concurrency in flight); latency
 * is measured from each operation's intended start, so an operation that starts late because
 * every slot was busy counts its wait (no coordinated omission); "begin rpc" is the BeginStep
 * RPC alone. Percentiles come from a high-dynamic-range histogram (bench_hist.c: 1 us to 19 h,
 * within 0.1 %).
 * --stall-probe measures the machine's stalls during each timed run (bench_stall.c): a thread
 * of its own wakes every 2 ms and records how late; the report adds their p99, p99.9, max and
 * the wake-ups more than 5 ms late (JSON: stall_p99_ms, stall_p999_ms, stall_max_ms,
 * stall_wakeups, stalls_over_5ms).
 * --sweep LIST (pairs, replay; with --duration) runs closed-loop first to measure the maximum
 * throughput, then once per point of LIST at that rate, e.g. --sweep 100,25%,50%,90%: a number
 * is operations/s, a percentage is of the maximum; one report per run (--json: one object per
 * line, each with "phase").
 * Prints operations, seconds, throughput, latency p50/p90/p99/max (ms), the BeginStep RPC's own
 * latency, and errors by gRPC code. --json prints one object with workload, ops, seconds,
 * throughput, p50_ms, p90_ms, p99_ms, p999_ms, max_ms, errors (docs/api.md §11) and, in
 * addition, concurrency, rate, begins, begin_p50_ms, begin_p90_ms, begin_p99_ms, begin_p999_ms,
 * begin_max_ms, begin_rpc_p50_ms, begin_rpc_p99_ms, begin_rpc_p999_ms (pairs, replay), with
 * --rate start_late_p50_ms, start_late_p99_ms, start_late_p999_ms (pairs, replay: how late the
 * operations that waited for their time started, the generator's own lag), and calls
 * (storm and dups: BeginStep and CompleteStep RPCs made) and wait_ms, and with --by-group
 * groups: [{name, leader, ops}].
 * Exit status: 0, or 1 when any operation failed, 2 on bad usage, 3 when it cannot start.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "idem_build_version.h"

static const char *const workload_names[] = {"pairs", "replay", "storm", "saga", "dups"};

/* pairs and replay: the single-threaded driver (bench_async.c) in caller 0. */
static bool async_driver(const conf *cf) {
  return cf->w == W_PAIRS || cf->w == W_REPLAY;
}

static void *async_main(void *p) {
  worker *w = p;
  if (bench_run_async(w->sh, w) != 0) bench_count_error(w->sh, -1);
  return NULL;
}

static void *worker_main(void *p) {
  worker *w = p;
  shared *sh = w->sh;
  bool storm = sh->cf->w == W_STORM || sh->cf->w == W_DUPS; /* rounds in lock step */
  for (long seq = 0;; seq++) {
    double t0 = 0; /* the operation's intended start */
    if (storm) {
      /* rounds in lock step: worker 0 decides before the barrier whether a round runs, and
       * everyone reads that decision after it */
      if (w->id == 0) sh->storm_run = bench_next_op(sh, sh->cf->concurrency, &sh->storm_at);
      pthread_barrier_wait(&sh->storm_go);
      if (!sh->storm_run) break;
    } else if (!bench_next_op(sh, 1, &t0)) {
      break;
    }
    if (storm) t0 = sh->storm_at;
    int rc = bench_op(w, seq);
    lat_add(&w->lat, (now_s() - t0) * 1000.0);
    if (rc != IDEM_OK) bench_count_error(sh, rc);
    w->ops++;
    if (storm) pthread_barrier_wait(&sh->storm_done);
  }
  return NULL;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: idem-bench --addr HOST:PORT [--tenant T] --workload pairs|replay|storm|saga|dups\n"
          "                  [--concurrency 64] [--channels 4] [--duration 10 | --count N]\n"
          "                  [--keys N] [--rate OPS_PER_S] [--wait-ms MS] [--action-ms 50]\n"
          "                  [--by-group] [--json] [--sweep RATE|PCT%%,...] [--stall-probe]\n"
          "       idem-bench --addr HOST:PORT --topology\n"
          "       idem-bench --version\n");
}

/* --sweep: "100,25%,50%,90%": rates in operations/s, or percentages of the measured maximum. */
static int parse_sweep(const char *list, conf *cf) {
  char buf[512];
  if (strlen(list) >= sizeof buf) {
    fprintf(stderr, "idem-bench: --sweep: the list is too long\n");
    return 2;
  }
  strcpy(buf, list);
  cf->sweep_n = 0;
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    char *end = NULL;
    double v = strtod(t, &end);
    bool pct = end && *end == '%';
    if (end == t || (pct ? end[1] != '\0' : *end != '\0') || !(v > 0) || (pct && v > 100) ||
        cf->sweep_n == BENCH_MAX_SWEEP) {
      fprintf(stderr,
              "idem-bench: --sweep: \"%s\" is not a rate > 0 or a percentage in (0, 100]%%; "
              "at most %d points\n", t, BENCH_MAX_SWEEP);
      return 2;
    }
    cf->sweep_v[cf->sweep_n] = v;
    cf->sweep_pct[cf->sweep_n++] = pct;
  }
  if (cf->sweep_n == 0) {
    fprintf(stderr, "idem-bench: --sweep: give at least one rate or percentage\n");
    return 2;
  }
  return 0;
}

static int parse(int argc, char **argv, conf *cf) {
  *cf = (conf){.tenant = "bench", .w = -1, .concurrency = 64, .channels = 4, .duration_s = 10,
               .keys = 10000, .action_ms = 50};
  static const struct option opts[] = {
      {"addr", required_argument, 0, 'a'},     {"tenant", required_argument, 0, 't'},
      {"workload", required_argument, 0, 'w'}, {"concurrency", required_argument, 0, 'c'},
      {"channels", required_argument, 0, 'm'}, {"duration", required_argument, 0, 'd'},
      {"count", required_argument, 0, 'n'},    {"keys", required_argument, 0, 'k'},
      {"rate", required_argument, 0, 'r'},     {"json", no_argument, 0, 'j'},
      {"wait-ms", required_argument, 0, 'W'},  {"action-ms", required_argument, 0, 'A'},
      {"by-group", no_argument, 0, 'g'},       {"topology", no_argument, 0, 'T'},
      {"help", no_argument, 0, 'h'},           {"version", no_argument, 0, 'V'},
      {"sweep", required_argument, 0, 'S'},    {"stall-probe", no_argument, 0, 'P'},
      {0, 0, 0, 0}};
  bool have_duration = false, have_count = false;
  int o;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
      case 'a': cf->addr = optarg; break;
      case 't': cf->tenant = optarg; break;
      case 'w':
        for (int i = 0; i < 5; i++)
          if (strcmp(optarg, workload_names[i]) == 0) cf->w = (workload)i;
        if ((int)cf->w < 0) {
          fprintf(stderr, "idem-bench: --workload: unknown workload \"%s\"\n", optarg);
          return 2;
        }
        break;
      case 'c': cf->concurrency = atoi(optarg); break;
      case 'm': cf->channels = atoi(optarg); break;
      case 'd':
        cf->duration_s = atof(optarg);
        have_duration = true;
        break;
      case 'n':
        cf->count = atol(optarg);
        have_count = true;
        break;
      case 'k': cf->keys = atoi(optarg); break;
      case 'r': cf->rate = atof(optarg); break;
      case 'j': cf->json = true; break;
      case 'g': cf->by_group = true; break;
      case 'P': cf->stall_probe = true; break;
      case 'T': cf->topology = true; break;
      case 'W': cf->wait_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
      case 'A': cf->action_ms = atoi(optarg); break;
      case 'S':
        if (parse_sweep(optarg, cf) != 0) return 2;
        break;
      case 'h': usage(stdout); exit(0);
      case 'V': printf("idem-bench %s (libidem %s)\n", IDEM_VERSION, idem_version()); exit(0);
      default: usage(stderr); return 2;
    }
  }
  if (cf->addr && cf->topology) return 0;
  if (!cf->addr || (int)cf->w < 0) {
    fprintf(stderr, "idem-bench: --addr and --workload are required\n");
    usage(stderr);
    return 2;
  }
  if (have_duration && have_count) {
    fprintf(stderr, "idem-bench: give --duration or --count, not both\n");
    return 2;
  }
  if (cf->concurrency < 1 || cf->concurrency > 4096 || cf->channels < 1 ||
      cf->channels > 256 || !(cf->duration_s > 0) || (have_count && cf->count < 1) ||
      cf->keys < 1 || !(cf->rate >= 0)) {
    fprintf(stderr, "idem-bench: --concurrency 1-4096, --channels 1-256, --duration > 0, "
                    "--count >= 1, --keys >= 1, --rate >= 0\n");
    return 2;
  }
  if (cf->by_group && cf->w != W_PAIRS) {
    fprintf(stderr, "idem-bench: --by-group: only with --workload pairs\n");
    return 2;
  }
  if (cf->sweep_n > 0 && (cf->rate > 0 || have_count || !async_driver(cf))) {
    fprintf(stderr, "idem-bench: --sweep: only with --workload pairs or replay, and without "
                    "--rate or --count (each point runs --duration seconds)\n");
    return 2;
  }
  return 0;
}

static void print_errors_json(shared *sh) {
  bool first = true;
  for (int i = 0; i <= BENCH_MAX_CODES; i++) {
    long v = atomic_load(&sh->errors[i]);
    if (!v) continue;
    printf("%s\"%s\":%ld", first ? "" : ",",
           i < BENCH_MAX_CODES ? idem_strerror(i) : "library", v);
    first = false;
  }
}

typedef struct result {
  long ops, errors;
  double secs;
  lat_summary op, bg, rpc; /* operations; BeginStep from the intended start; the RPC alone */
  lat_summary late;        /* --rate: how late a waiting operation started (the generator) */
  lat_summary stall;       /* --stall-probe: how late the probe's wake-ups came (the machine) */
  long stalls_over_5ms;    /* --stall-probe: wake-ups more than 5 ms late */
} result;

static void report_json(const conf *cf, shared *sh, const result *r, const char *phase) {
  const lat_summary *op = &r->op, *bg = &r->bg, *rpc = &r->rpc, *late = &r->late;
  printf("{");
  if (phase) printf("\"phase\":\"%s\",", phase);
  printf("\"workload\":\"%s\",\"ops\":%ld,\"seconds\":%.3f,\"throughput\":%.1f,"
         "\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"p999_ms\":%.3f,\"max_ms\":%.3f,"
         "\"errors\":{",
         workload_names[cf->w], r->ops, r->secs, r->secs > 0 ? (double)r->ops / r->secs : 0,
         op->p50, op->p90, op->p99, op->p999, op->max);
  print_errors_json(sh);
  printf("},\"calls\":%ld,\"wait_ms\":%u,", atomic_load(&sh->calls), cf->wait_ms);
  printf("\"concurrency\":%d,\"rate\":%.1f,\"begins\":%zu,\"begin_p50_ms\":%.3f,"
         "\"begin_p90_ms\":%.3f,\"begin_p99_ms\":%.3f,\"begin_p999_ms\":%.3f,"
         "\"begin_max_ms\":%.3f",
         cf->concurrency, cf->rate, bg->n, bg->p50, bg->p90, bg->p99, bg->p999, bg->max);
  if (rpc->n)
    printf(",\"begin_rpc_p50_ms\":%.3f,\"begin_rpc_p99_ms\":%.3f,\"begin_rpc_p999_ms\":%.3f",
           rpc->p50, rpc->p99, rpc->p999);
  if (late->n)
    printf(",\"start_late_p50_ms\":%.3f,\"start_late_p99_ms\":%.3f,\"start_late_p999_ms\":%.3f",
           late->p50, late->p99, late->p999);
  if (r->stall.n)
    printf(",\"stall_p99_ms\":%.3f,\"stall_p999_ms\":%.3f,\"stall_max_ms\":%.3f,"
           "\"stall_wakeups\":%zu,\"stalls_over_5ms\":%ld",
           r->stall.p99, r->stall.p999, r->stall.max, r->stall.n, r->stalls_over_5ms);
  if (sh->route) {
    printf(",\"groups\":[");
    for (int g = 0; g < sh->route->n_groups; g++)
      printf("%s{\"name\":\"%s\",\"leader\":\"%s\",\"ops\":%ld}", g ? "," : "",
             sh->route->name[g], sh->route->leader[g], atomic_load(&sh->group_ops[g]));
    printf("]");
  }
  printf("}\n");
}

/* One run's figures: as text, or as one JSON object on a line (phase: the sweep's point). */
static void report(const conf *cf, shared *sh, const result *r, const char *phase) {
  if (cf->json) {
    report_json(cf, sh, r, phase);
    fflush(stdout);
    return;
  }
  const lat_summary *op = &r->op, *bg = &r->bg, *rpc = &r->rpc, *late = &r->late;
  if (phase) printf("== %s\n", phase);
  printf("workload     %s (concurrency %d, channels %d", workload_names[cf->w], cf->concurrency,
         cf->channels);
  if (cf->rate > 0) printf(", rate %.1f /s", cf->rate);
  printf(")\n");
  printf("operations   %ld in %.2f s\n", r->ops, r->secs);
  printf("throughput   %.1f /s\n", r->secs > 0 ? (double)r->ops / r->secs : 0);
  printf("latency ms   p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n", op->p50, op->p90,
         op->p99, op->p999, op->max);
  printf("begin ms     p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (%zu BeginStep "
         "calls%s)\n",
         bg->p50, bg->p90, bg->p99, bg->p999, bg->max, bg->n,
         cf->rate > 0 ? ", from the intended start" : "");
  if (rpc->n && cf->rate > 0)
    printf("begin rpc ms p50 %.3f  p99 %.3f  p99.9 %.3f  (the RPC alone)\n", rpc->p50, rpc->p99,
           rpc->p999);
  if (late->n)
    printf("start late   p50 %.3f  p99 %.3f  p99.9 %.3f ms  (%zu operations that waited for "
           "their time: the load generator's own lag)\n",
           late->p50, late->p99, late->p999, late->n);
  if (r->stall.n)
    printf("stalls ms    p99 %.3f  p99.9 %.3f  max %.3f  (%zu wake-ups of a 2 ms sleep: how late; "
           "%ld more than 5 ms late)\n",
           r->stall.p99, r->stall.p999, r->stall.max, r->stall.n, r->stalls_over_5ms);
  if (cf->w == W_STORM || cf->w == W_DUPS)
    printf("rpc calls    %ld (BeginStep and CompleteStep; wait_ms %u)\n", atomic_load(&sh->calls),
           cf->wait_ms);
  if (sh->route)
    for (int g = 0; g < sh->route->n_groups; g++)
      printf("group        %s at %s: %ld operations\n", sh->route->name[g], sh->route->leader[g],
             atomic_load(&sh->group_ops[g]));
  printf("errors       %ld\n", r->errors);
  for (int i = 0; i <= BENCH_MAX_CODES; i++) {
    long v = atomic_load(&sh->errors[i]);
    if (v) printf("  %-22s %ld\n", i < BENCH_MAX_CODES ? idem_strerror(i) : "library", v);
  }
  fflush(stdout);
}

/* One timed run of cf's workload (cf->rate: its pacing) on fresh tickets and counters. 0, or 3
 * when it cannot start. */
static int run_once(const conf *cf, shared *sh, worker *ws, result *out) {
  atomic_store(&sh->issued, 0);
  atomic_store(&sh->stop, false);
  atomic_store(&sh->calls, 0);
  for (int i = 0; i <= BENCH_MAX_CODES; i++) atomic_store(&sh->errors[i], 0);
  for (int g = 0; g < BENCH_MAX_GROUPS; g++) atomic_store(&sh->group_ops[g], 0);
  sh->cf = cf;
  stall_probe probe = {0};
  if (cf->stall_probe && !stall_probe_start(&probe))
    fprintf(stderr, "idem-bench: cannot start the stall probe\n");
  sh->t0 = now_s();
  int threads = async_driver(cf) ? 1 : cf->concurrency;
  for (int i = 0; i < threads; i++) {
    ws[i] = (worker){.sh = sh, .id = i};
    if (pthread_create(&ws[i].th, NULL, async_driver(cf) ? async_main : worker_main, &ws[i]) !=
        0) {
      fprintf(stderr, "idem-bench: cannot start caller %d\n", i);
      return 3;
    }
  }
  if (cf->count == 0) {
    while (now_s() - sh->t0 < cf->duration_s) usleep(10000);
    atomic_store(&sh->stop, true);
  }
  for (int i = 0; i < threads; i++) pthread_join(ws[i].th, NULL);
  sh->round++;
  *out = (result){.secs = now_s() - sh->t0};
  stall_probe_stop(&probe);
  out->stall = lat_summarize(&probe.late);
  out->stalls_over_5ms = lat_count_over(&probe.late, 5.0);
  lat_free(&probe.late);
  lat_buf all = {0}, begins = {0}, rpcs = {0}, lates = {0};
  bool ok = true;
  for (int i = 0; i < threads; i++) {
    out->ops += ws[i].ops;
    ok = lat_merge(&all, &ws[i].lat) && ok;
    ok = lat_merge(&begins, &ws[i].begin) && ok;
    ok = lat_merge(&rpcs, &ws[i].begin_rpc) && ok;
    ok = lat_merge(&lates, &ws[i].late) && ok;
  }
  out->op = lat_summarize(&all);
  out->bg = lat_summarize(&begins);
  out->rpc = lat_summarize(&rpcs);
  out->late = lat_summarize(&lates);
  lat_free(&lates);
  lat_free(&all);
  lat_free(&begins);
  lat_free(&rpcs);
  if (!ok) {
    fprintf(stderr, "idem-bench: out of memory\n");
    return 3;
  }
  for (int i = 0; i <= BENCH_MAX_CODES; i++) out->errors += atomic_load(&sh->errors[i]);
  return 0;
}

/* --sweep: a closed-loop run for the maximum, then each point paced; one report per run. */
static int sweep(const conf *base, shared *sh, worker *ws, long *errors) {
  result r;
  conf cf = *base;
  cf.rate = 0;
  if (run_once(&cf, sh, ws, &r)) return 3;
  report(&cf, sh, &r, "maximum");
  *errors += r.errors;
  double max = r.secs > 0 ? (double)r.ops / r.secs : 0;
  for (int i = 0; i < base->sweep_n; i++) {
    cf.rate = base->sweep_pct[i] ? max * base->sweep_v[i] / 100.0 : base->sweep_v[i];
    if (!(cf.rate > 0)) continue;
    char phase[64];
    if (base->sweep_pct[i])
      snprintf(phase, sizeof phase, "%g%% of the maximum", base->sweep_v[i]);
    else
      snprintf(phase, sizeof phase, "%g per s", base->sweep_v[i]);
    if (run_once(&cf, sh, ws, &r)) return 3;
    report(&cf, sh, &r, phase);
    *errors += r.errors;
  }
  return 0;
}

int main(int argc, char **argv) {
  conf cf;
  int prc = parse(argc, argv, &cf);
  if (prc) return prc;
  if (cf.topology) {
    idem_options o = {.address = cf.addr, .deadline_ms = 3000};
    idem_client *c = NULL;
    idem_error e = {0};
    if (idem_connect(&o, &c, &e) != IDEM_OK) {
      fprintf(stderr, "idem-bench: connect %s: %s\n", cf.addr, e.message);
      return 3;
    }
    int rc = bench_route_print(c);
    idem_close(c);
    return rc;
  }

  shared *sh = calloc(1, sizeof *sh);
  worker *ws = calloc((size_t)cf.concurrency, sizeof *ws);
  if (!sh || !ws) return 3;
  sh->cf = &cf;
  uint32_t r = 0;
  if (getrandom(&r, sizeof r, 0) != sizeof r) r = (uint32_t)getpid();
  snprintf(sh->run_id, sizeof sh->run_id, "b%ld-%08x", (long)time(NULL), r);
  sh->clients = calloc((size_t)cf.channels, sizeof *sh->clients);
  if (!sh->clients) return 3;
  for (int i = 0; i < cf.channels; i++) {
    idem_options o = {.address = cf.addr, .tenant = cf.tenant, .deadline_ms = 10000};
    idem_error e = {0};
    if (idem_connect(&o, &sh->clients[i], &e) != IDEM_OK) {
      fprintf(stderr, "idem-bench: connect %s: %s\n", cf.addr, e.message);
      return 3;
    }
  }
  bench_route route = {0};
  if (cf.by_group) {
    char err[256];
    if (bench_route_fetch(sh->clients[0], &route, err, sizeof err) != 0) {
      fprintf(stderr, "idem-bench: --by-group: %s\n", err);
      return 3;
    }
    sh->route = &route;
  }
  if (cf.w == W_REPLAY && bench_setup_replay(sh)) return 3;
  if (cf.w == W_STORM || cf.w == W_DUPS) {
    pthread_barrier_init(&sh->storm_go, NULL, (unsigned)cf.concurrency);
    pthread_barrier_init(&sh->storm_done, NULL, (unsigned)cf.concurrency);
  }

  long total_err = 0;
  int rc = 0;
  if (cf.sweep_n > 0) {
    rc = sweep(&cf, sh, ws, &total_err);
  } else {
    result res = {0};
    rc = run_once(&cf, sh, ws, &res);
    if (rc == 0) report(&cf, sh, &res, NULL);
    total_err = res.errors;
  }

  for (int i = 0; i < cf.channels; i++) idem_close(sh->clients[i]);
  if (cf.w == W_STORM || cf.w == W_DUPS) {
    pthread_barrier_destroy(&sh->storm_go);
    pthread_barrier_destroy(&sh->storm_done);
  }
  bench_route_free(&route);
  free(ws);
  free(sh->clients);
  free(sh);
  return rc ? rc : total_err ? 1 : 0;
}
