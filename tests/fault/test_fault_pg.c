/* Scenario 4: stop / restart Postgres under the HA cluster. Fail-closed calls answer
 * UNAVAILABLE within their deadline; service returns within 5 s of Postgres accepting
 * connections; no acknowledged write is lost. Stops the shared test Postgres
 * (IDEM_TEST_PGCTL / IDEM_TEST_PG_DIR, like integration/test_pg_outage.c): alone in its
 * binary, and Postgres runs again at the end. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "fault.h"

static void pgctl(const char *verb) {
  const char *argv[] = {h_env("IDEM_TEST_PGCTL"), verb, h_env("IDEM_TEST_PG_DIR"), NULL};
  cr_assert_eq(spawn_run(argv, &(spawn_opts){.out_log = "/dev/null"}, 120000), 0,
               "%s %s %s failed", argv[0], verb, argv[2]);
}

#define ACKED 20

Test(fault, postgres_down_fails_closed_then_recovers, .fini = f_fini, .timeout = 120) {
  static cluster cl; /* static: f_fini may stop it after a failed assertion */
  f_cluster_start(&cl, 2);
  char tenant[64], gids[ACKED][80], gid[80];
  h_tenant(tenant);
  idem_client *c = f_client(&cl, -1, tenant, 2000);
  idem_error e = {0};
  for (int i = 0; i < ACKED; i++) {
    h_unique("pg", gids[i], sizeof gids[i]);
    cr_assert_eq(f_pair(c, gids[i], &e), IDEM_OK, "%s", e.message);
  }
  int leader = f_leader(&cl, NULL);

  pgctl("stop");
  int64_t worst = 0;
  for (int i = 0; i < 5; i++) {
    h_unique("pg", gid, sizeof gid);
    idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
    idem_begin b = {0};
    int64_t t = h_now_ms();
    int rc = idem_step_begin(c, &k, NULL, 0, 0, &b, &e);
    int64_t took = h_now_ms() - t;
    if (took > worst) worst = took;
    if (rc != IDEM_UNAVAILABLE) pgctl("start");
    cr_assert_eq(rc, IDEM_UNAVAILABLE, "call %d with Postgres down: %s (%s)", i,
                 idem_strerror(rc), e.message);
  }
  idem_status st;
  bool status_ok = f_status(&cl, leader, &st);
  bool still_leader = status_ok && st.leader && !st.store_ok;

  pgctl("start"); /* pg_ctl -w: returns once Postgres accepts connections */
  int64_t t1 = h_now_ms();
  int rc;
  bool served;
  H_WAITED(served, (h_unique("pg", gid, sizeof gid), (rc = f_pair(c, gid, &e)) == IDEM_OK), 10000);
  int64_t back = h_now_ms() - t1;
  printf("postgres down: UNAVAILABLE, slowest answer %lld ms (deadline 2000 ms); postgres "
         "back: served again after %lld ms\n",
         (long long)worst, (long long)back);
  fflush(stdout);
  cr_assert(still_leader, "GetStatus during the outage: leader with store_ok false expected");
  H_EXPECT_TIMING(worst < 2000 + 100, "an answer took %lld ms, longer than the deadline",
                  (long long)worst);
  cr_assert(served, "not served again within 10 s of Postgres's return: %s", e.message);
  H_EXPECT_TIMING(back <= 5000, "served again only after %lld ms", (long long)back);
  for (int i = 0; i < ACKED; i++) {
    idem_step_key k = {gids[i], "payment", "charge", IDEM_FORWARD};
    idem_record r = {0};
    cr_assert_eq(idem_step_lookup(c, &k, &r, &e), IDEM_OK, "%s", e.message);
    cr_assert_eq(r.state, IDEM_STATE_SUCCEEDED, "acknowledged write lost: %s", gids[i]);
    idem_record_clear(&r);
  }
  idem_close(c);
  f_cluster_stop(&cl);
}
