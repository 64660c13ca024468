/* test_moves.c — moving slots between groups (docs/api.md §18) on a two-group cluster
 * (tests/support/groups.h: g1 serves slots 0-31, g2 32-63), with real PostgreSQL logical
 * replication between the two databases:
 *  - half of g1's slots move to g2 while clients run pairs on both halves: every acknowledged
 *    completion is still there (a REPLAY with its body), none PROCEEDs twice, the rows are in
 *    g2's database and gone from g1's, the replication objects are gone, and the same request_id
 *    again answers the first result, replayed; the moved slots' audit rows arrive in g2 although
 *    g2's own audit rows already hold their ids (a target numbers arriving audit rows itself);
 *  - a move whose replication keeps failing (a row of the slots already in the target: the copy
 *    fails on its key) is rolled back, naming the target's log, and nothing moves;
 *  - bad requests are refused naming the field, and nothing moves;
 *  - a dry run counts and changes nothing;
 *  - a move whose driver (g1's leader) is killed -9 while it copies is resumed by g1's next
 *    leader from where the subscription stands (api.md §18) and finishes: the slots
 *    are g2's, the same request_id replays the result, nothing of the move is left, nothing is
 *    lost.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "groups.h"
#include "harness.h"
#include "idem/v1/coordinator.pb-c.h"
#include "moves.h"
#include "spawn.h"

#define FROM 0
#define TO 15 /* half of g1's slots */

/* n steps resolved by hand (an audit row each) in group g, in slots from..to when g is 0. */
static void resolve_some(const h_groups *cl, int g, int n, const char *tag) {
  char both[160];
  snprintf(both, sizeof both, "%s,%s", cl->node[0].addr, cl->node[1].addr);
  idem_client *c = h_groups_client(cl, both); /* libidem routes to each id's group */
  for (int i = 0, k = 0; i < n; k++) {
    char id[48];
    snprintf(id, sizeof id, "%s-%d", tag, k);
    uint32_t slot = h_groups_slot_of(cl->t, id);
    if (h_groups_group_of(cl->t, id) != g || (g == 0 && slot > TO)) continue; /* FROM is 0 */
    idem_step_key key = {id, "audit", "resolve", IDEM_FORWARD};
    idem_begin b = {0};
    idem_error e = {0};
    cr_assert_eq(idem_step_begin(c, &key, NULL, 0, 30000, &b, &e), IDEM_OK, "%s", e.message);
    idem_begin_clear(&b);
    idem_resolution r = {.outcome = IDEM_OUTCOME_SUCCEEDED, .reason = "a move carries my audit"};
    cr_assert_eq(idem_step_resolve(c, &key, &r, NULL, &e), IDEM_OK, "%s", e.message);
    i++;
  }
  idem_close(c);
}

