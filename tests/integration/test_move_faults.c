/* test_move_faults.c — a move of slots 0-15 from g1 to g2 (docs/api.md §18) with a failure
 * injected in each phase, while clients run pairs on g1's slots. The driver is held in the phase
 * (IDEM_TEST_MOVE_HOLD=PHASE:MS, a test hook of the server) so that the failure lands there:
 *  - the driver (g1's leader) killed -9 in copying, blocked and switched;
 *  - etcd killed and restarted in copying, blocked and switched;
 *  - the source's or the target's PostgreSQL failed over to its streaming standby (a server of
 *    its own and its standby, scripts/pgctl; the group's --store names both hosts with
 *    target_session_attrs=read-write): the source in copying and switched, the target in
 *    copying.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "groups.h"
#include "harness.h"
#include "moves.h"
#include "spawn.h"

#define FROM 0
#define TO 15
#define HOLD_MS 1500

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

/* A PostgreSQL primary and its streaming standby in a directory of their own, for one group. */
typedef struct pg_pair {
  char dir[64], a[96], b[96];
  int port_a, port_b;
  char url[256]; /* both hosts, read-write: the group's --store URL */
} pg_pair;

static void pgctl(const char *const *argv) {
  const char *full[8] = {h_env("IDEM_TEST_PGCTL")};
  for (int i = 0; argv[i] && i < 6; i++) full[i + 1] = argv[i];
  cr_assert_eq(spawn_run(full, NULL, 120000), 0, "pgctl %s %s failed", argv[0], argv[1]);
}

static void pair_start(pg_pair *p, const char *db) {
  snprintf(p->dir, sizeof p->dir, "/tmp/idem-move-pg.XXXXXX");
  cr_assert(mkdtemp(p->dir));
  chmod(p->dir, 0755);
  snprintf(p->a, sizeof p->a, "%s/a", p->dir);
  snprintf(p->b, sizeof p->b, "%s/b", p->dir);
  p->port_a = h_free_port();
  p->port_b = h_free_port();
  char pa[16], pb[16];
  snprintf(pa, sizeof pa, "%d", p->port_a);
  snprintf(pb, sizeof pb, "%d", p->port_b);
  pgctl((const char *[]){"init", p->a, pa, NULL});
  char sql[128], admin[128];
  snprintf(admin, sizeof admin, "postgresql://postgres@127.0.0.1:%d/postgres", p->port_a);
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", db);
  PGconn *c = pgx_connect(admin);
  PQclear(pgx_run(c, sql, 0, NULL));
  PQfinish(c);
  pgctl((const char *[]){"standby", pa, p->b, pb, NULL});
  snprintf(p->url, sizeof p->url,
           "postgresql://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?target_session_attrs=read-write",
           p->port_a, p->port_b, db);
}

/* The primary stops; its standby is promoted (a new timeline; no logical slot comes along). */
static void pair_fail_over(pg_pair *p) {
  pgctl((const char *[]){"stop", p->a, NULL});
  pgctl((const char *[]){"promote", p->b, NULL});
}

static void pair_stop(pg_pair *p) {
  pgctl((const char *[]){"stop", p->a, NULL});
  pgctl((const char *[]){"stop", p->b, NULL});
  const char *rm[] = {"/bin/rm", "-rf", p->dir, NULL};
  spawn_run(rm, NULL, 60000);
}

static void run_case(const fault_case *fc) {
  char hold[64];
  snprintf(hold, sizeof hold, "IDEM_TEST_MOVE_HOLD=%s:%d", fc->phase, HOLD_MS);
  h_groups cl;
  memset(&cl, 0, sizeof cl);
  pg_pair pair;
  int failing = strcmp(fc->fault, "source-failover") == 0   ? 0
                : strcmp(fc->fault, "target-failover") == 0 ? 1
                                                            : -1;
  const char *urls[2] = {NULL, NULL};
  if (failing >= 0) {
    pair_start(&pair, failing ? "idem_move_g2" : "idem_move_g1");
    urls[failing] = pair.url;
  }
  h_groups_start_on(&cl, (const char *[]){hold, NULL}, urls);
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
  int64_t t0 = h_now_ms();
  cr_assert(wait_phase(&cl, other, fc->phase), "the move reached %s", fc->phase);
  int64_t t_phase = h_now_ms();
  h_sleep_ms(200); /* inside the hold: the phase's own work is done */
  if (strcmp(fc->fault, "kill-driver") == 0) {
    kill(cl.node[driver].pid, SIGKILL);
    waitpid(cl.node[driver].pid, NULL, 0);
    cl.node[driver].pid = 0;
  } else if (failing >= 0) {
    pair_fail_over(&pair);
  } else {
    etcd_kill(&cl.etcd);
    h_sleep_ms(1000);
    etcd_restart(&cl.etcd);
  }
  int64_t t_fault = h_now_ms();
  /* the move ends: no move in the map, as a live node sees it */
  bool ended = false;
  for (int64_t until = h_now_ms() + 60000; !ended && h_now_ms() < until; h_sleep_ms(100)) {
    Idem__V1__Topology *t = h_topology(&cl, other);
    ended = t && !t->move;
    if (t) idem__v1__topology__free_unpacked(t, NULL);
  }
  cr_assert(ended, "the move ended (%s in %s)", fc->fault, fc->phase);
  int64_t t_end = h_now_ms();
  atomic_store(&T.stop, true);
  pthread_join(th, NULL);
  pthread_join(mt, NULL);
  /* its result, asked again: finished or rolled back */
  move_answer r = h_move_slots(&cl, other, FROM, TO, "g2", "faulted", false);
  bool finished = r.status == 0, rolled_back = r.status == 10 && strstr(r.details, "rolled back");
  cr_assert(finished || rolled_back, "%s in %s: %d %s", fc->fault, fc->phase, r.status, r.details);
  cr_log_info("%s in %s: %s (%s); phase after %lld ms, fault %lld ms, ended %lld ms later",
              fc->fault, fc->phase, finished ? "finished" : "rolled back", r.details,
              (long long)(t_phase - t0), (long long)(t_fault - t_phase),
              (long long)(t_end - t_fault));
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
  if (failing >= 0) pair_stop(&pair);
}

ParameterizedTestParameters(move_faults, each_failure_in_each_phase) {
  static fault_case cases[] = {
      {"copying", "kill-driver"},  {"blocked", "kill-driver"},  {"switched", "kill-driver"},
      {"copying", "etcd-restart"}, {"blocked", "etcd-restart"}, {"switched", "etcd-restart"},
      {"copying", "source-failover"}, {"switched", "source-failover"},
      {"copying", "target-failover"},
  };
  return cr_make_param_array(fault_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(fault_case *fc, move_faults, each_failure_in_each_phase, .timeout = 240) {
  run_case(fc);
}
