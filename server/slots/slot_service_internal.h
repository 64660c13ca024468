/* slot_service_internal.h — what slot_service.c (the views, the watch) and slot_service_etcd.c
 * (the map, results and progress in etcd) share. Prefix ss__. */
#ifndef IDEM_SLOTS_SLOT_SERVICE_INTERNAL_H
#define IDEM_SLOTS_SLOT_SERVICE_INTERNAL_H

#include <pthread.h>

#include "slot_service.h"

#define SS_RESULTS 16   /* the latest results the watch saw, kept for waiters */
#define SS_ETCD_MS 2000 /* one etcd call */

struct slots_view {
  _Atomic long refs; /* the service's (while current) and each holder's */
  slotmap *map;
  uint16_t *owner; /* per slot: the index of its group */
};

typedef struct ss_result {
  char rid[64];
  char *json;
  size_t len;
} ss_result;

struct slot_service {
  uint32_t slots;
  char **groups;
  size_t n_groups;
  slots_etcd etcd;
  bool in_etcd;
  char map_key[512];        /* <prefix>/slotmap */
  char results_prefix[512]; /* <prefix>/moves/ */
  char progress_key[512];   /* <prefix>/slotmove.progress */
  char watch_prefix[512];   /* <prefix>/ */
  int64_t watch_from;       /* the revision the watch starts at */
  pthread_mutex_t cur_mu;   /* cur's exchange and its holders' counts */
  slots_view *cur;
  pthread_mutex_t mu; /* changes, results; cv's */
  pthread_cond_t cv;
  uint64_t changes;
  ss_result results[SS_RESULTS];
  size_t next_result;
  _Atomic bool stop;
  _Atomic uint64_t rows;
  _Atomic int64_t lag;
  _Atomic bool have_progress;
  pthread_t watcher;
  bool watching;
};

/* A view of m (taken; freed on failure): NULL on allocation failure. */
slots_view *ss__view(slotmap *m);
/* Builds v's slot -> group table; SLOTS_USAGE when the map has another slot count or names a
 * group the node lacks. */
slots_result ss__index(const slot_service *s, slots_view *v, char *msg, size_t cap);
/* Follows m (taken) when it is newer than the map followed; false when it cannot (logged). */
bool ss__follow(slot_service *s, slotmap *m);
/* Counts a change and wakes the waiters. */
void ss__changed(slot_service *s);
/* Starts the watch's thread; false when it could not. */
bool ss__watch_start(slot_service *s);

#endif