Test(moves, half_a_group_moves_under_traffic_and_nothing_is_lost, .timeout = 240) {
  h_groups cl;
  h_groups_start(&cl, false);
  h_groups_wait_balanced(&cl, NULL);
  /* audit rows on both sides: g2's ids 1-6 are taken when g1's 1-3 arrive */
  resolve_some(&cl, 0, 3, "g1-audit");
  resolve_some(&cl, 1, 6, "g2-audit");
  cr_assert_eq(h_count_rows(cl.url[0], "idem_audit", FROM, TO), 3);
  traffic T = {.cl = &cl};
  T.acked = calloc(ACKED_MAX, sizeof *T.acked);
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, h_traffic_run, &T);
  H_WAIT(atomic_load(&T.pairs) >= 100, 20000, "traffic runs before the move");
  long long in_range = h_count_rows(cl.url[0], "idem_steps", FROM, TO);
  cr_assert_gt(in_range, 0, "g1 holds steps in slots %d-%d", FROM, TO);

  move_answer a = h_move_slots(&cl, 1, FROM, TO, "g2", "move-half", false);
  cr_assert_eq(a.status, 0, "MoveSlots: %d %s", a.status, a.details);
  int pairs_after_move = atomic_load(&T.pairs);
  H_WAIT(atomic_load(&T.pairs) >= pairs_after_move + 100, 20000,
         "traffic goes on against the new owner: 100 pairs after the move");
  atomic_store(&T.stop, true);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  cr_log_info("moved %llu steps, %llu sagas; paused %lld ms; %d pairs, %d errors", (unsigned long long)a.steps,
              (unsigned long long)a.sagas, (long long)a.paused_ms, atomic_load(&T.pairs),
              atomic_load(&T.errors));
  cr_expect_geq(a.steps, (uint64_t)in_range, "every step in range moved");
  cr_expect_geq(a.paused_ms, 0);
  cr_expect_lt(a.paused_ms, 15000);
  cr_expect_eq(atomic_load(&T.dup_proceed), 0, "no fresh key was answered anything but PROCEED");
  cr_expect_eq(atomic_load(&T.errors), 0,
               "every pair of the traffic was begun and completed through the move (the first "
               "errors are logged above)");
  cr_expect_eq(h_lost_results(&cl, &T), 0, "every acknowledged completion replays its body");
  /* the rows live in g2 now, and only there */
  cr_expect_eq(h_count_rows(cl.url[0], "idem_steps", FROM, TO), 0, "g1 deleted the moved steps");
  cr_expect_geq(h_count_rows(cl.url[1], "idem_steps", FROM, TO), in_range, "g2 holds them");
  cr_expect_eq(h_count_rows(cl.url[1], "idem_audit", FROM, TO), 3, "g2 holds their audit rows");
  cr_expect_eq(h_count_rows(cl.url[0], "idem_audit", FROM, TO), 0, "g1 deleted them");
  cr_expect_eq(h_count_rows(cl.url[1], "idem_audit", 32, 63), 6, "g2's own audit rows stay");
  cr_expect_eq(h_move_leftovers(&cl), 0, "no publication, subscription or slot is left");
  for (int n = 0; n < 2; n++) /* both nodes follow the new map */
    H_WAIT(h_slot_is(&cl, n, FROM, "g2"), 5000, "node %d: slot %d is g2's", n, FROM);
  /* /metrics: the driver counted the move finished; no move is under way */
  double finished = 0, phase_on = 0;
  for (int n = 0; n < 2; n++) {
    finished += h_metric(cl.mport[n], "idem_slot_moves_total{result=\"finished\"}");
    phase_on += h_metric(cl.mport[n], "idem_slot_move_phase{phase=\"copying\"}");
  }
  cr_expect_eq(finished, 1, "one node counted the move finished");
  cr_expect_eq(phase_on, 0, "no move in phase copying");
  /* the same request_id again: the first result */
  move_answer again = h_move_slots(&cl, 0, FROM, TO, "g2", "move-half", false);
  cr_expect_eq(again.status, 0, "%s", again.details);
  cr_expect(again.replayed);
  cr_expect_eq(again.version, a.version);
  cr_expect_eq(again.steps, a.steps);
  free(T.acked);
  h_groups_stop(&cl);
}

Test(moves, a_move_whose_replication_keeps_failing_is_rolled_back, .timeout = 180) {
  h_groups cl;
  h_groups_start(&cl, false);
  h_groups_wait_balanced(&cl, NULL);
  resolve_some(&cl, 0, 1, "dup"); /* one step in the moving slots */
  /* the same row in g2's database already, as a botched manual copy would leave it */
  char sh[1200];
  snprintf(sh, sizeof sh,
           "psql -qAtX '%s' -c \"\\copy (SELECT * FROM idem_steps WHERE slot BETWEEN %d AND %d)"
           " TO STDOUT\" | psql -qAtX '%s' -c '\\copy idem_steps FROM STDIN'",
           cl.url[0], FROM, TO, cl.url[1]);
  const char *argv[] = {"/bin/sh", "-c", sh, NULL};
  cr_assert_eq(spawn_run(argv, NULL, 30000), 0, "copied the row: %s", sh);
  cr_assert_eq(h_count_rows(cl.url[1], "idem_steps", FROM, TO), 1);
  move_answer a = h_move_slots(&cl, 1, FROM, TO, "g2", "dup-key", false);
  cr_expect_eq(a.status, 10, "ABORTED: %d %s", a.status, a.details);
  cr_expect(strstr(a.details, "rolled back") && strstr(a.details, "logical replication failed"),
            "names why: %s", a.details);
  cr_expect_str_eq(a.reason, "move-rolled-back", "the reason word (§5): %s", a.details);
  char g[64] = "";
  h_group_of_slot(&cl, 0, FROM, g, sizeof g);
  cr_expect_str_eq(g, "g1", "the slots stay g1's");
  cr_expect_eq(h_count_rows(cl.url[0], "idem_steps", FROM, TO), 1, "g1 keeps its row");
  cr_expect_eq(h_move_leftovers(&cl), 0, "no publication, subscription or slot is left");
  h_groups_stop(&cl);
}

