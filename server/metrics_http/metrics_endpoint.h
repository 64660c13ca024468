/* metrics_endpoint.h — the /metrics endpoint of a node: the HTTP server (metrics_http.h) and the
 * step gauges it reads through a store connection of its own. */
#ifndef IDEM_METRICS_HTTP_METRICS_ENDPOINT_H
#define IDEM_METRICS_HTTP_METRICS_ENDPOINT_H

#include <stdint.h>

#include "../metrics/metrics.h"
#include "../store/store.h"

typedef struct metrics_endpoint metrics_endpoint;

/* Serves /metrics on address with the gauges read through st (owned from here on: closed by
 * metrics_endpoint_stop, or at once on failure). NULL (logged) when it cannot listen. */
metrics_endpoint *metrics_endpoint_start(const char *address, store *st, int64_t store_timeout_ms);

/* Stops the endpoint and closes its store. NULL is fine. */
void metrics_endpoint_stop(metrics_endpoint *m);

#endif
