/* test_groups.c — slot groups (docs/api.md §17): two store groups (a database each on the test
 * Postgres), two coordinators elected through a private etcd.
 *  - every saga's steps land in its slot's group only (checked in each store with SQL), and
 *    BeginSaga's global id has its request id's slot;
 *  - the two nodes lead one group each; a call to the wrong node answers UNAVAILABLE with
 *    idem-leader and idem-group and stores nothing, and libidem follows the redirect;
 *  - kill -9 of one node under load: the other leads both groups within TTL + 1 s, with no
 *    PROCEED after an acknowledged completion and no acknowledged completion lost;
 *  - a paused leader of g1 is fenced in g1's store (its fence raised past its epoch) while g2's
 *    fence does not move, and once resumed it answers nothing of g1;
 *  - another --slots, or groups other than the map's: exit 2 naming it, nothing in etcd.
 * libidem's routing by the topology, the group labels of /metrics and following a newer map are
 * test_groups_topology.c's.
 * The cluster and the slot function (computed independently of the server, FNV-1a 64 by hand)
 * are tests/support/groups.h's. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "groups.h"
#include "harness.h"
#include "pbenc.h"

#define SLOTS H_GROUPS_SLOTS /* g1 serves 0-31, g2 32-63 (equal ranges in the order named) */
#define TTL_S H_GROUPS_TTL_S
#define COORD "/idem.v1.Coordinator/"

static void wait_balanced(const h_groups *cl) {
  h_groups_wait_balanced(cl, h_groups_answering_leader);
}

/* Rows of tenant t in database url whose global id is of group g, and those that are not. */
static void count_rows(const char *url, const char *table, const char *t, int g, long *mine,
                       long *other) {
  PGconn *pc = PQconnectdb(url);
  cr_assert_eq(PQstatus(pc), CONNECTION_OK);
  char sql[200];
  snprintf(sql, sizeof sql, "SELECT global_id, coalesce(slot, -1) FROM %s WHERE tenant = $1",
           table);
  const char *params[] = {t};
  PGresult *r = PQexecParams(pc, sql, 1, NULL, params, NULL, NULL, 0);
  cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(pc));
  *mine = *other = 0;
  for (int i = 0; i < PQntuples(r); i++) {
    cr_expect_eq(atoi(PQgetvalue(r, i, 1)), (int)h_groups_slot_of(t, PQgetvalue(r, i, 0)),
                 "%s: the row's slot column is its saga's slot", table);
    if (h_groups_group_of(t, PQgetvalue(r, i, 0)) == g)
      (*mine)++;
    else
      (*other)++;
  }
  PQclear(r);
  PQfinish(pc);
}

Test(groups, steps_land_in_their_slots_group_and_each_node_leads_one, .timeout = 120) {
  h_groups cl;
  h_groups_start(&cl, false);
  wait_balanced(&cl);
  char both[160];
  snprintf(both, sizeof both, "%s,%s", cl.node[0].addr, cl.node[1].addr);
  idem_client *c = h_groups_client(&cl, both);
  enum { SAGAS = 40 };
  int per_group[2] = {0, 0};
  for (int i = 0; i < SAGAS; i++) {
    char rid[32], gid[IDEM_GLOBAL_ID_MAX + 1];
    snprintf(rid, sizeof rid, "req-%d", i);
    idem_error e = {0};
    cr_assert_eq(idem_saga_begin(c, rid, "order", NULL, 0, gid, NULL, NULL, &e), IDEM_OK, "%s",
                 e.message);
    cr_assert_eq(h_groups_slot_of(cl.t, gid), h_groups_slot_of(cl.t, rid),
                 "BeginSaga's global id %s has the slot of its request id %s", gid, rid);
    per_group[h_groups_group_of(cl.t, gid)]++;
    idem_step_key k = {gid, "payments", "charge", IDEM_FORWARD};
    idem_begin b = {0};
    cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
    cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
    cr_assert_eq(
        idem_step_complete(c, &k, b.attempt, IDEM_OUTCOME_SUCCEEDED, 200, "ok", 2, NULL, &e),
        IDEM_OK, "%s", e.message);
    idem_begin_clear(&b);
  }
  cr_assert(per_group[0] > 0 && per_group[1] > 0, "40 request ids fall in both groups (%d, %d)",
            per_group[0], per_group[1]);
  for (int g = 0; g < 2; g++) {
    long mine, other;
    count_rows(cl.url[g], "idem_steps", cl.t, g, &mine, &other);
    cr_expect_eq(mine, per_group[g], "g%d holds its %d sagas' steps (has %ld)", g + 1, per_group[g],
                 mine);
    cr_expect_eq(other, 0, "g%d holds %ld steps of the other group", g + 1, other);
    count_rows(cl.url[g], "idem_sagas", cl.t, g, &mine, &other);
    cr_expect_eq(mine, per_group[g]);
    cr_expect_eq(other, 0);
  }
  idem_close(c);
  h_groups_stop(&cl);
}

