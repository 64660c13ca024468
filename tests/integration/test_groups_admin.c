/* test_groups_admin.c — the Admin calls that span slot groups (docs/api.md §17), on a two-group
 * cluster (tests/support/groups.h):
 *  - ListSteps and ListAudit without a global id, asked of a node that leads only one group,
 *    return every match of both groups exactly once across pages;
 *  - a bulk resolution (libidem's idem_steps_resolve) resolves the steps of both groups, max_steps
 *    bounds the sum, and a repeat with the same request id converges;
 *  - ResolveSteps without idem-group is refused naming it;
 *  - SetPolicy with one group's database refusing connections answers UNAVAILABLE naming that
 *    group, the other group keeps the change, and a repeat converges.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "groups.h"
#include "harness.h"
#include "pbenc.h"

enum { PER_GROUP = 9 };

/* PER_GROUP steps begun (IN_PROGRESS) in each group: ids "open-N" of either group. */
static void begin_steps(const h_groups *cl, idem_client *c) {
  for (int g = 0; g < 2; g++)
    for (int i = 0; i < PER_GROUP; i++) {
      char tag[32], gid[64];
      snprintf(tag, sizeof tag, "open%d-%d", g, i);
      h_groups_id_in_group(cl->t, g, tag, gid, sizeof gid);
      idem_step_key k = {gid, "payments", "charge", IDEM_FORWARD};
      idem_begin b = {0};
      idem_error e = {0};
      cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 60000, &b, &e), IDEM_OK, "%s", e.message);
      cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
      idem_begin_clear(&b);
    }
}

/* Every step of the tenant listed through node `at`, page by page (page_size 4): how many, and
 * how many of them were seen twice; *pages counts the pages. */
static int list_all(const h_groups *cl, int at, idem_state state, int *twice, int *pages) {
  idem_client *c = h_groups_client(cl, cl->node[at].addr);
  char seen[64][IDEM_GLOBAL_ID_MAX + 1];
  int n = 0;
  *twice = *pages = 0;
  char *token = NULL;
  for (;;) {
    idem_steps_filter f = {.state = state, .page_size = 4, .page_token = token};
    idem_step_page p = {0};
    idem_error e = {0};
    cr_assert_eq(idem_steps_list(c, &f, &p, &e), IDEM_OK, "%s", e.message);
    (*pages)++;
    for (size_t i = 0; i < p.n_steps; i++) {
      for (int j = 0; j < n; j++)
        if (strcmp(seen[j], p.steps[i].global_id) == 0) (*twice)++;
      if (n < 64) snprintf(seen[n++], sizeof seen[0], "%s", p.steps[i].global_id);
    }
    free(token);
    token = p.next_page_token[0] ? strdup(p.next_page_token) : NULL;
    idem_step_page_clear(&p);
    if (!token || *pages > 40) break;
  }
  free(token);
  idem_close(c);
  return n;
}

Test(groups_admin, list_steps_without_a_saga_covers_both_groups_once, .timeout = 120) {
  h_groups cl;
  h_groups_start(&cl, false);
  h_groups_wait_balanced(&cl, NULL);
  char both[160];
  snprintf(both, sizeof both, "%s,%s", cl.node[0].addr, cl.node[1].addr);
  idem_client *c = h_groups_client(&cl, both);
  begin_steps(&cl, c);
  idem_close(c);
  for (int at = 0; at < 2; at++) { /* each node leads one group and reads both */
    int twice, pages;
    int n = list_all(&cl, at, IDEM_STATE_IN_PROGRESS, &twice, &pages);
    cr_expect_eq(n, 2 * PER_GROUP, "node %d listed %d of %d steps", at, n, 2 * PER_GROUP);
    cr_expect_eq(twice, 0, "node %d listed %d steps twice", at, twice);
    cr_expect_geq(pages, 6, "pages of 4: %d", pages);
  }
  h_groups_stop(&cl);
}

/* BeginStep on a fresh key of group g (its *attempt-th, counted up): ms left on its lease, or
 * -1 when the call failed. */
