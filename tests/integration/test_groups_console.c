/* test_groups_console.c — the console on a real two-group cluster (groups.h, docs/api.md §13,
 * §17), over HTTP. The Slots page: each node's page lists both ranges with their group and both
 * groups with their leader (the node calls show leading it), epoch, store "ok" and slot count;
 * the navigation links to it; one group's database refusing connections shows that group's
 * store "unreachable" and the other's "ok". Every group's sagas: a saga of g2 is shown (saga
 * page, step page, the steps listing beside a step of g1) by both nodes, resolved on g2's
 * leader, and refused on the other node with g2's leader named. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "groups.h"
#include "harness.h"
#include "moves.h" /* h_sql_count */

/* The row of table id whose first cell is first (a copy, up to "</tr>"), NULL when none. */
static char *row_of(const char *html, const char *id, const char *first) {
  char tag[64], cell[96];
  snprintf(tag, sizeof tag, "<table id=\"%s\">", id);
  const char *t = strstr(html, tag);
  if (!t) return NULL;
  const char *end = strstr(t, "</table>");
  snprintf(cell, sizeof cell, "<tr><td>%s</td>", first);
  const char *r = strstr(t, cell);
  if (!r) { /* a numeric first cell */
    snprintf(cell, sizeof cell, "<tr><td class=\"num\">%s</td>", first);
    r = strstr(t, cell);
  }
  if (!r || (end && r > end)) return NULL;
  const char *e = strstr(r, "</tr>");
  return e ? strndup(r, (size_t)(e - r)) : NULL;
}

static void expect_group(const char *html, const char *name, const char *leader, bool here,
                         const char *store) {
  char *row = row_of(html, "groups", name);
  cr_assert(row, "a row of group %s: %s", name, html);
  cr_expect(strstr(row, leader), "%s led by %s: %s", name, leader, row);
  cr_expect(strstr(row, store), "%s's store %s: %s", name, store, row);
  cr_expect(strstr(row, "<td class=\"num\">32</td>"), "%s serves 32 slots: %s", name, row);
  cr_expect(strstr(row, here ? "<td>yes</td>" : "<td>no</td>"), "%s led here %d: %s", name, here,
            row);
  free(row);
}

static void expect_range(const char *html, const char *span, const char *group) {
  char *row = row_of(html, "ranges", span);
  cr_assert(row, "a range %s: %s", span, html);
  char cell[32];
  snprintf(cell, sizeof cell, "<td>%s</td>", group);
  cr_expect(strstr(row, cell), "%s served by %s: %s", span, group, row);
  free(row);
}

Test(groups_console, the_slots_page_lists_both_groups_and_ranges, .timeout = 120) {
  h_groups cl;
  h_groups_start(&cl, true);
  h_groups_wait_balanced(&cl, NULL);
  int lead[2] = {h_groups_leader_of(&cl, 0), h_groups_leader_of(&cl, 1)};
  for (int i = 0; i < 2; i++) {
    char *html = NULL;
    int st = h_http_get(cl.cport[i], "/slots", &html);
    cr_assert_eq(st, 200, "%s", html);
    cr_expect(strstr(html, "<h1>Slots</h1>"), "%s", html);
    cr_expect(strstr(html, "<a href=\"/slots\">Slots</a>"), "the navigation links it");
    cr_expect(strstr(html, "64 slots, map version 1"), "%s", html);
    expect_range(html,
                 "0\xE2\x80\x93"
                 "31",
                 "g1");
    expect_range(html,
                 "32\xE2\x80\x93"
                 "63",
                 "g2");
    expect_group(html, "g1", cl.node[lead[0]].addr, lead[0] == i, ">ok<");
    expect_group(html, "g2", cl.node[lead[1]].addr, lead[1] == i, ">ok<");
    free(html);
  }
  /* g1's database refuses connections (its sessions ended): g1 unreachable, g2 ok */
  char sql[200];
  snprintf(sql, sizeof sql, "ALTER DATABASE %s ALLOW_CONNECTIONS false", cl.db[0]);
  pgx_sql(NULL, sql, 0, NULL);
  const char *p[] = {cl.db[0]};
  pgx_sql(NULL, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1",
          1, p);
  char *html = NULL;
  cr_assert_eq(h_http_get(cl.cport[0], "/slots", &html), 200, "%s", html);
  snprintf(sql, sizeof sql, "ALTER DATABASE %s ALLOW_CONNECTIONS true", cl.db[0]);
  pgx_sql(NULL, sql, 0, NULL);
  expect_group(html, "g1", cl.node[lead[0]].addr, lead[0] == 0, ">unreachable<");
  expect_group(html, "g2", cl.node[lead[1]].addr, lead[1] == 0, ">ok<");
  free(html);
  h_groups_stop(&cl);
}

