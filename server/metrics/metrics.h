/* metrics.h — process-wide counters, gauges and latency histograms (no per-key labels),
 * rendered as Prometheus text at /metrics. Every function is thread-safe and lock-free on the
 * hot path; calling them before metrics_http_start (or without --metrics) is fine. */
#ifndef IDEM_METRICS_H
#define IDEM_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A BeginStep for a fail-open operation answered PROCEED_UNGUARDED (store unreachable). */
void metrics_unguarded(void);

/* The reaper deleted n rows of kind ("steps" or "sagas"). */
void metrics_reaped(const char *kind, uint64_t n);

/* Current counts (for tests and GetStatus); the /metrics text is the public interface. */
uint64_t metrics_unguarded_total(void);
uint64_t metrics_reaped_total(const char *kind);

#endif