static int64_t fresh_step_lease(const h_groups *cl, idem_client *c, int g, int *attempt) {
  char tag[32], gid[64];
  snprintf(tag, sizeof tag, "pol%d", (*attempt)++);
  h_groups_id_in_group(cl->t, g, tag, gid, sizeof gid);
  idem_step_key k = {gid, "payments", "charge", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  if (idem_step_begin(c, &k, NULL, 0, 0, &b, &e) != IDEM_OK) return -1;
  int64_t lease = b.lease_expires_unix_ms - h_wall_ms();
  idem_begin_clear(&b);
  return lease;
}

Test(groups_admin, a_bulk_resolution_spans_both_groups, .timeout = 120) {
  h_groups cl;
  h_groups_start(&cl, false);
  h_groups_wait_balanced(&cl, NULL);
  char both[160];
  snprintf(both, sizeof both, "%s,%s", cl.node[0].addr, cl.node[1].addr);
  idem_client *c = h_groups_client(&cl, both);
  begin_steps(&cl, c);
  idem_bulk_resolution br = {
      .filter = {.state = IDEM_STATE_IN_PROGRESS},
      .res = {.outcome = IDEM_OUTCOME_FAILED, .code = 409, .reason = "incident 7"},
      .max_steps = 2 * PER_GROUP - 1,
      .request_id = "bulk-1",
  };
  idem_bulk_result r;
  idem_error e = {0};
  cr_expect_eq(idem_steps_resolve(c, &br, 10000, &r, &e), IDEM_FAILED_PRECONDITION,
               "max_steps bounds the sum over the groups");
  cr_expect(strstr(e.message, "across 2 groups"), "%s", e.message);
  br.max_steps = 2 * PER_GROUP;
  cr_assert_eq(idem_steps_resolve(c, &br, 10000, &r, &e), IDEM_OK, "%s", e.message);
  cr_expect_eq(r.matched, 2 * PER_GROUP);
  cr_expect_eq(r.resolved, 2 * PER_GROUP);
  int twice, pages;
  cr_expect_eq(list_all(&cl, 0, IDEM_STATE_IN_PROGRESS, &twice, &pages), 0, "none left open");
  cr_expect_eq(list_all(&cl, 1, IDEM_STATE_FAILED, &twice, &pages), 2 * PER_GROUP);
  cr_assert_eq(idem_steps_resolve(c, &br, 10000, &r, &e), IDEM_OK, "%s", e.message);
  cr_expect(r.replayed, "the same request id again answers the first answer");
  cr_expect_eq(r.resolved, 2 * PER_GROUP);
  /* the audit trail of both groups, through either node, each row once */
  idem_close(c);
  for (int at = 0; at < 2; at++) {
    c = h_groups_client(&cl, cl.node[at].addr);
    int rows = 0, guard = 0;
    char *token = NULL;
    do {
      idem_audit_page p = {0};
      cr_assert_eq(idem_audit_list(c, NULL, 5, token, &p, &e), IDEM_OK, "%s", e.message);
      rows += (int)p.n_entries;
      free(token);
      token = p.next_page_token[0] ? strdup(p.next_page_token) : NULL;
      idem_audit_page_clear(&p);
    } while (token && ++guard < 40);
    free(token);
    cr_expect_eq(rows, 2 * PER_GROUP, "node %d: one audit row per resolved step", at);
    idem_close(c);
  }
  /* a raw ResolveSteps without idem-group is refused, naming it */
  pbuf *filter = pb_varint(pb_new(), 1, 1); /* state IN_PROGRESS */
  pbuf *req = pb_str(pb_varint(pb_sub(pb_new(), 1, filter), 2, 1), 5, "x");
  char details[256];
  int lead = h_groups_leader_of(&cl, 0);
  int st = h_raw_call(cl.node[lead].addr, "/idem.v1.Admin/ResolveSteps", cl.t, req->b, req->n,
                      details, sizeof details);
  pb_free(req);
  cr_expect_eq(st, 3, "INVALID_ARGUMENT: %d %s", st, details);
  cr_expect(strstr(details, "idem-group"), "%s", details);
  h_groups_stop(&cl);
}

/* The policy row of (payments, charge) in database url: its lease_ms, -1 when none. */
static long long policy_lease(const char *url, const char *t) {
  const char *p[] = {t};
  PGconn *c = pgx_connect(url);
  PGresult *r = pgx_run(c,
                        "SELECT lease_ms FROM idem_policies WHERE tenant = $1 AND service ="
                        " 'payments' AND operation = 'charge'",
                        1, p);
  long long v = PQntuples(r) ? atoll(PQgetvalue(r, 0, 0)) : -1;
  PQclear(r);
  PQfinish(c);
  return v;
}

static void allow_connections(const h_groups *cl, int g, bool allow) {
  char sql[160];
  snprintf(sql, sizeof sql, "ALTER DATABASE %s ALLOW_CONNECTIONS %s", cl->db[g],
           allow ? "true" : "false");
  pgx_sql(NULL, sql, 0, NULL);
}

Test(groups_admin, a_policy_set_with_one_group_down_names_it_and_converges, .timeout = 120) {
  h_groups cl;
  h_groups_start(&cl, false);
  h_groups_wait_balanced(&cl, NULL);
  char both[160];
  snprintf(both, sizeof both, "%s,%s", cl.node[0].addr, cl.node[1].addr);
  idem_client *c = h_groups_client(&cl, both);
  allow_connections(&cl, 1, false); /* g2's database takes no new connection */
  idem_policy p = {.service = "payments",
                   .operation = "charge",
                   .failure_mode = 1,
                   .retention_s = 3600,
                   .lease_ms = 7000};
  idem_policy out;
  idem_error e = {0};
  int rc;
  /* a leadership change under way answers "not the leader" without a group (g2's leader may
   * step down, its store gone): the call once more, as a client would, until one names a group */
  bool answered;
  H_WAITED(answered,
           (rc = idem_policy_set(c, &p, &out, &e)) != IDEM_UNAVAILABLE || strstr(e.message, "group "),
           10000);
  allow_connections(&cl, 1, true);
  cr_expect(answered, "an answer other than a refusal naming no group, within 10 s: %s", e.message);
  cr_expect_eq(rc, IDEM_UNAVAILABLE, "%s", e.message);
  cr_expect(strstr(e.message, "group g2"), "names the group: %s", e.message);
  cr_expect_eq(policy_lease(cl.url[0], cl.t), 7000, "g1 kept the change");
  cr_expect_eq(policy_lease(cl.url[1], cl.t), -1, "g2 could not take it");
  cr_assert_eq(idem_policy_set(c, &p, &out, &e), IDEM_OK, "the repeat: %s", e.message);
  cr_expect_eq(policy_lease(cl.url[1], cl.t), 7000, "converged");
  /* each group's leader resolves the policy from its own store (its cache refreshes every 2 s) */
  for (int g = 0; g < 2; g++) {
    int attempt = 0;
    int64_t lease = 0;
    H_WAIT((lease = fresh_step_lease(&cl, c, g, &attempt)) > 5000, 10000,
           "g%d's step has the policy's 7 s lease (%lld ms left)", g + 1, (long long)lease);
  }
  idem_close(c);
  h_groups_stop(&cl);
}
