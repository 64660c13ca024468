/* test_move_faults.c — a move of slots 0-15 from g1 to g2 (docs/api.md §18) with a failure
 * injected in each phase, while clients run pairs on g1's slots. The driver is held in the phase
 * (IDEM_TEST_MOVE_HOLD=PHASE:MS, a test hook of the server) so that the failure lands there:
 *  - the driver (g1's leader) killed -9 in copying, blocked and switched;
 *  - etcd killed and restarted in copying, blocked and switched;
 *  - the source's or the target's PostgreSQL failed over to its streaming standby (a server of
 *    its own and its standby, scripts/pgctl; the group's --store names both hosts with
 *    target_session_attrs=read-write), each in copying, blocked and switched.
 * Each case is a test of its own (move_faults/<fault>_in_<phase>, for --filter). The move must
 * end within a minute with the result §18 requires: a failover of either PostgreSQL before the
 * switch rolls back saying so (logical replication slots do not survive it), a killed driver's
 * move in copying is resumed by the source group's next leader and finishes (§18), one
 * in blocked is rolled back by it ("cut short"), and
 * a move found switched is finished whatever failed (the map already names the target); an etcd
 * restart before the switch may end either way (the driver may keep its leadership and go on).
 * Then the slots belong to exactly the group the result says, their rows live in that group's
 * database only, nothing of the replication is left, and the history check holds: every
 * acknowledged completion replays its body and no fresh key was answered anything but PROCEED.
 * Runs in the release build only (label matrix): the same code paths run under the sanitizers
 * in test_moves.c. */
#include <criterion/criterion.h>
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
  const char *phase; /* copying, blocked, switched */
  const char *fault; /* kill-driver, etcd-restart, source-failover, target-failover */
} fault_case;

/* The result §18 requires of a case. */
typedef enum { END_EITHER, END_FINISHED, END_ROLLED_BACK } move_end;

static move_end required_end(const fault_case *fc) {
  if (strcmp(fc->phase, "switched") == 0) return END_FINISHED; /* past the commit point */
  if (strcmp(fc->fault, "etcd-restart") == 0) return END_EITHER;
  /* the driver gone while copying: its successor resumes the copy (the subscription stands) */
  if (strcmp(fc->fault, "kill-driver") == 0 && strcmp(fc->phase, "copying") == 0)
    return END_FINISHED;
  return END_ROLLED_BACK; /* a failover, or the driver gone in the handoff: rolled back */
}

/* Whether a rolled-back move's details say why, as the server words it for this fault: "the
 * source's PostgreSQL failed over (...): logical replication slots do not survive a PostgreSQL 15
 * failover", or "the source's replication slot ... is gone (a failover of its PostgreSQL: logical
 * slots do not survive one in PostgreSQL 15)"; "cut short in phase P" when the driver died. */
static bool says_why(const fault_case *fc, const char *details) {
  if (strstr(fc->fault, "failover"))
    return (strstr(details, "failed over") || strstr(details, "a failover")) &&
           strstr(details, "do not survive");
  char cut[64];
  snprintf(cut, sizeof cut, "cut short in phase %s", fc->phase);
  return strstr(details, cut) != NULL;
}

/* Waits (10 s) until the driver has done the phase's own work and holds (the map names the phase
 * before that work): copying once the target's subscription exists, blocked once the source's
 * block committed (with the move's mark); switched is written after its work. */
