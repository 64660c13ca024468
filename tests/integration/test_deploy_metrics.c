/* test_deploy_metrics.c — every metric an alert rule (deploy/prometheus/idem-rules.yml) or a
 * dashboard panel (deploy/grafana/idem-dashboard.json) names exists on a live coordinator: a
 * two-group cluster (so that the group-labelled and slot-move series are there too) is scraped,
 * and each idem_* name in those files must be a family the scrape declares (# TYPE) or a sample
 * it holds (histograms: name_bucket, _sum, _count). A renamed metric fails here, not at 3 am. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "groups.h"
#include "harness.h"

#ifndef IDEM_DEPLOY_DIR
#error "IDEM_DEPLOY_DIR must name the deploy/ folder"
#endif

static h_groups cl;

TestSuite(deploy_metrics, .timeout = 120);

/* Whether the scrape declares family name, or holds a sample of it. */
static bool exists(const char *scrape, const char *name) {
  size_t n = strlen(name);
  for (const char *line = scrape; *line;) {
    if (strncmp(line, "# TYPE ", 7) == 0 && strncmp(line + 7, name, n) == 0 && line[7 + n] == ' ')
      return true;
    if (strncmp(line, name, n) == 0 && (line[n] == ' ' || line[n] == '{')) return true;
    const char *eol = strchr(line, '\n');
    if (!eol) break;
    line = eol + 1;
  }
  return false;
}

/* Checks every idem_* name in the file; returns how many it found. */
static int check_names(const char *path, const char *scrape) {
  char *text = h_read_file(path);
  int found = 0;
  for (const char *p = text; (p = strstr(p, "idem_")) != NULL;) {
    if (p > text && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z'))) {
      p++;
      continue;
    }
    size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)n, p);
    cr_assert(exists(scrape, name), "%s names %s, which no coordinator exports", path, name);
    found++;
    p += n;
  }
  free(text);
  return found;
}

Test(deploy_metrics, every_metric_a_rule_or_panel_names_exists) {
  h_groups_start(&cl, false);
  /* an error, so that the reason counter has a sample besides its declaration */
  idem_client *c = h_groups_client(&cl, cl.node[0].addr);
  idem_record r;
  idem_error e = {0};
  idem_step_key k = {"g-none", "pay", "charge", IDEM_FORWARD};
  cr_assert_eq(idem_step_lookup(c, &k, &r, &e), IDEM_NOT_FOUND, "%s", e.message);
  idem_close(c);
  char *scrape = NULL;
  for (int i = 0; i < 2; i++) {
    char *body;
    cr_assert_eq(h_http_get(cl.mport[i], "/metrics", &body), 200);
    size_t a = scrape ? strlen(scrape) : 0, b = strlen(body);
    scrape = realloc(scrape, a + b + 1);
    memcpy(scrape + a, body, b + 1);
    free(body);
  }
  cr_assert(exists(scrape, "idem_rpc_errors_total"));
  cr_assert_not(exists(scrape, "idem_no_such_metric"), "the check cannot fail");
  int rules = check_names(IDEM_DEPLOY_DIR "/prometheus/idem-rules.yml", scrape);
  int panels = check_names(IDEM_DEPLOY_DIR "/grafana/idem-dashboard.json", scrape);
  cr_assert_geq(rules, 7, "the rules name %d metrics", rules);
  cr_assert_geq(panels, 12, "the panels name %d metrics", panels);
  free(scrape);
  h_groups_stop(&cl);
}
