/* A planned switchover under load (patronictl switchover --force): the standby becomes
 * primary and the former primary rejoins as its synchronous standby. The coordinators serve
 * again within 5 s, never write to the demoted node (no 25006 in their logs), lose no
 * acknowledged complete and PROCEED no attempt twice. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "ha.h"

Test(ha, switchover_serves_again_within_5s, .fini = ha_fini, .timeout = 240) {
  static ha_cluster cl; /* static: ha_fini may stop it after a failed assertion */
  static ha_load L;
  ha_start(&cl);
  ha_print_settings(&cl, "switchover");
  ha_load_start(&L, &cl);
  h_sleep_ms(3000); /* the load's rate before the fault: a measurement window */
  int p = ha_primary(&cl);
  cr_assert_geq(p, 0, "no primary");

  int64_t t0 = h_now_ms();
  char out[4096];
  int st = ha_lib(&cl, out, sizeof out, 60000, "switchover", NULL);
  int64_t took = h_now_ms() - t0;
  int64_t promoted = ha_wait_primary(&cl, 1 - p, 0, 20000);
  printf("switchover: patronictl returned %d after %lld ms; pg%d primary after %lld ms\n", st,
         (long long)took, 2 - p, (long long)promoted);
  fflush(stdout);
  double before = ha_load_rate(&L, t0 - 2000, t0);
  ha_load_wait_full(&L, t0, before, 10000);
  /* the former primary rejoins as the synchronous standby; load goes on meanwhile */
  int ready = ha_lib(&cl, NULL, 0, 90000, "wait_ready", "60");
  int64_t rejoined = h_now_ms() - t0;
  printf("switchover: pg%d rejoined as synchronous standby %lld ms after the switchover began\n",
         p + 1, (long long)rejoined);
  ha_load_stop(&L);

  ha_report r;
  ha_check(&L, t0, &r);
  ha_print("switchover", &r, &L);
  int refused = ha_coord_log_count(&cl, "sqlstate=25006");
  cr_assert_eq(st, 0, "patronictl switchover failed:\n%s", out);
  cr_assert_geq(promoted, 0, "pg%d was not promoted", 2 - p);
  cr_assert_eq(ready, 0, "pg%d did not rejoin as a synchronous standby", p + 1);
  cr_assert_geq(r.served_again_ms, 0, "no pair served after the switchover");
  H_EXPECT_TIMING(r.served_again_ms <= 5000,
                  "served again only %lld ms after the switchover began",
                  (long long)r.served_again_ms);
  cr_assert_eq(refused, 0, "%d writes went to a read-only node", refused);
  ha_assert(&r, &L);
  free(L.ops);
  ha_stop(&cl);
}
