/* metrics.c — the counters behind /metrics and their Prometheus text rendering. Counters are
 * relaxed atomics (a scrape may see one counter a call ahead of another; never torn). */
#include "metrics.h"
#include "metrics_internal.h"

#include "idem/v1/names.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MG METRICS_GROUPS_MAX

static atomic_uint_fast64_t g_unguarded;
static atomic_uint_fast64_t g_traceparent_invalid;
static atomic_uint_fast64_t g_reaped_steps[MG];
static atomic_uint_fast64_t g_reaped_sagas[MG];
static atomic_uint_fast64_t g_reaped_bodies[MG]; /* bodies dropped past result retention */

static _Atomic(metrics_leader_fn) g_leader_fn;
static _Atomic(void *) g_leader_arg;

static int group_ix(int group) {
  return group >= 0 && group < MG ? group : 0;
}

static uint64_t sum_groups(atomic_uint_fast64_t *v) {
  uint64_t n = 0;
  for (int g = 0; g < MG; g++) n += (uint64_t)atomic_load(&v[g]);
  return n;
}

void metrics_unguarded(void) {
  atomic_fetch_add(&g_unguarded, 1);
}

static atomic_uint_fast64_t *reaped_counter(const char *kind) {
  if (strcmp(kind, "sagas") == 0) return g_reaped_sagas;
  if (strcmp(kind, "bodies") == 0) return g_reaped_bodies;
  return g_reaped_steps;
}

void metrics_reaped_g(int group, const char *kind, uint64_t n) {
  atomic_fetch_add(&reaped_counter(kind)[group_ix(group)], n);
}

void metrics_reaped(const char *kind, uint64_t n) {
  metrics_reaped_g(0, kind, n);
}

void metrics_traceparent_invalid(void) {
  atomic_fetch_add(&g_traceparent_invalid, 1);
}

uint64_t metrics_traceparent_invalid_total(void) {
  return atomic_load(&g_traceparent_invalid);
}

uint64_t metrics_unguarded_total(void) {
  return atomic_load(&g_unguarded);
}

uint64_t metrics_reaped_total(const char *kind) {
  return sum_groups(reaped_counter(kind));
}

/* --- waiting --- */

static atomic_uint_fast64_t g_waiting, g_wait_timeouts;

void metrics_set_waiting(uint64_t n) {
  atomic_store(&g_waiting, n);
}
void metrics_wait_timed_out(void) {
  atomic_fetch_add(&g_wait_timeouts, 1);
}
uint64_t metrics_waiting(void) {
  return atomic_load(&g_waiting);
}
uint64_t metrics_wait_timed_out_total(void) {
  return atomic_load(&g_wait_timeouts);
}

/* --- throughput --- */

static atomic_uint_fast64_t g_batches[MG], g_batched[MG], g_cache_hits, g_cache_misses;

void metrics_batch_g(int group, uint64_t n) {
  atomic_fetch_add(&g_batches[group_ix(group)], 1);
  atomic_fetch_add(&g_batched[group_ix(group)], n);
}

void metrics_batch(uint64_t n) {
  metrics_batch_g(0, n);
}

void metrics_replay_cache(bool hit) {
  atomic_fetch_add(hit ? &g_cache_hits : &g_cache_misses, 1);
}

uint64_t metrics_replay_cache_total(bool hit) {
  return atomic_load(hit ? &g_cache_hits : &g_cache_misses);
}

/* --- incident response --- */

/* Latency buckets, upper bounds in microseconds (rendered in seconds); one more for +Inf. */
static const int64_t bucket_us[] = {500,    1000,   2500,   5000,    10000,   25000,  50000,
                                    100000, 250000, 500000, 1000000, 2500000, 5000000};
#define N_BUCKETS (sizeof bucket_us / sizeof bucket_us[0])

/* docs/api.md §22: the last traced call per bucket, an OpenMetrics exemplar. A writer that finds
 * the slot busy skips (a recent call is enough); the scrape waits for it (a copy of 50 bytes). */
typedef struct exemplar {
  atomic_flag busy;
  char trace_id[METRICS_TRACE_ID_MAX + 1]; /* "" = none yet */
  int64_t micros;
  int64_t at_ms; /* Unix ms */
} exemplar;

