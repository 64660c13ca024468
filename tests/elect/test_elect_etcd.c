/* The etcd elector against a real etcd this test starts (loopback, temp data dir): one leader
 * at a time, epochs that only grow, keep-alives while leading, hand-over on resign, fail-closed
 * when etcd dies, recovery when it returns, fencing before serving, and a term ended on purpose
 * (yield, resign) letting its calls finish before another node can lead. TTL 2 s throughout. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "elect/elect.h"
#include "elect/elect_etcd_http.h"
#include "etcd_proc.h"
#include "spawn.h"
#include "testutil.h"
#include "util/clock.h"

#define TTL 2

static etcd_proc *live_etcd; /* stopped by fini when a test ends early */
static void fini(void) {
  if (live_etcd) etcd_stop(live_etcd);
}

/* Sleeps ms: only where the time is the test's subject (each call says why). */
static void nap(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The set-up every etcd test shares: etcd started (stopped by fini if the test fails) and an
 * election prefix of the test's own into prefix. */
static void etcd_up(etcd_proc *ep, char *prefix, size_t n);
/* The end every etcd test shares: its electors freed (NULL ones skipped), etcd stopped. */
static void etcd_down(etcd_proc *ep, elect **els, int n) {
  for (int i = 0; i < n; i++)
    if (els[i]) elect_free(els[i]);
  etcd_stop(ep);
  live_etcd = NULL;
}

/* How many candidates el sees in its election (its status; 0 while not known). */
static int candidates(elect *el) {
  elect_status st;
  elect_status_get(el, &st);
  return st.candidates;
}

/* el's view of the leader's address ("" unknown): its status into *st. */
static const char *leader_seen(elect *el, elect_status *st) {
  elect_status_get(el, st);
  return st->leader_addr;
}

typedef struct fence_cb {
  atomic_int calls;
  atomic_int refuse_first; /* answer false (store down) this many times */
  atomic_uint_least64_t fenced_epoch;
} fence_cb;

static bool on_elected(void *arg, uint64_t epoch, bool *superseded) {
  fence_cb *f = arg;
  *superseded = false;
  atomic_fetch_add(&f->calls, 1);
  if (atomic_load(&f->refuse_first) > 0) {
    atomic_fetch_sub(&f->refuse_first, 1);
    return false;
  }
  atomic_store(&f->fenced_epoch, epoch);
  return true;
}

static elect *node(const etcd_proc *e, const char *prefix, const char *name, fence_cb *f) {
  elect_etcd_config cfg = {.endpoints = e->url,
                           .prefix = prefix,
                           .node_id = name,
                           .advertise = name,
                           .ttl_s = TTL,
                           .on_elected = f ? on_elected : NULL,
                           .on_elected_arg = f};
  err_t err;
  err_clear(&err);
  elect *el = elect_etcd_new(&cfg, &err);
  cr_assert(el, "elect_etcd_new: %s", err.msg);
  cr_assert_eq(elect_start(el, &err), ERR_OK, "%s", err.msg);
  return el;
}

/* Waits until exactly one of n electors leads; returns its index, or -1 at the deadline. */
static int wait_one_leader(elect **els, int n, int64_t within_ms) {
  int64_t until = clock_mono_ms() + within_ms;
  for (;;) {
    int leaders = 0, who = -1;
    for (int i = 0; i < n; i++)
      if (els[i] && elect_is_leader(els[i], NULL)) leaders++, who = i;
    cr_assert_leq(leaders, 1, "two leaders at once");
    if (leaders == 1) return who;
    if (clock_mono_ms() > until) return -1;
    nap(10); /* the next poll: each turn also checks that two never lead at once */
  }
}

static void unique_prefix(char *out, size_t n) {
  snprintf(out, n, "/idem-test/%d/%" PRId64, (int)getpid(), clock_mono_ms());
}

static void etcd_up(etcd_proc *ep, char *prefix, size_t n) {
  etcd_start(ep);
  live_etcd = ep;
  unique_prefix(prefix, n);
}

/* The two-node set-up: node a (fence callback fa, may be NULL) started alone and leading, then
 * node b (fb) beside it, into els[0] and els[1]. Returns how long a took to lead (ms). */
static int64_t two_nodes(const etcd_proc *ep, const char *prefix, elect *els[2], const char *a,
                         fence_cb *fa, const char *b, fence_cb *fb) {
  els[0] = node(ep, prefix, a, fa);
  els[1] = NULL;
  int64_t t0 = clock_mono_ms();
  cr_assert_eq(wait_one_leader(els, 1, 5000), 0, "the only candidate leads");
  int64_t took = clock_mono_ms() - t0;
  els[1] = node(ep, prefix, b, fb);
  return took;
}

Test(elect_codec, base64_and_int64_strings) {
  char *b = etcd__b64("/idem/leader", 12);
  cr_assert_str_eq(b, "L2lkZW0vbGVhZGVy");
  size_t len = 0;
  char *d = etcd__unb64(b, &len);
  cr_assert_str_eq(d, "/idem/leader");
  cr_assert_eq(len, 12);
  free(b);
  free(d);
  for (size_t n = 0; n < 6; n++) { /* every padding length */
    char *e = etcd__b64("abcdef", n);
    char *back = etcd__unb64(e, &len);
    cr_assert_eq(len, n);
    cr_assert_eq(memcmp(back, "abcdef", n), 0);
    free(e);
    free(back);
  }
  cr_assert_null(etcd__unb64("abc", NULL), "not a multiple of 4");
  cJSON *j = cJSON_Parse("{\"ID\":\"7587869325113340161\",\"TTL\":\"5\",\"n\":3}");
  cr_assert_eq(etcd__i64(j, "ID"), 7587869325113340161LL);
  cr_assert_eq(etcd__i64(j, "TTL"), 5);
  cr_assert_eq(etcd__i64(j, "n"), 3);
  cr_assert_eq(etcd__i64(j, "absent"), 0, "zero values are omitted");
  cJSON_Delete(j);
  /* found by fuzz/fuzz_etcd.c: a number outside int64 was cast (undefined behaviour) */
  j = cJSON_Parse("{\"big\":8.3e113,\"neg\":-1e300,\"max\":9223372036854775808,\"ok\":-42}");
  cr_assert_eq(etcd__i64(j, "big"), 0, "out of range reads as malformed");
  cr_assert_eq(etcd__i64(j, "neg"), 0);
  cr_assert_eq(etcd__i64(j, "max"), 0);
  cr_assert_eq(etcd__i64(j, "ok"), -42);
  cJSON_Delete(j);
}

Test(elect_config, refuses_bad_settings) {
  err_t err;
  err_clear(&err);
  elect_etcd_config cfg = {.endpoints = "", .ttl_s = 5};
  cr_assert_null(elect_etcd_new(&cfg, &err));
  cfg.endpoints = "http://127.0.0.1:1";
  cfg.ttl_s = 1;
  cr_assert_null(elect_etcd_new(&cfg, &err));
  cr_assert(strstr(err.msg, "ttl"), "%s", err.msg);
}

Test(elect_etcd, one_leader_keepalives_and_handover_on_resign, .fini = fini, .timeout = 60) {
  static etcd_proc ep; /* static: fini may stop it after a failed assertion */
  char prefix[96];
  etcd_up(&ep, prefix, sizeof prefix);
  fence_cb fa = {0}, fb = {0};
  elect *els[2];
  int64_t first = two_nodes(&ep, prefix, els, "127.0.0.1:1001", &fa, "127.0.0.1:1002", &fb);
  printf("first leader after %" PRId64 " ms\n", first);
  uint64_t epoch_a = 0;
  cr_assert(elect_is_leader(els[0], &epoch_a));
  cr_assert_gt(epoch_a, 0);
  cr_assert_eq(atomic_load(&fa.fenced_epoch), epoch_a, "fenced at the epoch it serves under");

  /* 3 TTLs: still the leader, renewed by keep-alives every TTL/3; the standby sees it */
  int64_t until = clock_mono_ms() + 3 * TTL * 1000;
  while (clock_mono_ms() < until) {
    cr_assert(elect_is_leader(els[0], NULL), "the leader lost its term while etcd is up");
    cr_assert_not(elect_is_leader(els[1], NULL));
    nap(50); /* not a wait: 3 TTLs in which the term must hold */
  }
  cr_assert_geq(elect_etcd__keepalives(els[0]), 6, "keep-alives every TTL/3: %" PRIu64,
                elect_etcd__keepalives(els[0]));
  cr_assert_geq(elect_etcd__keepalives(els[1]), 6, "the standby's lease is renewed too");
  elect_status st;
  elect_status_get(els[1], &st);
  cr_assert_str_eq(st.leader_addr, "127.0.0.1:1001");
  cr_assert(st.election_ok);
  cr_assert_eq(st.epoch, 0);

  /* resign: the standby leads within a second, under a higher epoch */
  int64_t t1 = clock_mono_ms();
  elect_resign(els[0]);
  cr_assert_not(elect_is_leader(els[0], NULL), "serving stops before resign returns");
  cr_assert_eq(wait_one_leader(els, 2, 5000), 1, "the standby did not take over");
  int64_t took = clock_mono_ms() - t1;
  H_EXPECT_TIMING(took < 1000, "the standby took over after %" PRId64 " ms, not within 1 s", took);
  uint64_t epoch_b = 0;
  elect_is_leader(els[1], &epoch_b);
  printf("resign: standby leads after %" PRId64 " ms, epoch %" PRIu64 " -> %" PRIu64 "\n", took,
         epoch_a, epoch_b);
  cr_assert_gt(epoch_b, epoch_a);
  etcd_down(&ep, els, 2);
}

Test(elect_etcd, fails_closed_when_etcd_dies_and_recovers, .fini = fini, .timeout = 60) {
  static etcd_proc ep; /* static: fini may stop it after a failed assertion */
  char prefix[96];
  etcd_up(&ep, prefix, sizeof prefix);
  elect *els[2];
  two_nodes(&ep, prefix, els, "127.0.0.1:2001", NULL, "127.0.0.1:2002", NULL);
  uint64_t e1 = 0;
  elect_is_leader(els[0], &e1);
  H_WAIT(candidates(els[0]) == 2, 5000, "the second node campaigns behind the first");

  int64_t killed = clock_mono_ms();
  etcd_kill(&ep);
  while (elect_is_leader(els[0], NULL)) {
    cr_assert_lt(clock_mono_ms() - killed, TTL * 1000, "still serving a TTL after etcd died");
    nap(5); /* the next poll: serving past the TTL is the failure (two leaders possible) */
  }
  int64_t stopped = clock_mono_ms() - killed;
  cr_assert_not(elect_is_leader(els[1], NULL));
  printf("etcd killed: leader stopped serving after %" PRId64 " ms (TTL %d s)\n", stopped, TTL);
  nap(TTL * 1000); /* not a wait: a TTL in which nobody may lead without etcd */
  elect_status st;
  elect_status_get(els[0], &st);
  cr_assert_not(st.election_ok, "election_ok while etcd is down");

  int64_t back = clock_mono_ms();
  etcd_restart(&ep);
  int64_t up = clock_mono_ms();
  int who = wait_one_leader(els, 2, TTL * 1000 + 2000);
  cr_assert_geq(who, 0, "no leader within TTL + 2 s of etcd's return");
  uint64_t e2 = 0;
  elect_is_leader(els[who], &e2);
  printf("etcd back (restart took %" PRId64 " ms): node %d leads after %" PRId64
         " ms, epoch %" PRIu64 " -> %" PRIu64 "\n",
         up - back, who, clock_mono_ms() - up, e1, e2);
  cr_assert_gt(e2, e1, "a new term has a higher epoch");
  etcd_down(&ep, els, 2);
}

Test(elect_etcd, serves_only_after_the_fence_and_steps_down_when_the_lease_goes, .fini = fini,
     .timeout = 60) {
  static etcd_proc ep; /* static: fini may stop it after a failed assertion */
  char prefix[96];
  etcd_up(&ep, prefix, sizeof prefix);
  fence_cb f = {0};
  atomic_store(&f.refuse_first, 3);
  elect *el = node(&ep, prefix, "127.0.0.1:3001", &f);
  elect *els[1] = {el};
  cr_assert_eq(wait_one_leader(els, 1, 5000), 0);
  cr_assert_geq(atomic_load(&f.calls), 4, "served before the fence was raised");
  uint64_t e1 = 0;
  elect_is_leader(el, &e1);

  /* revoke the lease behind its back: etcd drops the key; the node notices and campaigns
   * again under a new lease and a higher epoch */
  char url[96], body[64];
  snprintf(url, sizeof url, "%s/v3/lease/revoke", ep.url);
  snprintf(body, sizeof body, "{\"ID\":\"%" PRId64 "\"}", elect_etcd__lease(el));
  const char *curl[] = {"curl", "-sf", "-m", "2", "-o", "/dev/null", "-X", "POST", url, "-d", body,
                        NULL};
  cr_assert_eq(spawn_run(curl, NULL, 10000), 0, "curl -X POST %s -d %s", url, body);
  int64_t t0 = clock_mono_ms();
  while (elect_is_leader(el, NULL)) {
    uint64_t e = 0;
    elect_is_leader(el, &e);
    if (e != e1) break;
    cr_assert_lt(clock_mono_ms() - t0, TTL * 1000, "did not notice the lost lease");
    nap(5); /* the next poll: serving past the TTL is the failure (two leaders possible) */
  }
  printf("lease revoked: old term ended after %" PRId64 " ms\n", clock_mono_ms() - t0);
  cr_assert_geq(wait_one_leader(els, 1, 5000), 0);
  uint64_t e2 = 0;
  elect_is_leader(el, &e2);
  cr_assert_gt(e2, e1);
  etcd_down(&ep, els, 1);
}

/* The observer watches the election instead of asking for the leader: while nothing changes, 2
 * nodes make no Leader read at etcd in 2 s (asking every 200 ms would be about 20), and a change
 * (the leader resigns) reaches the other node's view of the leader within a second. etcd's own
 * counter of the Election.Leader calls it answered (grpc_server_handled_total) is the measure. */
Test(elect_etcd, the_observer_watches_instead_of_asking, .fini = fini, .timeout = 60) {
  static etcd_proc ep; /* static: fini may stop it after a failed assertion */
  char prefix[96];
  etcd_up(&ep, prefix, sizeof prefix);
  elect *els[2];
  two_nodes(&ep, prefix, els, "127.0.0.1:4001", NULL, "127.0.0.1:4002", NULL);
  elect_status st;
  H_WAIT(strcmp(leader_seen(els[1], &st), "127.0.0.1:4001") == 0, 5000,
         "the standby learns the leader (its first read)");
  /* a watch begun before the node's lease existed ends after TTL/3 and is read again once: not
   * a wait, the time before the window below, so that the window holds no re-read */
  nap(TTL * 1000 / 3 + 500);
  const char *leader = "grpc_method=\"Leader\"";
  double before = etcd_metric(&ep, "grpc_server_handled_total", leader);
  cr_assert_geq(before, 1, "etcd counts the Leader reads (grpc_server_handled_total)");
  nap(2000); /* the window measured: nothing changes in the election meanwhile */
  double reads = etcd_metric(&ep, "grpc_server_handled_total", leader) - before;
  printf("observer: %.0f Leader reads by 2 nodes in 2 s of a steady election\n", reads);
  cr_assert_leq(reads, 2, "%.0f Leader reads in 2 s: the observer polls", reads);

  int64_t t0 = clock_mono_ms();
  elect_resign(els[0]);
  H_WAIT(strcmp(leader_seen(els[0], &st), "127.0.0.1:4002") == 0, 5000,
         "the resigned node sees the new leader");
  int64_t saw = clock_mono_ms() - t0;
  printf("observer: the resigned node saw the new leader after %" PRId64 " ms\n", saw);
  H_EXPECT_TIMING(saw < 1000, "the resigned node saw the new leader after %" PRId64 " ms", saw);
  etcd_down(&ep, els, 2);
}

/* What a node's on_stepping_down saw: it holds the term's end this long (the calls admitted in
 * it being answered) and watches the other elector meanwhile. */
typedef struct step_down_cb {
  elect *self, *other;
  atomic_int calls;
  atomic_bool self_served;  /* this node was still serving during the hook */
  atomic_bool other_led;    /* the other node led during the hook: the key went too early */
  int hold_ms;
} step_down_cb;

static void on_stepping_down(void *arg) {
  step_down_cb *s = arg;
  atomic_fetch_add(&s->calls, 1);
  int64_t until = clock_mono_ms() + s->hold_ms;
  while (clock_mono_ms() < until) {
    if (elect_is_leader(s->self, NULL)) atomic_store(&s->self_served, true);
    if (s->other && elect_is_leader(s->other, NULL)) atomic_store(&s->other_led, true);
    nap(5); /* not a wait: the hook holds the term's end for hold_ms, as calls finishing would */
  }
}

static elect *node_stepping(const etcd_proc *e, const char *prefix, const char *name,
                            step_down_cb *s) {
  elect_etcd_config cfg = {.endpoints = e->url,
                           .prefix = prefix,
                           .node_id = name,
                           .advertise = name,
                           .ttl_s = TTL,
                           .on_stepping_down = on_stepping_down,
                           .on_stepping_down_arg = s};
  err_t err;
  err_clear(&err);
  elect *el = elect_etcd_new(&cfg, &err);
  cr_assert(el, "elect_etcd_new: %s", err.msg);
  cr_assert_eq(elect_start(el, &err), ERR_OK, "%s", err.msg);
  return el;
}

/* A yield and a resign stop serving at once, then hold the key while on_stepping_down lets the
 * term's calls finish (here 400 ms), and only then let the other node lead: so no other node's
 * fence can meet a commit of the term (docs/internals.md, "Handing a group over"). */
Test(elect_etcd, yield_and_resign_let_the_terms_calls_finish_before_the_key_goes, .fini = fini,
     .timeout = 60) {
  static etcd_proc ep; /* static: fini may stop it after a failed assertion */
  char prefix[96];
  etcd_up(&ep, prefix, sizeof prefix);
  static step_down_cb sa, sb; /* static: read by the electors' threads until they are freed */
  sa.hold_ms = sb.hold_ms = 400;
  elect *els[2] = {node_stepping(&ep, prefix, "127.0.0.1:4001", &sa), NULL};
  sa.self = els[0];
  cr_assert_eq(wait_one_leader(els, 1, 5000), 0, "the only candidate leads");
  els[1] = node_stepping(&ep, prefix, "127.0.0.1:4002", &sb);
  sb.self = els[1];
  sa.other = els[1];
  sb.other = els[0];
  H_WAIT(candidates(els[0]) == 2, 5000, "the second node campaigns behind the first");

  int64_t t0 = clock_mono_ms();
  elect_yield(els[0]); /* asks: the elector's own thread ends the term */
  H_WAIT(!elect_is_leader(els[0], NULL), 5000, "the yielding node stops serving");
  H_EXPECT_TIMING(clock_mono_ms() - t0 < 1000, "still serving %" PRId64 " ms after the yield",
                  clock_mono_ms() - t0);
  cr_assert_eq(wait_one_leader(els, 2, 3000), 1, "the other node did not lead after the yield");
  int64_t took = clock_mono_ms() - t0;
  printf("yield: hook called %d time(s), the other node led after %" PRId64 " ms\n",
         atomic_load(&sa.calls), took);
  cr_assert_eq(atomic_load(&sa.calls), 1, "on_stepping_down once for the yield");
  cr_assert_not(atomic_load(&sa.self_served), "still serving while the term's calls finished");
  cr_assert_not(atomic_load(&sa.other_led), "the other node led before the term's calls finished");
  cr_assert_geq(took, 400, "the key went before on_stepping_down returned (%" PRId64 " ms)", took);

  H_WAIT(candidates(els[1]) == 2, 5000, "the first node campaigns again, behind");
  t0 = clock_mono_ms();
  elect_resign(els[1]);
  took = clock_mono_ms() - t0;
  cr_assert_not(elect_is_leader(els[1], NULL), "serving stops before resign returns");
  cr_assert_eq(atomic_load(&sb.calls), 1, "on_stepping_down once for the resign");
  cr_assert_not(atomic_load(&sb.other_led), "the other node led before the term's calls finished");
  cr_assert_eq(wait_one_leader(els, 2, 3000), 0, "the first node did not lead after the resign");
  printf("resign: returned after %" PRId64 " ms\n", took);
  elect_resign(els[1]); /* idempotent: no second hook */
  cr_assert_eq(atomic_load(&sb.calls), 1);
  sa.other = NULL;
  elect_free(els[0]); /* it leads: free resigns, the hook once more */
  cr_assert_eq(atomic_load(&sa.calls), 2, "on_stepping_down when free resigns a served term");
  els[0] = NULL;
  etcd_down(&ep, els, 2);
}
