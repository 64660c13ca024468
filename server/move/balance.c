/* balance.c — see balance.h. */
#include "balance.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "../util/clock.h"
#include "../util/log.h"
#include "../util/ticker.h"
#include "../slots/slotmap.h"

#define CHECK_MS 250

struct balance {
  elect *els[SLOTMAP_GROUPS_MAX];
  size_t n;
  int64_t settle_ms;
  int64_t over_since, last_yield; /* the ticker's thread only */
  ticker *t;
  balance_keep_fn keep;
  void *keep_arg;
};

size_t balance_share(size_t groups, size_t nodes) {
  if (nodes == 0) nodes = 1;
  return (groups + nodes - 1) / nodes;
}

/* One look: how many groups this node leads against its share of the live nodes. */
static bool balance_once(void *arg) {
  balance *b = arg;
  size_t led = 0, nodes = 1, last_led = b->n; /* b->n: none that may be yielded */
  int keep = b->keep ? b->keep(b->keep_arg) : -1;
  for (size_t i = 0; i < b->n; i++) {
    elect_status es;
    elect_status_get(b->els[i], &es);
    if (es.candidates > 0 && (size_t)es.candidates > nodes) nodes = (size_t)es.candidates;
    if (es.leader) {
      led++;
      if ((int)i != keep) last_led = i;
    }
  }
  size_t share = balance_share(b->n, nodes);
  int64_t now = clock_mono_ms();
  if (led <= share) {
    b->over_since = 0;
  } else if (!b->over_since) {
    b->over_since = now;
  } else if (now - b->over_since >= b->settle_ms && now - b->last_yield >= b->settle_ms &&
             last_led < b->n) {
    char l[24], s[24], nn[24];
    snprintf(l, sizeof l, "%zu", led);
    snprintf(s, sizeof s, "%zu", share);
    snprintf(nn, sizeof nn, "%zu", nodes);
    log_kv(LOG_INFO, "yielding a group to balance the nodes", "led", l, "share", s, "nodes", nn,
           (const char *)NULL);
    elect_yield(b->els[last_led]);
    b->last_yield = now;
    b->over_since = 0;
  }
  return true;
}

balance *balance_start(elect *const *els, size_t n, int64_t settle_ms, balance_keep_fn keep,
                       void *keep_arg) {
  if (n > SLOTMAP_GROUPS_MAX) return NULL;
  balance *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  for (size_t i = 0; i < n; i++) b->els[i] = els[i];
  b->n = n;
  b->settle_ms = settle_ms;
  b->keep = keep;
  b->keep_arg = keep_arg;
  if (!(b->t = ticker_start(CHECK_MS, balance_once, b))) {
    free(b);
    return NULL;
  }
  return b;
}

void balance_stop(balance *b) {
  if (!b) return;
  ticker_stop(b->t);
  free(b);
}
