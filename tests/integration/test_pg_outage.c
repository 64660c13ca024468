/* Postgres stopped → every call answers UNAVAILABLE promptly (within its deadline) and the
 * server keeps running; Postgres back → calls succeed again without restarting the server.
 * Stops the shared test Postgres: scripts/test runs this binary alone (ctest runs serially). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void pgctl(const char *verb) {
  const char *argv[] = {h_env("IDEM_TEST_PGCTL"), verb, h_env("IDEM_TEST_PG_DIR"), NULL};
  cr_assert_eq(spawn_run(argv, NULL, 120000), 0, "%s %s %s failed", argv[0], verb, argv[2]);
}

Test(pg_outage, unavailable_while_down_then_recovers_without_restart, .timeout = 180) {
  srv s;
  h_srv_start(&s, NULL, NULL);
  char tenant[64], gid[96];
  h_tenant(tenant);
  h_unique("outage", gid, sizeof gid);
  idem_client *c = h_client(&s, tenant, 2000);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);

  pgctl("stop");
  int64_t worst = 0;
  for (int i = 0; i < 5; i++) {
    idem_step_key k2 = {gid, "payment", i % 2 ? "refund" : "charge", IDEM_FORWARD};
    int64_t t0 = h_now_ms();
    int rc = idem_step_begin(c, &k2, NULL, 0, 0, &b, &e);
    int64_t took = h_now_ms() - t0;
    if (took > worst) worst = took;
    cr_assert_eq(rc, IDEM_UNAVAILABLE, "call %d with Postgres down: %s (%s)", i,
                 idem_strerror(rc), e.message);
    cr_assert(!strcmp(e.reason, "store-unavailable") || !strcmp(e.reason, "store-timeout"),
              "call %d: reason '%s' (%s)", i, e.reason, e.message);
  }
  printf("postgres down: UNAVAILABLE, slowest answer %lld ms (deadline 2000 ms)\n",
         (long long)worst);
  H_EXPECT_TIMING(worst < 2000, "the slowest answer took %lld ms (deadline 2000 ms)",
                  (long long)worst);
  idem_status st = {0};
  cr_assert_eq(idem_get_status(c, &st, &e), IDEM_OK, "status must answer while the store is down");
  cr_assert_not(st.store_ok);

  pgctl("start");
  int64_t back = h_now_ms();
  int rc;
  H_WAIT_EVERY(50, (rc = idem_step_begin(c, &k, NULL, 0, 0, &b, &e)) != IDEM_UNAVAILABLE, 30000,
               "BeginStep answers other than UNAVAILABLE after Postgres came back: %s", e.message);
  printf("postgres back: served again after %lld ms\n", (long long)(h_now_ms() - back));
  cr_assert_eq(rc, IDEM_ABORTED, "the step begun before the outage is still in progress: %s",
               e.message);
  idem_close(c);
  cr_assert_eq(h_srv_stop(&s), 0);
}
