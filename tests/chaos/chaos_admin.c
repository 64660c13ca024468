/* chaos_admin.c — the fault campaign's questions to the cluster and its slot moves (the nemesis,
 * tests/chaos/nemesis.sh, runs them through idem-chaos-client; docs/chaos.md):
 *
 *   --leader A,B             the address of the first node whose GetStatus says it leads
 *   --group-leader G A,B     the address of the node whose GetTopology says it leads group G
 *   --groups-led A,B         exit 0 when every group has a leader, as a node that answers
 *                            sees it
 *   --move A,B SEED RID      picks a move at random from the slot map (a piece of one range, to
 *                            another group), prints "plan FROM TO SOURCE TARGET" at once, runs it
 *                            (Admin.MoveSlots, request id RID, up to 90 s) and prints
 *                            "result finished|rolled-back|refused|unknown DETAILS"; meanwhile
 *                            "phase P" each time the move's phase, asked every 50 ms, changes
 *                            (the nemesis lands its fault by these lines)
 * Each exits 1 when no node answers (or, for --move, when no move could be planned). */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <idem/idem.h>

#include "chaos_admin.h"

static idem_client *connect_to(const char *addrs, int64_t deadline_ms) {
  idem_options o = {.address = addrs, .tenant = "chaos", .deadline_ms = deadline_ms};
  idem_client *c = NULL;
  idem_error e = {0};
  return idem_connect(&o, &c, &e) == IDEM_OK ? c : NULL;
}

/* Calls fn with a client of each address alone until it returns 0. */
static int each_node(const char *addrs, int (*fn)(idem_client *c, const char *addr, void *arg),
                     void *arg) {
  char *list = strdup(addrs), *save = NULL;
  int rc = 1;
  for (char *a = strtok_r(list, ",", &save); a && rc; a = strtok_r(NULL, ",", &save)) {
    /* one address: libidem does not follow redirects elsewhere, so the answer is this node's */
    idem_client *c = connect_to(a, 500);
    if (!c) continue;
    rc = fn(c, a, arg);
    idem_close(c);
  }
  free(list);
  return rc;
}

static int says_leader(idem_client *c, const char *addr, void *arg) {
  (void)arg;
  idem_status st = {0};
  idem_error e = {0};
  if (idem_get_status(c, &st, &e) != IDEM_OK || !st.leader) return 1;
  printf("%s\n", addr);
  return 0;
}

int chaos_leader(const char *addrs) { return each_node(addrs, says_leader, NULL); }

static int leads_group(idem_client *c, const char *addr, void *arg) {
  idem_topology t = {0};
  idem_error e = {0};
  if (idem_get_topology(c, &t, &e) != IDEM_OK) return 1;
  int rc = 1;
  for (size_t i = 0; i < t.n_groups; i++)
    if (strcmp(t.groups[i].name, (const char *)arg) == 0 && t.groups[i].led_here) rc = 0;
  idem_topology_clear(&t);
  if (rc == 0) printf("%s\n", addr);
  return rc;
}

int chaos_group_leader(const char *group, const char *addrs) {
  return each_node(addrs, leads_group, (void *)group);
}

static int all_led(idem_client *c, const char *addr, void *arg) {
  (void)addr, (void)arg;
  idem_topology t = {0};
  idem_error e = {0};
  if (idem_get_topology(c, &t, &e) != IDEM_OK) return 1;
  int rc = t.n_groups > 0 ? 0 : 2;
  for (size_t i = 0; i < t.n_groups; i++)
    if (!t.groups[i].leader_address[0]) rc = 2;
  idem_topology_clear(&t);
  return rc;
}

int chaos_groups_led(const char *addrs) { return each_node(addrs, all_led, NULL) ? 1 : 0; }


typedef struct plan {
  uint64_t rng;
  uint32_t from, to;
  char source[IDEM_GROUP_NAME_MAX + 1], target[IDEM_GROUP_NAME_MAX + 1];
} plan;

