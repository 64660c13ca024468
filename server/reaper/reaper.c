/* reaper.c — the periodic delete of expired rows (see reaper.h). */
#include "reaper.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../metrics/metrics.h"
#include "../util/clock.h"
#include "../util/log.h"

struct reaper {
  reaper_config cfg;
  store *st;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop; /* under mu; also read by the round between batches */
};

static void sleep_us(int64_t us) {
  struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static bool stopped(const bool *stop) {
  return stop && __atomic_load_n(stop, __ATOMIC_ACQUIRE);
}

/* One kind of reaping: its store call (one batch) and how hard it goes. Bodies go in shorter
 * batches and at a gentler pace (REAPER_BODY_DIVISOR, REAPER_BODY_REST_FACTOR). */
typedef struct reap_kind {
  const char *name; /* metrics_reaped's kind */
  err_code (*batch)(store *s, uint32_t limit, int64_t deadline, uint64_t *n, err_t *err);
  uint32_t divisor;    /* of the configured batch */
  int64_t rest_factor; /* rest this many times as long as a batch took */
} reap_kind;

/* In the order of a round: bodies first (their rows stay), then rows, then sagas. */
static const reap_kind kinds[] = {
    {"bodies", store_reap_bodies, REAPER_BODY_DIVISOR, REAPER_BODY_REST_FACTOR},
    {"steps", store_reap_steps, 1, REAPER_REST_FACTOR},
    {"sagas", store_reap_sagas, 1, REAPER_REST_FACTOR},
};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

/* Batches of one kind until a short batch, a store error or stop. *failed on a store error. */
static uint64_t reap_all_of(store *st, const reaper_config *cfg, const bool *stop,
                            const reap_kind *kind, bool *failed) {
  uint32_t batch = cfg->batch ? cfg->batch : REAPER_BATCH_DEFAULT;
  batch = (batch + kind->divisor - 1) / kind->divisor;
  int64_t timeout = cfg->store_timeout_ms > 0 ? cfg->store_timeout_ms : 2000;
  uint64_t total = 0;
  while (!stopped(stop)) {
    uint64_t n = 0;
    err_t err;
    err_clear(&err);
    int64_t started_us = clock_mono_us(), deadline = clock_mono_ms() + timeout;
    err_code rc = kind->batch(st, batch, deadline, &n, &err);
    if (rc != ERR_OK) {
      *failed = true;
      log_kv(LOG_WARN, "reaper: store call failed, will retry next round", "kind", kind->name,
             "error", err.msg, (const char *)NULL);
      break;
    }
    if (n > 0) metrics_reaped_g(cfg->metrics_group, kind->name, n);
    total += n;
    if (n < batch) break;
    /* At most a fifth of the time deleting: rest REAPER_REST_FACTOR times as long as the batch
     * took (or pause_ms if longer), so that BeginStep/CompleteStep keep their share of the CPU
     * and the disk. Measured in microseconds: batches take about a millisecond. With a third
     * (and 200-row batches) BeginStep's p99 under load was 1.1-2.6x its value without reaping
     * (test_reaper_load); with a fifth and 100-row batches, 1.0-1.2x. */
    int64_t rest_us = kind->rest_factor * (clock_mono_us() - started_us);
    sleep_us(rest_us > cfg->pause_ms * 1000 ? rest_us : cfg->pause_ms * 1000);
  }
  return total;
}

uint64_t reaper_round(store *st, const reaper_config *cfg, const bool *stop) {
  if (cfg->is_leader && !cfg->is_leader(cfg->is_leader_arg)) return 0;
  int64_t t0 = clock_mono_ms();
  bool failed = false;
  uint64_t n[N_KINDS] = {0}, total = 0;
  for (size_t i = 0; i < N_KINDS && !failed; i++) {
    n[i] = reap_all_of(st, cfg, stop, &kinds[i], &failed);
    total += n[i];
  }
  metrics_reaper_round_g(cfg->metrics_group, !failed && !stopped(stop));
  if (total > 0) {
    char b[24], s[24], g[24], ms[24];
    snprintf(b, sizeof b, "%llu", (unsigned long long)n[0]); /* in the order of kinds[] */
    snprintf(s, sizeof s, "%llu", (unsigned long long)n[1]);
    snprintf(g, sizeof g, "%llu", (unsigned long long)n[2]);
    snprintf(ms, sizeof ms, "%lld", (long long)(clock_mono_ms() - t0));
    log_kv(LOG_INFO, "reaper: expired rows deleted", "bodies_dropped", b, "steps", s, "sagas", g,
           "ms", ms, (const char *)NULL);
  }
  return total;
}

static void *reaper_main(void *arg) {
  reaper *r = arg;
  pthread_mutex_lock(&r->mu);
  for (;;) {
    struct timespec until = clock_after_us(CLOCK_MONOTONIC, r->cfg.interval_ms * 1000);
    while (!r->stop)
      if (pthread_cond_timedwait(&r->cv, &r->mu, &until) == ETIMEDOUT) break;
    if (r->stop) break;
    pthread_mutex_unlock(&r->mu);
    reaper_round(r->st, &r->cfg, &r->stop);
    pthread_mutex_lock(&r->mu);
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

reaper *reaper_start(const reaper_config *cfg) {
  if (!cfg || cfg->interval_ms <= 0 || !cfg->open_store) return NULL;
  reaper *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->cfg = *cfg;
  r->st = cfg->open_store(cfg->open_store_arg);
  if (!r->st) {
    free(r);
    return NULL;
  }
  pthread_mutex_init(&r->mu, NULL);
  clock_cond_init(&r->cv);
  if (pthread_create(&r->thread, NULL, reaper_main, r) != 0) {
    store_close(r->st);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
    return NULL;
  }
  return r;
}

void reaper_stop(reaper *r) {
  if (!r) return;
  pthread_mutex_lock(&r->mu);
  __atomic_store_n(&r->stop, true, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  pthread_join(r->thread, NULL);
  store_close(r->st);
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(r);
}
