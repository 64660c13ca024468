/* idem-move-load — client load across a slot move (docs/api.md §18), for bench/moves/run.
 *
 *   idem-move-load --addr H:P,H:P --tenant T --slots S --from A --to B --group G
 *                  [--moving 16] [--other 8] [--before 5] [--after 5]
 *                  [--rate-moving R] [--rate-other R] [--json] [--trace FILE]
 *                  [--burn CORES:SECONDS] [--cpu-top] [--max-rate N] [--preload N]
 *
 * --moving callers run pairs (BeginStep + CompleteStep, fresh keys) on sagas whose slot is in
 * A..B, --other callers on every other slot; each caller a thread with its own libidem client
 * over all the addresses (libidem routes by the topology and follows redirects). After --before
 * seconds of load it calls Admin.MoveSlots(A..B → G) and waits for its end, then --after seconds
 * more. Each pair's latency is counted in the window it started in (before1 and before2, the
 * two halves of the time before the move: their difference is the run's noise; during, after)
 * and its class (moving, other). With --rate-moving / --rate-other R a class runs R pairs/s in
 * all (each caller on a fixed schedule, its latency counted from the scheduled start, so that a
 * stall also counts for the pairs it delayed); without, each caller runs back to back. Then the history check: every acknowledged completion of
 * the moving slots must answer REPLAY with its body (lost), and no fresh key may have been
 * answered anything but PROCEED (dup_proceed). --trace FILE writes every pair's start and
 * latency, with the move's start and end, for reading a stall against the servers' logs.
 * Prints, per window and class, pairs/s, p50, p99, max and errors, then the move's paused_ms and
 * counts, lost and dup_proceed; --json as one object. Exit 0 when the move finished and the
 * history check holds, 1 otherwise, 2 on bad usage.
 *
 * Where the CPU went: the machine's busy share per window (/proc/stat), and the CPU seconds of
 * PostgreSQL's logical replication processes (walsenders, which decode on the source; the
 * subscription's apply and table sync workers on the target), sampled from /proc every 50 ms.
 * --burn CORES:SECONDS is the control run: no move; for SECONDS in its place, threads of a
 * child process (a session of its own) spin CORES cores' worth of CPU (duty cycle), so that the
 * latencies beside the same CPU spent by something that is not replication can be set against a
 * move's (CORES 0: nothing runs in the move's place, the no-move control). --max-rate N: the
 * move's throttle, rows/s of its initial copy (MoveSlotsRequest.max_rows_per_s; default 0, the
 * server's --move-max-rate). --cpu-top names the commands whose CPU rose most from before2 to during.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "idem/idem.h"
#include "proc_cpu.h"

enum { BEFORE1, BEFORE2, DURING, AFTER, WINDOWS };
enum { MOVING, OTHER, CLASSES };
static const char *const window_names[] = {"before1", "before2", "during", "after"};
static const char *const class_names[] = {"moving", "other"};

typedef struct samples {
  double *v;
  size_t n, cap;
  long errors;
} samples;

typedef struct acked {
  char (*ids)[48];
  size_t n, cap;
} acked;

static struct {
  const char *addr, *tenant, *group;
  uint32_t slots, from, to;
  int moving, other;
  double before_s, after_s;
  double rate[2]; /* pairs/s per class, 0 = back to back */
  bool json;
  const char *trace; /* --trace FILE: every pair's start (s from the load's) and latency */
  double burn_cores, burn_s; /* --burn CORES:SECONDS: the control run, no move */
  bool cpu_top;
  uint32_t max_rate; /* --max-rate: MoveSlotsRequest.max_rows_per_s */
  long preload;      /* --preload N: completed pairs written to the moving slots first */
} cf = {.slots = 256, .moving = 16, .other = 8, .before_s = 5, .after_s = 5};

static atomic_bool stop_load;
static double t_load_start;
static _Atomic double t_move_start, t_move_end; /* 0: not yet */
static atomic_long dup_proceed;

typedef struct caller {
  int id, cls;
  pthread_t th;
  samples s[WINDOWS];
  acked a;
  samples start, took, slot; /* every pair, for --trace */
} caller;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void add(samples *s, double v) {
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 1024;
    s->v = realloc(s->v, s->cap * sizeof *s->v);
    if (!s->v) abort();
  }
  s->v[s->n++] = v;
}