Test(groups, a_wrong_group_call_redirects_and_does_nothing, .timeout = 120) {
  h_groups cl;
  h_groups_start(&cl, false);
  wait_balanced(&cl);
  int l1 = h_groups_answering_leader(&cl, 0), other = 1 - l1; /* other leads g2, not g1 */
  char gid[64];
  h_groups_id_in_group(cl.t, 0, "wrong", gid, sizeof gid);
  pbuf *req = pb_sub(pb_new(), 1, pb_key(gid, "payments", "charge", 1));
  char details[256], grp[32] = "", reason[32] = "", leader[128] = "";
  int st = h_raw_call_trailer(cl.node[other].addr, COORD "BeginStep", cl.t, req->b, req->n, details,
                              sizeof details, "idem-group", grp, sizeof grp);
  cr_assert_eq(st, 14, "UNAVAILABLE from the node that does not lead g1: %d %s", st, details);
  cr_expect_str_eq(grp, "g1");
  h_raw_call_trailer(cl.node[other].addr, COORD "BeginStep", cl.t, req->b, req->n, details,
                     sizeof details, "idem-leader", leader, sizeof leader);
  cr_expect_str_eq(leader, cl.node[l1].addr, "idem-leader names g1's leader");
  h_raw_call_trailer(cl.node[other].addr, COORD "BeginStep", cl.t, req->b, req->n, details,
                     sizeof details, "idem-reason", reason, sizeof reason);
  cr_expect_str_eq(reason, "not-leader");
  pb_free(req);
  long mine, oth;
  for (int g = 0; g < 2; g++) {
    count_rows(cl.url[g], "idem_steps", cl.t, g, &mine, &oth);
    cr_expect_eq(mine + oth, 0, "nothing stored in g%d", g + 1);
  }
  /* libidem given only the wrong node follows idem-leader */
  idem_client *c = h_groups_client(&cl, cl.node[other].addr);
  idem_step_key k = {gid, "payments", "charge", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_expect_eq(b.decision, IDEM_DECISION_PROCEED);
  idem_begin_clear(&b);
  count_rows(cl.url[0], "idem_steps", cl.t, 0, &mine, &oth);
  cr_expect_eq(mine, 1, "the step is in g1");
  idem_close(c);
  h_groups_stop(&cl);
}

/* --- kill -9 of one node under load --- */

enum { KEYS = 4000, WORKERS = 4 };

typedef struct load {
  h_groups *cl;
  char addrs[160];
  atomic_int next;
  atomic_bool stop;
  atomic_int acked[KEYS];     /* CompleteStep answered OK */
  atomic_int after_ack[KEYS]; /* a PROCEED seen after that */
  atomic_long ok, failed;
} load;

/* A load thread. It asserts nothing (criterion's asserts belong to the test's own thread): a
 * client that cannot connect shows as no pairs done. */
static void *worker(void *arg) {
  load *L = arg;
  idem_options o = {.address = L->addrs, .tenant = L->cl->t, .deadline_ms = 3000};
  idem_client *c = NULL;
  idem_error ce = {0};
  if (idem_connect(&o, &c, &ce) != IDEM_OK) return NULL;
  while (!atomic_load(&L->stop)) {
    int i = atomic_fetch_add(&L->next, 1) % KEYS;
    char gid[32];
    snprintf(gid, sizeof gid, "k-%d", i);
    idem_step_key k = {gid, "payments", "charge", IDEM_FORWARD};
    idem_begin b = {0};
    idem_error e = {0};
    int was_acked = atomic_load(&L->acked[i]);
    if (idem_step_begin(c, &k, NULL, 0, 0, &b, &e) != IDEM_OK) {
      atomic_fetch_add(&L->failed, 1);
      continue;
    }
    if (b.decision == IDEM_DECISION_PROCEED) {
      if (was_acked) atomic_fetch_add(&L->after_ack[i], 1);
      if (idem_step_complete(c, &k, b.attempt, IDEM_OUTCOME_SUCCEEDED, 200, gid, strlen(gid), NULL,
                             &e) == IDEM_OK) {
        atomic_store(&L->acked[i], 1);
        atomic_fetch_add(&L->ok, 1);
      } else {
        atomic_fetch_add(&L->failed, 1);
      }
    } else {
      atomic_fetch_add(&L->ok, 1);
    }
    idem_begin_clear(&b);
  }
  idem_close(c);
  return NULL;
}

Test(groups, kill_one_node_the_other_leads_both, .timeout = 180) {
  h_groups cl;
  h_groups_start(&cl, false);
  wait_balanced(&cl);
  load *L = calloc(1, sizeof *L);
  L->cl = &cl;
  snprintf(L->addrs, sizeof L->addrs, "%s,%s", cl.node[0].addr, cl.node[1].addr);
  pthread_t th[WORKERS];
  for (int i = 0; i < WORKERS; i++) pthread_create(&th[i], NULL, worker, L);
  H_WAIT(atomic_load(&L->ok) >= 300, 20000, "load runs before the kill: 300 pairs");
  kill(cl.node[0].pid, SIGKILL);
  waitpid(cl.node[0].pid, NULL, 0);
  int64_t killed = h_now_ms();
  cl.node[0].pid = 0;
  H_WAIT(h_groups_answering_leader(&cl, 0) == 1 && h_groups_answering_leader(&cl, 1) == 1, 15000,
         "the survivor (node 1) leads both groups after node 0's kill -9");
  int64_t both = h_now_ms() - killed;
  long ok_at_failover = atomic_load(&L->ok);
  H_WAIT(atomic_load(&L->ok) >= ok_at_failover + 300, 20000,
         "300 more pairs acknowledged after the failover");
  atomic_store(&L->stop, true);
  for (int i = 0; i < WORKERS; i++) pthread_join(th[i], NULL);
  fprintf(stderr,
          "groups failover: the survivor led both groups %lld ms after kill -9 (TTL %d s)\n",
          (long long)both, TTL_S);
  H_EXPECT_TIMING(both <= TTL_S * 1000 + 1000, "within the TTL + 1 s: %lld ms", (long long)both);
  /* every acknowledged completion is still there; none was followed by a PROCEED */
  idem_client *c = h_groups_client(&cl, cl.node[1].addr);
  int lost = 0, dup = 0, acked = 0;
  for (int i = 0; i < KEYS; i++) {
    dup += atomic_load(&L->after_ack[i]);
    if (!atomic_load(&L->acked[i])) continue;
    acked++;
    char gid[32];
    snprintf(gid, sizeof gid, "k-%d", i);
    idem_step_key k = {gid, "payments", "charge", IDEM_FORWARD};
    idem_begin b = {0};
    idem_error e = {0};
    int rc = idem_step_begin(c, &k, NULL, 0, 0, &b, &e);
    if (rc != IDEM_OK || b.decision != IDEM_DECISION_REPLAY || b.result.body_len != strlen(gid) ||
        memcmp(b.result.body, gid, b.result.body_len) != 0)
      lost++;
    idem_begin_clear(&b);
  }
  fprintf(stderr, "groups failover: %d keys acknowledged, %d lost, %d PROCEED after an ack\n",
          acked, lost, dup);
  cr_expect_gt(acked, 300);
  cr_expect_eq(lost, 0);
  cr_expect_eq(dup, 0);
  idem_close(c);
  free(L);
  h_groups_stop(&cl);
}

/* --- fencing per group --- */

static long long fence_of(const h_groups *cl, int g) {
  return pgx_sql(cl->url[g], "SELECT epoch FROM idem_fence WHERE id = 1", 0, NULL);
}

Test(groups, a_paused_leader_is_fenced_in_its_groups_store_only, .timeout = 120) {
  h_groups cl;
  h_groups_start(&cl, false);
  wait_balanced(&cl);
  int a = h_groups_answering_leader(&cl, 0), b = 1 - a; /* a leads g1, b leads g2 */
  long long f1 = fence_of(&cl, 0), f2 = fence_of(&cl, 1);
  cr_assert_gt(f1, 0);
  cr_assert_gt(f2, 0);
  kill(cl.node[a].pid, SIGSTOP);
  char grp[32];
  bool took;
  H_WAITED(took, h_groups_probe(&cl, b, 0, grp, sizeof grp) == 5, 4 * TTL_S * 1000 + 5000);
  long long f1_after = fence_of(&cl, 0), f2_after = fence_of(&cl, 1);
  kill(cl.node[a].pid, SIGCONT);
  cr_assert(took, "the other node took g1 while node %d was paused", a);
  cr_expect_gt(f1_after, f1, "g1's store fences the paused leader's epoch %lld (now %lld)", f1,
               f1_after);
  cr_expect_eq(f2_after, f2, "g2's store is untouched");
  /* resumed, the old leader of g1 serves nothing of g1: its term ran out while it was paused */
  cr_expect_eq(h_groups_probe(&cl, a, 0, grp, sizeof grp), 14,
               "no answer for g1 from the old leader");
  cr_expect_str_eq(grp, "g1");
  h_groups_stop(&cl);
}

/* --- refusals at start --- */

/* Runs the coordinator with args until it exits (30 s): its exit status; its log into log. */
static int run_node(const char *const *args, char *log, size_t cap) {
  srv s;
  (void)s;
  char path[] = "/tmp/idem-groups-start-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  const char *argv[24];
  int n = 0;
  argv[n++] = h_env("IDEM_COORDINATOR_BIN");
  argv[n++] = "--listen";
  char listen[32];
  snprintf(listen, sizeof listen, "127.0.0.1:%d", h_free_port());
  argv[n++] = listen;
  for (int i = 0; args[i]; i++) argv[n++] = args[i];
  argv[n] = NULL;
  int st = spawn_run(argv, &(spawn_opts){.log = path}, 30000);
  FILE *f = fopen(path, "r");
  size_t got = f ? fread(log, 1, cap - 1, f) : 0;
  log[got] = '\0';
  if (f) fclose(f);
  unlink(path);
  return st;
}

Test(groups, another_slot_count_or_other_groups_exit_2_naming_it, .timeout = 120) {
  h_groups cl;
  h_groups_start(&cl, false);
  char log[8192];
  const char *slots[] = {"--store",   cl.store[0], "--store", cl.store[1], "--etcd",
                         cl.etcd.url, "--slots",   "32",      NULL};
  cr_expect_eq(run_node(slots, log, sizeof log), 2, "%s", log);
  cr_expect(strstr(log, "--slots 32") && strstr(log, "created with 64 slots"), "%s", log);
  char g3[300];
  snprintf(g3, sizeof g3, "g3=%s", cl.url[1]);
  const char *groups[] = {"--store",   cl.store[0], "--store", g3,  "--etcd",
                          cl.etcd.url, "--slots",   "64",      NULL};
  cr_expect_eq(run_node(groups, log, sizeof log), 2, "%s", log);
  /* the database of g2 given as g3: refused by the owner check (the database records g2),
   * before the slot map's check would */
  cr_expect(strstr(log, "group g2, which this node is not given") ||
                strstr(log, "is this cluster's database of group g2"),
            "%s", log);
  /* the running cluster is untouched: both groups still led */
  cr_expect_geq(h_groups_answering_leader(&cl, 0), 0);
  cr_expect_geq(h_groups_answering_leader(&cl, 1), 0);
  h_groups_stop(&cl);
}

Test(groups, a_bad_store_exits_2_and_writes_nothing_to_etcd, .timeout = 120) {
  etcd_proc e;
  etcd_start(&e);
  char log[8192];
  const char *unresolvable[] = {"--store", "g1=postgresql://postgres@no-such-host.invalid/x",
                                "--store", "g2=postgresql://postgres@127.0.0.1:1/x",
                                "--etcd",  e.url,
                                NULL};
  cr_expect_eq(run_node(unresolvable, log, sizeof log), 2, "%s", log);
  cr_expect(strstr(log, "group=g1") || strstr(log, "\"group\":\"g1\""), "names the group: %s", log);
  cr_expect(strstr(log, "no-such-host.invalid"), "names the host: %s", log);
  const char *bad_name[] = {"--store", "g/1=dbname=x", "--etcd", e.url, NULL};
  cr_expect_eq(run_node(bad_name, log, sizeof log), 2, "%s", log);
  cr_expect(strstr(log, "--store g/1"), "%s", log);
  cr_expect_eq(etcd_count_prefix(&e, "/idem/"), 0, "nothing written to etcd");
  etcd_stop(&e);
}
