/* cmd_policy.c — idemctl policy list|get|set|delete and reconcile (the Admin policy calls and
 * the journal replay of libidem). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/v1/names.h"
#include "idemctl.h"
#include "util/duration.h"

static const char *mode_word(int m) {
  return m == IDEM_FAIL_OPEN || m == IDEM_FAIL_CLOSED ? idem_word_failure_mode(m) : "-";
}

/* "24h", "90s", "1500ms": the largest unit that divides evenly. */
/* A duration as idemctl reads it back (util/duration's grammar). */
static const char *dur_words(int64_t ms, char *buf, size_t n) {
  duration_exact(ms, buf, n);
  return buf;
}

static cJSON *json_policy(const idem_policy *p) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "service", p->service);
  cJSON_AddStringToObject(o, "operation", p->operation);
  cJSON_AddStringToObject(o, "failure_mode", mode_word(p->failure_mode));
  cJSON_AddNumberToObject(o, "retention_s", p->retention_s);
  cJSON_AddNumberToObject(o, "key_retention_s", p->key_retention_s);
  cJSON_AddNumberToObject(o, "lease_ms", p->lease_ms);
  cJSON_AddNumberToObject(o, "updated_unix_ms", (double)p->updated_unix_ms);
  return o;
}

static void print_policies(const idem_policy *ps, size_t n) {
  static const char *const hdr[] = {"SERVICE", "OPERATION",     "MODE",   "RETENTION",
                                    "KEYS KEPT", "LEASE", "UPDATED"};
  table *t = table_new(7, hdr);
  for (size_t i = 0; i < n; i++) {
    char r[32], k[32], l[32], u[32];
    bool same = ps[i].key_retention_s <= ps[i].retention_s;
    const char *row[] = {
        ps[i].service,
        ps[i].operation,
        mode_word(ps[i].failure_mode),
        dur_words((int64_t)ps[i].retention_s * 1000, r, sizeof r),
        same ? "same" : dur_words((int64_t)ps[i].key_retention_s * 1000, k, sizeof k),
        dur_words(ps[i].lease_ms, l, sizeof l),
        ps[i].updated_unix_ms ? fmt_age(ps[i].updated_unix_ms, u, sizeof u) : "built-in"};
    table_row(t, row);
  }
  table_print(t);
  table_free(t);
}

int cmd_policy_list(ctl *c) {
  idem_policies l;
  idem_error e = {0};
  memset(&l, 0, sizeof l);
  if (idem_policy_list(ctl_client(c), &l, &e) != IDEM_OK) return ctl_fail("policy list", &e);
  if (c->json) {
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < l.n; i++) cJSON_AddItemToArray(arr, json_policy(&l.policies[i]));
    json_print(arr);
  } else if (l.n == 0) {
    printf("(no stored policies: every operation has the built-in default)\n");
  } else {
    print_policies(l.policies, l.n);
  }
  idem_policies_clear(&l);
  return EXIT_OK;
}

/* One policy, as JSON or as a one-row table. */
static int show_policy(const ctl *c, const idem_policy *p) {
  if (c->json)
    json_print(json_policy(p));
  else
    print_policies(p, 1);
  return EXIT_OK;
}

int cmd_policy_get(ctl *c) {
  idem_policy p;
  idem_error e = {0};
  if (idem_policy_get(ctl_client(c), c->pos[0], c->pos[1], &p, &e) != IDEM_OK)
    return ctl_fail("policy get", &e);
  return show_policy(c, &p);
}

int cmd_policy_set(ctl *c) {
  if (ctl_has(c, "fail-open") && ctl_has(c, "fail-closed"))
    return ctl_usage_error(c, "--fail-open and --fail-closed exclude each other");
  int64_t retention_ms = 0, lease_ms = 0, key_ms = -1;
  const char *v;
  if ((v = ctl_flag_value(c, "retention")) &&
      (!fmt_parse_duration(v, &retention_ms) || retention_ms < 1000 || retention_ms % 1000))
    return ctl_usage_error(c, "--retention: expected whole seconds, e.g. 24h");
  if ((v = ctl_flag_value(c, "key-retention")) &&
      (!fmt_parse_duration(v, &key_ms) || key_ms < 0 || key_ms % 1000 ||
       key_ms > 400LL * 86400 * 1000))
    return ctl_usage_error(c, "--key-retention: expected 0 (same as --retention) or whole "
                              "seconds up to 400d, e.g. 365d");
  if ((v = ctl_flag_value(c, "lease")) &&
      (!fmt_parse_duration(v, &lease_ms) || lease_ms < 1 || lease_ms > 3600000))
    return ctl_usage_error(c, "--lease: expected 1ms to 1h, e.g. 30s");
  /* unspecified fields keep their current effective value */
  idem_policy cur, p, out;
  idem_error e = {0};
  memset(&cur, 0, sizeof cur);
  cur.failure_mode = IDEM_FAIL_CLOSED; /* the built-in default (README) */
  cur.retention_s = 86400;
  cur.lease_ms = 30000;
  if (strcmp(c->pos[0], "*") != 0 && strcmp(c->pos[1], "*") != 0 &&
      idem_policy_get(ctl_client(c), c->pos[0], c->pos[1], &cur, &e) != IDEM_OK)
    return ctl_fail("policy set", &e);
  memset(&p, 0, sizeof p);
  snprintf(p.service, sizeof p.service, "%s", c->pos[0]);
  snprintf(p.operation, sizeof p.operation, "%s", c->pos[1]);
  p.failure_mode = ctl_has(c, "fail-open") ? IDEM_FAIL_OPEN
                   : ctl_has(c, "fail-closed")
                       ? IDEM_FAIL_CLOSED
                       : (cur.failure_mode ? cur.failure_mode : IDEM_FAIL_CLOSED);
  p.retention_s = retention_ms ? (uint32_t)(retention_ms / 1000) : cur.retention_s;
  p.lease_ms = lease_ms ? (uint32_t)lease_ms : cur.lease_ms;
  /* GetPolicy answers the key retention in effect: one no longer than the retention was "the
   * same", and stays so when only the retention changes */
  p.key_retention_s = key_ms >= 0                              ? (uint32_t)(key_ms / 1000)
                      : cur.key_retention_s > cur.retention_s ? cur.key_retention_s
                                                              : 0;
  if (key_ms < 0 && p.key_retention_s && p.key_retention_s < p.retention_s) {
    char k[32];
    return ctl_usage_error(c,
                           "--retention: longer than the keys' retention (%s) kept from the "
                           "current policy; give --key-retention too (0 = as long as results)",
                           dur_words((int64_t)p.key_retention_s * 1000, k, sizeof k));
  }
  if (idem_policy_set(ctl_client(c), &p, &out, &e) != IDEM_OK) return ctl_fail("policy set", &e);
  return show_policy(c, &out);
}

