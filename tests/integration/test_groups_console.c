/* test_groups_console.c — the console's Slots page (/slots, docs/api.md §13, §17) on a real
 * two-group cluster (groups.h), over HTTP: each node's page lists both ranges with their group
 * and both groups with their leader (the node calls show leading it), epoch, store "ok" and
 * slot count; the navigation links to it; one group's database refusing connections shows that
 * group's store "unreachable" and the other's "ok". */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "groups.h"
#include "harness.h"

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
