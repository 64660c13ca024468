/* test_drain.c — a drain loses no call (docs/upgrading.md, "What to watch"): two nodes on two
 * slot groups (tests/support/groups.h) under four clients that know both addresses; each node in
 * turn is SIGTERMed (it drains and exits 0) and started again on the same address, DRAINS times.
 * Every client runs BeginStep then CompleteStep on fresh keys, so every right answer is known: a
 * PROCEED, then OK; one key in four is completed UNKNOWN and settled with Admin.ResolveStep, whose
 * right answer is OK with the step FAILED (a drain drains Admin calls as it drains the others). Counted over the run: the calls answered, those that failed with a transient
 * error libidem's retries did not absorb (CANCELLED, UNAVAILABLE, ...), and those whose answer was
 * lost (outcome unknown, or a fresh key's BeginStep that did not PROCEED: its first try acted and
 * its answer never came). Checked: no call failed and no answer was lost (scripts/drain-loop
 * runs it 20 times in a row on a busy machine). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "groups.h"
#include "harness.h"

enum { CLIENTS = 4, DRAINS = 4, CODES = 17 };

typedef struct tally {
  char addrs[160], t[64];
  int id;
  atomic_bool *stop;
  atomic_long *done; /* pairs completed by all the clients: what the test's thread waits on */
  long calls, ok, failed[CODES], lost[CODES], lost_proceed, unresolved, other;
  char first[512]; /* the first call that did not go right: method, code, reason, message */
} tally;

/* One answer: ok, a failure (by code), or a lost answer (by code: the client cannot know what
 * its call did). */
static bool count(tally *x, const char *what, const char *gid, int rc, const idem_error *e) {
  x->calls++;
  if (rc == IDEM_OK) {
    x->ok++;
    return true;
  }
  if (!x->first[0])
    snprintf(x->first, sizeof x->first, "%s %s at %lld: %s %d reason '%s' '%s'%s", what, gid,
             (long long)h_now_ms(), e->outcome_unknown ? "lost" : "failed", rc, e->reason,
             e->message, e->leader[0] ? " (a leader named)" : "");
  if (rc < 0 || rc >= CODES)
    x->other++;
  else if (e->outcome_unknown)
    x->lost[rc]++;
  else
    x->failed[rc]++;
  return false;
}

/* A client thread: BeginStep and CompleteStep on fresh keys until told to stop (it asserts
 * nothing: criterion's asserts belong to the test's thread). */
static void *pairs(void *arg) {
  tally *x = arg;
  idem_options o = {.address = x->addrs, .tenant = x->t, .deadline_ms = 5000};
  idem_client *c = NULL;
  idem_error e = {0};
  if (idem_connect(&o, &c, &e) != IDEM_OK) return NULL; /* no calls: the test's checks fail */
  for (long n = 0; !atomic_load(x->stop); n++) {
    char gid[64];
    snprintf(gid, sizeof gid, "drain-%d-%ld", x->id, n);
    idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD};
    idem_begin b = {0};
    int rc = idem_step_begin(c, &k, NULL, 0, 0, &b, &e);
    bool ok = count(x, "BeginStep", gid, rc, &e);
    uint64_t attempt = b.attempt;
    int decision = (int)b.decision;
    bool proceed = ok && b.decision == IDEM_DECISION_PROCEED;
    idem_begin_clear(&b);
    if (ok && !proceed && !x->first[0]) /* a fresh key: its first try began the step */
      snprintf(x->first, sizeof x->first, "BeginStep: decision %d, not PROCEED", decision);
    if (ok && !proceed) x->lost_proceed++;
    if (!proceed) {
      if (!ok) h_sleep_ms(5); /* an answer at once: do not spin */
      continue;
    }
    bool settle = n % 4 == 3; /* an operator settles one step in four: an Admin call */
    rc = idem_step_complete(c, &k, attempt, settle ? IDEM_OUTCOME_UNKNOWN : IDEM_OUTCOME_SUCCEEDED,
                            200, "ok", 2, NULL, &e);
    ok = count(x, "CompleteStep", gid, rc, &e);
    if (ok && settle) {
      idem_resolution res = {IDEM_OUTCOME_FAILED, 409, "no", 2, "drain test", "ops"};
      idem_record rec = {0};
      rc = idem_step_resolve(c, &k, &res, &rec, &e);
      ok = count(x, "ResolveStep", gid, rc, &e);
      if (ok && rec.state != IDEM_STATE_FAILED) { /* a right answer is the step resolved */
        x->unresolved++;
        if (!x->first[0])
          snprintf(x->first, sizeof x->first, "ResolveStep %s: state %d, not FAILED", gid,
                   (int)rec.state);
      }
      idem_record_clear(&rec);
    }
    if (ok)
      atomic_fetch_add(x->done, 1);
    else
      h_sleep_ms(5); /* an answer at once: do not spin */
  }
  idem_close(c);
  return NULL;
}

