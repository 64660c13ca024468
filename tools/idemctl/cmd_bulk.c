/* cmd_bulk.c — `idemctl resolve --where …`: Admin.ResolveSteps (docs/api.md §12) for on-call after
 * an outage. A dry run first shows the count and a sample; without --yes on a terminal it asks; the
 * request id (made here unless --request-id) is printed so that a run cut short can be repeated
 * without resolving anything twice. --stuck is two requests (in progress with an expired lease,
 * then unknown), with the request ids R.in_progress and R.unknown. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "idemctl.h"

#define BULK_TIMEOUT_MS 600000 /* a bulk resolution of thousands of steps takes seconds */

typedef struct part { /* one ResolveSteps request */
  idem_steps_filter filter;
  char request_id[300];
  idem_bulk_result r;
} part;

static int run(ctl *c, part *p, const idem_bulk_resolution *tmpl, bool dry_run) {
  idem_bulk_resolution in = *tmpl;
  in.filter = p->filter;
  in.request_id = p->request_id;
  in.dry_run = dry_run;
  idem_error e = {0};
  int64_t timeout = c->deadline_ms > BULK_TIMEOUT_MS ? c->deadline_ms : BULK_TIMEOUT_MS;
  if (idem_steps_resolve(ctl_client(c), &in, timeout, &p->r, &e) != IDEM_OK)
    return ctl_fail("resolve --where", &e);
  return EXIT_OK;
}

static void print_sample(const part *parts, int n) {
  for (int k = 0; k < n; k++)
    for (size_t i = 0; i < parts[k].r.n_sample; i++) {
      const idem_bulk_key *s = &parts[k].r.sample[i];
      printf("  %s %s/%s (%s)\n", s->global_id, s->service, s->operation, fmt_phase(s->phase));
    }
}

static void print_json(const part *parts, int n, bool dry_run) {
  cJSON *arr = cJSON_CreateArray();
  for (int k = 0; k < n; k++) {
    const idem_bulk_result *r = &parts[k].r;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "request_id", parts[k].request_id);
    cJSON_AddNumberToObject(o, "matched", r->matched);
    cJSON_AddNumberToObject(o, "resolved", r->resolved);
    cJSON_AddStringToObject(o, "batch_id", r->batch_id);
    cJSON_AddBoolToObject(o, "dry_run", dry_run);
    cJSON_AddBoolToObject(o, "replayed", r->replayed);
    cJSON *sample = cJSON_AddArrayToObject(o, "sample");
    for (size_t i = 0; i < r->n_sample; i++) {
      cJSON *s = cJSON_CreateObject();
      cJSON_AddStringToObject(s, "global_id", r->sample[i].global_id);
      cJSON_AddStringToObject(s, "service", r->sample[i].service);
      cJSON_AddStringToObject(s, "operation", r->sample[i].operation);
      cJSON_AddStringToObject(s, "phase", fmt_phase(r->sample[i].phase));
      cJSON_AddItemToArray(sample, s);
    }
    cJSON_AddItemToArray(arr, o);
  }
  json_print(arr);
}

/* The parts of the request: one filter, or the two of --stuck. */
static int plan(ctl *c, part parts[2], int *n) {
  idem_steps_filter f;
  int rc = ctl_parse_filter(c, &f);
  if (rc != EXIT_OK) return rc;
  const char *rid = ctl_flag_value(c, "request-id");
  char made[40];
  if (!rid) {
    if (!ctl_new_request_id(made)) return ctl_usage_error(c, "cannot make a request id");
    rid = made;
  }
  if (ctl_has(c, "stuck")) {
    if (f.state) return ctl_usage_error(c, "--stuck and --state exclude each other");
    *n = 2;
    parts[0].filter = parts[1].filter = f;
    parts[0].filter.state = IDEM_STATE_IN_PROGRESS;
    parts[0].filter.lease_expired_only = true;
    parts[1].filter.state = IDEM_STATE_UNKNOWN;
    snprintf(parts[0].request_id, sizeof parts[0].request_id, "%s.in_progress", rid);
    snprintf(parts[1].request_id, sizeof parts[1].request_id, "%s.unknown", rid);
    return EXIT_OK;
  }
  if (f.state != IDEM_STATE_IN_PROGRESS && f.state != IDEM_STATE_UNKNOWN)
    return ctl_usage_error(c, "--where needs --state in_progress, --state unknown or --stuck");
  *n = 1;
  parts[0].filter = f;
  snprintf(parts[0].request_id, sizeof parts[0].request_id, "%s", rid);
  return EXIT_OK;
}

