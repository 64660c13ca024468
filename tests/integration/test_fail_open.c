/* Server-side fail-open with Postgres stopped: BeginStep for a fail-open operation answers
 * PROCEED_UNGUARDED (nothing recorded, logged), a fail-closed one UNAVAILABLE; the policies
 * come from the server's memory (GetPolicy answers too); idem_step_run runs the action
 * unguarded and journals it. Stops the shared test Postgres, so it is alone in its binary
 * (ctest runs binaries one at a time) and starts it again before it ends. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static void pgctl(const char *verb) {
  const char *argv[] = {h_env("IDEM_TEST_PGCTL"), verb, h_env("IDEM_TEST_PG_DIR"), NULL};
  cr_assert_eq(spawn_run(argv, NULL, 120000), 0, "%s %s %s failed", argv[0], verb, argv[2]);
}

static int calls;
static void action(void *arg, const idem_step_ctx *ctx, idem_step_output *out) {
  (void)arg;
  calls++;
  cr_assert(ctx->unguarded);
  out->outcome = IDEM_OUTCOME_SUCCEEDED;
  out->code = 201;
}

static bool log_has(const srv *s, const char *needle) {
  FILE *f = fopen(s->log_path, "r");
  if (!f) return false;
  char line[2048];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

Test(fail_open, store_down_fail_open_proceeds_unguarded_fail_closed_refused, .timeout = 180) {
  srv s;
  h_srv_start(&s, NULL, NULL);
  char t[64], gid[96], journal[128];
  h_tenant(t);
  h_unique("fo", gid, sizeof gid);
  h_unique("/tmp/idem-journal", journal, sizeof journal);
  idem_options o = {.address = s.addr, .tenant = t, .journal_path = journal};
  idem_client *c;
  idem_error e = {0};
  cr_assert_eq(idem_connect(&o, &c, &e), IDEM_OK);
  idem_policy p = {.failure_mode = IDEM_FAIL_OPEN, .retention_s = 3600, .lease_ms = 5000};
  strcpy(p.service, "mail");
  strcpy(p.operation, "send");
  cr_assert_eq(idem_policy_set(c, &p, NULL, &e), IDEM_OK, "%s", e.message);

  pgctl("stop");
  idem_step_key open_k = {gid, "mail", "send", IDEM_FORWARD};
  idem_step_key closed_k = {gid, "payment", "charge", IDEM_FORWARD};
  idem_begin b = {0};
  int rc = idem_step_begin(c, &open_k, NULL, 0, 0, &b, &e);
  cr_assert_eq(rc, IDEM_OK, "fail-open with the store down: %s (%s)", idem_strerror(rc),
               e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED_UNGUARDED);
  cr_assert_eq(b.attempt, 0);
  idem_begin_clear(&b);
  rc = idem_step_begin(c, &closed_k, NULL, 0, 0, &b, &e);
  cr_assert_eq(rc, IDEM_UNAVAILABLE, "fail-closed with the store down: %s", idem_strerror(rc));
  idem_policy got;
  cr_assert_eq(idem_policy_get(c, "mail", "send", &got, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(got.failure_mode, IDEM_FAIL_OPEN, "the server keeps the last known policies");

  /* through idem_step_run: runs unguarded, journaled as "server" */
  idem_run_options ro = {.deadline_ms = 3000};
  idem_run_report rep = {0};
  cr_assert_eq(idem_step_run(c, &open_k, NULL, 0, action, NULL, &ro, &rep, &e), IDEM_OK, "%s",
               e.message);
  cr_assert(rep.ran && rep.unguarded && rep.journaled);
  cr_assert_eq(rep.decision, IDEM_DECISION_PROCEED_UNGUARDED);
  idem_run_report_clear(&rep);
  calls = 0;
  cr_assert_eq(idem_step_run(c, &closed_k, NULL, 0, action, NULL, &ro, &rep, &e),
               IDEM_UNAVAILABLE);
  cr_assert_eq(calls, 0, "a fail-closed action ran with the store down");
  cr_assert(log_has(&s, "proceeds unguarded"), "the unguarded answer is logged");

  pgctl("start");
  H_WAIT_EVERY(50, idem_step_begin(c, &closed_k, NULL, 0, 0, &b, &e) != IDEM_UNAVAILABLE, 30000,
               "BeginStep answers other than UNAVAILABLE after Postgres came back: %s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
  idem_begin_clear(&b);
  /* nothing was recorded for the unguarded runs: the key is new to the coordinator */
  idem_record r;
  cr_assert_eq(idem_step_lookup(c, &open_k, &r, &e), IDEM_NOT_FOUND);
  /* the journal line reconciles */
  idem_reconcile_report rr = {0};
  cr_assert_eq(idem_journal_reconcile(c, journal, &rr, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(rr.lines, 1);
  cr_assert_eq(rr.recorded, 1);
  idem_reconcile_report_clear(&rr);
  cr_assert_eq(idem_step_lookup(c, &open_k, &r, &e), IDEM_OK);
  cr_assert_eq(r.state, IDEM_STATE_SUCCEEDED);
  cr_assert_eq(r.result.code, 201);
  idem_record_clear(&r);
  unlink(journal);
  idem_close(c);
  cr_assert_eq(h_srv_stop(&s), 0);
}