Test(groups_console, a_saga_of_the_second_group_is_shown_and_resolved, .timeout = 120) {
  h_groups cl;
  h_groups_start(&cl, true);
  h_groups_wait_balanced(&cl, NULL);
  int lead2 = h_groups_leader_of(&cl, 1), other = 1 - lead2; /* other leads g1, not g2 */
  char addrs[300], gid2[64], gid1[64];
  snprintf(addrs, sizeof addrs, "%s,%s", cl.node[0].addr, cl.node[1].addr);
  h_groups_id_in_group(cl.t, 1, "console", gid2, sizeof gid2);
  h_groups_id_in_group(cl.t, 0, "console", gid1, sizeof gid1);
  idem_client *c = h_groups_client(&cl, addrs);
  const char *gids[2] = {gid1, gid2};
  for (int g = 0; g < 2; g++) { /* one step in progress in each group */
    idem_step_key k = {gids[g], "payments", "charge", IDEM_FORWARD};
    idem_begin b = {0};
    idem_error e = {0};
    cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 600000, &b, &e), IDEM_OK, "%s", e.message);
    cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
    idem_begin_clear(&b);
  }
  char path[256], cookie[160], *resp = NULL;
  for (int i = 0; i < 2; i++) { /* both nodes show g2's saga and step, and list both groups' */
    h_console_session(cl.cport[i], cl.t, cookie, sizeof cookie);
    snprintf(path, sizeof path, "/sagas/%s", gid2);
    cr_assert_eq(h_http_request(cl.cport[i], "GET", path, cookie, NULL, &resp), 200, "node %d: %s",
                 i, resp);
    cr_expect(strstr(resp, "<td>payments</td><td>charge</td>"), "node %d: %s", i, resp);
    free(resp);
    snprintf(path, sizeof path, "/steps/%s/payments/charge/forward", gid2);
    cr_assert_eq(h_http_request(cl.cport[i], "GET", path, cookie, NULL, &resp), 200, "node %d: %s",
                 i, resp);
    cr_expect(strstr(resp, "id=\"record\""), "node %d: %s", i, resp);
    if (i == lead2)
      cr_expect(strstr(resp, "<form class=\"card\" id=\"resolve\""), "g2's leader offers: %s",
                resp);
    else
      cr_expect(strstr(resp, cl.node[lead2].addr), "the other names g2's leader: %s", resp);
    free(resp);
    cr_assert_eq(h_http_request(cl.cport[i], "GET", "/steps", cookie, NULL, &resp), 200, "%s",
                 resp);
    cr_expect(strstr(resp, gid1) && strstr(resp, gid2), "node %d lists both groups': %s", i, resp);
    free(resp);
  }
  /* resolved on g2's leader; refused, naming it, on the other node */
  for (int pass = 0; pass < 2; pass++) {
    int i = pass == 0 ? other : lead2;
    h_console_session(cl.cport[i], cl.t, cookie, sizeof cookie);
    char csrf[80] = "";
    if (i == other) /* a page with a form of this session: g1's leader may edit policies */
      snprintf(path, sizeof path, "/policies");
    else
      snprintf(path, sizeof path, "/steps/%s/payments/charge/forward", gid2);
    cr_assert_eq(h_http_request(cl.cport[i], "GET", path, cookie, NULL, &resp), 200, "%s", resp);
    cr_assert(h_text_after(resp, "name=\"csrf\" value=\"", "\"", csrf, sizeof csrf), "%s", resp);
    free(resp);
    char form[256];
    snprintf(form, sizeof form,
             "csrf=%s&outcome=failed&code=7&body=&reason=stuck+in+g2&confirm=yes", csrf);
    snprintf(path, sizeof path, "/steps/%s/payments/charge/forward/resolve", gid2);
    int st = h_http_request(cl.cport[i], "POST", path, cookie, form, &resp);
    if (i == other) {
      cr_expect_eq(st, 503, "the node not leading g2 refuses: %s", resp);
      cr_expect(strstr(resp, cl.node[lead2].addr), "and names g2's leader: %s", resp);
    } else {
      cr_expect_eq(st, 303, "g2's leader resolves: %s", resp);
      cr_expect(strstr(resp, "?resolved=1"), "%s", resp);
    }
    free(resp);
  }
  idem_step_key k = {gid2, "payments", "charge", IDEM_FORWARD};
  idem_record rec = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_lookup(c, &k, &rec, &e), IDEM_OK, "%s", e.message);
  cr_expect_eq(rec.state, IDEM_STATE_FAILED, "resolved failed: %d", rec.state);
  cr_expect_eq(rec.result.code, 7);
  idem_record_clear(&rec);
  /* the saga page of g2 shows the resolution in its audit trail */
  h_console_session(cl.cport[other], cl.t, cookie, sizeof cookie);
  snprintf(path, sizeof path, "/sagas/%s", gid2);
  cr_assert_eq(h_http_request(cl.cport[other], "GET", path, cookie, NULL, &resp), 200, "%s", resp);
  cr_expect(strstr(resp, "stuck in g2"), "the audit row: %s", resp);
  free(resp);
  idem_close(c);
  h_groups_stop(&cl);
}

