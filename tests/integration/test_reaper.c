/* The reaper (--reaper-interval 1) with a 2 s retention: finished steps and saga request ids
 * are deleted after their retention and the same key proceeds afresh; IN_PROGRESS and UNKNOWN
 * steps survive (an UNKNOWN step is still replayed). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

static long long rows_of(const char *tenant, const char *gid) {
  const char *p[] = {tenant, gid};
  return pgx_sql(NULL, "SELECT count(*) FROM idem_steps WHERE tenant = $1 AND global_id = $2", 2,
                 p);
}

/* The IN_PROGRESS step's holder at work: it extends its lease (the policy's 1.9 s). */
static void keep_alive(idem_client *c, const idem_step_key *k) {
  idem_error e = {0};
  cr_assert_eq(idem_step_extend(c, k, 1, 0, NULL, &e), IDEM_OK, "%s", e.message);
}

static void begin_complete(idem_client *c, const idem_step_key *k, idem_outcome oc) {
  idem_begin b = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(c, k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
  if (oc != IDEM_OUTCOME_UNSPECIFIED)
    cr_assert_eq(idem_step_complete(c, k, b.attempt, oc, 500, "x", 1, NULL, &e), IDEM_OK, "%s",
                 e.message);
  idem_begin_clear(&b);
}

Test(reaper, expired_rows_go_and_keys_proceed_afresh, .timeout = 90) {
  const char *args[] = {"--reaper-interval", "1", NULL};
  srv s;
  h_srv_start(&s, NULL, args);
  char t[64];
  h_tenant(t);
  idem_client *c = h_client(&s, t, 0);
  idem_error e = {0};
  /* leases must end before keys are forgotten (docs/limits.md): 1.9 s under a 2 s retention */
  idem_policy p = {.failure_mode = IDEM_FAIL_CLOSED, .retention_s = 2, .lease_ms = 1900};
  strcpy(p.service, "*");
  strcpy(p.operation, "*");
  cr_assert_eq(idem_policy_set(c, &p, NULL, &e), IDEM_OK, "%s", e.message);

  char g_done[96], g_run[96], g_unk[96], g_fail[96];
  h_unique("done", g_done, sizeof g_done);
  h_unique("run", g_run, sizeof g_run);
  h_unique("unk", g_unk, sizeof g_unk);
  h_unique("fail", g_fail, sizeof g_fail);
  idem_step_key k_done = {g_done, "payment", "charge", IDEM_FORWARD};
  idem_step_key k_run = {g_run, "payment", "charge", IDEM_FORWARD};
  idem_step_key k_unk = {g_unk, "payment", "charge", IDEM_FORWARD};
  idem_step_key k_fail = {g_fail, "payment", "charge", IDEM_FORWARD};
  begin_complete(c, &k_done, IDEM_OUTCOME_SUCCEEDED);
  begin_complete(c, &k_fail, IDEM_OUTCOME_FAILED);
  begin_complete(c, &k_run, IDEM_OUTCOME_UNSPECIFIED); /* stays IN_PROGRESS (kept_alive) */
  begin_complete(c, &k_unk, IDEM_OUTCOME_UNKNOWN);
  /* a saga request id with the tenant's (*, *) retention of 2 s, with a label */
  char gid1[IDEM_GLOBAL_ID_MAX + 1], gid2[IDEM_GLOBAL_ID_MAX + 1], req[96];
  h_unique("req", req, sizeof req);
  idem_label lab = {"team", "payments"};
  bool created = false;
  cr_assert_eq(idem_saga_begin(c, req, "order", &lab, 1, gid1, &created, NULL, &e), IDEM_OK, "%s",
               e.message);
  cr_assert(created);
  const char *sp[] = {t, gid1};
  cr_assert_eq(
      pgx_sql(NULL, "SELECT count(*) FROM idem_saga_labels WHERE tenant = $1 AND global_id = $2", 2,
              sp),
      1);

  uint64_t t0 = (uint64_t)h_now_ms();
  while (rows_of(t, g_done) + rows_of(t, g_fail) > 0 ||
         pgx_sql(NULL, "SELECT count(*) FROM idem_sagas WHERE tenant = $1 AND global_id = $2", 2,
                 sp) > 0) {
    cr_assert_lt((uint64_t)h_now_ms() - t0, 20000, "the reaper did not delete within 20 s");
    keep_alive(c, &k_run);
    h_sleep_ms(100); /* the next poll: each turn also extends the running step's lease */
  }
  printf("reaped 2 s after completion within %llu ms\n", (unsigned long long)(h_now_ms() - t0));
  cr_assert_eq(
      pgx_sql(NULL, "SELECT count(*) FROM idem_saga_labels WHERE tenant = $1 AND global_id = $2", 2,
              sp),
      0, "labels go with their saga");
  /* well past the retention: IN_PROGRESS and UNKNOWN are still there */
  for (int i = 0; i < 15; i++) {
    keep_alive(c, &k_run);
    h_sleep_ms(100); /* not a wait: 1.5 s in which the reaper must leave these two alone */
  }
  keep_alive(c, &k_run);
  cr_assert_eq(rows_of(t, g_run), 1, "an IN_PROGRESS step was reaped");
  cr_assert_eq(rows_of(t, g_unk), 1, "an UNKNOWN step was reaped");

  /* the reaped keys proceed afresh (attempt 1); UNKNOWN still replays; IN_PROGRESS is busy */
  idem_begin b = {0};
  cr_assert_eq(idem_step_begin(c, &k_done, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(b.attempt, 1);
  idem_begin_clear(&b);
  cr_assert_eq(idem_step_begin(c, &k_unk, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_REPLAY, "UNKNOWN is replayed until resolved");
  cr_assert_eq(b.result.outcome, IDEM_OUTCOME_UNKNOWN);
  idem_begin_clear(&b);
  cr_assert_eq(idem_step_begin(c, &k_run, NULL, 0, 0, &b, &e), IDEM_ABORTED);
  /* the request id is new again */
  cr_assert_eq(idem_saga_begin(c, req, "order", NULL, 0, gid2, &created, NULL, &e), IDEM_OK, "%s",
               e.message);
  cr_assert(created, "the expired request id starts a new saga");
  cr_assert_str_neq(gid1, gid2);

  idem_close(c);
  cr_assert_eq(h_srv_stop(&s), 0);
}
