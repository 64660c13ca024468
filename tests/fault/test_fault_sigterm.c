/* Scenario 5: SIGTERM the leader: it resigns at once and a standby serves within 1 s. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>

#include "fault.h"

Test(fault, sigterm_leader_hands_over_within_1s, .fini = f_fini, .timeout = 60) {
  static cluster cl; /* static: f_fini may stop it after a failed assertion */
  f_cluster_start(&cl, 2);
  char tenant[64], gid[80];
  h_tenant(tenant);
  idem_client *c = f_client(&cl, -1, tenant, 3000);
  idem_error e = {0};
  h_unique("st", gid, sizeof gid);
  cr_assert_eq(f_pair(c, gid, &e), IDEM_OK, "%s", e.message);
  uint64_t e1 = 0;
  int old = f_leader(&cl, &e1);
  cr_assert_geq(old, 0);

  int64_t t0 = h_now_ms();
  f_signal(&cl, old, SIGTERM);
  uint64_t e2 = 0;
  int neu = f_wait_leader(&cl, old, 3000, &e2);
  int64_t leads = h_now_ms() - t0;
  h_unique("st", gid, sizeof gid);
  int rc = f_pair(c, gid, &e);
  int64_t served = h_now_ms() - t0;
  printf("sigterm: node %d (epoch %llu) resigned; node %d leads after %lld ms (epoch %llu); "
         "first pair through the client acknowledged after %lld ms\n",
         old + 1, (unsigned long long)e1, neu + 1, (long long)leads, (unsigned long long)e2,
         (long long)served);
  fflush(stdout);
  cr_assert_geq(neu, 0, "no standby took over");
  cr_assert_eq(rc, IDEM_OK, "%s", e.message);
  H_EXPECT_TIMING(leads <= 1000, "standby led only after %lld ms", (long long)leads);
  cr_assert_gt(e2, e1);
  cr_assert_eq(h_srv_stop(&cl.nodes[old]), 0, "the old leader drains and exits 0");
  cl.up[old] = false;
  idem_close(c);
  f_cluster_stop(&cl);
}