typedef struct rpc_stat {
  exemplar ex[N_BUCKETS + 1];
  _Atomic(const char *) name;
  atomic_uint_fast64_t calls[METRICS_CODES];
  atomic_uint_fast64_t buckets[N_BUCKETS + 1]; /* not cumulative; the last is +Inf */
  atomic_uint_fast64_t sum_us;
  atomic_uint_fast64_t count;
} rpc_stat;

static rpc_stat g_rpc[METRICS_METHODS_MAX];

static const char *const code_names[METRICS_CODES] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

#define N_DECISIONS ((int)IDEM_WORD_COUNT(idem_decision_words))
#define decision_names idem_decision_words
static atomic_uint_fast64_t g_decisions[N_DECISIONS];
static atomic_uint_fast64_t g_takeovers;

#define N_OUTCOMES ((int)IDEM_WORD_COUNT(idem_outcome_words))
#define outcome_names idem_outcome_words
static atomic_uint_fast64_t g_resolved[N_OUTCOMES];

static const char *const store_kinds[] = {"unavailable", "timeout", "conflict", "error"};
#define N_STORE_KINDS (sizeof store_kinds / sizeof store_kinds[0])
static atomic_uint_fast64_t g_store_errors[MG][N_STORE_KINDS];
static atomic_uint_fast64_t g_store_connects;

static atomic_bool g_leader = true;
static atomic_uint_fast64_t g_epoch;

static _Atomic(metrics_counts_fn) g_counts_fn;
static _Atomic(void *) g_counts_arg;

void metrics_rpc_name(int method, const char *name) {
  if (method < 0 || method >= METRICS_METHODS_MAX) return;
  atomic_store(&g_rpc[method].name, name);
}

const char *metrics__rpc_name(int m) {
  return m >= 0 && m < METRICS_METHODS_MAX ? atomic_load(&g_rpc[m].name) : NULL;
}