/* The overview, the audit trail and the policies read every group (docs/api.md §17): one step in
 * progress and one resolved step in each group; both nodes' overviews count both groups' steps,
 * their audit trails show both groups' resolutions; a policy set through the console is written
 * to both groups' stores; one that a group lacks is shown, saying it is not the same in every
 * group, by both nodes. */
Test(groups_console, the_overview_audit_and_policies_read_every_group, .timeout = 120) {
  h_groups cl;
  h_groups_start(&cl, true);
  h_groups_wait_balanced(&cl, NULL);
  int lead1 = h_groups_leader_of(&cl, 0);
  char addrs[300];
  snprintf(addrs, sizeof addrs, "%s,%s", cl.node[0].addr, cl.node[1].addr);
  idem_client *c = h_groups_client(&cl, addrs);
  const char *svc[2] = {"svc-of-g1", "svc-of-g2"}, *why[2] = {"fixed-in-g1", "fixed-in-g2"};
  for (int g = 0; g < 2; g++) {
    char open_id[64], done_id[64];
    h_groups_id_in_group(cl.t, g, "open", open_id, sizeof open_id);
    h_groups_id_in_group(cl.t, g, "done", done_id, sizeof done_id);
    const char *ids[2] = {open_id, done_id};
    for (int k = 0; k < 2; k++) {
      idem_step_key key = {ids[k], svc[g], "op", IDEM_FORWARD};
      idem_begin b = {0};
      idem_error e = {0};
      cr_assert_eq(idem_step_begin(c, &key, NULL, 0, 600000, &b, &e), IDEM_OK, "%s", e.message);
      idem_begin_clear(&b);
      if (k == 0) continue;
      idem_resolution r = {.outcome = IDEM_OUTCOME_SUCCEEDED, .reason = why[g]};
      cr_assert_eq(idem_step_resolve(c, &key, &r, NULL, &e), IDEM_OK, "%s", e.message);
    }
  }
  char cookie[160], *resp = NULL;
  for (int i = 0; i < 2; i++) {
    h_console_session(cl.cport[i], cl.t, cookie, sizeof cookie);
    cr_assert_eq(h_http_request(cl.cport[i], "GET", "/", cookie, NULL, &resp), 200, "%s", resp);
    for (int g = 0; g < 2; g++) { /* one in progress each */
      char want[256];
      snprintf(want, sizeof want,
               "<td>%s</td><td>op</td><td class=\"num\"><a href=\"/steps?state=in_progress&amp;"
               "service=%s&amp;operation=op\">1</a>",
               svc[g], svc[g]);
      cr_expect(strstr(resp, want), "node %d counts %s: %s", i, svc[g], strstr(resp, "<h2>"));
    }
    free(resp);
    cr_assert_eq(h_http_request(cl.cport[i], "GET", "/audit", cookie, NULL, &resp), 200, "%s",
                 resp);
    cr_expect(strstr(resp, why[0]) && strstr(resp, why[1]), "node %d's audit shows both: %s", i,
              resp);
    free(resp);
  }
  /* a policy set on g1's leader's console reaches both groups' stores */
  h_console_session(cl.cport[lead1], cl.t, cookie, sizeof cookie);
  char csrf[80] = "", form[400];
  cr_assert_eq(h_http_request(cl.cport[lead1], "GET", "/policies", cookie, NULL, &resp), 200, "%s",
               resp);
  cr_assert(h_text_after(resp, "name=\"csrf\" value=\"", "\"", csrf, sizeof csrf), "%s", resp);
  free(resp);
  snprintf(form, sizeof form,
           "csrf=%s&service=pol-svc&operation=*&mode=fail-open&retention_s=3600&"
           "key_retention_s=0&lease_ms=7000",
           csrf);
  cr_assert_eq(h_http_request(cl.cport[lead1], "POST", "/policies", cookie, form, &resp), 303,
               "%s", resp);
  free(resp);
  for (int g = 0; g < 2; g++)
    cr_expect_eq(h_sql_count(cl.url[g], "SELECT count(*) FROM idem_policies WHERE service = "
                                        "'pol-svc' AND lease_ms = 7000"),
                 1, "group %d holds the policy", g + 1);
  /* a policy only g2 holds (a change that missed g1) is shown by both nodes, flagged */
  cr_assert_eq(h_sql_count(cl.url[0], "WITH d AS (DELETE FROM idem_policies WHERE service = "
                                      "'pol-svc' RETURNING 1) SELECT count(*) FROM d"),
               1);
  for (int i = 0; i < 2; i++) {
    h_console_session(cl.cport[i], cl.t, cookie, sizeof cookie);
    cr_assert_eq(h_http_request(cl.cport[i], "GET", "/policies", cookie, NULL, &resp), 200, "%s",
                 resp);
    char *row = row_of(resp, "policies", "pol-svc");
    cr_expect(row && strstr(row, "fail-open") && strstr(row, "not the same in every group"),
              "node %d: %s", i, row ? row : resp);
    free(row);
    free(resp);
  }
  idem_close(c);
  h_groups_stop(&cl);
}
