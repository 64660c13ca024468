/* test_groups_policy_conns.c — a policy change is written to every store group (docs/api.md
 * §17) over connections the node keeps open, not a new connection per call and group: on a
 * two-group cluster, N SetPolicy and N DeletePolicy calls (Admin API, through libidem; after a
 * first such round, which connects the workers' own stores) open at most N/2 PostgreSQL
 * connections, and N policy forms posted to the console's /policies page (after a first one) at
 * most 2, as both nodes' idem_store_connects_total say (every connection a store of the node
 * opened). A connection per call and other group would be 2N and N. Every change reached both
 * groups' databases (the rows are counted there). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "groups.h"
#include "harness.h"
#include "pgexec.h"

enum { N = 20 };

/* Connections opened so far by both nodes' stores (each node's counter must be served). */
static double connects(const h_groups *cl) {
  double sum = 0;
  for (int i = 0; i < 2; i++) {
    double v = h_metric(cl->mport[i], "idem_store_connects_total");
    cr_assert_geq(v, 0, "node %d serves idem_store_connects_total", i);
    sum += v;
  }
  return sum;
}

/* The tenant's policy rows in database url whose service starts with prefix. */
static long long rows_in(const char *url, const char *tenant, const char *prefix) {
  char like[64];
  snprintf(like, sizeof like, "%s%%", prefix);
  const char *p[] = {tenant, like};
  return pgx_sql(url, "SELECT count(*) FROM idem_policies WHERE tenant = $1 AND service LIKE $2",
                 2, p);
}

static void set_policy(idem_client *c, const char *svc, uint32_t lease_ms) {
  idem_policy p = {.failure_mode = 1, .retention_s = 3600, .lease_ms = lease_ms};
  snprintf(p.service, sizeof p.service, "%s", svc);
  snprintf(p.operation, sizeof p.operation, "*");
  idem_error e = {0};
  cr_assert_eq(idem_policy_set(c, &p, NULL, &e), IDEM_OK, "SetPolicy %s: %s", svc, e.message);
}

/* N SetPolicy (services tag0..) then N DeletePolicy of them; the rows each group's database
 * held after the sets into rows[2]. */
static void set_then_delete(const h_groups *cl, idem_client *c, const char *tag,
                            long long rows[2]) {
  char svc[32];
  for (int i = 0; i < N; i++) {
    snprintf(svc, sizeof svc, "%s%d", tag, i);
    set_policy(c, svc, 1000 + (uint32_t)i);
  }
  for (int g = 0; g < 2; g++) rows[g] = rows_in(cl->url[g], cl->t, tag);
  for (int i = 0; i < N; i++) {
    snprintf(svc, sizeof svc, "%s%d", tag, i);
    bool deleted = false;
    idem_error e = {0};
    cr_assert_eq(idem_policy_delete(c, svc, "*", &deleted, &e), IDEM_OK, "DeletePolicy %s: %s",
                 svc, e.message);
    cr_expect(deleted, "%s was there", svc);
  }
}

Test(groups_policy_conns, policy_changes_reuse_each_groups_connection, .timeout = 180) {
  h_groups cl;
  h_groups_start(&cl, true);
  h_groups_wait_balanced(&cl, NULL);
  char both[160];
  snprintf(both, sizeof both, "%s,%s", cl.node[0].addr, cl.node[1].addr);
  idem_client *c = h_groups_client(&cl, both);
  /* a first round: the workers' own stores connect on their first call, the policy stores too;
   * the second round is the one counted */
  long long rows[2];
  double before = connects(&cl);
  set_then_delete(&cl, c, "warm", rows);
  double warm = connects(&cl) - before;
  before = connects(&cl);
  set_then_delete(&cl, c, "api", rows);
  double api = connects(&cl) - before;
  printf("Admin API: %d SetPolicy + %d DeletePolicy on 2 groups opened %.0f connections (the "
         "first such round %.0f)\n",
         N, N, api, warm);
  cr_expect_eq(rows[0], N, "g1 took every change: %lld rows", rows[0]);
  cr_expect_eq(rows[1], N, "g2 took every change: %lld rows", rows[1]);
  cr_expect_eq(rows_in(cl.url[1], cl.t, "api"), 0, "g2 took every delete");
  /* not 0: a worker not used in the first round connects its own stores on its first call */
  cr_expect_leq(api, N / 2, "%.0f connections for %d policy changes (one per call and other "
                            "group would be %d)", api, 2 * N, 2 * N);
  idem_close(c);

  /* the console's form on g1's leader (it edits policies), as many times, after one that
   * opens the page's handles */
  int at = h_groups_leader_of(&cl, 0);
  char *resp = NULL, cookie[160], csrf[80];
  h_console_session(cl.cport[at], cl.t, cookie, sizeof cookie);
  cr_assert_eq(h_http_request(cl.cport[at], "GET", "/policies", cookie, NULL, &resp), 200, "%s",
               resp);
  cr_assert(h_text_after(resp, "name=\"csrf\" value=\"", "\"", csrf, sizeof csrf), "%s", resp);
  free(resp);
  for (int i = 0; i <= N; i++) {
    if (i == 1) before = connects(&cl);
    char form[256];
    snprintf(form, sizeof form,
             "csrf=%s&service=web%d&operation=*&mode=fail-closed&retention_s=3600"
             "&key_retention_s=0&lease_ms=5000",
             csrf, i);
    cr_assert_eq(h_http_request(cl.cport[at], "POST", "/policies", cookie, form, &resp), 303,
                 "the console's policy form %d: %s", i, resp);
    free(resp);
  }
  double console = connects(&cl) - before;
  printf("console: %d policy forms on 2 groups opened %.0f connections\n", N, console);
  cr_expect_eq(rows_in(cl.url[1], cl.t, "web"), N + 1, "g2 took every console change");
  cr_expect_leq(console, 2, "%.0f connections for %d console policy changes (one per call and "
                            "other group would be %d)", console, N, N);
  h_groups_stop(&cl);
}