/* A BeginStep, a GetSaga and a BeginSaga with malformed ids, sent to each node. */
static void expect_invalid_everywhere(const h_groups *cl) {
  const char *bad_ids[] = {"bad id!", "tab\there", "x/y"};
  for (int at = 0; at < 2; at++)
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++) {
      Idem__V1__StepKey key = IDEM__V1__STEP_KEY__INIT;
      key.global_id = (char *)bad_ids[i];
      key.service = "payments";
      key.operation = "charge";
      key.phase = IDEM__V1__PHASE__PHASE_FORWARD;
      Idem__V1__BeginStepRequest bs = IDEM__V1__BEGIN_STEP_REQUEST__INIT;
      bs.key = &key;
      Idem__V1__GetSagaRequest gs = IDEM__V1__GET_SAGA_REQUEST__INIT;
      gs.global_id = (char *)bad_ids[i];
      Idem__V1__BeginSagaRequest sg = IDEM__V1__BEGIN_SAGA_REQUEST__INIT;
      char long_rid[300];
      memset(long_rid, 'r', sizeof long_rid - 1);
      long_rid[sizeof long_rid - 1] = '\0';
      sg.request_id = long_rid; /* over 255 */
      struct {
        const char *method, *field;
        const ProtobufCMessage *m;
      } calls[] = {{"/idem.v1.Coordinator/BeginStep", "key.global_id", &bs.base},
                   {"/idem.v1.Coordinator/GetSaga", "global_id", &gs.base},
                   {"/idem.v1.Coordinator/BeginSaga", "request_id", &sg.base}};
      for (size_t k = 0; k < 3; k++) {
        uint8_t buf[1024];
        size_t n = protobuf_c_message_pack(calls[k].m, buf);
        char details[256], reason[64];
        int st = h_raw_call_reason(cl->node[at].addr, calls[k].method, cl->t, buf, n, details,
                                   sizeof details, reason, sizeof reason);
        cr_expect_eq(st, 3, "node %d, %s of '%s': %d %s", at, calls[k].method, bad_ids[i], st,
                     details);
        cr_expect_str_eq(reason, "invalid-argument", "node %d, %s", at, calls[k].method);
        cr_expect(strstr(details, calls[k].field), "names %s: %s", calls[k].field, details);
      }
    }
}

Test(moves, bad_requests_are_refused_naming_the_field_and_nothing_moves, .timeout = 120) {
  h_groups cl;
  h_groups_start(&cl, false);
  h_groups_wait_balanced(&cl, NULL);
  Idem__V1__Topology *before = h_topology(&cl, 0);
  cr_assert(before);
  struct {
    uint32_t from, to;
    const char *group, *rid, *word;
    int status;
  } bad[] = {
      {5, 3, "g2", "r1", "to:", 3},          {0, 64, "g2", "r2", "to:", 3},
      {0, 3, "g9", "r3", "group:", 3},       {0, 3, "g1", "r4", "group:", 3},
      {30, 40, "g2", "r5", "span groups", 3}, {0, 3, "g2", "", "request_id", 3},
      {0, 3, "g2", "a b", "request_id", 3},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    move_answer a = h_move_slots(&cl, 0, bad[i].from, bad[i].to, bad[i].group, bad[i].rid, false);
    cr_expect_eq(a.status, bad[i].status, "case %zu: %d %s", i, a.status, a.details);
    cr_expect(strstr(a.details, bad[i].word), "case %zu names %s: %s", i, bad[i].word, a.details);
  }
  /* input is checked before routing (§5): a malformed global id is INVALID_ARGUMENT on both
   * nodes, whichever group's leader each is, never a redirect to a group */
  expect_invalid_everywhere(&cl);
  /* a dry run counts g1's rows and moves nothing */
  idem_client *c = h_groups_client(&cl, cl.node[0].addr);
  char gid[64];
  h_groups_id_in_group(cl.t, 0, "dry", gid, sizeof gid);
  idem_step_key k = {gid, "payments", "charge", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  char both[160];
  snprintf(both, sizeof both, "%s,%s", cl.node[0].addr, cl.node[1].addr);
  idem_close(c);
  c = h_groups_client(&cl, both);
  cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 30000, &b, &e), IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);
  idem_close(c);
  move_answer d = h_move_slots(&cl, 0, 0, 31, "g2", "dry", true);
  cr_expect_eq(d.status, 0, "%s", d.details);
  cr_expect_eq(d.steps, (uint64_t)h_count_rows(cl.url[0], "idem_steps", 0, 31));
  cr_expect_geq(d.steps, 1);
  Idem__V1__Topology *after = h_topology(&cl, 0);
  cr_assert(after);
  cr_expect_eq(after->version, before->version, "no map version was written");
  cr_expect_null(after->move, "no move under way");
  cr_expect_eq(h_move_leftovers(&cl), 0);
  idem__v1__topology__free_unpacked(before, NULL);
  idem__v1__topology__free_unpacked(after, NULL);
  h_groups_stop(&cl);
}