/* Starts node i of cl again on the address it had (the clients know only those two). */
static void restart_on_same_address(h_groups *cl, int i) {
  srv *s = &cl->node[i];
  char metrics[32], slots[16], ttl[16];
  cl->mport[i] = h_free_port();
  snprintf(metrics, sizeof metrics, "127.0.0.1:%d", cl->mport[i]);
  snprintf(slots, sizeof slots, "%d", H_GROUPS_SLOTS);
  snprintf(ttl, sizeof ttl, "%d", H_GROUPS_TTL_S);
  const char *argv[] = {h_env("IDEM_COORDINATOR_BIN"),
                        "--listen",
                        s->addr,
                        "--metrics",
                        metrics,
                        "--store",
                        cl->store[0],
                        "--store",
                        cl->store[1],
                        "--etcd",
                        cl->etcd.url,
                        "--slots",
                        slots,
                        "--election-ttl",
                        ttl,
                        "--reaper-interval",
                        "0",
                        NULL};
  int listened = h_log_count(s->log_path, "listening");
  int refused = h_log_count(s->log_path, "cannot listen");
  s->pid = spawn_start(argv, &(spawn_opts){.log = s->log_path, .append = true});
  bool up = h_wait_listening(s->pid, s->log_path, s->port, listened, refused, "idem-coordinator");
  if (!up) s->pid = 0;
  cr_assert(up, "node %d could not listen on %s again (taken meanwhile)", i, s->addr);
}

static void words(char *buf, size_t cap, const long *by_code, long extra, const char *extra_name) {
  static const char *names[CODES] = {"OK",
                                     "CANCELLED",
                                     "UNKNOWN",
                                     "INVALID_ARGUMENT",
                                     "DEADLINE_EXCEEDED",
                                     "NOT_FOUND",
                                     "ALREADY_EXISTS",
                                     "PERMISSION_DENIED",
                                     "RESOURCE_EXHAUSTED",
                                     "FAILED_PRECONDITION",
                                     "ABORTED",
                                     "OUT_OF_RANGE",
                                     "UNIMPLEMENTED",
                                     "INTERNAL",
                                     "UNAVAILABLE",
                                     "DATA_LOSS",
                                     "UNAUTHENTICATED"};
  size_t n = 0;
  buf[0] = '\0';
  for (int i = 0; i < CODES; i++)
    if (by_code[i] && n < cap)
      n += (size_t)snprintf(buf + n, cap - n, " %s %ld", names[i], by_code[i]);
  if (extra && n < cap) snprintf(buf + n, cap - n, " %s %ld", extra_name, extra);
}

TestSuite(drain);