void metrics_rpc_done(int method, int grpc_code, int64_t micros) {
  if (method < 0 || method >= METRICS_METHODS_MAX) return;
  rpc_stat *s = &g_rpc[method];
  if (grpc_code >= 0 && grpc_code < METRICS_CODES)
    atomic_fetch_add_explicit(&s->calls[grpc_code], 1, memory_order_relaxed);
  if (micros < 0) micros = 0;
  size_t b = 0;
  while (b < N_BUCKETS && micros > bucket_us[b]) b++;
  atomic_fetch_add_explicit(&s->buckets[b], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->sum_us, (uint64_t)micros, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
}

void metrics_rpc_done_traced(int method, int grpc_code, int64_t micros, const char *trace_id) {
  metrics_rpc_done(method, grpc_code, micros);
  if (method < 0 || method >= METRICS_METHODS_MAX || !trace_id || !trace_id[0]) return;
  if (micros < 0) micros = 0;
  size_t b = 0;
  while (b < N_BUCKETS && micros > bucket_us[b]) b++;
  exemplar *x = &g_rpc[method].ex[b];
  if (atomic_flag_test_and_set_explicit(&x->busy, memory_order_acquire)) return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(x->trace_id, sizeof x->trace_id, "%s", trace_id);
  x->micros = micros;
  x->at_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  atomic_flag_clear_explicit(&x->busy, memory_order_release);
}

void metrics_decision(int decision, bool takeover) {
  if (decision < 0 || decision >= N_DECISIONS) return;
  atomic_fetch_add_explicit(&g_decisions[decision], 1, memory_order_relaxed);
  if (takeover) atomic_fetch_add_explicit(&g_takeovers, 1, memory_order_relaxed);
}

void metrics_resolved(int outcome) {
  if (outcome < 0 || outcome >= N_OUTCOMES) return;
  atomic_fetch_add_explicit(&g_resolved[outcome], 1, memory_order_relaxed);
}

void metrics_store_error_g(int group, const char *kind) {
  size_t i = 0;
  while (i < N_STORE_KINDS - 1 && strcmp(kind, store_kinds[i]) != 0) i++;
  atomic_fetch_add_explicit(&g_store_errors[group_ix(group)][i], 1, memory_order_relaxed);
}

void metrics_store_connected(void) {
  atomic_fetch_add_explicit(&g_store_connects, 1, memory_order_relaxed);
}

void metrics_store_error(const char *kind) {
  metrics_store_error_g(0, kind);
}

void metrics_set_groups(size_t n, const char *const *names, metrics_leader_fn fn, void *arg) {
  if (n > MG) n = MG;
  atomic_store(&g_leader_arg, arg);
  atomic_store(&g_leader_fn, fn);
  metrics__set_group_names(n, names); /* last: a scrape sees the groups with their leader fn */
}

void metrics_set_leader(bool leader, uint64_t epoch) {
  atomic_store(&g_leader, leader);
  atomic_store(&g_epoch, epoch);
}

static _Atomic(metrics_move_fn) g_move_fn;
static _Atomic(void *) g_move_arg;
static atomic_uint_fast64_t g_moves_ended[2]; /* finished, rolled back */

void metrics_set_move_fn(metrics_move_fn fn, void *arg) {
  atomic_store(&g_move_arg, arg);
  atomic_store(&g_move_fn, fn);
}

void metrics_move_ended(bool finished) {
  atomic_fetch_add_explicit(&g_moves_ended[finished ? 0 : 1], 1, memory_order_relaxed);
}

void metrics_set_counts_fn(metrics_counts_fn fn, void *arg) {
  atomic_store(&g_counts_arg, arg);
  atomic_store(&g_counts_fn, fn);
}

/* --- rendering --- */

static unsigned long long ld(atomic_uint_fast64_t *v) {
  return (unsigned long long)atomic_load_explicit(v, memory_order_relaxed);
}

#define help metrics__help

/* An OpenMetrics exemplar for bucket b of method m, when one is kept: ` # {trace_id="…"} v t`. */
static void render_exemplar(FILE *f, int m, size_t b) {
  if (!metrics__om()) return;
  exemplar *x = &g_rpc[m].ex[b], copy;
  while (atomic_flag_test_and_set_explicit(&x->busy, memory_order_acquire)) {
  }
  memcpy(copy.trace_id, x->trace_id, sizeof copy.trace_id);
  copy.micros = x->micros;
  copy.at_ms = x->at_ms;
  atomic_flag_clear_explicit(&x->busy, memory_order_release);
  if (copy.trace_id[0])
    fprintf(f, " # {trace_id=\"%s\"} %.6f %.3f", copy.trace_id, (double)copy.micros / 1e6,
            (double)copy.at_ms / 1e3);
}

static void render_rpc(FILE *f) {
  help(f, "idem_rpc_calls_total", "counter", "Calls finished, by method and gRPC status code.");
  for (int m = 0; m < METRICS_METHODS_MAX; m++) {
    const char *name = atomic_load(&g_rpc[m].name);
    if (!name) continue;
    for (int c = 0; c < METRICS_CODES; c++) {
      unsigned long long n = ld(&g_rpc[m].calls[c]);
      if (n == 0 && c != 0) continue; /* OK always; other codes once seen */
      fprintf(f, "idem_rpc_calls_total{method=\"%s\",code=\"%s\"} %llu\n", name, code_names[c], n);
    }
  }
  help(f, "idem_rpc_duration_seconds", "histogram",
       "Time from a call's arrival to its reply, by method.");
  for (int m = 0; m < METRICS_METHODS_MAX; m++) {
    const char *name = atomic_load(&g_rpc[m].name);
    if (!name) continue;
    unsigned long long cum = 0;
    for (size_t b = 0; b <= N_BUCKETS; b++) {
      cum += ld(&g_rpc[m].buckets[b]);
      if (b < N_BUCKETS)
        fprintf(f, "idem_rpc_duration_seconds_bucket{method=\"%s\",le=\"%g\"} %llu", name,
                (double)bucket_us[b] / 1e6, cum);
      else
        fprintf(f, "idem_rpc_duration_seconds_bucket{method=\"%s\",le=\"+Inf\"} %llu", name, cum);
      render_exemplar(f, m, b);
      fputc('\n', f);
    }
    fprintf(f, "idem_rpc_duration_seconds_sum{method=\"%s\"} %.6f\n", name,
            (double)ld(&g_rpc[m].sum_us) / 1e6);
    fprintf(f, "idem_rpc_duration_seconds_count{method=\"%s\"} %llu\n", name, ld(&g_rpc[m].count));
  }
}

/* The families of plain counters and gauges: each is one or more series of one atomic, with an
 * optional label; the labelled families over the contract's words are rendered by loops below. */
typedef struct series {
  const char *label; /* the label's value, NULL for a family without a label */
  atomic_uint_fast64_t *v;
} series;
typedef struct family {
  const char *name, *type, *help;
  const char *label_key; /* NULL: one unlabelled series */
  series s[2];
} family;

static const family FAMILIES[] = {
    {"idem_takeovers_total",
     "counter",
     "PROCEED answers that took over an expired lease.",
     NULL,
     {{NULL, &g_takeovers}}},
    {"idem_unguarded_executions_total",
     "counter",
     "PROCEED_UNGUARDED answers (fail-open while the store was unreachable).",
     NULL,
     {{NULL, &g_unguarded}}},
    {"idem_traceparent_invalid_total",
     "counter",
     "Calls whose traceparent metadata was malformed (ignored; docs/api.md 22).",
     NULL,
     {{NULL, &g_traceparent_invalid}}},
    {"idem_begin_step_waiters",
     "gauge",
     "BeginStep calls waiting on a step in progress (wait_ms).",
     NULL,
     {{NULL, &g_waiting}}},
    {"idem_begin_step_wait_timeouts_total",
     "counter",
     "Waiting BeginStep calls answered ABORTED because their wait ran out.",
     NULL,
     {{NULL, &g_wait_timeouts}}},
    {"idem_store_connects_total",
     "counter",
     "PostgreSQL connections this process opened (every store, every group).",
     NULL,
     {{NULL, &g_store_connects}}},
    {"idem_replay_cache_lookups_total",
     "counter",
     "BeginSteps looked up in the leader's replay cache, by result.",
     "result",
     {{"hit", &g_cache_hits}, {"miss", &g_cache_misses}}},
};

static void render_family(FILE *f, const family *fam) {
  help(f, fam->name, fam->type, fam->help);
  for (size_t i = 0; i < sizeof fam->s / sizeof fam->s[0] && fam->s[i].v; i++) {
    if (fam->label_key)
      fprintf(f, "%s{%s=\"%s\"} %llu\n", fam->name, fam->label_key, fam->s[i].label,
              ld(fam->s[i].v));
    else
      fprintf(f, "%s %llu\n", fam->name, ld(fam->s[i].v));
  }
}

/* A family labelled by the words of one of the contract's enums (names[from..to]). */
static void render_words(FILE *f, const char *name, const char *help_text, const char *key,
                         const char *const *names, atomic_uint_fast64_t *v, int from, int to) {
  help(f, name, "counter", help_text);
  for (int i = from; i <= to; i++)
    fprintf(f, "%s{%s=\"%s\"} %llu\n", name, key, names[i], ld(&v[i]));
}

#define sample metrics__sample

/* The store, batch, reaper and election series: per group with groups, else as one. */
static void render_grouped(FILE *f) {
  int groups = metrics__groups();
  metrics_leader_fn fn = groups > 1 ? atomic_load(&g_leader_fn) : NULL;
  help(f, "idem_store_errors_total", "counter", "Failed store calls, by kind.");
  for (int g = 0; g < groups; g++)
    for (size_t k = 0; k < N_STORE_KINDS; k++)
      sample(f, "idem_store_errors_total", g, "kind", store_kinds[k], ld(&g_store_errors[g][k]));
  help(f, "idem_reaped_rows_total", "counter", "Expired rows deleted by the reaper, by table.");
  for (int g = 0; g < groups; g++) {
    sample(f, "idem_reaped_rows_total", g, "kind", "steps", ld(&g_reaped_steps[g]));
    sample(f, "idem_reaped_rows_total", g, "kind", "sagas", ld(&g_reaped_sagas[g]));
  }
  help(f, "idem_reaped_bodies_total", "counter",
       "Bodies of finished steps dropped past their result retention (the key is kept).");
  for (int g = 0; g < groups; g++)
    sample(f, "idem_reaped_bodies_total", g, NULL, NULL, ld(&g_reaped_bodies[g]));
  help(f, "idem_store_batches_total", "counter", "Group commits (one transaction each).");
  for (int g = 0; g < groups; g++)
    sample(f, "idem_store_batches_total", g, NULL, NULL, ld(&g_batches[g]));
  help(f, "idem_store_batched_steps_total", "counter",
       "Step transactions committed in group commits.");
  for (int g = 0; g < groups; g++)
    sample(f, "idem_store_batched_steps_total", g, NULL, NULL, ld(&g_batched[g]));
  bool lead[MG];
  uint64_t epoch[MG];
  for (int g = 0; g < groups; g++) {
    lead[g] = atomic_load(&g_leader);
    epoch[g] = atomic_load(&g_epoch);
    if (fn) fn(atomic_load(&g_leader_arg), g, &lead[g], &epoch[g]);
  }
  help(f, "idem_epoch", "gauge", "The leadership epoch this node serves under.");
  for (int g = 0; g < groups; g++)
    sample(f, "idem_epoch", g, NULL, NULL, (unsigned long long)epoch[g]);
  help(f, "idem_leader", "gauge", "1 while this node is the leader.");
  for (int g = 0; g < groups; g++) sample(f, "idem_leader", g, NULL, NULL, lead[g] ? 1 : 0);
}

static void render_counters(FILE *f) {
  render_words(f, "idem_begin_step_decisions_total", "BeginStep answers, by decision.", "decision",
               decision_names, g_decisions, 1, N_DECISIONS - 1);
  render_words(f, "idem_resolved_steps_total", "Steps resolved by hand, by outcome.", "outcome",
               outcome_names, g_resolved, 1, 3);
  for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++) render_family(f, &FAMILIES[i]);
  render_grouped(f);
}

