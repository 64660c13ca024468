/* When a fail-open step may run unguarded (docs/api.md, "Error reasons"): only when no
 * coordinator can decide on any known address. Two real nodes, etcd and Postgres:
 *   - a hung leader (SIGSTOP) beside a standby: the standby takes over and decides; the step
 *     never runs unguarded although the first answer was a deadline;
 *   - a standby names the leader (not-leader) and libidem follows it;
 *   - etcd gone: every node answers no-leader, so a fail-open step runs unguarded (journalled)
 *     and a fail-closed one does not run. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "fault.h"

/* A client for every node, with a journal, that knows the policies of mail/send (fail-open)
 * and payment/charge (fail-closed). */
static idem_client *journal_client(cluster *cl, const char *tenant, const char *journal) {
  idem_client *admin = f_client(cl, -1, tenant, 2000);
  h_set_policy(admin, "mail", "send", IDEM_FAIL_OPEN);
  h_set_policy(admin, "payment", "*", IDEM_FAIL_CLOSED);
  idem_close(admin);
  idem_options o = {.address = cl->all_addrs, .tenant = tenant, .journal_path = journal,
                    .deadline_ms = 400};
  idem_client *c = NULL;
  idem_error e = {0};
  cr_assert_eq(idem_connect(&o, &c, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(idem_policy_prefetch(c, "mail", "send", &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(idem_policy_prefetch(c, "payment", "charge", &e), IDEM_OK, "%s", e.message);
  return c;
}

Test(fault, a_hung_leader_beside_a_standby_never_runs_a_fail_open_step_unguarded, .fini = f_fini,
     .timeout = 90) {
  static cluster cl; /* static: f_fini may stop it after a failed assertion */
  f_cluster_start(&cl, 2);
  char tenant[64], gid[80], journal[128];
  h_tenant(tenant);
  h_unique("/tmp/idem-reasons-journal", journal, sizeof journal);
  int leader = f_leader(&cl, NULL);
  cr_assert_geq(leader, 0);
  idem_client *c = journal_client(&cl, tenant, journal);

  /* the standby names the leader; libidem follows it */
  idem_client *standby = f_client(&cl, 1 - leader, tenant, 2000);
  idem_step_key k0 = {"reasons-standby", "mail", "send", IDEM_FORWARD};
  h_unique("rs", gid, sizeof gid);
  k0.global_id = gid;
  idem_begin b = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(standby, &k0, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED, "decided by the leader");
  idem_begin_clear(&b);
  idem_close(standby);

  f_signal(&cl, leader, SIGSTOP); /* hung: connections open, nothing answered */
  h_unique("rh", gid, sizeof gid);
  idem_step_key k = {gid, "mail", "send", IDEM_FORWARD};
  h_action a = {.code = 200};
  idem_run_options ro = {.deadline_ms = 20000, .no_wait = true};
  idem_run_report rep = {0};
  int64_t t0 = h_now_ms();
  int rc = idem_step_run(c, &k, NULL, 0, h_action_run, &a, &ro, &rep, &e);
  int64_t took = h_now_ms() - t0;
  f_signal(&cl, leader, SIGCONT);
  printf("reasons: a hung leader; the fail-open step %s after %lld ms (%d begin retries)\n",
         rep.unguarded ? "ran UNGUARDED" : "was decided by the new leader", (long long)took,
         rep.begin_retries);
  fflush(stdout);
  cr_assert_eq(rc, IDEM_OK, "%s (%s)", idem_strerror(rc), e.message);
  cr_assert_eq(a.calls, 1);
  cr_assert_not(rep.unguarded, "ran unguarded while the standby could (and did) decide");
  cr_assert_eq(rep.decision, IDEM_DECISION_PROCEED);
  cr_assert_gt(rep.begin_retries, 0, "the hung leader cannot decide: the run asked again");
  cr_assert_eq(h_line_count(journal), 0, "nothing journalled");
  idem_run_report_clear(&rep);
  idem_close(c);
  remove(journal);
  f_cluster_stop(&cl);
}

/* Whether node i refuses a BeginStep with no-leader (no leader to send the caller to); last
 * gets what it answered. A standby names the former leader until etcd has not answered it for a
 * lease TTL (docs/api.md §7; each node's own answer, without libidem following idem-leader:
 * test_fault_status.c). */
static bool refuses_no_leader(cluster *cl, int i, const char *tenant, char *last, size_t n) {
  idem_client *one = f_client(cl, i, tenant, 1000);
  char gid[80];
  h_unique("rn", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  int rc = idem_step_begin(one, &k, NULL, 0, 0, &b, &e);
  snprintf(last, n, "%s %s: %s", idem_strerror(rc), e.reason, e.message);
  if (rc == IDEM_OK) idem_begin_clear(&b);
  idem_close(one);
  return rc == IDEM_UNAVAILABLE && strcmp(e.reason, "no-leader") == 0;
}

/* How many nodes say they lead (GetStatus). */
static int leading(cluster *cl) {
  idem_status st;
  int n = 0;
  for (int i = 0; i < cl->n; i++) n += f_status(cl, i, &st) && st.leader;
  return n;
}

Test(fault, etcd_gone_every_node_says_no_leader_and_fail_open_runs_unguarded, .fini = f_fini,
     .timeout = 90) {
  static cluster cl;
  f_cluster_start(&cl, 2);
  char tenant[64], gid[80], journal[128];
  h_tenant(tenant);
  h_unique("/tmp/idem-reasons-journal", journal, sizeof journal);
  idem_client *c = journal_client(&cl, tenant, journal);

  etcd_kill(&cl.etcd);
  int64_t t0 = h_now_ms();
  H_WAIT(leading(&cl) == 0, F_TTL * 1000 + 10000, "every node stops leading without etcd");
  int64_t stopped = h_now_ms() - t0;
  H_EXPECT_TIMING(stopped < F_TTL * 1000 + 2000, "a node still led %lld ms after etcd died",
                  (long long)stopped);
  /* on the wire: each node refuses with no-leader (no leader to send the caller to) */
  for (int i = 0; i < cl.n; i++) {
    char last[600] = "";
    H_WAIT_EVERY(100, refuses_no_leader(&cl, i, tenant, last, sizeof last),
                 F_TTL * 1000 + 10000, "node %d refuses no-leader (last: %s)", i + 1, last);
  }

  h_unique("ro", gid, sizeof gid);
  idem_step_key open = {gid, "mail", "send", IDEM_FORWARD};
  idem_step_key closed = {gid, "payment", "charge", IDEM_FORWARD};
  idem_run_options ro = {.deadline_ms = 1500};
  idem_run_report rep = {0};
  idem_error e = {0};
  h_action a = {.code = 200}, b = {.code = 200};
  cr_assert_eq(idem_step_run(c, &open, NULL, 0, h_action_run, &a, &ro, &rep, &e), IDEM_OK,
               "fail-open: reason '%s' (%s), leader '%s'", e.reason, e.message, e.leader);
  cr_assert(a.calls == 1 && a.unguarded && rep.unguarded && rep.journaled);
  idem_run_report_clear(&rep);
  int rc = idem_step_run(c, &closed, NULL, 0, h_action_run, &b, &ro, &rep, &e);
  cr_assert_eq(rc, IDEM_UNAVAILABLE, "fail-closed: %s (%s)", idem_strerror(rc), e.message);
  /* the last answer: a node without a leader (each node answers so by now, above: none names
   * a stale leader for libidem to follow) */
  cr_assert_str_eq(e.reason, "no-leader", "fail-closed: reason '%s' (%s), leader '%s'", e.reason,
                   e.message, e.leader);
  cr_assert_eq(b.calls, 0, "a fail-closed action ran without a leader");
  cr_assert_eq(h_line_count(journal), 1);
  idem_close(c);
  remove(journal);
  f_cluster_stop(&cl);
}
