/* metrics_endpoint.c — see metrics_endpoint.h. */
#include "metrics_endpoint.h"
#include "metrics_http.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "../util/clock.h"
#include "../util/log.h"

/* The step counts are read from the store at most once a second, however many scrapes come
 * (a client opening hundreds of connections must not turn each into a count over every step). */
#define COUNTS_FRESH_MS 1000

struct metrics_endpoint {
  pthread_mutex_t mu; /* the store is one connection; scrapes may overlap */
  store *st;
  int64_t timeout_ms;
  metrics_http *http;
  step_counts last;     /* under mu: the last counts read, */
  int64_t last_mono_ms; /* when (0 = never, or the read failed) */
};

static bool counts(void *arg, uint64_t *in_progress, uint64_t *unknown, uint64_t *lease_expired) {
  metrics_endpoint *m = arg;
  err_t err;
  err_code rc = ERR_OK;
  pthread_mutex_lock(&m->mu);
  int64_t now = clock_mono_ms();
  if (!m->last_mono_ms || now - m->last_mono_ms >= COUNTS_FRESH_MS) {
    rc = store_count_steps(m->st, now + m->timeout_ms, &m->last, &err);
    m->last_mono_ms = rc == ERR_OK ? now : 0;
  }
  step_counts n = m->last;
  pthread_mutex_unlock(&m->mu);
  if (rc != ERR_OK) return false;
  *in_progress = n.in_progress;
  *unknown = n.unknown;
  *lease_expired = n.lease_expired;
  return true;
}

metrics_endpoint *metrics_endpoint_start(const char *address, store *st, int64_t store_timeout_ms) {
  metrics_endpoint *m = st ? calloc(1, sizeof *m) : NULL;
  if (!m) {
    store_close(st);
    log_kv(LOG_ERROR, "cannot serve /metrics", "error", "out of memory", (const char *)NULL);
    return NULL;
  }
  pthread_mutex_init(&m->mu, NULL);
  m->st = st;
  m->timeout_ms = store_timeout_ms < 1000 ? store_timeout_ms : 1000;
  metrics_set_counts_fn(counts, m);
  char why[160], port[16];
  int bound = 0;
  m->http = metrics_http_start(address, &bound, why, sizeof why);
  if (!m->http) {
    log_kv(LOG_ERROR, "cannot serve /metrics", "address", address, "error", why,
           (const char *)NULL);
    metrics_endpoint_stop(m);
    return NULL;
  }
  snprintf(port, sizeof port, "%d", bound);
  log_kv(LOG_INFO, "serving /metrics", "address", address, "port", port, (const char *)NULL);
  return m;
}

void metrics_endpoint_stop(metrics_endpoint *m) {
  if (!m) return;
  metrics_http_stop(m->http);
  metrics_set_counts_fn(NULL, NULL);
  store_close(m->st);
  pthread_mutex_destroy(&m->mu);
  free(m);
}
