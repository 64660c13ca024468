/* test_moves_request.c — a MoveSlots request_id names one move (docs/api.md §18), like an
 * idempotency key, on a two-group cluster (tests/support/groups.h: g1 serves slots 0-31,
 * g2 32-63) with real logical replication:
 *  - while the move of a request_id is under way (held in copying by the server's test hook) and
 *    after it ended, the same request_id with another range or target group is refused
 *    FAILED_PRECONDITION, reason request-mismatch, naming the request_id, and nothing moves: the
 *    map's version, the ranges and the rows in both databases stay as they were;
 *  - the same request_id with the same parameters waits for / replays the first result;
 *  - another request while it runs is refused, reason move-in-progress; `idemctl slots` before
 *    the move's first progress reading says "nothing copied yet" (never "lag -1 B").
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "groups.h"
#include "harness.h"
#include "idem/v1/coordinator.pb-c.h"
#include "moves.h"

#define FROM 0
#define TO 3
#define HOLD_MS 4000
#define FAILED_PRECONDITION 9

/* n steps completed in slots FROM..TO (g1's), through both nodes. */
static void steps_in_range(const h_groups *cl, int n) {
  char both[160];
  snprintf(both, sizeof both, "%s,%s", cl->node[0].addr, cl->node[1].addr);
  idem_client *c = h_groups_client(cl, both);
  for (int i = 0, k = 0; i < n; k++) {
    char id[48];
    snprintf(id, sizeof id, "rq-%d", k);
    uint32_t slot = h_groups_slot_of(cl->t, id);
    if (slot > TO) continue; /* FROM is 0 */
    idem_step_key key = {id, "payments", "charge", IDEM_FORWARD};
    idem_begin b = {0};
    idem_error e = {0};
    cr_assert_eq(idem_step_begin(c, &key, NULL, 0, 30000, &b, &e), IDEM_OK, "%s", e.message);
    idem_begin_clear(&b);
    i++;
  }
  idem_close(c);
}

typedef struct bg_move {
  const h_groups *cl;
  move_answer a;
} bg_move;

#define RATE 777 /* the move's throttle, rows/s: its driver logs it */

static void *bg_move_run(void *arg) {
  bg_move *m = arg;
  m->a = h_move_slots_rate(m->cl, 0, FROM, TO, "g2", "rq-move", false, RATE);
  return NULL;
}

/* Whether either node's log has needle. */
static bool in_a_log(const h_groups *cl, const char *needle) {
  for (int i = 0; i < 2; i++) {
    FILE *f = fopen(cl->node[i].log_path, "r");
    char line[2048];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
    if (f) fclose(f);
    if (found) return true;
  }
  return false;
}

/* The request_id "rq-move" with other parameters, from either node: refused, request-mismatch. */
static void expect_mismatches(const h_groups *cl, const char *when) {
  struct {
    uint32_t from, to;
    const char *group;
  } other[] = {{FROM, TO + 1, "g2"}, {FROM + 1, TO, "g2"}, {FROM, TO, "g1"}, {8, 11, "g2"}};
  for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
    move_answer a = h_move_slots(cl, (int)(i % 2), other[i].from, other[i].to, other[i].group,
                                 "rq-move", false);
    cr_expect_eq(a.status, FAILED_PRECONDITION, "%s, case %zu: %d %s", when, i, a.status,
                 a.details);
    cr_expect_str_eq(a.reason, "request-mismatch", "%s, case %zu: %s", when, i, a.details);
    cr_expect(strstr(a.details, "rq-move"), "%s, case %zu names the request_id: %s", when, i,
              a.details);
    /* a dry run is no way around it either */
    move_answer d =
        h_move_slots(cl, (int)(i % 2), other[i].from, other[i].to, other[i].group, "rq-move", true);
    cr_expect_eq(d.status, FAILED_PRECONDITION, "%s, dry run %zu: %d %s", when, i, d.status,
                 d.details);
    cr_expect_str_eq(d.reason, "request-mismatch", "%s, dry run %zu", when, i);
  }
}

/* Whether node `at`'s map carries the move of request rid in phase copying. */
static bool move_copying(const h_groups *cl, int at, const char *rid) {
  Idem__V1__Topology *t = h_topology(cl, at);
  bool yes = t && t->move && strcmp(t->move->request_id, rid) == 0 &&
             strcmp(t->move->phase, "copying") == 0;
  if (t) idem__v1__topology__free_unpacked(t, NULL);
  return yes;
}

