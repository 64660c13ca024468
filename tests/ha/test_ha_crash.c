/* A crash of the primary's postmaster alone (kill -9) under load: its Patroni agent, alive,
 * restarts it in place (no failover); the coordinators reconnect to it by themselves; no
 * acknowledged complete is lost, no attempt PROCEEDs twice, and callers see only UNAVAILABLE or
 * an unknown outcome. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "ha.h"

Test(ha, postmaster_crash_restarts_in_place, .fini = ha_fini, .timeout = 240) {
  static ha_cluster cl; /* static: ha_fini may stop it after a failed assertion */
  static ha_load L;
  ha_start(&cl);
  ha_print_settings(&cl, "postmaster crash");
  ha_load_start(&L, &cl);
  h_sleep_ms(3000); /* the load's rate before the fault: a measurement window */
  int p = ha_primary(&cl);
  cr_assert_geq(p, 0, "no primary");
  pid_t pm = ha_postmaster_pid(&cl, p);
  cr_assert(pm > 0);

  int64_t t0 = h_now_ms();
  ha_kill(pm);
  int64_t bound = (int64_t)(cl.ttl + cl.loop_wait + 3) * 1000;
  int64_t back = ha_wait_primary(&cl, p, pm, bound + 10000);
  printf(
      "postmaster crash: pg%d's postmaster %d killed; pg%d primary again (new postmaster %d) "
      "after %lld ms\n",
      p + 1, (int)pm, p + 1, (int)ha_postmaster_pid(&cl, p), (long long)back);
  fflush(stdout);
  double before = ha_load_rate(&L, t0 - 2000, t0);
  ha_load_wait_full(&L, t0, before, (back > 0 ? back : bound) + 8000);
  h_sleep_ms(2000); /* the steady rate after recovery: a measurement window */
  int now_primary = ha_primary(&cl);
  ha_load_stop(&L);

  ha_report r;
  ha_check(&L, t0, &r);
  ha_print("postmaster crash", &r, &L);
  cr_assert_geq(back, 0, "the postmaster was not restarted");
  cr_assert_eq(now_primary, p, "not restarted in place: pg%d is primary", now_primary + 1);
  H_EXPECT_TIMING(back <= bound, "restart took %lld ms", (long long)back);
  cr_assert_geq(r.first_served_ms, 0, "no pair served after the restart");
  ha_assert(&r, &L);
  free(L.ops);
  ha_stop(&cl);
}
