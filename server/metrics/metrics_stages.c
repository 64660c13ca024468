/* metrics_stages.c — where a step call's time goes, stage by stage (metrics.h "stages of a step
 * call", docs/observability.md "Stages of a step call"): one histogram per method and stage, and
 * one of the whole call on the same clock, with buckets fine enough to tell 1, 2, 5 and 10 ms
 * apart. Observing is a binary search over the bounds and three relaxed atomic adds. */
#include <stdatomic.h>
#include <stdio.h>

#include "metrics.h"
#include "metrics_internal.h"

/* Upper bounds in microseconds: ten a decade (the R10 series 1, 1.25, 1.6, 2, 2.5, 3.2, 4, 5,
 * 6.3, 8; a factor of about 1.26) from 50 us to 2 s, then +Inf. */
static const int64_t le_us[] = {50,     63,     80,     100,     125,     160,     200,    250,
                                320,    400,    500,    630,     800,     1000,    1250,   1600,
                                2000,   2500,   3200,   4000,    5000,    6300,    8000,   10000,
                                12500,  16000,  20000,  25000,   32000,   40000,   50000,  63000,
                                80000,  100000, 125000, 160000,  200000,  250000,  320000, 400000,
                                500000, 630000, 800000, 1000000, 1250000, 1600000, 2000000};
#define NB ((int)(sizeof le_us / sizeof le_us[0]))

static const char *const stage_names[METRICS_STAGE__COUNT] = {
    [METRICS_STAGE_ARRIVE] = "arrive", [METRICS_STAGE_HANDLER] = "handler",
    [METRICS_STAGE_QUEUE] = "queue",   [METRICS_STAGE_READ] = "read",
    [METRICS_STAGE_WRITE] = "write",   [METRICS_STAGE_COMMIT] = "commit",
    [METRICS_STAGE_ANSWER] = "answer", [METRICS_STAGE_REPLY] = "reply",
    [METRICS_STAGE_SEND] = "send",
};

typedef struct fine_hist {
  atomic_uint_fast64_t b[NB + 1]; /* not cumulative; [NB] = +Inf */
  atomic_uint_fast64_t sum_us, count;
} fine_hist;

/* [method][stage]; [method][METRICS_STAGE__COUNT] is the whole call */
static fine_hist g_stage[METRICS_METHODS_MAX][METRICS_STAGE__COUNT + 1];

static _Thread_local int tl_handler_method = -1, tl_answer_method = -1;
static _Thread_local int64_t tl_handler_us, tl_answer_us;

static void observe(fine_hist *h, int64_t us) {
  if (us < 0) us = 0;
  int lo = 0, hi = NB; /* the first bound >= us, or NB */
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (le_us[mid] < us)
      lo = mid + 1;
    else
      hi = mid;
  }
  atomic_fetch_add_explicit(&h->b[lo], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum_us, (uint64_t)us, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

void metrics_stage_observe(int method, metrics_stage s, int64_t micros) {
  if (method < 0 || method >= METRICS_METHODS_MAX || s < 0 || s >= METRICS_STAGE__COUNT) return;
  observe(&g_stage[method][s], micros);
}

void metrics_stage_call(int method, int64_t micros) {
  if (method < 0 || method >= METRICS_METHODS_MAX) return;
  observe(&g_stage[method][METRICS_STAGE__COUNT], micros);
}

void metrics_stage_handler_set(int method, int64_t at_us) {
  tl_handler_method = method;
  tl_handler_us = at_us;
}

bool metrics_stage_handler_get(int *method, int64_t *at_us) {
  if (tl_handler_method < 0) return false;
  *method = tl_handler_method;
  *at_us = tl_handler_us;
  return true;
}

void metrics_stage_answer_set(int method, int64_t at_us) {
  tl_answer_method = method;
  tl_answer_us = at_us;
}

bool metrics_stage_answer_get(int method, int64_t *at_us) {
  if (tl_answer_method < 0 || tl_answer_method != method) return false;
  *at_us = tl_answer_us;
  return true;
}

static unsigned long long ld(atomic_uint_fast64_t *v) {
  return (unsigned long long)atomic_load_explicit(v, memory_order_relaxed);
}

/* One histogram's samples; labels is the text inside the braces before le. */
static void render_hist(FILE *f, const char *name, const char *labels, fine_hist *h) {
  unsigned long long cum = 0;
  for (int i = 0; i <= NB; i++) {
    cum += ld(&h->b[i]);
    if (i < NB)
      fprintf(f, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels, (double)le_us[i] / 1e6, cum);
    else
      fprintf(f, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels, cum);
  }
  fprintf(f, "%s_sum{%s} %.6f\n", name, labels, (double)ld(&h->sum_us) / 1e6);
  fprintf(f, "%s_count{%s} %llu\n", name, labels, ld(&h->count));
}

/* A method's series appear with its first staged call (only the step calls answered by the
 * group commit are staged). */
static bool staged(int m) {
  return metrics__rpc_name(m) && ld(&g_stage[m][METRICS_STAGE__COUNT].count) > 0;
}

void metrics__render_stages(FILE *f) {
  char labels[160];
  metrics__help(f, "idem_stage_seconds", "histogram",
                "Time a step call spent in each stage, by method and stage "
                "(docs/observability.md, Stages of a step call).");
  for (int m = 0; m < METRICS_METHODS_MAX; m++) {
    if (!staged(m)) continue;
    for (int s = 0; s < METRICS_STAGE__COUNT; s++) {
      snprintf(labels, sizeof labels, "method=\"%s\",stage=\"%s\"", metrics__rpc_name(m),
               stage_names[s]);
      render_hist(f, "idem_stage_seconds", labels, &g_stage[m][s]);
    }
  }
  metrics__help(f, "idem_stage_call_seconds", "histogram",
                "A staged step call from its arrival to its reply handed to gRPC (the stages "
                "arrive to reply), in the stages' buckets.");
  for (int m = 0; m < METRICS_METHODS_MAX; m++) {
    if (!staged(m)) continue;
    snprintf(labels, sizeof labels, "method=\"%s\"", metrics__rpc_name(m));
    render_hist(f, "idem_stage_call_seconds", labels, &g_stage[m][METRICS_STAGE__COUNT]);
  }
}
