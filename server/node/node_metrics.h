/* node_metrics.h — the /metrics endpoint of a node: the HTTP server (metrics/) and the step
 * gauges it reads through a store connection of its own. */
#ifndef IDEM_NODE_METRICS_H
#define IDEM_NODE_METRICS_H

#include <stdint.h>

#include "../metrics/metrics.h"
#include "../store/store.h"

typedef struct node_metrics node_metrics;

/* Serves /metrics on address with the gauges read through st (owned from here on: closed by
 * node_metrics_stop, or at once on failure). NULL (logged) when it cannot listen. */
node_metrics *node_metrics_start(const char *address, store *st, int64_t store_timeout_ms);

/* Stops the endpoint and closes its store. NULL is fine. */
void node_metrics_stop(node_metrics *m);

#endif