Test(moves_request, another_move_under_the_same_request_id_is_refused_the_same_replays,
     .timeout = 240) {
  h_groups cl;
  char hold[64];
  snprintf(hold, sizeof hold, "IDEM_TEST_MOVE_HOLD=copying:%d", HOLD_MS);
  const char *env[] = {hold, NULL};
  h_groups_start_env(&cl, env);
  h_groups_wait_balanced(&cl, NULL);
  steps_in_range(&cl, 4);
  long long g1_rows = h_count_rows(cl.url[0], "idem_steps", FROM, 31);
  long long g1_range = h_count_rows(cl.url[0], "idem_steps", FROM, TO);
  cr_assert_eq(g1_range, 4);

  bg_move m = {.cl = &cl};
  pthread_t th;
  pthread_create(&th, NULL, bg_move_run, &m);
  /* under way: the map carries the move of rq-move */
  H_WAIT_EVERY(50, move_copying(&cl, 1, "rq-move"), 30000, "the move rq-move reaches copying");
  /* held before its first progress reading: idemctl says so, no "lag -1 B" */
  char cmd[512], out[4096] = "";
  snprintf(cmd, sizeof cmd, "%s --addr %s slots 2>&1", IDEMCTL_BIN, cl.node[1].addr);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  pclose(p);
  cr_expect(strstr(out, "moving slots 0-3 from g1 to g2: copying, nothing copied yet"), "%s", out);
  cr_expect(!strstr(out, "-1 B"), "%s", out);
  expect_mismatches(&cl, "under way");
  /* another request while it runs: refused with the listed word (§5), nothing planned */
  for (int at = 0; at < 2; at++) {
    move_answer busy = h_move_slots(&cl, at, 8, 11, "g2", "rq-other", false);
    cr_expect_eq(busy.status, FAILED_PRECONDITION, "node %d: %d %s", at, busy.status,
                 busy.details);
    cr_expect_str_eq(busy.reason, "move-in-progress", "node %d: %s", at, busy.details);
  }
  Idem__V1__Topology *mid = h_topology(&cl, 1);
  cr_assert(mid && mid->move, "still under way after the refusals");
  cr_expect_eq(mid->move->from, FROM);
  cr_expect_eq(mid->move->to, TO);
  cr_expect_str_eq(mid->move->target, "g2");
  idem__v1__topology__free_unpacked(mid, NULL);
  /* the same parameters while it runs: waits for the move's own result */
  move_answer same = h_move_slots(&cl, 1, FROM, TO, "g2", "rq-move", false);
  pthread_join(th, NULL);
  cr_assert_eq(m.a.status, 0, "the move: %d %s", m.a.status, m.a.details);
  cr_expect(!m.a.replayed);
  cr_expect_eq(m.a.steps, (uint64_t)g1_range, "it moved its own range's rows");
  /* the request's max_rows_per_s reached the driver's throttle (its first decision is logged) */
  char rate[64];
  snprintf(rate, sizeof rate, "of %d rows/s", RATE);
  cr_expect(in_a_log(&cl, rate), "a driver's log names the throttle \"%s\"", rate);
  cr_expect_eq(same.status, 0, "%s", same.details);
  cr_expect(same.replayed);
  cr_expect_eq(same.version, m.a.version);

  /* after it ended: the kept result refuses other parameters too, and nothing moves */
  /* node 0 learns the map without the move from its watch, a moment after the answer */
  Idem__V1__Topology *before = NULL;
  H_WAIT_EVERY(20,
               ((before ? idem__v1__topology__free_unpacked(before, NULL) : (void)0),
                (before = h_topology(&cl, 0)) && !before->move),
               10000, "node 0's map drops the move after it ended");
  long long g2_rows = h_count_rows(cl.url[1], "idem_steps", FROM, 63);
  expect_mismatches(&cl, "ended");
  Idem__V1__Topology *after = h_topology(&cl, 0);
  cr_assert(after);
  cr_expect_eq(after->version, before->version, "no map version was written");
  cr_expect_null(after->move, "no move under way");
  cr_expect_eq(after->n_ranges, before->n_ranges);
  for (size_t i = 0; i < after->n_ranges && i < before->n_ranges; i++) {
    cr_expect_eq(after->ranges[i]->from, before->ranges[i]->from);
    cr_expect_eq(after->ranges[i]->to, before->ranges[i]->to);
    cr_expect_str_eq(after->ranges[i]->group, before->ranges[i]->group);
  }
  cr_expect_eq(h_count_rows(cl.url[0], "idem_steps", FROM, 31), g1_rows - g1_range,
               "g1 lost only the moved range");
  cr_expect_eq(h_count_rows(cl.url[1], "idem_steps", FROM, 63), g2_rows, "g2 gained nothing more");
  cr_expect_eq(h_move_leftovers(&cl), 0, "no publication, subscription or slot is left");
  /* the same parameters again: the first result */
  move_answer again = h_move_slots(&cl, 0, FROM, TO, "g2", "rq-move", false);
  cr_expect_eq(again.status, 0, "%s", again.details);
  cr_expect(again.replayed);
  cr_expect_eq(again.version, m.a.version);
  cr_expect_eq(again.steps, m.a.steps);
  idem__v1__topology__free_unpacked(before, NULL);
  idem__v1__topology__free_unpacked(after, NULL);
  h_groups_stop(&cl);
}