static void render_gauges(FILE *f) {
  metrics_counts_fn fn = atomic_load(&g_counts_fn);
  uint64_t in_progress = 0, unknown = 0, lease_expired = 0;
  bool ok = fn && fn(atomic_load(&g_counts_arg), &in_progress, &unknown, &lease_expired);
  help(f, "idem_steps_scrape_ok", "gauge", "1 when the step counts below could be read.");
  fprintf(f, "idem_steps_scrape_ok %d\n", ok ? 1 : 0);
  if (!ok) return;
  help(f, "idem_steps", "gauge", "Live steps in a state that needs attention, over all tenants.");
  fprintf(f, "idem_steps{state=\"in_progress\"} %llu\n", (unsigned long long)in_progress);
  fprintf(f, "idem_steps{state=\"unknown\"} %llu\n", (unsigned long long)unknown);
  help(f, "idem_steps_lease_expired", "gauge",
       "Live IN_PROGRESS steps whose lease has run out (their holder stopped; nobody took over).");
  fprintf(f, "idem_steps_lease_expired %llu\n", (unsigned long long)lease_expired);
}

static void render_moves(FILE *f) {
  metrics_move_fn fn = atomic_load(&g_move_fn);
  if (!fn) return;
  const char *phase = NULL;
  uint64_t rows = 0;
  int64_t lag = -1;
  bool on = fn(atomic_load(&g_move_arg), &phase, &rows, &lag);
  static const char *const phases[] = {"planned", "copying", "blocked", "switched", "rolling_back"};
  help(f, "idem_slot_move_phase", "gauge", "1 for the phase of the slot move under way.");
  for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++)
    fprintf(f, "idem_slot_move_phase{phase=\"%s\"} %d\n", phases[i],
            on && phase && strcmp(phase, phases[i]) == 0 ? 1 : 0);
  help(f, "idem_slot_move_rows_copied", "gauge", "Steps and sagas the move's target holds so far.");
  fprintf(f, "idem_slot_move_rows_copied %llu\n", on ? (unsigned long long)rows : 0ULL);
  help(f, "idem_slot_move_lag_bytes", "gauge",
       "Source WAL the move's target has not confirmed (-1: unknown).");
  fprintf(f, "idem_slot_move_lag_bytes %lld\n", on ? (long long)lag : -1LL);
  help(f, "idem_slot_moves_total", "counter", "Slot moves this node ended, by result.");
  fprintf(f, "idem_slot_moves_total{result=\"finished\"} %llu\n", ld(&g_moves_ended[0]));
  fprintf(f, "idem_slot_moves_total{result=\"rolled_back\"} %llu\n", ld(&g_moves_ended[1]));
}

static char *render(bool om) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  metrics__set_om(om);
  render_rpc(f);
  render_counters(f);
  render_gauges(f);
  render_moves(f);
  metrics__render_ops(f);
  metrics__render_store(f);
  metrics__render_stages(f);
  if (om) fputs("# EOF\n", f);
  metrics__set_om(false);
  if (fclose(f) != 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

char *metrics_render(void) {
  return render(false);
}

char *metrics_render_openmetrics(void) {
  return render(true);
}