static bool confirm(uint32_t matched, const char *outcome) {
  printf("resolve these %u step(s) as %s? [y/N] ", matched, outcome);
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof line, stdin)) return false;
  return line[0] == 'y' || line[0] == 'Y';
}

int cmd_resolve_where(ctl *c) {
  if (c->npos != 0) return ctl_usage_error(c, "--where takes no GLOBAL_ID SERVICE OPERATION");
  idem_bulk_resolution tmpl;
  memset(&tmpl, 0, sizeof tmpl);
  uint8_t *body = NULL;
  int rc = ctl_parse_resolution(c, &tmpl.res, &body);
  if (rc != EXIT_OK) return rc;
  uint64_t max = 1000;
  const char *v = ctl_flag_value(c, "max");
  if (v) {
    char *end;
    errno = 0;
    unsigned long long m = strtoull(v, &end, 10);
    if (errno || *end || end == v || m < 1 || m > 10000) {
      free(body);
      return ctl_usage_error(c, "--max: expected 1 to 10000");
    }
    max = m;
  }
  tmpl.max_steps = (uint32_t)max;
  part parts[2];
  memset(parts, 0, sizeof parts);
  int n = 0;
  if ((rc = plan(c, parts, &n)) != EXIT_OK) {
    free(body);
    return rc;
  }
  bool dry = ctl_has(c, "dry-run"), yes = ctl_has(c, "yes");
  const char *outcome = ctl_flag_value(c, "outcome");
  if (!dry && !yes && !isatty(STDIN_FILENO)) {
    free(body);
    return ctl_usage_error(c, "not on a terminal: pass --yes to resolve (or --dry-run to count)");
  }
  if (dry || !yes) { /* count first: a dry run, and on a terminal the question */
    uint32_t total = 0;
    for (int k = 0; k < n && rc == EXIT_OK; k++) rc = run(c, &parts[k], &tmpl, true);
    for (int k = 0; k < n; k++) total += parts[k].r.matched;
    if (rc == EXIT_OK && (dry || c->json)) {
      if (c->json) {
        print_json(parts, n, true);
      } else {
        printf("%u step(s) match (dry run: nothing resolved); first ones:\n", total);
        print_sample(parts, n);
      }
    }
    if (rc != EXIT_OK || dry || c->json) {
      free(body);
      return rc;
    }
    printf("%u step(s) match; first ones:\n", total);
    print_sample(parts, n);
    if (total == 0 || !confirm(total, outcome)) {
      printf("nothing resolved\n");
      free(body);
      return EXIT_OK;
    }
  }
  for (int k = 0; k < n && rc == EXIT_OK; k++) rc = run(c, &parts[k], &tmpl, false);
  free(body);
  if (rc != EXIT_OK) {
    fprintf(stderr, "idemctl: repeat with --request-id %s to finish without resolving twice\n",
            n == 2 ? parts[0].request_id : parts[0].request_id);
    return rc;
  }
  if (c->json) {
    print_json(parts, n, false);
    return EXIT_OK;
  }
  for (int k = 0; k < n; k++) {
    const idem_bulk_result *r = &parts[k].r;
    printf("%s%u matched, %u resolved as %s", r->replayed ? "(replayed: the first answer) " : "",
           r->matched, r->resolved, outcome);
    if (r->matched > r->resolved)
      printf(", %u skipped (changed since they matched)", r->matched - r->resolved);
    printf("; batch %s; request id %s\n", r->batch_id, parts[k].request_id);
  }
  return EXIT_OK;
}