Test(drain, sigterm_under_load_loses_no_call, .timeout = 120) {
  h_groups cl;
  h_groups_start_env(&cl, NULL);
  cl.node[0].keep_log = cl.node[1].keep_log = true; /* appended to across restarts */
  h_groups_wait_balanced(&cl, NULL);
  atomic_bool stop = false;
  atomic_long done = 0;
  tally x[CLIENTS];
  pthread_t th[CLIENTS];
  memset(x, 0, sizeof x);
  for (int i = 0; i < CLIENTS; i++) {
    snprintf(x[i].addrs, sizeof x[i].addrs, "%s,%s", cl.node[0].addr, cl.node[1].addr);
    snprintf(x[i].t, sizeof x[i].t, "%s", cl.t);
    x[i].id = i;
    x[i].stop = &stop;
    x[i].done = &done;
    pthread_create(&th[i], NULL, pairs, &x[i]);
  }
  H_WAIT(atomic_load(&done) >= 200, 20000, "the clients completed 200 pairs before the first drain");
  int64_t drain_ms[DRAINS];
  for (int d = 0; d < DRAINS; d++) {
    int i = d % 2;
    int64_t t0 = h_now_ms();
    fprintf(stderr, "drain: SIGTERM to node %d (%s) at %lld\n", i, cl.node[i].addr, (long long)t0);
    int st = spawn_stop(cl.node[i].pid, 20000);
    cl.node[i].pid = 0;
    drain_ms[d] = h_now_ms() - t0;
    if (st != 0) h_srv_dump_log(&cl.node[i]);
    cr_assert_eq(st, 0, "node %d drains and exits 0 on SIGTERM (status %d)", i, st);
    restart_on_same_address(&cl, i);
    h_groups_wait_balanced(&cl, NULL);
  }
  long at_last = atomic_load(&done); /* the calls after the last drain */
  H_WAIT(atomic_load(&done) >= at_last + 200, 20000,
         "the clients completed 200 pairs after the last drain");
  atomic_store(&stop, true);
  for (int i = 0; i < CLIENTS; i++) pthread_join(th[i], NULL);

  tally all = {0};
  for (int i = 0; i < CLIENTS; i++) {
    all.calls += x[i].calls, all.ok += x[i].ok, all.lost_proceed += x[i].lost_proceed;
    all.unresolved += x[i].unresolved;
    all.other += x[i].other;
    for (int c = 0; c < CODES; c++) all.failed[c] += x[i].failed[c], all.lost[c] += x[i].lost[c];
    if (x[i].first[0]) fprintf(stderr, "drain: client %d: first wrong answer: %s\n", i, x[i].first);
  }
  long failed = all.other, lost = all.lost_proceed + all.unresolved;
  for (int c = 0; c < CODES; c++) failed += all.failed[c], lost += all.lost[c];
  char fw[256], lw[256];
  words(fw, sizeof fw, all.failed, all.other, "library");
  words(lw, sizeof lw, all.lost, all.lost_proceed, "not-PROCEED");
  fprintf(stderr,
          "drain: %d drains (%lld, %lld, %lld, %lld ms) under %d clients: %ld calls answered, %ld "
          "ok; failed %ld%s; answer lost %ld%s\n",
          DRAINS, (long long)drain_ms[0], (long long)drain_ms[1], (long long)drain_ms[2],
          (long long)drain_ms[3], CLIENTS, all.calls, all.ok, failed, fw, lost, lw);
  cr_expect_gt(all.ok, 200, "the clients were served");
  cr_expect_eq(failed, 0, "no call failed with an error a retry would have absorbed:%s", fw);
  /* A lost answer: CI saw about 1 in 6,000-9,500 calls (a try that acted, ABORTED "in
   * progress" on its repeat). Traced (docs/internals.md, "The drain"): a group handed over (a
   * SIGTERM's resign, the balancer's yield after a restart) with step commits in flight, which
   * the new leader's fence ended mid-commit. The fence now lets them end first. */
  cr_expect_eq(lost, 0,
               "no answer lost (outcome unknown, a fresh key not PROCEED, a resolve not FAILED):%s "
               "unresolved %ld",
               lw, all.unresolved);
  h_groups_stop(&cl);
  for (int i = 0; i < 2; i++) {
    if (failed || lost)
      fprintf(stderr, "drain: node %d's log kept in %s\n", i, cl.node[i].log_path);
    else
      unlink(cl.node[i].log_path);
  }
}

/* A client idle on its connection while the node drains: the GOAWAY of the node's gRPC shutdown
 * sits unread on that connection (libidem polls it only while a call is in flight). Its next call
 * is not written on that connection: a server whose gRPC core has begun its shutdown ends such a
 * call CANCELLED, never handled (a lost try: the step helper ends STEP_UNKNOWN, the outcome
 * unknown). libidem reads the GOAWAY first, finds the drained node's listener closed, and knows
 * that nothing was sent. */
