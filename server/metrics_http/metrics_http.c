/* metrics_http.c — GET /metrics over HTTP/1.1 (Prometheus text, or OpenMetrics with
 * exemplars when the Accept header asks for it) with libmicrohttpd (Debian's libmicrohttpd-dev),
 * one internal polling thread. Anything else is 404 (other paths) or 405 (other methods). One
 * answer per connection (Connection: close): a client pipelining requests without reading
 * costs one rendering, not as many as the socket buffers hold (docs/limits.md). */
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "metrics_http.h"

#include "../metrics/metrics.h"
#include "../util/hostport.h"

struct metrics_http {
  struct MHD_Daemon *d;
};

/* Idle or trickling connections must not blind the scrapes (README "Limits"): a scrape takes
 * milliseconds, so a connection silent for METRICS_HTTP_IDLE_S is closed, and up to
 * METRICS_HTTP_CONN_MAX are served at once (a client that keeps more than that open, sending a
 * byte at a time, still can: bind --metrics to an address only the scraper reaches). */
#define METRICS_HTTP_CONN_MAX 4096u
#define METRICS_HTTP_IDLE_S 3u
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define CONTENT_TYPE_OM "application/openmetrics-text; version=1.0.0; charset=utf-8"

/* Whether the scraper accepts OpenMetrics (docs/api.md §22: Prometheus asks for it first, with
 * exemplar storage on): an Accept header naming application/openmetrics-text without q=0. */
static bool wants_openmetrics(struct MHD_Connection *conn) {
  const char *a = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
  const char *p = a ? strstr(a, "application/openmetrics-text") : NULL;
  if (!p) return false;
  size_t len = strcspn(p, ","); /* this media range's parameters */
  const char *q = strstr(p, "q=");
  return !(q && q < p + len && strtod(q + 2, NULL) <= 0);
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned int status, char *body,
                             enum MHD_ResponseMemoryMode mode, const char *type) {
  struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, mode);
  if (!r) {
    if (mode == MHD_RESPMEM_MUST_FREE) free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                          type ? type : "text/plain; charset=utf-8");
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result ret = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls) {
  (void)cls;
  (void)version;
  (void)upload_data;
  static int first;
  if (*req_cls == NULL) { /* headers only so far: answer on the next call */
    *req_cls = &first;
    return MHD_YES;
  }
  if (*upload_data_size != 0) {
    *upload_data_size = 0; /* ignore a body */
    return MHD_YES;
  }
  if (strcmp(url, "/metrics") != 0)
    return reply(conn, MHD_HTTP_NOT_FOUND, (char *)"not found: try /metrics\n",
                 MHD_RESPMEM_PERSISTENT, NULL);
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
    return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, (char *)"method not allowed\n",
                 MHD_RESPMEM_PERSISTENT, NULL);
  bool om = wants_openmetrics(conn);
  char *text = om ? metrics_render_openmetrics() : metrics_render();
  if (!text)
    return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, (char *)"out of memory\n",
                 MHD_RESPMEM_PERSISTENT, NULL);
  return reply(conn, MHD_HTTP_OK, text, MHD_RESPMEM_MUST_FREE, om ? CONTENT_TYPE_OM : CONTENT_TYPE);
}

metrics_http *metrics_http_start(const char *addr, int *bound_port, char *errbuf,
                                 size_t errbuf_len) {
  struct sockaddr_storage ss;
  socklen_t ss_len;
  if (!hostport_listen_addr(addr, &ss, &ss_len, errbuf, errbuf_len)) return NULL;
  metrics_http *h = calloc(1, sizeof *h);
  if (!h) {
    snprintf(errbuf, errbuf_len, "out of memory");
    return NULL;
  }
  /* epoll: no FD_SETSIZE ceiling, so the cap can be high (the node raised RLIMIT_NOFILE) */
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
  if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  h->d =
      MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL, MHD_OPTION_SOCK_ADDR,
                       (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT, METRICS_HTTP_CONN_MAX,
                       MHD_OPTION_CONNECTION_TIMEOUT, METRICS_HTTP_IDLE_S, MHD_OPTION_END);
  if (!h->d) {
    free(h);
    snprintf(errbuf, errbuf_len, "cannot listen on %s", addr);
    return NULL;
  }
  if (bound_port) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *bound_port = info ? (int)info->port : 0;
  }
  return h;
}

void metrics_http_stop(metrics_http *h) {
  if (!h) return;
  MHD_stop_daemon(h->d);
  free(h);
}
