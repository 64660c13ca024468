/* metrics_store.c — where a step transaction's time goes in the group commit
 * (docs/observability.md "Where the time goes"): histograms per store group of the wait in the
 * batcher's queue, the
 * batch size, the round trips to PostgreSQL and the time from a batch's start to its commit. */
#include <stdatomic.h>
#include <stdio.h>

#include "metrics.h"
#include "metrics_internal.h"

#define NB_MAX 16

typedef struct hist_def {
  const char *name, *help;
  int nb;
  double le[NB_MAX]; /* upper bounds; one more bucket for +Inf */
} hist_def;

static const hist_def defs[METRICS_STORE_HIST__COUNT] = {
    [METRICS_QUEUE_WAIT] = {"idem_store_queue_wait_seconds",
                            "Time a step transaction waited in the group commit's queue.",
                            12,
                            {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                             0.25, 1}},
    [METRICS_BATCH_SIZE] = {"idem_store_batch_size",
                            "Step transactions committed together by one group commit.",
                            9,
                            {1, 2, 4, 8, 16, 32, 64, 128, 256}},
    [METRICS_ROUND_TRIPS] = {"idem_store_round_trips",
                             "Round trips to PostgreSQL per committed batch (retries included).",
                             6,
                             {2, 3, 4, 6, 8, 12}},
    [METRICS_COMMIT] = {"idem_store_commit_seconds",
                        "Time from a batch's start (locks and reads) to its commit.",
                        12,
                        {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}},
};

typedef struct hist {
  atomic_uint_fast64_t b[NB_MAX + 1]; /* not cumulative; [nb] = +Inf */
  _Atomic double sum;
  atomic_uint_fast64_t count;
} hist;

static hist g_hist[METRICS_GROUPS_MAX][METRICS_STORE_HIST__COUNT];

void metrics_store_observe_g(int group, metrics_store_hist h, double v) {
  if (h < 0 || h >= METRICS_STORE_HIST__COUNT) return;
  if (group < 0 || group >= METRICS_GROUPS_MAX) group = 0;
  const hist_def *d = &defs[h];
  hist *x = &g_hist[group][h];
  int i = 0;
  while (i < d->nb && v > d->le[i]) i++;
  atomic_fetch_add_explicit(&x->b[i], 1, memory_order_relaxed);
  double old = atomic_load_explicit(&x->sum, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(&x->sum, &old, old + v, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
  atomic_fetch_add_explicit(&x->count, 1, memory_order_relaxed);
}

void metrics__render_store(FILE *f) {
  int groups = metrics__groups();
  for (int h = 0; h < METRICS_STORE_HIST__COUNT; h++) {
    const hist_def *d = &defs[h];
    metrics__help(f, d->name, "histogram", d->help);
    for (int g = 0; g < groups; g++) {
      hist *x = &g_hist[g][h];
      char le[32], series[96];
      unsigned long long cum = 0;
      snprintf(series, sizeof series, "%s_bucket", d->name);
      for (int i = 0; i <= d->nb; i++) {
        cum += (unsigned long long)atomic_load_explicit(&x->b[i], memory_order_relaxed);
        if (i < d->nb)
          snprintf(le, sizeof le, "%g", d->le[i]);
        else
          snprintf(le, sizeof le, "+Inf");
        metrics__sample(f, series, g, "le", le, cum);
      }
      snprintf(series, sizeof series, "%s_sum", d->name);
      metrics__sample_f(f, series, g, atomic_load_explicit(&x->sum, memory_order_relaxed));
      snprintf(series, sizeof series, "%s_count", d->name);
      metrics__sample(f, series, g, NULL, NULL,
                      (unsigned long long)atomic_load_explicit(&x->count, memory_order_relaxed));
    }
  }
}