Test(moves, a_move_whose_driver_is_killed_while_copying_is_resumed_by_the_next_leader,
     .timeout = 240) {
  h_groups cl;
  h_groups_start(&cl, false);
  h_groups_wait_balanced(&cl, NULL);
  traffic T = {0};
  pthread_t th;
  int driver = h_move_under_load(&cl, &T, &th), other = 1 - driver;
  h_bg_move m = {.cl = &cl, .at = 1, .from = FROM, .to = TO, .group = "g2", .rid = "move-killed"};
  h_bg_move_start(&m);
  /* wait until the move is copying, then kill its driver */
  cr_assert(h_wait_move_phase(&cl, other, "copying", 20000), "the move reached copying");
  cr_expect_eq(h_metric(cl.mport[other], "idem_slot_move_phase{phase=\"copying\"}"), 1,
               "/metrics shows the phase");
  kill(cl.node[driver].pid, SIGKILL);
  waitpid(cl.node[driver].pid, NULL, 0);
  cl.node[driver].pid = 0;
  /* g1's next leader resumes the copy and finishes: the move leaves the map */
  cr_assert(h_wait_move_ended(&cl, other, 60000), "the move ended");
  atomic_store(&T.stop, true);
  pthread_join(th, NULL);
  h_bg_move_join(&m);
  char g[64];
  h_group_of_slot(&cl, other, FROM, g, sizeof g);
  cr_expect_str_eq(g, "g2", "slot %d is g2's: the move was resumed, not rolled back", FROM);
  cr_expect_eq(h_metric(cl.mport[other], "idem_slot_moves_total{result=\"finished\"}"), 1,
               "g1's next leader counted the move finished");
  cr_expect_eq(h_metric(cl.mport[other], "idem_slot_moves_total{result=\"rolled_back\"}"), 0,
               "and not rolled back");
  move_answer again = h_move_slots(&cl, other, FROM, TO, "g2", "move-killed", false);
  cr_expect_eq(again.status, 0, "OK: %d %s", again.status, again.details);
  cr_expect(again.replayed, "the result replays");
  cr_expect_gt(again.steps, 0, "the result counts the steps moved");
  cr_expect_eq(h_count_rows(cl.url[0], "idem_steps", FROM, TO), 0, "g1 kept none of the rows");
  cr_expect_gt(h_count_rows(cl.url[1], "idem_steps", FROM, TO), 0, "g2 holds them");
  cr_expect_eq(h_move_leftovers(&cl), 0, "no publication, subscription or slot is left");
  cr_expect_eq(atomic_load(&T.dup_proceed), 0);
  cr_expect_eq(h_lost_results(&cl, &T), 0, "every acknowledged completion replays its body");
  free(T.acked);
  h_groups_stop(&cl);
}

/* Whether node `at` knows group name and some node leads it. */
static bool group_led(const h_groups *cl, int at, const char *name) {
  Idem__V1__Topology *t = h_topology(cl, at);
  bool led = false;
  for (size_t i = 0; t && i < t->n_groups; i++)
    if (strcmp(t->groups[i]->name, name) == 0 && t->groups[i]->leader_address[0]) led = true;
  if (t) idem__v1__topology__free_unpacked(t, NULL);
  return led;
}

/* docs/scaling-out.md, "Adding a group": a third database, every node restarted one at a time
 * with one more --store, then slots moved onto it, while the steps already there stay put. */
