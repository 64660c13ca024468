/* metrics_http.h — GET /metrics over HTTP (libmicrohttpd), serving metrics_render()'s
 * text; the node starts it for --metrics. Here, above metrics/, so that metrics/ stays a leaf of
 * counters and the store does not link an HTTP server. */
#ifndef IDEM_METRICS_HTTP_METRICS_HTTP_H
#define IDEM_METRICS_HTTP_METRICS_HTTP_H

#include <stddef.h>

typedef struct metrics_http metrics_http;

/* Serves GET /metrics on addr ("HOST:PORT", IPv4 or [IPv6]; port 0 = any) from its own
 * thread. Returns NULL with a message in errbuf when the address is malformed or cannot be
 * bound. *bound_port (may be NULL) receives the port. Stop with metrics_http_stop. */
metrics_http *metrics_http_start(const char *addr, int *bound_port, char *errbuf,
                                 size_t errbuf_len);

/* Stops serving and frees h. NULL is fine. */
void metrics_http_stop(metrics_http *h);

#endif