static void ack(acked *a, const char *id) {
  if (a->n == a->cap) {
    a->cap = a->cap ? 2 * a->cap : 1024;
    a->ids = realloc(a->ids, a->cap * sizeof *a->ids);
    if (!a->ids) abort();
  }
  snprintf(a->ids[a->n++], sizeof a->ids[0], "%s", id);
}

static int window_of(double t) {
  double s = atomic_load(&t_move_start), e = atomic_load(&t_move_end);
  if (s == 0 || t < s) return t < t_load_start + cf.before_s / 2 ? BEFORE1 : BEFORE2;
  if (e == 0 || t < e) return DURING;
  return AFTER;
}

static bool in_range(uint32_t slot) {
  return slot >= cf.from && slot <= cf.to;
}

static idem_client *client(void) {
  idem_options o = {.address = cf.addr, .tenant = cf.tenant, .deadline_ms = 10000};
  idem_client *c = NULL;
  idem_error e = {0};
  if (idem_connect(&o, &c, &e) != IDEM_OK) {
    fprintf(stderr, "idem-move-load: connect: %s\n", e.message);
    exit(1);
  }
  return c;
}

static void *run_caller(void *arg) {
  caller *k = arg;
  idem_client *c = client();
  long seq = 0;
  int per_class = k->cls == MOVING ? cf.moving : cf.other;
  double every = cf.rate[k->cls] > 0 ? per_class / cf.rate[k->cls] : 0;
  /* callers of a class start spread over one period */
  double next = t_load_start + every * (k->id % per_class) / per_class;
  while (!atomic_load(&stop_load)) {
    char id[48];
    do /* a fresh key of the caller's class */
      snprintf(id, sizeof id, "ml-%d-%ld", k->id, seq++);
    while (in_range(idem_slot_of(cf.tenant, id, cf.slots)) != (k->cls == MOVING));
    double t0 = now_s();
    if (every > 0) { /* on schedule: wait for the slot, or count from it when late */
      if (t0 < next) {
        double d = next - t0;
        nanosleep(&(struct timespec){(time_t)d, (long)((d - (long)d) * 1e9)}, NULL);
      }
      t0 = next;
      next += every;
      if (atomic_load(&stop_load)) break;
    }
    int w = window_of(t0);
    idem_step_key key = {id, "bench", "move", IDEM_FORWARD};
    idem_begin b = {0};
    idem_error e = {0};
    int rc = idem_step_begin(c, &key, NULL, 0, 30000, &b, &e);
    if (rc == IDEM_OK && b.decision != IDEM_DECISION_PROCEED) {
      atomic_fetch_add(&dup_proceed, 1);
      idem_begin_clear(&b);
      continue;
    }
    uint64_t attempt = b.attempt;
    idem_begin_clear(&b);
    if (rc == IDEM_OK)
      rc = idem_step_complete(c, &key, attempt, IDEM_OUTCOME_SUCCEEDED, 0, id, strlen(id), NULL,
                              &e);
    if (rc != IDEM_OK) {
      k->s[w].errors++;
      continue;
    }
    add(&k->s[w], (now_s() - t0) * 1000.0);
    if (cf.trace) {
      add(&k->start, t0 - t_load_start);
      add(&k->took, (now_s() - t0) * 1000.0);
      add(&k->slot, (double)idem_slot_of(cf.tenant, id, cf.slots));
    }
    if (k->cls == MOVING) ack(&k->a, id);
  }
  idem_close(c);
  return NULL;
}

static void *run_sampler(void *arg) {
  (void)arg;
  while (!atomic_load(&stop_load)) {
    repl_sample();
    nanosleep(&(struct timespec){0, 50000000}, NULL);
  }
  return NULL;
}

/* --burn: one thread per started core, each using its share of every 10 ms of wall time in CPU
 * time of its own (CLOCK_THREAD_CPUTIME_ID: preempted, it spins on), until burn_end */