Test(moves, a_third_group_joins_a_live_cluster_and_takes_slots, .timeout = 240) {
  h_groups cl;
  h_groups_start(&cl, false);
  h_groups_wait_balanced(&cl, NULL);
  char both[160];
  snprintf(both, sizeof both, "%s,%s", cl.node[0].addr, cl.node[1].addr);
  idem_client *c = h_groups_client(&cl, both);
  enum { N = 20 };
  char ids[N][64];
  for (int i = 0; i < N; i++) { /* finished steps in g1 */
    char tag[16];
    snprintf(tag, sizeof tag, "old%d", i);
    h_groups_id_in_group(cl.t, 0, tag, ids[i], sizeof ids[i]);
    idem_step_key k = {ids[i], "payments", "charge", IDEM_FORWARD};
    idem_begin b = {0};
    idem_error e = {0};
    cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 30000, &b, &e), IDEM_OK, "%s", e.message);
    uint64_t attempt = b.attempt;
    idem_begin_clear(&b);
    cr_assert_eq(idem_step_complete(c, &k, attempt, IDEM_OUTCOME_SUCCEEDED, 0, ids[i],
                                    strlen(ids[i]), NULL, &e),
                 IDEM_OK, "%s", e.message);
  }
  idem_close(c);
  /* 1. a database for g3; 2. each node restarted with --store g3=URL */
  char db3[64], url3[256];
  pgx_db_create("idem_g3", db3, sizeof db3, url3, sizeof url3);
  snprintf(cl.extra, sizeof cl.extra, "g3=%s", url3);
  for (int n = 0; n < 2; n++) {
    cr_assert_eq(h_srv_stop(&cl.node[n]), 0, "node %d drains", n);
    h_groups_node_start(&cl, n);
  }
  H_WAIT(group_led(&cl, 0, "g3") && group_led(&cl, 1, "g3"), 30000, "both nodes know g3's leader");
  /* 3. slots onto it */
  move_answer a = h_move_slots(&cl, 0, FROM, TO, "g3", "to-g3", false);
  cr_assert_eq(a.status, 0, "%d %s", a.status, a.details);
  long long moved = h_count_rows(url3, "idem_steps", FROM, TO);
  cr_expect_eq((long long)a.steps, moved, "g3 holds what the move counted");
  cr_expect_eq(h_count_rows(cl.url[0], "idem_steps", FROM, TO), 0);
  H_WAIT(h_slot_is(&cl, 1, FROM, "g3"), 5000, "node 1: slot %d is g3's", FROM);
  snprintf(both, sizeof both, "%s,%s", cl.node[0].addr, cl.node[1].addr); /* new ports */
  c = h_groups_client(&cl, both); /* every old step replays, wherever it lives now */
  int replayed = 0;
  for (int i = 0; i < N; i++) {
    idem_step_key k = {ids[i], "payments", "charge", IDEM_FORWARD};
    idem_begin b = {0};
    idem_error e = {0};
    int rc = idem_step_begin(c, &k, NULL, 0, 30000, &b, &e);
    if (rc == IDEM_OK && b.decision == IDEM_DECISION_REPLAY && b.result.body_len == strlen(ids[i]))
      replayed++;
    else
      cr_log_error("%s (slot %u): rc %d decision %d %s (%s)", ids[i],
                   h_groups_slot_of(cl.t, ids[i]), rc, b.decision, e.message, e.reason);
    idem_begin_clear(&b);
  }
  idem_close(c);
  cr_expect_eq(replayed, N, "every finished step replays");
  cr_expect_gt(moved, 0, "some of them moved to g3");
  h_groups_stop(&cl);
  pgx_db_drop(db3);
}

/* A node that leads both groups and drives a move out of g2 gives up a group when the other
 * node comes back (the balance rule), but not g2: yielding the source would roll the move back
 * (before, it yielded the last group it led, g2). */
Test(moves, the_balancer_keeps_the_source_of_a_move_driven_here, .timeout = 240) {
  const char *env[] = {"IDEM_TEST_MOVE_HOLD=copying:8000", NULL};
  h_groups cl;
  h_groups_start_env(&cl, env);
  h_groups_wait_balanced(&cl, NULL);
  cr_assert_eq(h_srv_stop(&cl.node[1]), 0, "node 1 drains");
  H_WAIT(h_groups_leader_of(&cl, 0) == 0 && h_groups_leader_of(&cl, 1) == 0, 30000,
         "node 0 leads both groups");
  h_bg_move m = {.cl = &cl, .at = 0, .from = 32, .to = 47, .group = "g1", .rid = "keep-source"};
  h_bg_move_start(&m);
  cr_assert(h_wait_move_phase(&cl, 0, "copying", 20000), "the move reached copying");
  h_groups_node_start(&cl, 1); /* node 0 is over its share now */
  H_WAIT(h_groups_leader_of(&cl, 0) == 1, 30000, "node 0 gave g1 to node 1");
  cr_expect_eq(h_groups_leader_of(&cl, 1), 0, "node 0 kept g2, the move's source");
  h_bg_move_join(&m);
  cr_expect_eq(m.a.status, 0, "the move finished: %d %s", m.a.status, m.a.details);
  char g[64];
  h_group_of_slot(&cl, 1, 32, g, sizeof g);
  cr_expect_str_eq(g, "g1");
  cr_expect_eq(h_move_leftovers(&cl), 0, "no publication, subscription or slot is left");
  h_groups_stop(&cl);
}
