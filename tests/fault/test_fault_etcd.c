/* Scenario 3: kill etcd. The leader stops serving within TTL (fail-closed: UNAVAILABLE);
 * after etcd returns, a leader serves again within TTL + 2 s. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "fault.h"

Test(fault, etcd_down_fails_closed_then_recovers, .fini = f_fini, .timeout = 90) {
  static cluster cl; /* static: f_fini may stop it after a failed assertion */
  f_cluster_start(&cl, 2);
  char tenant[64], gid[80];
  h_tenant(tenant);
  int old = f_leader(&cl, NULL);
  cr_assert_geq(old, 0);
  idem_client *direct = f_client(&cl, old, tenant, 1000); /* the leader only */
  idem_client *c = f_client(&cl, -1, tenant, 1000);
  idem_error e = {0};
  h_unique("etcd", gid, sizeof gid);
  cr_assert_eq(f_pair(direct, gid, &e), IDEM_OK, "%s", e.message);

  int64_t t0 = h_now_ms();
  etcd_kill(&cl.etcd);
  idem_status st;
  /* the leader's own view: when it stops serving */
  H_WAIT(f_status(&cl, old, &st) && !st.leader, F_TTL * 1000 + 10000,
         "node %d stops leading after etcd died", old + 1);
  int64_t stopped = h_now_ms() - t0;
  h_unique("etcd", gid, sizeof gid);
  int rc = f_pair(direct, gid, &e); /* fail-closed */
  cr_assert_eq(rc, IDEM_UNAVAILABLE, "fail-closed answer: %s (%s)", idem_strerror(rc), e.message);
  cr_assert(f_status(&cl, old, &st));
  cr_assert_not(st.leader);
  h_sleep_ms(F_TTL * 1000); /* not a wait: a TTL in which no node may lead without etcd */
  cr_assert(f_status(&cl, old, &st));
  cr_assert_not(st.election_ok, "election_ok while etcd is down");
  for (int i = 0; i < cl.n; i++) cr_assert(f_status(&cl, i, &st) && !st.leader);

  etcd_restart(&cl.etcd);
  int64_t t1 = h_now_ms();
  H_WAIT((h_unique("etcd", gid, sizeof gid), (rc = f_pair(c, gid, &e)) == IDEM_OK),
         F_TTL * 1000 + 10000, "a leader serves again after etcd's return: %s", e.message);
  int64_t back = h_now_ms() - t1;
  uint64_t ep = 0;
  int neu = f_leader(&cl, &ep);
  printf("etcd killed: leader stopped serving after %lld ms (TTL %d s); etcd back: node %d "
         "serves after %lld ms (epoch %llu)\n",
         (long long)stopped, F_TTL, neu + 1, (long long)back, (unsigned long long)ep);
  fflush(stdout);
  H_EXPECT_TIMING(stopped <= F_TTL * 1000, "stopped after %lld ms > TTL", (long long)stopped);
  H_EXPECT_TIMING(back <= F_TTL * 1000 + 2000, "served again after %lld ms > TTL + 2 s",
                  (long long)back);
  idem_close(direct);
  idem_close(c);
  f_cluster_stop(&cl);
}
