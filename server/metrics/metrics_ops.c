/* metrics_ops.c — the series an operator's alerts read (deploy/prometheus/,
 * docs/observability.md): errors by reason, the reaper's last finished round. (Steps past their
 * lease are counted with the other step gauges, metrics.c.) */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "metrics.h"
#include "metrics_internal.h"

/* Errors by reason: a slot per reason word, claimed by the first call that names it. The words
 * are static strings (util/err.h), a few dozen of them. */
#define REASONS_MAX 64
static _Atomic(const char *) g_reason_name[REASONS_MAX];
static atomic_uint_fast64_t g_reason_calls[REASONS_MAX];

void metrics_rpc_error(const char *reason) {
  if (!reason || !reason[0]) return;
  for (int i = 0; i < REASONS_MAX; i++) {
    const char *n = atomic_load(&g_reason_name[i]);
    if (!n && atomic_compare_exchange_strong(&g_reason_name[i], &n, reason)) n = reason;
    if (n && strcmp(n, reason) == 0) {
      atomic_fetch_add_explicit(&g_reason_calls[i], 1, memory_order_relaxed);
      return;
    }
  }
}

static _Atomic int64_t g_reaper_round_s[METRICS_GROUPS_MAX];

void metrics_reaper_round_g(int group, bool ok) {
  if (!ok) return;
  if (group < 0 || group >= METRICS_GROUPS_MAX) group = 0;
  atomic_store(&g_reaper_round_s[group], (int64_t)time(NULL));
}

void metrics__render_ops(FILE *f) {
  metrics__help(f, "idem_rpc_errors_total", "counter",
                "Calls answered with an error, by the reason they carry (idem-reason).");
  for (int i = 0; i < REASONS_MAX; i++) {
    const char *n = atomic_load(&g_reason_name[i]);
    if (!n) break;
    fprintf(f, "idem_rpc_errors_total{reason=\"%s\"} %llu\n", n,
            (unsigned long long)atomic_load_explicit(&g_reason_calls[i], memory_order_relaxed));
  }
  metrics__help(f, "idem_reaper_last_round_timestamp_seconds", "gauge",
                "When the reaper last finished a round without a store error (0: not yet; only "
                "a leader reaps).");
  for (int g = 0; g < metrics__groups(); g++)
    metrics__sample(f, "idem_reaper_last_round_timestamp_seconds", g, NULL, NULL,
                    (unsigned long long)atomic_load(&g_reaper_round_s[g]));
}