int cmd_policy_delete(ctl *c) {
  bool deleted = false;
  idem_error e = {0};
  if (idem_policy_delete(ctl_client(c), c->pos[0], c->pos[1], &deleted, &e) != IDEM_OK)
    return ctl_fail("policy delete", &e);
  if (c->json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "deleted", deleted);
    json_print(o);
  } else {
    printf(deleted ? "deleted policy %s/%s\n" : "no stored policy %s/%s\n", c->pos[0], c->pos[1]);
  }
  return deleted ? EXIT_OK : EXIT_REFUSED;
}

static const char *reconcile_word(idem_reconcile_status s) {
  switch (s) {
    case IDEM_RECONCILE_RECORDED:
      return "recorded";
    case IDEM_RECONCILE_ALREADY_PRESENT:
      return "already present";
    case IDEM_RECONCILE_RAN_TWICE:
      return "ran twice";
    case IDEM_RECONCILE_SKIPPED:
      return "skipped";
    case IDEM_RECONCILE_INVALID:
      return "invalid";
    case IDEM_RECONCILE_FAILED:
      return "failed";
  }
  return "-";
}

int cmd_reconcile(ctl *c) {
  idem_reconcile_report rep;
  memset(&rep, 0, sizeof rep);
  idem_error e = {0};
  int code = idem_journal_reconcile(ctl_client(c), c->pos[0], &rep, &e);
  if (code != IDEM_OK && rep.lines == 0) {
    idem_reconcile_report_clear(&rep);
    return ctl_fail("reconcile", &e);
  }
  if (c->json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "lines", (double)rep.lines);
    cJSON_AddNumberToObject(o, "recorded", (double)rep.recorded);
    cJSON_AddNumberToObject(o, "already_present", (double)rep.already_present);
    cJSON_AddNumberToObject(o, "ran_twice", (double)rep.ran_twice);
    cJSON_AddNumberToObject(o, "skipped", (double)rep.skipped);
    cJSON_AddNumberToObject(o, "invalid", (double)rep.invalid);
    cJSON_AddNumberToObject(o, "failed", (double)rep.failed);
    cJSON *items = cJSON_AddArrayToObject(o, "items");
    for (size_t i = 0; i < rep.n_items; i++) {
      const idem_reconcile_line *l = &rep.items[i];
      cJSON *it = cJSON_CreateObject();
      cJSON_AddNumberToObject(it, "line", (double)l->line_no);
      cJSON_AddStringToObject(it, "status", reconcile_word(l->status));
      cJSON_AddStringToObject(it, "global_id", l->global_id);
      cJSON_AddStringToObject(it, "service", l->service);
      cJSON_AddStringToObject(it, "operation", l->operation);
      cJSON_AddStringToObject(it, "phase", fmt_phase(l->phase));
      cJSON_AddStringToObject(it, "detail", l->detail);
      cJSON_AddItemToArray(items, it);
    }
    json_print(o);
  } else {
    printf(
        "%zu lines: %zu recorded, %zu already present, %zu ran twice, %zu skipped, "
        "%zu invalid, %zu failed\n",
        rep.lines, rep.recorded, rep.already_present, rep.ran_twice, rep.skipped, rep.invalid,
        rep.failed);
    if (rep.n_items > 0) {
      static const char *const hdr[] = {"LINE", "STATUS", "STEP", "DETAIL"};
      table *t = table_new(4, hdr);
      for (size_t i = 0; i < rep.n_items; i++) {
        const idem_reconcile_line *l = &rep.items[i];
        char no[24], step[300];
        snprintf(no, sizeof no, "%zu", l->line_no);
        snprintf(step, sizeof step, "%s %s/%s%s", l->global_id, l->service, l->operation,
                 l->phase == IDEM_COMPENSATION ? " (compensation)" : "");
        const char *row[] = {no, reconcile_word(l->status), step, l->detail};
        table_row(t, row);
      }
      printf("\n");
      table_print(t);
      table_free(t);
    }
  }
  int rc = code != IDEM_OK                                ? ctl_fail("reconcile stopped", &e)
           : (rep.ran_twice || rep.invalid || rep.failed) ? EXIT_REFUSED
                                                          : EXIT_OK;
  idem_reconcile_report_clear(&rep);
  return rc;
}
