/* Loss of the synchronous standby under load (kill -9 of its Patroni agent and postmaster).
 * synchronous_mode is not strict (docs/ha.md): the primary's agent stops waiting for the
 * standby and writes go on alone, with no failover; nothing acknowledged is lost. Then the
 * standby's agent starts again and it rejoins as the synchronous standby. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "ha.h"

Test(ha, standby_loss_writes_go_on_alone, .fini = ha_fini, .timeout = 240) {
  static ha_cluster cl; /* static: ha_fini may stop it after a failed assertion */
  static ha_load L;
  ha_start(&cl);
  ha_print_settings(&cl, "standby loss");
  ha_load_start(&L, &cl);
  h_sleep_ms(3000); /* the load's rate before the fault: a measurement window */
  int p = ha_primary(&cl);
  cr_assert_geq(p, 0, "no primary");
  int s = 1 - p;
  pid_t agent, pm;
  int64_t t0 = h_now_ms();
  ha_kill_host(&cl, s, &agent, &pm);
  double before = ha_load_rate(&L, t0 - 2000, t0);
  int64_t bound = (int64_t)(cl.ttl + cl.loop_wait + 3) * 1000;
  int64_t full = ha_load_wait_full(&L, t0, before, bound + 5000);
  int still = ha_primary(&cl);
  printf(
      "standby loss: pg%d (agent %d, postmaster %d) killed; pg%d still primary; full "
      "throughput after %lld ms\n",
      s + 1, (int)agent, (int)pm, still + 1, (long long)full);
  fflush(stdout);
  /* the standby comes back and catches up while the load goes on */
  int64_t t1 = h_now_ms();
  cr_assert_eq(ha_lib(&cl, NULL, 0, 30000, "start_node", s == 0 ? "pg1" : "pg2"), 0);
  int ready = ha_lib(&cl, NULL, 0, 90000, "wait_ready", "60");
  printf("standby loss: pg%d back as synchronous standby after %lld ms\n", s + 1,
         (long long)(h_now_ms() - t1));
  ha_load_stop(&L);

  ha_report r;
  ha_check(&L, t0, &r);
  ha_print("standby loss", &r, &L);
  cr_assert_eq(still, p, "a failover happened");
  cr_assert_geq(r.first_served_ms, 0, "no pair served after the standby was lost");
  H_EXPECT_TIMING(r.first_served_ms <= bound, "writes stalled %lld ms",
                  (long long)r.first_served_ms);
  cr_assert_eq(ready, 0, "pg%d did not rejoin as the synchronous standby", s + 1);
  ha_assert(&r, &L);
  free(L.ops);
  ha_stop(&cl);
}