static bool wait_held(const h_groups *cl, const char *phase) {
  const char *url = NULL, *sql = NULL;
  if (strcmp(phase, "copying") == 0) {
    url = cl->url[1];
    sql = "SELECT count(*) FROM pg_subscription WHERE subname LIKE 'idem_move_%' AND subdbid ="
          " (SELECT oid FROM pg_database WHERE datname = current_database())";
  } else if (strcmp(phase, "blocked") == 0) {
    url = cl->url[0];
    sql = "SELECT count(*) FROM idem_move_marks";
  } else {
    return true;
  }
  bool held;
  H_WAITED(held, h_sql_count(url, sql) > 0, 10000);
  return held;
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

/* The primary stops; its standby is promoted (a new timeline; no logical slot comes along), not
 * before not_before_ms: the driver's hold has ended by then, so it meets a store that does not
 * answer (a promotion under way), not only the promoted one. */
static void pair_fail_over(pg_pair *p, int64_t not_before_ms) {
  pgctl((const char *[]){"stop", p->a, NULL});
  int64_t left = not_before_ms - h_now_ms();
  if (left > 0) h_sleep_ms(left); /* not a wait: the fault is timed to outlast the driver's hold */
  pgctl((const char *[]){"promote", p->b, NULL});
}

static void pair_stop(pg_pair *p) {
  pgctl((const char *[]){"stop", p->a, NULL});
  pgctl((const char *[]){"stop", p->b, NULL});
  const char *rm[] = {"/bin/rm", "-rf", p->dir, NULL};
  spawn_run(rm, NULL, 60000);
}

/* The case's pair while it runs: a case that fails stops it in pair_fini (its servers would
 * outlive the test otherwise). */
static pg_pair the_pair, *running_pair;

static void pair_fini(void) {
  if (running_pair) pair_stop(running_pair);
  running_pair = NULL;
}

static void run_case(const fault_case *fc) {
  int64_t t_start = h_now_ms();
  char hold[64];
  snprintf(hold, sizeof hold, "IDEM_TEST_MOVE_HOLD=%s:%d", fc->phase, HOLD_MS);
  h_groups cl;
  memset(&cl, 0, sizeof cl);
  pg_pair *pair = &the_pair;
  int failing = strcmp(fc->fault, "source-failover") == 0   ? 0
                : strcmp(fc->fault, "target-failover") == 0 ? 1
                                                            : -1;
  const char *urls[2] = {NULL, NULL};
  if (failing >= 0) {
    pair_start(pair, failing ? "idem_move_g2" : "idem_move_g1");
    running_pair = pair;
    urls[failing] = pair->url;
  }
  h_groups_start_on(&cl, (const char *[]){hold, NULL}, urls);
  h_groups_wait_balanced(&cl, NULL);
  traffic T = {0};
  pthread_t th;
  int driver = h_move_under_load(&cl, &T, &th), other = 1 - driver;
  h_bg_move m = {.cl = &cl, .at = other, .from = FROM, .to = TO, .group = "g2", .rid = "faulted"};
  h_bg_move_start(&m);
  int64_t t0 = h_now_ms();
  cr_assert(h_wait_move_phase(&cl, other, fc->phase, 30000), "the move reached %s", fc->phase);
  cr_assert(wait_held(&cl, fc->phase), "the driver holds in %s", fc->phase);
  int64_t t_phase = h_now_ms();
  if (strcmp(fc->fault, "kill-driver") == 0) {
    kill(cl.node[driver].pid, SIGKILL);
    waitpid(cl.node[driver].pid, NULL, 0);
    cl.node[driver].pid = 0;
  } else if (failing >= 0) {
    pair_fail_over(pair, t_phase + HOLD_MS + 300);
  } else {
    etcd_kill(&cl.etcd);
    h_sleep_ms(1000); /* not a wait: the fault, etcd gone for a second */
    etcd_restart(&cl.etcd);
  }
  int64_t t_fault = h_now_ms();
  /* the move ends: no move in the map, as a live node sees it */
  cr_assert(h_wait_move_ended(&cl, other, 60000), "the move ended (%s in %s)", fc->fault,
            fc->phase);
  int64_t t_end = h_now_ms();
  atomic_store(&T.stop, true);
  pthread_join(th, NULL);
  h_bg_move_join(&m);
  /* its result, asked again: the one §18 requires */
  move_answer r = h_move_slots(&cl, other, FROM, TO, "g2", "faulted", false);
  bool finished = r.status == 0, rolled_back = r.status == 10 && strstr(r.details, "rolled back");
  cr_log_info("%s in %s: %s (%s); phase after %lld ms, fault %lld ms, ended %lld ms later",
              fc->fault, fc->phase, finished ? "finished" : rolled_back ? "rolled back" : "?",
              r.details, (long long)(t_phase - t0), (long long)(t_fault - t_phase),
              (long long)(t_end - t_fault));
  cr_assert(finished || rolled_back, "%s in %s: %d %s", fc->fault, fc->phase, r.status, r.details);
  move_end want = required_end(fc);
  cr_assert(want != END_FINISHED || finished, "%s in %s must finish: %d %s", fc->fault, fc->phase,
            r.status, r.details);
  cr_assert(want != END_ROLLED_BACK || rolled_back, "%s in %s must roll back: %d %s", fc->fault,
            fc->phase, r.status, r.details);
  if (want == END_ROLLED_BACK)
    cr_assert(says_why(fc, r.details), "%s in %s: the answer says why: %s", fc->fault, fc->phase,
              r.details);
  const char *owner = finished ? "g2" : "g1";
  int owner_db = finished ? 1 : 0;
  H_WAIT(h_slot_is(&cl, other, FROM, owner), 5000, "slot %d is %s's, as the result says", FROM,
         owner);
  cr_expect_eq(h_count_rows(cl.url[1 - owner_db], "idem_steps", FROM, TO), 0,
               "the other group's database holds none of the slots' rows");
  cr_expect_gt(h_count_rows(cl.url[owner_db], "idem_steps", FROM, TO), 0);
  cr_expect_eq(h_move_leftovers(&cl), 0, "no publication, subscription or slot is left");
  cr_expect_eq(atomic_load(&T.dup_proceed), 0, "no fresh key was answered anything but PROCEED");
  cr_expect_eq(h_lost_results(&cl, &T), 0, "every acknowledged completion replays its body");
  free(T.acked);
  h_groups_stop(&cl);
  pair_fini();
  cr_log_info("%s in %s: %lld ms in all (cluster up %lld ms, checks and stop %lld ms)", fc->fault,
              fc->phase, (long long)(h_now_ms() - t_start), (long long)(t0 - t_start),
              (long long)(h_now_ms() - t_end));
}

#define FAULT_CASE(NAME, FAULT, PHASE)                               \
  Test(move_faults, NAME##_in_##PHASE, .timeout = 240, .fini = pair_fini) { \
    run_case(&(const fault_case){.phase = #PHASE, .fault = FAULT}); \
  }

FAULT_CASE(kill_driver, "kill-driver", copying)
FAULT_CASE(kill_driver, "kill-driver", blocked)
FAULT_CASE(kill_driver, "kill-driver", switched)
FAULT_CASE(etcd_restart, "etcd-restart", copying)
FAULT_CASE(etcd_restart, "etcd-restart", blocked)
FAULT_CASE(etcd_restart, "etcd-restart", switched)
FAULT_CASE(source_failover, "source-failover", copying)
FAULT_CASE(source_failover, "source-failover", blocked)
FAULT_CASE(source_failover, "source-failover", switched)
FAULT_CASE(target_failover, "target-failover", copying)
FAULT_CASE(target_failover, "target-failover", blocked)
FAULT_CASE(target_failover, "target-failover", switched)