Test(drain, an_idle_clients_next_call_is_not_lost, .timeout = 60) {
  srv s;
  h_srv_start(&s, NULL, NULL);
  idem_client *c = h_client(&s, "drain-idle", 1000);
  char gid[64];
  snprintf(gid, sizeof gid, "idle-%d-%lld", (int)getpid(), (long long)h_now_ms());
  idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  int rc = idem_step_begin(c, &k, NULL, 0, 0, &b, &e);
  idem_begin_clear(&b);
  cr_assert_eq(rc, IDEM_OK, "the first call is answered: %d %s", rc, e.message);
  /* the drain: gRPC's shutdown closes the listener and sends the client's connection a GOAWAY */
  cr_assert_eq(kill(s.pid, SIGTERM), 0);
  bool closed = false;
  for (int64_t end = h_now_ms() + 10000; !(closed = !h_port_open(s.port)) && h_now_ms() < end;)
    h_sleep_ms(5);
  cr_assert(closed, "the draining node closed its listener within 10 s");
  k.operation = "refund"; /* a fresh key, no policy: fail-closed */
  idem_run_options ro = {.deadline_ms = 1000};
  idem_run_report rep = {0};
  h_action a = {.code = 200};
  rc = idem_step_run(c, &k, NULL, 0, h_action_run, &a, &ro, &rep, &e);
  idem_run_report_clear(&rep);
  fprintf(stderr, "drain: the idle client's step run after the GOAWAY: %s: %s (outcome %s)\n",
          idem_strerror(rc), e.message, e.outcome_unknown ? "unknown" : "known");
  cr_expect(rc == IDEM_UNAVAILABLE || rc == IDEM_DEADLINE_EXCEEDED,
            "no node is left to answer, and no try was lost (STEP_UNKNOWN): %s: %s",
            idem_strerror(rc), e.message);
  cr_expect(!e.outcome_unknown, "the call reached no coordinator, so its outcome is known: %s",
            e.message);
  cr_expect_eq(a.calls, 0, "the action did not run");
  idem_close(c);
  int st = spawn_wait(s.pid, 20000);
  s.pid = 0;
  cr_expect_eq(st, 0, "the node drained and exited 0 (status %d)", st);
}

/* ResolveStep on key with client c: its status code, the error in *e. */
static int resolve_once(idem_client *c, const idem_step_key *k, idem_error *e) {
  idem_resolution res = {IDEM_OUTCOME_FAILED, 409, "no", 2, "drain test", "ops"};
  return idem_step_resolve(c, k, &res, NULL, e);
}

/* A node that resigned and knows no leader yet (an election under way: here, none comes) answers
 * no-leader without naming one, and its client backs off (up to 500 ms, in libidem and every
 * SDK) before it calls again, maybe this node. The node keeps answering for that long after its
 * last such answer before gRPC's shutdown: a call that came after the shutdown began would be
 * ended CANCELLED unhandled (a lost try) or find the node gone. With only the quiet period
 * (150 ms since the last call) it had shut down by the client's next try. */
Test(drain, a_client_told_no_leader_is_answered_after_its_backoff, .timeout = 60) {
  h_fixture f;
  h_fixture_start(&f, &(h_fixture_conf){.etcd = true, .deadline_ms = 100, .any_exit = true});
  char gid[64];
  snprintf(gid, sizeof gid, "noleader-%d-%lld", (int)getpid(), (long long)h_now_ms());
  idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD};
  idem_error e = {0};
  int rc = resolve_once(f.c, &k, &e);
  cr_assert_eq(rc, IDEM_NOT_FOUND, "the leader answers first: %s %s", idem_strerror(rc),
               e.message);
  cr_assert_eq(kill(f.s.pid, SIGTERM), 0);
  /* the node resigns: with no other node, no leader is known, and it answers no-leader */
  int64_t end = h_now_ms() + 5000;
  while ((rc = resolve_once(f.c, &k, &e)) != IDEM_UNAVAILABLE || strcmp(e.reason, "no-leader")) {
    cr_assert(h_now_ms() < end, "the draining node answers no-leader (last: %s %s '%s')",
              idem_strerror(rc), e.reason, e.message);
    h_sleep_ms(5);
  }
  h_sleep_ms(450); /* a client's backoff after no-leader, within the 500 ms they draw from */
  rc = resolve_once(f.c, &k, &e);
  fprintf(stderr, "drain: a try 450 ms after a no-leader answer: %s reason '%s': %s\n",
          idem_strerror(rc), e.reason, e.message);
  cr_expect(rc == IDEM_UNAVAILABLE && strcmp(e.reason, "no-leader") == 0,
            "the node still answers (no-leader), its gRPC not shut down: %s reason '%s': %s",
            idem_strerror(rc), e.reason, e.message);
  int st = spawn_wait(f.s.pid, 20000);
  f.s.pid = 0;
  cr_expect_eq(st, 0, "the node drained and exited 0 (status %d)", st);
  h_fixture_stop(&f);
}
