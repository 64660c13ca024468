/* Scenario 2: SIGSTOP the leader for 2 x TTL, then SIGCONT. A standby leads meanwhile; after
 * the new leader's first commit no commit from the old epoch succeeds — no row written by the
 * calls that were waiting in the paused leader's queue is newer than that commit, and a write
 * made directly under the old epoch is refused by the database — and the old leader steps
 * down by itself. */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "idem/v1/coordinator.pb-c.h"

typedef struct old_load {
  cluster *cl;
  int node;
  char tenant[64];
  atomic_bool stop;
  atomic_int next_worker;
  atomic_int ok;            /* calls the old leader answered OK */
  atomic_int returned[4];   /* each worker's calls that returned, answered or not */
  atomic_int ok_after; /* calls the OLD leader acknowledged after the new leader's commit */
  atomic_int_least64_t new_commit_ms;
} old_load;

/* Keeps sending BeginStep to the old leader only, as raw calls (no failover: the library
 * would follow idem-leader to the new leader) with 5 s deadlines, so that calls sit in its
 * queue while it is paused. */
static void *old_worker(void *arg) {
  old_load *L = arg;
  int me = atomic_fetch_add(&L->next_worker, 1);
  while (!atomic_load(&L->stop)) {
    char gid[80];
    h_unique("old", gid, sizeof gid);
    Idem__V1__StepKey k = IDEM__V1__STEP_KEY__INIT;
    k.global_id = gid;
    k.service = (char *)"payment";
    k.operation = (char *)"charge";
    k.phase = IDEM__V1__PHASE__PHASE_FORWARD;
    Idem__V1__BeginStepRequest req = IDEM__V1__BEGIN_STEP_REQUEST__INIT;
    req.key = &k;
    uint8_t buf[512];
    size_t len = idem__v1__begin_step_request__pack(&req, buf);
    int rc = h_raw_call(L->cl->nodes[L->node].addr, "/idem.v1.Coordinator/BeginStep", L->tenant,
                        buf, len, NULL, 0);
    int64_t nc = atomic_load(&L->new_commit_ms);
    if (rc == 0 && nc && h_now_ms() > nc) atomic_fetch_add(&L->ok_after, 1);
    if (rc == 0) atomic_fetch_add(&L->ok, 1);
    atomic_fetch_add(&L->returned[me], 1);
    if (rc != 0) h_sleep_ms(20); /* a refusal answers at once: do not spin */
  }
  return NULL;
}

Test(fault, sigstop_leader_is_fenced, .fini = f_fini, .timeout = 90) {
  static cluster cl; /* static: f_fini may stop it after a failed assertion */
  f_cluster_start(&cl, 2);
  uint64_t e1 = 0;
  int old = f_leader(&cl, &e1);
  cr_assert_geq(old, 0);
  old_load L;
  memset(&L, 0, sizeof L);
  L.cl = &cl;
  L.node = old;
  h_tenant(L.tenant);
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, old_worker, &L);
  H_WAIT(atomic_load(&L.ok) >= 20, 10000, "the leader answered 20 of the callers' BeginSteps");

  int64_t t0 = h_now_ms();
  f_signal(&cl, old, SIGSTOP);
  uint64_t e2 = 0;
  int neu = f_wait_leader(&cl, old, 2 * F_TTL * 1000, &e2);
  int64_t leads = h_now_ms() - t0;
  cr_assert_geq(neu, 0, "no standby took over from the paused leader");
  /* the new leader's first commit */
  idem_client *c = f_client(&cl, neu, L.tenant, 3000);
  char gid[80];
  h_unique("new", gid, sizeof gid);
  idem_error e = {0};
  cr_assert_eq(f_pair(c, gid, &e), IDEM_OK, "%s", e.message);
  int64_t commit_wall =
      pgx_sql(cl.pg_url, "SELECT (extract(epoch from clock_timestamp())*1000)::bigint", 0, NULL);
  atomic_store(&L.new_commit_ms, h_now_ms());
  int64_t left = t0 + 2 * F_TTL * 1000 - h_now_ms();
  if (left > 0) h_sleep_ms(left); /* the fault itself: the leader stays paused for 2 TTLs */
  int in_flight[4]; /* the calls each worker has waiting in the paused leader's queue */
  for (int i = 0; i < 4; i++) in_flight[i] = atomic_load(&L.returned[i]);
  f_signal(&cl, old, SIGCONT);
  int64_t t1 = h_now_ms();
  idem_status st;
  bool stepped;
  H_WAITED(stepped, f_status(&cl, old, &st) && !st.leader, 2000);
  int64_t down = h_now_ms() - t1;
  /* the old leader's queue drains: each worker's call that waited in it has returned (deadline
   * 5 s) */
  for (int i = 0; i < 4; i++)
    H_WAIT(atomic_load(&L.returned[i]) > in_flight[i], 10000,
           "worker %d's call queued at the paused leader returned after SIGCONT", i);
  atomic_store(&L.stop, true);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);

  /* no write of the old leader's calls committed after the new leader's first commit */
  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM idem_steps WHERE tenant = '%s' AND global_id LIKE 'old-%%'"
           " AND updated_ms >= %lld",
           L.tenant, (long long)commit_wall);
  long long late = pgx_sql(cl.pg_url, sql, 0, NULL);
  /* a write made directly under the old epoch is refused by the database */
  char url[700];
  snprintf(url, sizeof url, "%s%coptions=-c%%20idem.epoch%%3D%llu", cl.pg_url,
           strchr(cl.pg_url, '?') ? '&' : '?', (unsigned long long)e1);
  PGconn *pc = pgx_connect(url);
  PGresult *r = PQexec(pc, "DELETE FROM idem_steps WHERE tenant = 'nobody'");
  const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  bool refused = PQresultStatus(r) == PGRES_FATAL_ERROR && state && strcmp(state, "IF001") == 0;
  PQclear(r);
  PQfinish(pc);
  long long fence = pgx_sql(cl.pg_url, "SELECT epoch FROM idem_fence WHERE id = 1", 0, NULL);

  printf("sigstop: node %d (epoch %llu) paused for %d ms; node %d leads after %lld ms (epoch "
         "%llu, fence %lld); old leader reports stepped down %lld ms after SIGCONT; old-epoch "
         "commits after the new leader's first: %lld rows (%d replies OK delivered after it)\n",
         old + 1, (unsigned long long)e1, 2 * F_TTL * 1000, neu + 1, (long long)leads,
         (unsigned long long)e2, fence, (long long)down, late, atomic_load(&L.ok_after));
  fflush(stdout);
  cr_assert(stepped, "the old leader did not step down by itself");
  cr_assert_eq(late, 0, "the old leader committed after the new leader's first commit");
  /* ok_after is informational: a reply can reach us late (the node was paused between its
   * commit, made before the pause under the old epoch, and sending the reply); the database
   * rows above are the truth about commits */
  cr_assert(refused, "a write under the old epoch was not refused with IF001");
  cr_assert_eq((uint64_t)fence, e2);
  cr_assert(f_status(&cl, neu, &st) && st.leader, "the new leader lost its term");
  idem_close(c);
  f_cluster_stop(&cl);
}