static _Atomic double burn_end;
static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *run_burner(void *arg) {
  double share = *(double *)arg, period = 0.010;
  double wall0 = now_s(), cpu0 = thread_cpu_s();
  for (long k = 1; now_s() < atomic_load(&burn_end); k++) {
    while (thread_cpu_s() - cpu0 < share * period * (double)k && now_s() < atomic_load(&burn_end)) {
    }
    double rest = wall0 + period * (double)k - now_s();
    if (rest > 0) nanosleep(&(struct timespec){0, (long)(rest * 1e9)}, NULL);
  }
  return NULL;
}

/* The burner's process (idem-move-load --burn-child CORES:SECONDS): one thread per started core. */
static int burn_child(double cores, double secs) {
  int n = (int)cores + (cores > (int)cores);
  double share[8];
  pthread_t th[8];
  if (n > 8) n = 8;
  atomic_store(&burn_end, now_s() + secs);
  if (n == 0) /* the no-move control: nothing in the move's place */
    nanosleep(&(struct timespec){(time_t)secs, (long)((secs - (long)secs) * 1e9)}, NULL);
  for (int i = 0; i < n; i++) {
    share[i] = cores - i >= 1 ? 1.0 : cores - i;
    pthread_create(&th[i], NULL, run_burner, &share[i]);
  }
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  return 0;
}

/* The burner runs in a child process in a session of its own: with the kernel's autogroup
 * scheduling a session shares the CPU as one, so that the busy loop competes with the servers as
 * another program would, not with this process's callers. burned_s: the CPU seconds it spent. */
