/* Host loss of the Postgres primary under load: kill -9 of its Patroni agent and its
 * postmaster (a dead machine: Patroni alone would restart a killed postmaster). The synchronous
 * standby is promoted within Patroni's ttl + loop_wait + 3 s; the coordinators follow it by
 * themselves (multi-host --pg); no acknowledged complete is lost, no attempt PROCEEDs twice,
 * and callers see only UNAVAILABLE or an unknown outcome. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "ha.h"

Test(ha, primary_host_loss_promotes_the_standby, .fini = ha_fini, .timeout = 240) {
  static ha_cluster cl; /* static: ha_fini may stop it after a failed assertion */
  static ha_load L;
  ha_start(&cl);
  ha_print_settings(&cl, "host loss");
  ha_load_start(&L, &cl);
  h_sleep_ms(3000); /* the load's rate before the fault: a measurement window */
  int p = ha_primary(&cl);
  cr_assert_geq(p, 0, "no primary");
  pid_t agent, pm;
  int64_t t0 = h_now_ms();
  ha_kill_host(&cl, p, &agent, &pm);
  int64_t bound = (int64_t)(cl.ttl + cl.loop_wait + 3) * 1000;
  int64_t failover = ha_wait_primary(&cl, 1 - p, 0, bound + 10000);
  printf("host loss: pg%d (agent %d, postmaster %d) killed; pg%d primary after %lld ms\n", p + 1,
         (int)agent, (int)pm, 2 - p, (long long)failover);
  fflush(stdout);
  double before = ha_load_rate(&L, t0 - 2000, t0);
  ha_load_wait_full(&L, t0, before, (failover > 0 ? failover : bound) + 8000);
  h_sleep_ms(2000); /* the steady rate after recovery: a measurement window */
  ha_load_stop(&L);

  ha_report r;
  ha_check(&L, t0, &r);
  ha_print("host loss", &r, &L);
  cr_assert_geq(failover, 0, "the standby was not promoted");
  H_EXPECT_TIMING(failover <= bound, "failover took %lld ms > ttl + loop_wait + 3 s",
                  (long long)failover);
  cr_assert_geq(r.first_served_ms, 0, "no pair served after the failover");
  ha_assert(&r, &L);
  free(L.ops);
  ha_stop(&cl);
}