static uint32_t rnd(plan *p, uint32_t n) { /* xorshift64* */
  p->rng ^= p->rng >> 12;
  p->rng ^= p->rng << 25;
  p->rng ^= p->rng >> 27;
  return (uint32_t)((p->rng * 2685821657736338717ULL) >> 33) % n;
}

/* A piece (1 slot up to the whole) of a range chosen at random, to another group at random. */
static int pick(idem_client *c, const char *addr, void *arg) {
  (void)addr;
  plan *p = arg;
  idem_topology t = {0};
  idem_slot_move m = {0};
  idem_error e = {0};
  if (idem_get_topology_move(c, &t, &m, &e) != IDEM_OK) return 1;
  int rc = 1;
  if (!m.active && t.n_ranges > 0 && t.n_groups > 1) {
    const idem_slot_range *r = &t.ranges[rnd(p, (uint32_t)t.n_ranges)];
    uint32_t len = r->to - r->from + 1, n = 1 + rnd(p, len);
    p->from = r->from + rnd(p, len - n + 1);
    p->to = p->from + n - 1;
    snprintf(p->source, sizeof p->source, "%s", r->group);
    uint32_t g = rnd(p, (uint32_t)t.n_groups - 1);
    for (size_t i = 0, k = 0; i < t.n_groups; i++) {
      if (strcmp(t.groups[i].name, r->group) == 0) continue;
      if (k++ == g) snprintf(p->target, sizeof p->target, "%s", t.groups[i].name);
    }
    rc = p->target[0] ? 0 : 1;
  }
  idem_topology_clear(&t);
  return rc;
}

typedef struct watch {
  const char *addrs;
  atomic_bool stop;
} watch;

/* Prints "phase P" on each change of the phase the nodes report, until stop. */
static void *watch_phase(void *arg) {
  watch *w = arg;
  idem_client *c = connect_to(w->addrs, 500);
  char last[32] = "";
  while (c && !atomic_load(&w->stop)) {
    idem_topology t = {0};
    idem_slot_move m = {0};
    idem_error e = {0};
    if (idem_get_topology_move(c, &t, &m, &e) == IDEM_OK) {
      idem_topology_clear(&t);
      const char *p = m.active ? m.phase : "none";
      if (strcmp(p, last) != 0) {
        printf("phase %s\n", p);
        fflush(stdout);
        snprintf(last, sizeof last, "%s", p);
      }
    }
    /* not a wait: the watcher looks at the move's phase every 50 ms for the history */
    nanosleep(&(struct timespec){.tv_nsec = 50 * 1000000}, NULL);
  }
  idem_close(c);
  return NULL;
}

int chaos_move(const char *addrs, unsigned long long seed, const char *rid) {
  plan p = {.rng = seed * 2654435761ULL + 1};
  if (each_node(addrs, pick, &p) != 0) return 1;
  printf("plan %" PRIu32 " %" PRIu32 " %s %s\n", p.from, p.to, p.source, p.target);
  fflush(stdout);
  idem_client *c = connect_to(addrs, 5000);
  if (!c) {
    printf("result unknown no node answers\n");
    return 0;
  }
  idem_move mv = {.from = p.from, .to = p.to, .group = p.target, .request_id = rid,
                  .timeout_ms = 90000};
  idem_move_result r = {0};
  idem_error e = {0};
  watch w = {.addrs = addrs};
  pthread_t th;
  bool watching = pthread_create(&th, NULL, watch_phase, &w) == 0;
  int rc = idem_move_slots(c, &mv, &r, &e);
  atomic_store(&w.stop, true);
  if (watching) pthread_join(th, NULL);
  if (rc == IDEM_OK)
    printf("result finished paused_ms=%" PRId64 " steps=%" PRIu64 " version=%" PRIu64 "\n",
           r.paused_ms, r.steps_moved, r.version);
  else if (strstr(e.message, "rolled back"))
    printf("result rolled-back %s\n", e.message);
  else if (rc == IDEM_DEADLINE_EXCEEDED || rc == IDEM_UNAVAILABLE)
    printf("result unknown %s: %s\n", idem_strerror(rc), e.message);
  else
    printf("result refused %s: %s\n", idem_strerror(rc), e.message);
  idem_close(c);
  return 0;
}
