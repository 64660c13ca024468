/* idem-bench — a load generator for idem-coordinator (docs/api.md §11).
 *
 *   idem-bench --addr HOST:PORT [--tenant T] --workload pairs|replay|storm|saga|dups
 *              [--concurrency 64] [--channels 4] [--duration 10 | --count N] [--keys N]
 *              [--rate N] [--wait-ms MS] [--action-ms 50] [--by-group] [--json]
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
 * is measured from each operation's actual start.
 * Prints operations, seconds, throughput, latency p50/p90/p99/max (ms), the BeginStep RPC's own
 * latency, and errors by gRPC code. --json prints one object with workload, ops, seconds,
 * throughput, p50_ms, p90_ms, p99_ms, max_ms, errors (docs/api.md §11) and, in addition,
 * concurrency, rate, begins, begin_p50_ms, begin_p90_ms, begin_p99_ms, begin_max_ms, and calls
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
    if (storm) {
      /* rounds in lock step: worker 0 decides before the barrier whether a round runs, and
       * everyone reads that decision after it */
      if (w->id == 0) sh->storm_run = bench_next_op(sh, sh->cf->concurrency);
      pthread_barrier_wait(&sh->storm_go);
      if (!sh->storm_run) break;
    } else if (!bench_next_op(sh, 1)) {
      break;
    }
    double t0 = now_s();
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
          "                  [--by-group] [--json]\n"
          "       idem-bench --addr HOST:PORT --topology\n"
          "       idem-bench --version\n");
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
      case 'T': cf->topology = true; break;
      case 'W': cf->wait_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
      case 'A': cf->action_ms = atoi(optarg); break;
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

static void report(const conf *cf, shared *sh, long ops, double secs, lat_summary op,
                   lat_summary bg, long total_err) {
  double tput = secs > 0 ? (double)ops / secs : 0;
  if (cf->json) {
    printf("{\"workload\":\"%s\",\"ops\":%ld,\"seconds\":%.3f,\"throughput\":%.1f,"
           "\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,\"errors\":{",
           workload_names[cf->w], ops, secs, tput, op.p50, op.p90, op.p99, op.max);
    print_errors_json(sh);
    printf("},\"calls\":%ld,\"wait_ms\":%u,", atomic_load(&sh->calls), cf->wait_ms);
    printf("\"concurrency\":%d,\"rate\":%.1f,\"begins\":%zu,\"begin_p50_ms\":%.3f,"
           "\"begin_p90_ms\":%.3f,\"begin_p99_ms\":%.3f,\"begin_max_ms\":%.3f",
           cf->concurrency, cf->rate, bg.n, bg.p50, bg.p90, bg.p99, bg.max);
    if (sh->route) {
      printf(",\"groups\":[");
      for (int g = 0; g < sh->route->n_groups; g++)
        printf("%s{\"name\":\"%s\",\"leader\":\"%s\",\"ops\":%ld}", g ? "," : "",
               sh->route->name[g], sh->route->leader[g], atomic_load(&sh->group_ops[g]));
      printf("]");
    }
    printf("}\n");
    return;
  }
  printf("workload     %s (concurrency %d, channels %d", workload_names[cf->w], cf->concurrency,
         cf->channels);
  if (cf->rate > 0) printf(", rate %.1f /s", cf->rate);
  printf(")\n");
  printf("operations   %ld in %.2f s\n", ops, secs);
  printf("throughput   %.1f /s\n", tput);
  printf("latency ms   p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", op.p50, op.p90, op.p99,
         op.max);
  printf("begin ms     p50 %.3f  p90 %.3f  p99 %.3f  max %.3f  (%zu BeginStep calls)\n", bg.p50,
         bg.p90, bg.p99, bg.max, bg.n);
  if (cf->w == W_STORM || cf->w == W_DUPS)
    printf("rpc calls    %ld (BeginStep and CompleteStep; wait_ms %u)\n", atomic_load(&sh->calls),
           cf->wait_ms);
  if (sh->route)
    for (int g = 0; g < sh->route->n_groups; g++)
      printf("group        %s at %s: %ld operations\n", sh->route->name[g], sh->route->leader[g],
             atomic_load(&sh->group_ops[g]));
  printf("errors       %ld\n", total_err);
  for (int i = 0; i <= BENCH_MAX_CODES; i++) {
    long v = atomic_load(&sh->errors[i]);
    if (v) printf("  %-22s %ld\n", i < BENCH_MAX_CODES ? idem_strerror(i) : "library", v);
  }
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

  sh->t0 = now_s();
  int threads = async_driver(&cf) ? 1 : cf.concurrency;
  for (int i = 0; i < threads; i++) {
    ws[i].sh = sh;
    ws[i].id = i;
    if (pthread_create(&ws[i].th, NULL, threads == 1 && async_driver(&cf) ? async_main : worker_main,
                       &ws[i]) != 0) {
      fprintf(stderr, "idem-bench: cannot start caller %d\n", i);
      return 3;
    }
  }
  if (cf.count == 0) {
    while (now_s() - sh->t0 < cf.duration_s) usleep(10000);
    atomic_store(&sh->stop, true);
  }
  for (int i = 0; i < threads; i++) pthread_join(ws[i].th, NULL);
  double secs = now_s() - sh->t0;

  long ops = 0, total_err = 0;
  lat_buf all = {0}, begins = {0};
  for (int i = 0; i < cf.concurrency; i++) {
    ops += ws[i].ops;
    if (!lat_merge(&all, &ws[i].lat) || !lat_merge(&begins, &ws[i].begin)) {
      fprintf(stderr, "idem-bench: out of memory\n");
      return 3;
    }
  }
  lat_summary op = lat_summarize(&all), bg = lat_summarize(&begins);
  for (int i = 0; i <= BENCH_MAX_CODES; i++) total_err += atomic_load(&sh->errors[i]);
  report(&cf, sh, ops, secs, op, bg, total_err);

  for (int i = 0; i < cf.channels; i++) idem_close(sh->clients[i]);
  if (cf.w == W_STORM || cf.w == W_DUPS) {
    pthread_barrier_destroy(&sh->storm_go);
    pthread_barrier_destroy(&sh->storm_done);
  }
  lat_free(&all);
  lat_free(&begins);
  bench_route_free(&route);
  free(ws);
  free(sh->clients);
  free(sh);
  return total_err ? 1 : 0;
}
