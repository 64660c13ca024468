/* idem-move-load — client load across a slot move (docs/api.md §18), for bench/moves/run.
 *
 *   idem-move-load --addr H:P,H:P --tenant T --slots S --from A --to B --group G
 *                  [--moving 16] [--other 8] [--before 5] [--after 5] [--json]
 *
 * --moving callers run pairs (BeginStep + CompleteStep, fresh keys) on sagas whose slot is in
 * A..B, --other callers on every other slot; each caller a thread with its own libidem client
 * over all the addresses (libidem routes by the topology and follows redirects). After --before
 * seconds of load it calls Admin.MoveSlots(A..B → G) and waits for its end, then --after seconds
 * more. Each pair's latency is counted in the window it started in (before, during, after the
 * move) and its class (moving, other). Then the history check: every acknowledged completion of
 * the moving slots must answer REPLAY with its body (lost), and no fresh key may have been
 * answered anything but PROCEED (dup_proceed).
 * Prints, per window and class, pairs/s, p50, p99, max and errors, then the move's paused_ms and
 * counts, lost and dup_proceed; --json as one object. Exit 0 when the move finished and the
 * history check holds, 1 otherwise, 2 on bad usage.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "idem/idem.h"

enum { BEFORE, DURING, AFTER, WINDOWS };
enum { MOVING, OTHER, CLASSES };
static const char *const window_names[] = {"before", "during", "after"};
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
  bool json;
} cf = {.slots = 256, .moving = 16, .other = 8, .before_s = 5, .after_s = 5};

static atomic_bool stop_load;
static _Atomic double t_move_start, t_move_end; /* 0: not yet */
static atomic_long dup_proceed;

typedef struct caller {
  int id, cls;
  pthread_t th;
  samples s[WINDOWS];
  acked a;
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
  if (s == 0 || t < s) return BEFORE;
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
  while (!atomic_load(&stop_load)) {
    char id[48];
    do /* a fresh key of the caller's class */
      snprintf(id, sizeof id, "ml-%d-%ld", k->id, seq++);
    while (in_range(idem_slot_of(cf.tenant, id, cf.slots)) != (k->cls == MOVING));
    double t0 = now_s();
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
    if (k->cls == MOVING) ack(&k->a, id);
  }
  idem_close(c);
  return NULL;
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

static void usage(void) {
  fprintf(stderr,
          "usage: idem-move-load --addr H:P[,H:P] --tenant T --slots S --from A --to B --group G\n"
          "                      [--moving N] [--other N] [--before S] [--after S] [--json]\n");
  exit(2);
}

int main(int argc, char **argv) {
  static const struct option opts[] = {
      {"addr", 1, 0, 'a'},   {"tenant", 1, 0, 't'}, {"slots", 1, 0, 's'},  {"from", 1, 0, 'f'},
      {"to", 1, 0, 'T'},     {"group", 1, 0, 'g'},  {"moving", 1, 0, 'm'}, {"other", 1, 0, 'o'},
      {"before", 1, 0, 'b'}, {"after", 1, 0, 'A'},  {"json", 0, 0, 'j'},   {0, 0, 0, 0}};
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
      default: usage();
    }
  }
  if (!cf.addr || !cf.tenant || !cf.group || !have_from || !have_to || cf.to < cf.from ||
      cf.to >= cf.slots || cf.moving < 1 || cf.other < 0)
    usage();
  int n = cf.moving + cf.other;
  caller *ks = calloc((size_t)n, sizeof *ks);
  for (int i = 0; i < n; i++) {
    ks[i].id = i;
    ks[i].cls = i < cf.moving ? MOVING : OTHER;
    pthread_create(&ks[i].th, NULL, run_caller, &ks[i]);
  }
  double t0 = now_s();
  struct timespec ts = {(time_t)cf.before_s, (long)((cf.before_s - (long)cf.before_s) * 1e9)};
  nanosleep(&ts, NULL);
  idem_client *admin = client();
  idem_move m = {.from = cf.from, .to = cf.to, .group = cf.group, .timeout_ms = 600000};
  idem_move_result r = {0};
  idem_error e = {0};
  atomic_store(&t_move_start, now_s());
  int rc = idem_move_slots(admin, &m, &r, &e);
  atomic_store(&t_move_end, now_s());
  idem_close(admin);
  ts = (struct timespec){(time_t)cf.after_s, (long)((cf.after_s - (long)cf.after_s) * 1e9)};
  nanosleep(&ts, NULL);
  atomic_store(&stop_load, true);
  for (int i = 0; i < n; i++) pthread_join(ks[i].th, NULL);
  double t_end = now_s(), ms = atomic_load(&t_move_start), me = atomic_load(&t_move_end);
  double span[WINDOWS] = {ms - t0, me - ms, t_end - me};
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
  bool ok = rc == IDEM_OK && lost_n == 0 && dups == 0;
  if (cf.json) {
    printf("{\"move_ok\":%s,\"move_error\":\"%s\",\"move_s\":%.3f,\"paused_ms\":%lld,"
           "\"steps_moved\":%llu,\"sagas_moved\":%llu,\"lost\":%ld,\"dup_proceed\":%ld,\"windows\":[",
           rc == IDEM_OK ? "true" : "false", rc == IDEM_OK ? "" : e.message, me - ms,
           (long long)r.paused_ms, (unsigned long long)r.steps_moved,
           (unsigned long long)r.sagas_moved, lost_n, dups);
    for (int w = 0; w < WINDOWS; w++)
      for (int c = 0; c < CLASSES; c++) {
        const samples *s = &all[c][w];
        printf("%s{\"window\":\"%s\",\"class\":\"%s\",\"seconds\":%.3f,\"pairs\":%zu,"
               "\"pairs_per_s\":%.1f,\"p50_ms\":%.2f,\"p99_ms\":%.2f,\"max_ms\":%.2f,"
               "\"errors\":%ld}",
               w || c ? "," : "", window_names[w], class_names[c], span[w], s->n,
               span[w] > 0 ? (double)s->n / span[w] : 0, pct(s, 0.5), pct(s, 0.99),
               s->n ? s->v[s->n - 1] : 0, s->errors);
      }
    printf("]}\n");
  } else {
    printf("%-7s %-7s %8s %8s %10s %9s %9s %9s %7s\n", "window", "slots", "seconds", "pairs",
           "pairs/s", "p50 ms", "p99 ms", "max ms", "errors");
    for (int w = 0; w < WINDOWS; w++)
      for (int c = 0; c < CLASSES; c++) {
        const samples *s = &all[c][w];
        printf("%-7s %-7s %8.2f %8zu %10.1f %9.2f %9.2f %9.2f %7ld\n", window_names[w],
               class_names[c], span[w], s->n, span[w] > 0 ? (double)s->n / span[w] : 0,
               pct(s, 0.5), pct(s, 0.99), s->n ? s->v[s->n - 1] : 0, s->errors);
      }
    if (rc == IDEM_OK)
      printf("move %u-%u -> %s: %.2f s, paused %lld ms, %llu steps and %llu sagas moved\n",
             cf.from, cf.to, cf.group, me - ms, (long long)r.paused_ms,
             (unsigned long long)r.steps_moved, (unsigned long long)r.sagas_moved);
    else
      printf("move failed: %s\n", e.message);
    printf("history: %ld acknowledged completions of the moving slots lost, %ld fresh keys "
           "answered other than PROCEED\n",
           lost_n, dups);
  }
  return ok ? 0 : 1;
}
