/* test_move_faults.c — a move of slots 0-15 from g1 to g2 (docs/api.md §18) with a failure
 * injected in each phase, while clients run pairs on g1's slots. The driver is held in the phase
 * (IDEM_TEST_MOVE_HOLD=PHASE:MS, a test hook of the server) so that the failure lands there:
 *  - the driver (g1's leader) killed -9 in copying, blocked and switched;
 *  - etcd killed and restarted in copying, blocked and switched.
 * Each time the move must end, finished or rolled back, within a minute; the slots then belong
 * to exactly the group the result says, their rows live in that group's database only, nothing of
 * the replication is left, and the history check holds: every acknowledged completion replays
 * its body and no fresh key was answered anything but PROCEED.
 * Runs in the release build only (label matrix): the same code paths run under the sanitizers
 * in test_moves.c. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "groups.h"
#include "harness.h"
#include "moves.h"

#define FROM 0
#define TO 15
#define HOLD_MS 4000

typedef struct fault_case {
  char phase[16]; /* copying, blocked, switched */
  char fault[16]; /* kill-driver, etcd-restart */
} fault_case;

typedef struct bg_move {
  const h_groups *cl;
  int at;
  move_answer a;
} bg_move;

static void *bg_move_run(void *arg) {
  bg_move *m = arg;
  m->a = h_move_slots(m->cl, m->at, FROM, TO, "g2", "faulted", false);
  return NULL;
}

/* Waits until node `at` shows the move in phase (30 s). */
static bool wait_phase(const h_groups *cl, int at, const char *phase) {
  for (int64_t until = h_now_ms() + 30000; h_now_ms() < until; h_sleep_ms(20)) {
    Idem__V1__Topology *t = h_topology(cl, at);
    bool in = t && t->move && strcmp(t->move->phase, phase) == 0;
    if (t) idem__v1__topology__free_unpacked(t, NULL);
    if (in) return true;
  }
  return false;
}

static void run_case(const fault_case *fc) {
  char hold[64];
  snprintf(hold, sizeof hold, "IDEM_TEST_MOVE_HOLD=%s:%d", fc->phase, HOLD_MS);
  h_groups cl;
  memset(&cl, 0, sizeof cl);
  h_groups_start_env(&cl, (const char *[]){hold, NULL});
  h_groups_wait_balanced(&cl, NULL);
  traffic T = {.cl = &cl};
  T.acked = calloc(ACKED_MAX, sizeof *T.acked);
  pthread_t th;
  pthread_create(&th, NULL, h_traffic_run, &T);
  for (int64_t until = h_now_ms() + 20000; atomic_load(&T.pairs) < 50 && h_now_ms() < until;)
    h_sleep_ms(20);
  int driver = h_groups_leader_of(&cl, 0);
  cr_assert_geq(driver, 0, "g1 has a leader");
  int other = 1 - driver;
  bg_move m = {.cl = &cl, .at = other};
  pthread_t mt;
  pthread_create(&mt, NULL, bg_move_run, &m);
  cr_assert(wait_phase(&cl, other, fc->phase), "the move reached %s", fc->phase);
  h_sleep_ms(300); /* inside the hold: the phase's own work is done */
  if (strcmp(fc->fault, "kill-driver") == 0) {
    kill(cl.node[driver].pid, SIGKILL);
    waitpid(cl.node[driver].pid, NULL, 0);
    cl.node[driver].pid = 0;
  } else {
    etcd_kill(&cl.etcd);
    h_sleep_ms(1500);
    etcd_restart(&cl.etcd);
  }
  /* the move ends: no move in the map, as a live node sees it */
  bool ended = false;
  for (int64_t until = h_now_ms() + 60000; !ended && h_now_ms() < until; h_sleep_ms(100)) {
    Idem__V1__Topology *t = h_topology(&cl, other);
    ended = t && !t->move;
    if (t) idem__v1__topology__free_unpacked(t, NULL);
  }
  cr_assert(ended, "the move ended (%s in %s)", fc->fault, fc->phase);
  atomic_store(&T.stop, true);
  pthread_join(th, NULL);
  pthread_join(mt, NULL);
  /* its result, asked again: finished or rolled back */
  move_answer r = h_move_slots(&cl, other, FROM, TO, "g2", "faulted", false);
  bool finished = r.status == 0, rolled_back = r.status == 10 && strstr(r.details, "rolled back");
  cr_assert(finished || rolled_back, "%s in %s: %d %s", fc->fault, fc->phase, r.status, r.details);
  cr_log_info("%s in %s: %s (%s)", fc->fault, fc->phase, finished ? "finished" : "rolled back",
              r.details);
  const char *owner = finished ? "g2" : "g1";
  int owner_db = finished ? 1 : 0;
  char g[64] = "";
  for (int64_t until = h_now_ms() + 5000; h_now_ms() < until; h_sleep_ms(100)) {
    h_group_of_slot(&cl, other, FROM, g, sizeof g);
    if (strcmp(g, owner) == 0) break;
  }
  cr_expect_str_eq(g, owner, "slot %d is %s's, as the result says", FROM, owner);
  cr_expect_eq(h_count_rows(cl.url[1 - owner_db], "idem_steps", FROM, TO), 0,
               "the other group's database holds none of the slots' rows");
  cr_expect_gt(h_count_rows(cl.url[owner_db], "idem_steps", FROM, TO), 0);
  cr_expect_eq(h_move_leftovers(&cl), 0, "no publication, subscription or slot is left");
  cr_expect_eq(atomic_load(&T.dup_proceed), 0, "no fresh key was answered anything but PROCEED");
  cr_expect_eq(h_lost_results(&cl, &T), 0, "every acknowledged completion replays its body");
  free(T.acked);
  h_groups_stop(&cl);
}

ParameterizedTestParameters(move_faults, each_failure_in_each_phase) {
  static fault_case cases[] = {
      {"copying", "kill-driver"},  {"blocked", "kill-driver"},  {"switched", "kill-driver"},
      {"copying", "etcd-restart"}, {"blocked", "etcd-restart"}, {"switched", "etcd-restart"},
  };
  return cr_make_param_array(fault_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(fault_case *fc, move_faults, each_failure_in_each_phase, .timeout = 240) {
  run_case(fc);
}
