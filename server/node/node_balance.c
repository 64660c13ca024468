/* node_balance.c — see node_balance.h. */
#include "node_balance.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "../util/clock.h"
#include "../util/log.h"
#include "options.h"

#define CHECK_MS 250

struct node_balance {
  elect *els[OPT_LIST_MAX];
  size_t n;
  int64_t settle_ms;
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
};

size_t node_balance_share(size_t groups, size_t nodes) {
  if (nodes == 0) nodes = 1;
  return (groups + nodes - 1) / nodes;
}

static void *balance_main(void *arg) {
  node_balance *b = arg;
  int64_t over_since = 0, last_yield = 0;
  pthread_mutex_lock(&b->mu);
  while (!b->stop) {
    struct timespec ts = clock_after_us(CLOCK_MONOTONIC, CHECK_MS * 1000);
    pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    if (b->stop) break;
    pthread_mutex_unlock(&b->mu);
    size_t led = 0, nodes = 1, last_led = 0;
    for (size_t i = 0; i < b->n; i++) {
      elect_status es;
      elect_status_get(b->els[i], &es);
      if (es.candidates > 0 && (size_t)es.candidates > nodes) nodes = (size_t)es.candidates;
      if (es.leader) {
        led++;
        last_led = i;
      }
    }
    size_t share = node_balance_share(b->n, nodes);
    int64_t now = clock_mono_ms();
    if (led <= share) {
      over_since = 0;
    } else if (!over_since) {
      over_since = now;
    } else if (now - over_since >= b->settle_ms && now - last_yield >= b->settle_ms) {
      char l[24], s[24], nn[24];
      snprintf(l, sizeof l, "%zu", led);
      snprintf(s, sizeof s, "%zu", share);
      snprintf(nn, sizeof nn, "%zu", nodes);
      log_kv(LOG_INFO, "yielding a group to balance the nodes", "led", l, "share", s, "nodes", nn,
             (const char *)NULL);
      elect_yield(b->els[last_led]);
      last_yield = now;
      over_since = 0;
    }
    pthread_mutex_lock(&b->mu);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

node_balance *node_balance_start(elect *const *els, size_t n, int64_t settle_ms) {
  if (n > OPT_LIST_MAX) return NULL;
  node_balance *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  for (size_t i = 0; i < n; i++) b->els[i] = els[i];
  b->n = n;
  b->settle_ms = settle_ms;
  pthread_mutex_init(&b->mu, NULL);
  clock_cond_init(&b->cv);
  if (pthread_create(&b->th, NULL, balance_main, b) != 0) {
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
    return NULL;
  }
  return b;
}

void node_balance_stop(node_balance *b) {
  if (!b) return;
  pthread_mutex_lock(&b->mu);
  b->stop = true;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
  pthread_join(b->th, NULL);
  pthread_cond_destroy(&b->cv);
  pthread_mutex_destroy(&b->mu);
  free(b);
}