static double burned_s;
static void burn(void) {
  char spec[64];
  snprintf(spec, sizeof spec, "%.3f:%.3f", cf.burn_cores, cf.burn_s);
  pid_t child = fork();
  if (child == 0) { /* exec at once: nothing of this threaded process is used in the child */
    setsid();
    execl("/proc/self/exe", "idem-move-load", "--burn-child", spec, (char *)NULL);
    _exit(127);
  }
  struct rusage ru;
  int st;
  if (child > 0 && wait4(child, &st, 0, &ru) == child)
    burned_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(const samples *s, double p) {
  if (!s->n) return 0;
  size_t i = (size_t)(p * (double)(s->n - 1) + 0.5);
  return s->v[i];
}

/* Every acknowledged completion of the moving slots replays its body: how many do not. */
static long lost(caller *ks, int n) {
  idem_client *c = client();
  long bad = 0;
  for (int i = 0; i < n; i++)
    for (size_t j = 0; j < ks[i].a.n; j++) {
      const char *id = ks[i].a.ids[j];
      idem_step_key key = {id, "bench", "move", IDEM_FORWARD};
      idem_begin b = {0};
      idem_error e = {0};
      int rc = idem_step_begin(c, &key, NULL, 0, 30000, &b, &e);
      if (rc != IDEM_OK || b.decision != IDEM_DECISION_REPLAY || b.result.body_len != strlen(id) ||
          memcmp(b.result.body, id, b.result.body_len) != 0)
        bad++;
      idem_begin_clear(&b);
    }
  idem_close(c);
  return bad;
}

/* --preload: before the timed load, the moving callers write N completed pairs to the moving
 * slots back to back (keys "pl-…"), so that the move has rows to copy besides the load's own;
 * each is acknowledged into its caller's list, so the history check replays them too. */
static atomic_long preload_next;
static void *run_preload(void *arg) {
  caller *k = arg;
  int id = k->id;
  idem_client *c = client();
  long seq = 0;
  while (atomic_fetch_add(&preload_next, 1) < cf.preload) {
    char key_id[48];
    do
      snprintf(key_id, sizeof key_id, "pl-%d-%ld", id, seq++);
    while (!in_range(idem_slot_of(cf.tenant, key_id, cf.slots)));
    idem_step_key key = {key_id, "bench", "move", IDEM_FORWARD};
    idem_begin b = {0};
    idem_error e = {0};
    int rc = idem_step_begin(c, &key, NULL, 0, 30000, &b, &e);
    uint64_t attempt = b.attempt;
    bool go = rc == IDEM_OK && b.decision == IDEM_DECISION_PROCEED;
    idem_begin_clear(&b);
    if (go) rc = idem_step_complete(c, &key, attempt, IDEM_OUTCOME_SUCCEEDED, 0, key_id,
                                    strlen(key_id), NULL, &e);
    if (rc != IDEM_OK) {
      fprintf(stderr, "idem-move-load: --preload: %s\n", e.message);
      exit(1);
    }
    ack(&k->a, key_id); /* the history check replays it after the move, as the load's own */
  }
  idem_close(c);
  return NULL;
}

static void preload(caller *ks) {
  if (cf.preload <= 0) return;
  double t = now_s();
  pthread_t th[64];
  int n = cf.moving < 64 ? cf.moving : 64;
  for (int i = 0; i < n; i++) {
    ks[i].id = i;
    pthread_create(&th[i], NULL, run_preload, &ks[i]);
  }
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  if (!cf.json)
    printf("preloaded %ld completed pairs on the moving slots in %.1f s\n", cf.preload,
           now_s() - t);
}

static void usage(void) {
  fprintf(stderr,
          "usage: idem-move-load --addr H:P[,H:P] --tenant T --slots S --from A --to B --group G\n"
          "                      [--moving N] [--other N] [--before S] [--after S]\n"
          "                      [--rate-moving R] [--rate-other R] [--json] [--trace FILE]\n"
          "                      [--burn CORES:SECONDS] [--cpu-top] [--max-rate N]\n"
          "                      [--preload N]\n");
  exit(2);
}

int main(int argc, char **argv) {
  static const struct option opts[] = {
      {"addr", 1, 0, 'a'},   {"tenant", 1, 0, 't'}, {"slots", 1, 0, 's'},  {"from", 1, 0, 'f'},
      {"to", 1, 0, 'T'},     {"group", 1, 0, 'g'},  {"moving", 1, 0, 'm'}, {"other", 1, 0, 'o'},
      {"before", 1, 0, 'b'}, {"after", 1, 0, 'A'},  {"json", 0, 0, 'j'},
      {"rate-moving", 1, 0, 'r'}, {"rate-other", 1, 0, 'R'}, {"trace", 1, 0, 'x'},
      {"burn", 1, 0, 'B'}, {"cpu-top", 0, 0, 'C'}, {"max-rate", 1, 0, 'M'},
      {"preload", 1, 0, 'P'}, {0, 0, 0, 0}};
  double bc, bs;
  if (argc == 3 && strcmp(argv[1], "--burn-child") == 0 &&
      sscanf(argv[2], "%lf:%lf", &bc, &bs) == 2)
    return burn_child(bc, bs);
  bool have_from = false, have_to = false;
  for (int ch; (ch = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
    switch (ch) {
      case 'a': cf.addr = optarg; break;
      case 't': cf.tenant = optarg; break;
      case 's': cf.slots = (uint32_t)atol(optarg); break;
      case 'f': cf.from = (uint32_t)atol(optarg), have_from = true; break;
      case 'T': cf.to = (uint32_t)atol(optarg), have_to = true; break;
      case 'g': cf.group = optarg; break;
      case 'm': cf.moving = atoi(optarg); break;
      case 'o': cf.other = atoi(optarg); break;
      case 'b': cf.before_s = atof(optarg); break;
      case 'A': cf.after_s = atof(optarg); break;
      case 'j': cf.json = true; break;
      case 'r': cf.rate[MOVING] = atof(optarg); break;
      case 'R': cf.rate[OTHER] = atof(optarg); break;
      case 'x': cf.trace = optarg; break;
      case 'C': cf.cpu_top = true; break;
      case 'M': cf.max_rate = (uint32_t)atol(optarg); break;
      case 'P': cf.preload = atol(optarg); break;
      case 'B':
        if (sscanf(optarg, "%lf:%lf", &cf.burn_cores, &cf.burn_s) != 2 || cf.burn_cores < 0 ||
            cf.burn_cores > 8 || cf.burn_s <= 0) {
          fprintf(stderr, "idem-move-load: --burn: CORES:SECONDS, 0 <= CORES <= 8, SECONDS > 0\n");
          exit(2);
        }
        break;
      default: usage();
    }
  }
  if (!cf.addr || !cf.tenant || !cf.group || !have_from || !have_to || cf.to < cf.from ||
      cf.to >= cf.slots || cf.moving < 1 || cf.other < 0 || cf.rate[MOVING] < 0 ||
      cf.rate[OTHER] < 0)
    usage();
  int n = cf.moving + cf.other;
  caller *ks = calloc((size_t)n, sizeof *ks);
  preload(ks);
  cpu_mark mark[WINDOWS + 1];
  pthread_t sampler;
  pthread_create(&sampler, NULL, run_sampler, NULL);
  mark[BEFORE1] = cpu_now();
  t_load_start = now_s();
  for (int i = 0; i < n; i++) {
    ks[i].id = i;
    ks[i].cls = i < cf.moving ? MOVING : OTHER;
    pthread_create(&ks[i].th, NULL, run_caller, &ks[i]);
  }
  double t0 = t_load_start, half = cf.before_s / 2;
  struct timespec ts = {(time_t)half, (long)((half - (long)half) * 1e9)};
  static snap sn[3]; /* before2's start, the move's start (before2's end), the move's end */
  nanosleep(&ts, NULL);
  mark[BEFORE2] = cpu_now();
  if (cf.cpu_top) take_snap(&sn[0]);
  nanosleep(&ts, NULL);
  if (cf.cpu_top) take_snap(&sn[1]);
  idem_client *admin = client();
  idem_move m = {.from = cf.from, .to = cf.to, .group = cf.group, .timeout_ms = 600000};
  idem_move_result r = {0};
  idem_error e = {0};
  mark[DURING] = cpu_now();
  repl_sample();
  double repl0[REPL_KINDS] = {repl_seconds(REPL_WALSENDER), repl_seconds(REPL_WORKER)};
  atomic_store(&t_move_start, now_s());
  int rc = IDEM_OK;
  if (cf.burn_s > 0)
    burn();
  else
    rc = idem_move_slots_rate(admin, &m, cf.max_rate, &r, &e);
  atomic_store(&t_move_end, now_s());
  mark[AFTER] = cpu_now();
  if (cf.cpu_top) take_snap(&sn[2]);
  repl_sample();
  double repl_cpu[REPL_KINDS] = {repl_seconds(REPL_WALSENDER) - repl0[0],
                                 repl_seconds(REPL_WORKER) - repl0[1]};
  idem_close(admin);
  ts = (struct timespec){(time_t)cf.after_s, (long)((cf.after_s - (long)cf.after_s) * 1e9)};
  nanosleep(&ts, NULL);
  atomic_store(&stop_load, true);
  mark[WINDOWS] = cpu_now();
  for (int i = 0; i < n; i++) pthread_join(ks[i].th, NULL);
  pthread_join(sampler, NULL);
  double t_end = now_s(), ms = atomic_load(&t_move_start), me = atomic_load(&t_move_end);
  double span[WINDOWS] = {cf.before_s / 2, ms - t0 - cf.before_s / 2, me - ms, t_end - me};
  samples all[CLASSES][WINDOWS] = {{{0}}};
  for (int i = 0; i < n; i++)
    for (int w = 0; w < WINDOWS; w++) {
      samples *d = &all[ks[i].cls][w];
      for (size_t j = 0; j < ks[i].s[w].n; j++) add(d, ks[i].s[w].v[j]);
      d->errors += ks[i].s[w].errors;
    }
  for (int c = 0; c < CLASSES; c++)
    for (int w = 0; w < WINDOWS; w++) qsort(all[c][w].v, all[c][w].n, sizeof(double), cmp_double);
  long lost_n = lost(ks, cf.moving), dups = atomic_load(&dup_proceed);
  FILE *tf = cf.trace ? fopen(cf.trace, "w") : NULL;
  if (tf) {
    fprintf(tf, "# move %.3f %.3f (s from the load's start)\n# start_s class latency_ms slot\n",
            ms - t0, me - t0);
    for (int i = 0; i < n; i++)
      for (size_t j = 0; j < ks[i].start.n; j++)
        fprintf(tf, "%.4f %s %.2f %.0f\n", ks[i].start.v[j], class_names[ks[i].cls],
                ks[i].took.v[j], ks[i].slot.v[j]);
    fclose(tf);
  }
  bool ok = rc == IDEM_OK && lost_n == 0 && dups == 0;
  if (cf.json) {
    printf("{\"move_ok\":%s,\"move_error\":\"%s\",\"move_s\":%.3f,\"paused_ms\":%lld,"
           "\"steps_moved\":%llu,\"sagas_moved\":%llu,\"lost\":%ld,\"dup_proceed\":%ld,"
           "\"burn_cores\":%.2f,\"burned_cpu_s\":%.2f,\"walsender_cpu_s\":%.2f,"
           "\"worker_cpu_s\":%.2f,\"windows\":[",
           rc == IDEM_OK ? "true" : "false", rc == IDEM_OK ? "" : e.message, me - ms,
           (long long)r.paused_ms, (unsigned long long)r.steps_moved,
           (unsigned long long)r.sagas_moved, lost_n, dups, cf.burn_cores, burned_s,
           repl_cpu[REPL_WALSENDER], repl_cpu[REPL_WORKER]);
    for (int w = 0; w < WINDOWS; w++)
      for (int c = 0; c < CLASSES; c++) {
        const samples *s = &all[c][w];
        printf("%s{\"window\":\"%s\",\"class\":\"%s\",\"seconds\":%.3f,\"pairs\":%zu,"
               "\"pairs_per_s\":%.1f,\"p50_ms\":%.2f,\"p99_ms\":%.2f,\"max_ms\":%.2f,"
               "\"errors\":%ld,\"cpu_busy\":%.3f}",
               w || c ? "," : "", window_names[w], class_names[c], span[w], s->n,
               span[w] > 0 ? (double)s->n / span[w] : 0, pct(s, 0.5), pct(s, 0.99),
               s->n ? s->v[s->n - 1] : 0, s->errors, busy_share(mark[w], mark[w + 1]));
      }
    printf("]}\n");
  } else {
    printf("%-7s %-7s %8s %8s %10s %9s %9s %9s %7s %5s\n", "window", "slots", "seconds", "pairs",
           "pairs/s", "p50 ms", "p99 ms", "max ms", "errors", "cpu");
    for (int w = 0; w < WINDOWS; w++)
      for (int c = 0; c < CLASSES; c++) {
        const samples *s = &all[c][w];
        printf("%-7s %-7s %8.2f %8zu %10.1f %9.2f %9.2f %9.2f %7ld %4.0f%%\n", window_names[w],
               class_names[c], span[w], s->n, span[w] > 0 ? (double)s->n / span[w] : 0,
               pct(s, 0.5), pct(s, 0.99), s->n ? s->v[s->n - 1] : 0, s->errors,
               100 * busy_share(mark[w], mark[w + 1]));
      }
    if (cf.burn_s > 0)
      printf("control: no move; in its place %.2f CPU seconds spun over %.2f s (%.2f cores)\n",
             burned_s, me - ms, me > ms ? burned_s / (me - ms) : 0);
    else if (rc == IDEM_OK)
      printf("move %u-%u -> %s: %.2f s, paused %lld ms, %llu steps and %llu sagas moved\n",
             cf.from, cf.to, cf.group, me - ms, (long long)r.paused_ms,
             (unsigned long long)r.steps_moved, (unsigned long long)r.sagas_moved);
    else
      printf("move failed: %s\n", e.message);
    printf("replication CPU during the move: walsenders %.2f s, apply and sync workers %.2f s "
           "(%.2f cores over %.2f s)\n",
           repl_cpu[REPL_WALSENDER], repl_cpu[REPL_WORKER],
           me > ms ? (repl_cpu[REPL_WALSENDER] + repl_cpu[REPL_WORKER]) / (me - ms) : 0, me - ms);
    if (cf.cpu_top)
      print_cpu_top(stdout, &sn[0], &sn[1], span[BEFORE2], &sn[1], &sn[2], span[DURING]);
    printf("history: %ld acknowledged completions of the moving slots lost, %ld fresh keys "
           "answered other than PROCEED\n",
           lost_n, dups);
  }
  return ok ? 0 : 1;
}
