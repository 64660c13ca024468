/* test_incident.c — the incident drill, against a real coordinator, through the real
 * idemctl binary (h_idemctl, tests/support/capture.h): create stuck, expired and unknown
 * steps; find them with `idemctl steps --stuck`; inspect with `idemctl saga`; resolve one as
 * succeeded and one as retryable; check the replays changed, the audit shows both with actor
 * and reason, resolving a finished step is refused, exit codes follow docs/api.md §10, the
 * server logged one line per state change (text and JSON), and records no attempt finished
 * (a null compensation, an abandoned forward) are said as such. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "harness.h"

static void setup(void) {
  h_fixture_start(&H, &(h_fixture_conf){.no_client = true, .any_exit = true});
}

TestSuite(incident, .init = setup, .fini = h_teardown, .timeout = 120);

static idem_begin begin(idem_client *c, const char *gid, const char *svc, const char *op,
                        uint32_t lease_ms) {
  idem_step_key k = {gid, svc, op, IDEM_FORWARD};
  idem_begin b;
  idem_error e = {0};
  int rc = idem_step_begin(c, &k, NULL, 0, lease_ms, &b, &e);
  cr_assert_eq(rc, IDEM_OK, "begin %s/%s: %s", svc, op, e.message);
  return b;
}

static void complete(idem_client *c, const char *gid, const char *svc, const char *op,
                     uint64_t attempt, idem_outcome outcome) {
  idem_step_key k = {gid, svc, op, IDEM_FORWARD};
  idem_error e = {0};
  cr_assert_eq(idem_step_complete(c, &k, attempt, outcome, 502, "gateway timeout", 15, NULL, &e),
               IDEM_OK, "%s", e.message);
}

/* Whether the JSON array holds a step of service svc in state. */
/* Whether LookupStep of (gid, svc, op) answers with its result expired. */
static bool result_expired(idem_client *c, const char *gid, const char *svc, const char *op) {
  idem_step_key k = {gid, svc, op, IDEM_FORWARD};
  idem_record rec;
  idem_error e = {0};
  if (idem_step_lookup(c, &k, &rec, &e) != IDEM_OK) return false;
  bool expired = rec.result_expired;
  idem_record_clear(&rec);
  return expired;
}

static bool has_step(cJSON *arr, const char *svc, const char *state) {
  cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    cJSON *sv = cJSON_GetObjectItem(it, "service"), *st = cJSON_GetObjectItem(it, "state");
    if (cJSON_IsString(sv) && cJSON_IsString(st) && strcmp(sv->valuestring, svc) == 0 &&
        strcmp(st->valuestring, state) == 0)
      return true;
  }
  return false;
}

Test(incident, drill) {
  idem_client *c = h_client(&H.s, H.t, 0);
  char gid[IDEM_GLOBAL_ID_MAX + 1];
  idem_error e = {0};
  cr_assert_eq(idem_saga_begin(c, NULL, "order", NULL, 0, gid, NULL, NULL, &e), IDEM_OK);

  /* the incident: a charge whose caller died (lease expired), a reservation that timed out
   * (unknown), a booking still running (not stuck), a notification that finished */
  idem_begin charge = begin(c, gid, "payment", "charge", 50);
  idem_begin reserve = begin(c, gid, "inventory", "reserve", 0);
  complete(c, gid, "inventory", "reserve", reserve.attempt, IDEM_OUTCOME_UNKNOWN);
  begin(c, gid, "shipping", "book", 600000);
  idem_begin notify = begin(c, gid, "notify", "email", 0);
  complete(c, gid, "notify", "email", notify.attempt, IDEM_OUTCOME_SUCCEEDED);
  H_WAIT(h_wall_ms() > charge.lease_expires_unix_ms, 5000, "the charge's lease expires (at %lld)",
         (long long)charge.lease_expires_unix_ms);

  /* find them */
  h_ctl *r = calloc(1, sizeof *r);
  h_idemctl(r, H.s.addr, H.t, "steps", "--stuck", "--json", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cJSON *arr = cJSON_Parse(r->out);
  cr_assert(cJSON_IsArray(arr), "%s", r->out);
  cr_assert_eq(cJSON_GetArraySize(arr), 2, "%s", r->out);
  cr_assert(has_step(arr, "payment", "in_progress"));
  cr_assert(has_step(arr, "inventory", "unknown"));
  cJSON_Delete(arr);
  h_idemctl(r, H.s.addr, H.t, "steps", "--stuck", NULL);
  cr_assert_eq(r->status, 0);
  cr_assert(strstr(r->out, "GLOBAL_ID"), "%s", r->out);
  cr_assert(strstr(r->out, "in progress (lease expired"), "%s", r->out);
  cr_assert(strstr(r->out, "unknown"), "%s", r->out);
  cr_assert(!strstr(r->out, "shipping"), "%s", r->out);

  /* inspect */
  h_idemctl(r, H.s.addr, H.t, "saga", gid, NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  for (const char *w = "payment\0inventory\0shipping\0notify\0succeeded\0ago\0"; *w;
       w += strlen(w) + 1)
    cr_assert(strstr(r->out, w), "saga output lacks %s:\n%s", w, r->out);
  h_idemctl(r, H.s.addr, H.t, "step", gid, "inventory", "reserve", NULL);
  cr_assert_eq(r->status, 0);
  cr_assert(strstr(r->out, "gateway timeout"), "%s", r->out);

  /* decide and fix */
  h_idemctl(r, H.s.addr, H.t, "resolve", gid, "inventory", "reserve", "--outcome", "succeeded",
            "--code", "200", "--body", "reserved R-17", "--reason",
            "warehouse confirmed the reservation", "--actor", "alice", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_assert(strstr(r->out, "now succeeded"), "%s", r->out);
  h_idemctl(r, H.s.addr, H.t, "resolve", gid, "payment", "charge", "--outcome", "retryable",
            "--reason", "gateway shows no charge", "--actor", "bob", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_assert(strstr(r->out, "released"), "%s", r->out);

  /* the replays changed accordingly */
  idem_begin b = begin(c, gid, "inventory", "reserve", 0);
  cr_assert_eq(b.decision, IDEM_DECISION_REPLAY);
  cr_assert_eq(b.result.outcome, IDEM_OUTCOME_SUCCEEDED);
  cr_assert_eq(b.result.code, 200);
  cr_assert_eq(b.result.body_len, 13);
  cr_assert(memcmp(b.result.body, "reserved R-17", 13) == 0);
  idem_begin_clear(&b);
  b = begin(c, gid, "payment", "charge", 0);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(b.attempt, charge.attempt + 1);
  idem_begin_clear(&b);

  /* the audit shows both, newest first, with actor and reason */
  h_idemctl(r, H.s.addr, H.t, "audit", gid, "--json", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  arr = cJSON_Parse(r->out);
  cr_assert_eq(cJSON_GetArraySize(arr), 2, "%s", r->out);
  cJSON *a0 = cJSON_GetArrayItem(arr, 0), *a1 = cJSON_GetArrayItem(arr, 1);
  cr_assert_str_eq(cJSON_GetObjectItem(a0, "actor")->valuestring, "bob");
  cr_assert_str_eq(cJSON_GetObjectItem(a0, "reason")->valuestring, "gateway shows no charge");
  cr_assert_str_eq(cJSON_GetObjectItem(a0, "from_state")->valuestring, "in_progress");
  cr_assert_str_eq(cJSON_GetObjectItem(a0, "to_state")->valuestring, "released");
  cr_assert_str_eq(cJSON_GetObjectItem(a1, "actor")->valuestring, "alice");
  cr_assert_str_eq(cJSON_GetObjectItem(a1, "reason")->valuestring,
                   "warehouse confirmed the reservation");
  cr_assert_str_eq(cJSON_GetObjectItem(a1, "from_state")->valuestring, "unknown");
  cr_assert_str_eq(cJSON_GetObjectItem(a1, "to_state")->valuestring, "succeeded");
  cr_assert_str_eq(cJSON_GetObjectItem(a1, "tenant")->valuestring, H.t);
  cJSON_Delete(arr);
  h_idemctl(r, H.s.addr, H.t, "audit", NULL);
  cr_assert_eq(r->status, 0);
  cr_assert(strstr(r->out, "unknown → succeeded"), "%s", r->out);
  cr_assert(strstr(r->out, "alice"), "%s", r->out);

  /* refused: a finished step (1), no such step (1), no reason (2), bad flag (2) */
  h_idemctl(r, H.s.addr, H.t, "resolve", gid, "notify", "email", "--outcome", "failed", "--reason",
            "x", NULL);
  cr_assert_eq(r->status, 1, "%s", r->err);
  cr_assert(strstr(r->err, "only in_progress and unknown steps can be resolved"), "%s", r->err);
  h_idemctl(r, H.s.addr, H.t, "resolve", gid, "nosuch", "op", "--outcome", "failed", "--reason",
            "x", NULL);
  cr_assert_eq(r->status, 1, "%s", r->err);
  h_idemctl(r, H.s.addr, H.t, "resolve", gid, "payment", "charge", "--outcome", "failed", NULL);
  cr_assert_eq(r->status, 2);
  h_idemctl(r, H.s.addr, H.t, "steps", "--bogus", NULL);
  cr_assert_eq(r->status, 2);
  h_idemctl(r, H.s.addr, H.t, "steps", "--help", NULL);
  cr_assert_eq(r->status, 0);
  cr_assert(strstr(r->out, "--stuck"), "%s", r->out);
  free(r);

  /* the log: one line per state change, with tenant, ids, phase, attempt, from/to */
  FILE *f = fopen(H.s.log_path, "r");
  cr_assert(f);
  char line[2048];
  bool resolved = false, begun = false;
  while (fgets(line, sizeof line, f)) {
    if (!strstr(line, "step state changed") || !strstr(line, H.t) || !strstr(line, gid)) continue;
    if (strstr(line, "service=inventory") && strstr(line, "phase=forward") &&
        strstr(line, "attempt=1") && strstr(line, "from=unknown to=succeeded") &&
        strstr(line, "via=resolve") && strstr(line, "actor=alice"))
      resolved = true;
    if (strstr(line, "service=payment") && strstr(line, "from=none to=in_progress via=begin"))
      begun = true;
  }
  fclose(f);
  cr_assert(resolved && begun, "state change lines missing in %s", H.s.log_path);
  idem_close(c);
}

/* ResolveStep on (gid, svc, op) with outcome, code, body, reason and actor: its status code;
 * *state the record's state on OK. */
static int resolve(idem_client *c, const char *gid, const char *svc, idem_outcome outcome,
                   int32_t code, const char *body, const char *reason, const char *actor,
                   idem_state *state, idem_error *e) {
  idem_step_key k = {gid, svc, "settle", IDEM_FORWARD};
  idem_resolution res = {outcome, code, body, strlen(body), reason, actor};
  idem_record rec = {0};
  int rc = idem_step_resolve(c, &k, &res, &rec, e);
  if (rc == IDEM_OK && state) *state = rec.state;
  idem_record_clear(&rec);
  return rc;
}

/* A repeat of the ResolveStep that settled a step (same outcome, code, body, reason, actor) is
 * answered OK with the record, as a repeated CompleteStep is; anything else on a settled step is
 * refused not-resolvable: another result, reason or actor, a step its own attempt finished, a
 * step a ResolveSteps settled, and a released step begun again and finished since (docs/api.md
 * §12). So not-resolvable after a lost try proves that no try acted (§20). */
Test(incident, resolve_repeat) {
  idem_client *c = h_client(&H.s, H.t, 0);
  idem_error e = {0};
  idem_state st = IDEM_STATE_UNSPECIFIED;
  const char *gid = "repeat-1";
  idem_begin b = begin(c, gid, "fail", "settle", 0);
  complete(c, gid, "fail", "settle", b.attempt, IDEM_OUTCOME_UNKNOWN);
  b = begin(c, gid, "win", "settle", 0);
  complete(c, gid, "win", "settle", b.attempt, IDEM_OUTCOME_UNKNOWN);
  b = begin(c, gid, "own", "settle", 0);
  complete(c, gid, "own", "settle", b.attempt, IDEM_OUTCOME_FAILED);

  for (int i = 0; i < 2; i++) { /* the first settles, the second repeats it */
    cr_assert_eq(resolve(c, gid, "fail", IDEM_OUTCOME_FAILED, 409, "declined", "bank said no",
                         "alice", &st, &e),
                 IDEM_OK, "resolve %d: %s (%s)", i, e.message, e.reason);
    cr_assert_eq(st, IDEM_STATE_FAILED, "resolve %d", i);
    cr_assert_eq(resolve(c, gid, "win", IDEM_OUTCOME_SUCCEEDED, 200, "paid", "bank said yes", NULL,
                         &st, &e),
                 IDEM_OK, "resolve %d: %s (%s)", i, e.message, e.reason);
    cr_assert_eq(st, IDEM_STATE_SUCCEEDED, "resolve %d", i);
  }
  /* not the same request: each part differs once */
  struct {
    const char *svc;
    idem_outcome outcome;
    int32_t code;
    const char *body, *reason, *actor;
  } other[] = {
      {"fail", IDEM_OUTCOME_SUCCEEDED, 409, "declined", "bank said no", "alice"},
      {"fail", IDEM_OUTCOME_FAILED, 410, "declined", "bank said no", "alice"},
      {"fail", IDEM_OUTCOME_FAILED, 409, "declined!", "bank said no", "alice"},
      {"fail", IDEM_OUTCOME_FAILED, 409, "declined", "bank said so", "alice"},
      {"fail", IDEM_OUTCOME_FAILED, 409, "declined", "bank said no", "bob"},
      {"win", IDEM_OUTCOME_SUCCEEDED, 200, "paid", "bank said yes", "alice"},
      {"own", IDEM_OUTCOME_FAILED, 502, "gateway timeout", "x", NULL}, /* its attempt's result */
  };
  for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
    cr_assert_eq(resolve(c, gid, other[i].svc, other[i].outcome, other[i].code, other[i].body,
                         other[i].reason, other[i].actor, NULL, &e),
                 IDEM_FAILED_PRECONDITION, "other[%zu]: %s", i, e.message);
    cr_assert_str_eq(e.reason, "not-resolvable", "other[%zu]", i);
  }

  /* released by a resolve, begun again and released by its attempt: the repeat is refused */
  b = begin(c, gid, "again", "settle", 0);
  cr_assert_eq(resolve(c, gid, "again", IDEM_OUTCOME_RETRYABLE, 503, "busy", "retry it", NULL, &st,
                       &e),
               IDEM_OK, "%s", e.message);
  cr_assert_eq(st, IDEM_STATE_RELEASED);
  cr_assert_eq(resolve(c, gid, "again", IDEM_OUTCOME_RETRYABLE, 503, "busy", "retry it", NULL, &st,
                       &e),
               IDEM_OK, "a repeat while still released: %s", e.message);
  idem_begin b2 = begin(c, gid, "again", "settle", 0);
  cr_assert_eq(b2.attempt, b.attempt + 1);
  idem_step_key k = {gid, "again", "settle", IDEM_FORWARD};
  cr_assert_eq(idem_step_complete(c, &k, b2.attempt, IDEM_OUTCOME_RETRYABLE, 503, "busy", 4, NULL,
                                  &e),
               IDEM_OK, "%s", e.message);
  cr_assert_eq(resolve(c, gid, "again", IDEM_OUTCOME_RETRYABLE, 503, "busy", "retry it", NULL,
                       NULL, &e),
               IDEM_FAILED_PRECONDITION, "the second attempt's release is not the resolve's");
  cr_assert_str_eq(e.reason, "not-resolvable");

  /* settled by a ResolveSteps: a single ResolveStep like it is not its repeat */
  b = begin(c, "repeat-2", "bulk", "settle", 0);
  complete(c, "repeat-2", "bulk", "settle", b.attempt, IDEM_OUTCOME_UNKNOWN);
  idem_bulk_resolution bulk = {0};
  bulk.filter.state = IDEM_STATE_UNKNOWN;
  bulk.filter.global_id = "repeat-2";
  bulk.res = (idem_resolution){IDEM_OUTCOME_FAILED, 409, "declined", 8, "bank said no", NULL};
  bulk.max_steps = 10;
  bulk.request_id = "repeat-2-bulk";
  idem_bulk_result br = {0};
  cr_assert_eq(idem_steps_resolve(c, &bulk, 0, &br, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(br.resolved, 1);
  cr_assert_eq(resolve(c, "repeat-2", "bulk", IDEM_OUTCOME_FAILED, 409, "declined", "bank said no",
                       NULL, NULL, &e),
               IDEM_FAILED_PRECONDITION, "a single resolve after a bulk one");
  cr_assert_str_eq(e.reason, "not-resolvable");
  idem_close(c);
}

/* The tenant trap: an empty list names the tenant it asked, so that a missing or
 * mistyped --tenant shows; --help describes every command in one line. */
Test(incident, empty_list_names_the_tenant) {
  h_ctl *r = calloc(1, sizeof *r);
  h_idemctl(r, H.s.addr, H.t, "steps", "--service", "nothing-here", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  char want[160];
  snprintf(want, sizeof want, "(no steps in tenant %s)", H.t);
  cr_assert(strstr(r->out, want), "got: %s", r->out);
  h_idemctl(r, H.s.addr, NULL, "steps", "--service", "nothing-here", NULL);
  cr_assert_eq(r->status, 0);
  cr_assert(strstr(r->out, "default tenant: pass --tenant"), "got: %s", r->out);
  cr_assert(strstr(r->out, "use tenant shop"), "the hint names the examples' tenant: %s", r->out);
  h_idemctl(r, H.s.addr, H.t, "--help", NULL);
  cr_assert(strstr(r->out, "steps                                Steps of the tenant"),
            "--help lacks descriptions: %s", r->out);
  free(r);
}

/* resolve --where (Admin.ResolveSteps): a dry run counts, no terminal and no --yes refuses,
 * --yes resolves and prints the request id, the same --request-id replays the first answer. */
Test(incident, resolve_where) {
  idem_client *c = h_client(&H.s, H.t, 0);
  for (int i = 0; i < 3; i++) {
    char gid[32];
    snprintf(gid, sizeof gid, "where-%d", i);
    idem_begin b = begin(c, gid, "bulkctl", "charge", 0);
    complete(c, gid, "bulkctl", "charge", b.attempt, IDEM_OUTCOME_UNKNOWN);
  }
  idem_close(c);
  h_ctl *r = calloc(1, sizeof *r);
  h_idemctl(r, H.s.addr, H.t, "resolve", "--where", "--state", "unknown", "--service", "bulkctl",
            "--outcome", "failed", "--reason", "outage", "--dry-run", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_assert(strstr(r->out, "3 step(s) match (dry run: nothing resolved)"), "%s", r->out);
  cr_assert(strstr(r->out, "where-0 bulkctl/charge (forward)"), "%s", r->out);
  h_idemctl(r, H.s.addr, H.t, "resolve", "--where", "--state", "unknown", "--service", "bulkctl",
            "--outcome", "failed", "--reason", "outage", NULL); /* stdin is not a terminal here */
  cr_assert_eq(r->status, 2, "%s%s", r->out, r->err);
  cr_assert(strstr(r->err, "--yes"), "%s", r->err);
  h_idemctl(r, H.s.addr, H.t, "resolve", "--where", "--state", "unknown", "--service", "bulkctl",
            "--outcome", "failed", "--reason", "outage", "--yes", "--request-id", "ctl-bulk-1",
            NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_assert(strstr(r->out, "3 matched, 3 resolved as failed"), "%s", r->out);
  cr_assert(strstr(r->out, "request id ctl-bulk-1"), "%s", r->out);
  h_idemctl(r, H.s.addr, H.t, "resolve", "--where", "--state", "unknown", "--service", "bulkctl",
            "--outcome", "failed", "--reason", "outage", "--yes", "--request-id", "ctl-bulk-1",
            NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_assert(strstr(r->out, "(replayed: the first answer) 3 matched, 3 resolved"), "%s", r->out);
  h_idemctl(r, H.s.addr, H.t, "resolve", "--where", "--service", "bulkctl", "--outcome", "failed",
            "--reason", "x", "--yes", NULL);
  cr_assert_eq(r->status, 2, "no state: %s", r->out);
  free(r);
}

/* status: the node asked and where the leader is are two columns (on a standby they differ). */
Test(incident, status_names_the_node_and_the_leader) {
  h_ctl *r = calloc(1, sizeof *r);
  h_idemctl(r, H.s.addr, H.t, "status", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_assert(strstr(r->out, "ADDRESS") && strstr(r->out, "LEADER AT"), "%s", r->out);
  char row[256];
  snprintf(row, sizeof row, "%s  yes     %s", H.s.addr, H.s.addr);
  cr_assert(strstr(r->out, row), "want \"%s\" in:\n%s", row, r->out);
  free(r);
}

Test(incident, unavailable_is_exit_3) {
  h_ctl *r = calloc(1, sizeof *r);
  h_idemctl(r, "127.0.0.1:1", NULL, "--deadline-ms", "300", "status", NULL);
  cr_assert_eq(r->status, 3);
  free(r);
}

Test(incident, json_log_lines) {
  srv j;
  const char *args[] = {"--log-format", "json", NULL};
  h_srv_start(&j, NULL, args);
  idem_client *c = h_client(&j, H.t, 0);
  char gid[64];
  h_unique("g", gid, sizeof gid);
  idem_begin b = begin(c, gid, "payment", "charge", 0);
  complete(c, gid, "payment", "charge", b.attempt, IDEM_OUTCOME_FAILED);
  idem_close(c);
  FILE *f = fopen(j.log_path, "r");
  cr_assert(f);
  char line[4096];
  int changes = 0;
  while (fgets(line, sizeof line, f)) {
    cJSON *o = cJSON_Parse(line);
    cr_assert(o, "not JSON: %s", line);
    cJSON *msg = cJSON_GetObjectItem(o, "msg");
    cr_assert(cJSON_IsString(msg));
    if (strcmp(msg->valuestring, "step state changed") == 0 &&
        strcmp(cJSON_GetObjectItem(o, "global_id")->valuestring, gid) == 0) {
      cr_assert_str_eq(cJSON_GetObjectItem(o, "tenant")->valuestring, H.t);
      cr_assert_str_eq(cJSON_GetObjectItem(o, "service")->valuestring, "payment");
      cr_assert_str_eq(cJSON_GetObjectItem(o, "operation")->valuestring, "charge");
      cr_assert_str_eq(cJSON_GetObjectItem(o, "phase")->valuestring, "forward");
      cr_assert_str_eq(cJSON_GetObjectItem(o, "attempt")->valuestring, "1");
      changes++;
    }
    cJSON_Delete(o);
  }
  fclose(f);
  cr_assert_eq(changes, 2, "begin and complete: one line each");
  h_srv_stop(&j);
}

/* docs/api.md §12 through idemctl: --key-retention is stored and listed, kept when only the
 * retention changes, refused below the retention (naming the field), and 0 returns to "as long
 * as the retention". */
Test(incident, policy_key_retention) {
  h_ctl *r = calloc(1, sizeof *r);
  h_idemctl(r, H.s.addr, H.t, "--json", "policy", "set", "payment", "charge", "--retention", "1h",
            "--key-retention", "365d", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cJSON *o = cJSON_Parse(r->out);
  cr_assert_not_null(o, "%s", r->out);
  cr_assert_eq(cJSON_GetObjectItem(o, "key_retention_s")->valuedouble, 365 * 86400);
  cJSON_Delete(o);
  h_idemctl(r, H.s.addr, H.t, "--json", "policy", "set", "payment", "charge", "--retention", "2h",
            NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  o = cJSON_Parse(r->out);
  cr_assert_eq(cJSON_GetObjectItem(o, "retention_s")->valuedouble, 7200);
  cr_assert_eq(cJSON_GetObjectItem(o, "key_retention_s")->valuedouble, 365 * 86400, "kept");
  cJSON_Delete(o);
  /* a retention longer than the key retention it would keep: said in terms of the flags */
  h_idemctl(r, H.s.addr, H.t, "policy", "set", "payment", "charge", "--key-retention", "3h", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  h_idemctl(r, H.s.addr, H.t, "policy", "set", "payment", "charge", "--retention", "4h", NULL);
  cr_assert_eq(r->status, 2, "a retention past the kept key retention is a usage error");
  cr_assert(strstr(r->err, "--retention") && strstr(r->err, "--key-retention") &&
                strstr(r->err, "3h"),
            "%s", r->err);
  h_idemctl(r, H.s.addr, H.t, "policy", "set", "payment", "charge", "--key-retention", "365d",
            NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  h_idemctl(r, H.s.addr, H.t, "policy", "set", "payment", "charge", "--key-retention", "1h", NULL);
  cr_assert_neq(r->status, 0, "a key retention below the retention was accepted");
  cr_assert(strstr(r->err, "key_retention_s"), "%s", r->err);
  h_idemctl(r, H.s.addr, H.t, "policy", "list", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_assert(strstr(r->out, "KEYS KEPT") && strstr(r->out, "365d"), "%s", r->out);
  h_idemctl(r, H.s.addr, H.t, "--json", "policy", "set", "payment", "charge", "--key-retention",
            "0", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  o = cJSON_Parse(r->out);
  cr_assert_eq(cJSON_GetObjectItem(o, "key_retention_s")->valuedouble, 0);
  cJSON_Delete(o);
  /* policy get answers the key retention in effect: "same" as the retention, in JSON its value */
  h_idemctl(r, H.s.addr, H.t, "policy", "get", "payment", "charge", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_assert(strstr(r->out, "KEYS KEPT") && strstr(r->out, "same"), "%s", r->out);
  h_idemctl(r, H.s.addr, H.t, "--json", "policy", "get", "payment", "charge", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  o = cJSON_Parse(r->out);
  cr_assert_not_null(o, "%s", r->out);
  cr_assert_eq(cJSON_GetObjectItem(o, "key_retention_s")->valuedouble, 7200, "%s", r->out);
  cJSON_Delete(o);
  h_idemctl(r, H.s.addr, H.t, "policy", "set", "payment", "charge", "--key-retention", "soon",
            NULL);
  cr_assert_eq(r->status, 2, "a usage error");
  cr_assert(strstr(r->err, "--key-retention"), "%s", r->err);

  /* a step past its retention: idemctl step says the body expired (text and JSON) */
  h_idemctl(r, H.s.addr, H.t, "policy", "set", "notify", "email", "--retention", "1s",
            "--key-retention", "1h", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  idem_client *c = h_client(&H.s, H.t, 0);
  char gid[96];
  h_unique("kr", gid, sizeof gid);
  idem_begin b = begin(c, gid, "notify", "email", 0);
  complete(c, gid, "notify", "email", b.attempt, IDEM_OUTCOME_FAILED);
  idem_begin_clear(&b);
  /* the database clock decides when the result expires: wait for it */
  H_WAIT_EVERY(100, result_expired(c, gid, "notify", "email"), 15000,
               "LookupStep says notify/email's result expired");
  idem_close(c);
  h_idemctl(r, H.s.addr, H.t, "step", gid, "notify", "email", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_assert(strstr(r->out, "body        (expired"), "%s", r->out);
  cr_assert(strstr(r->out, "code        502"), "outcome and code are kept:\n%s", r->out);
  h_idemctl(r, H.s.addr, H.t, "--json", "step", gid, "notify", "email", NULL);
  o = cJSON_Parse(r->out);
  cr_assert_not_null(o, "%s", r->out);
  cJSON *res = cJSON_GetObjectItem(o, "result");
  cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(res, "expired")), "%s", r->out);
  cr_assert_str_eq(cJSON_GetObjectItem(res, "body_base64")->valuestring, "");
  cJSON_Delete(o);
  /* policy get shows the longer key retention */
  h_idemctl(r, H.s.addr, H.t, "policy", "get", "notify", "email", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_assert(strstr(r->out, "KEYS KEPT") && strstr(r->out, "1h"), "%s", r->out);
  /* the saga and steps tables say so too, with outcome and code, never the body */
  h_idemctl(r, H.s.addr, H.t, "saga", gid, NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_assert(strstr(r->out, "failed 502 (body expired)"), "%s", r->out);
  cr_assert(!strstr(r->out, "gateway timeout"), "%s", r->out);
  h_idemctl(r, H.s.addr, H.t, "steps", "--global-id", gid, NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_assert(strstr(r->out, "failed 502 (body expired)"), "%s", r->out);
  h_idemctl(r, H.s.addr, H.t, "--json", "steps", "--global-id", gid, NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  o = cJSON_Parse(r->out);
  cr_assert(cJSON_IsArray(o) && cJSON_GetArraySize(o) == 1, "%s", r->out);
  res = cJSON_GetObjectItem(cJSON_GetArrayItem(o, 0), "result");
  cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(res, "expired")), "%s", r->out);
  cJSON_Delete(o);
  free(r);
}

/* Issue 31 #7: a null compensation (stored succeeded, attempt 0, code 0) and an abandoned
 * forward are shown as what happened, never as a step that ran: text and JSON. */
Test(incident, skipped_records) {
  idem_client *c = h_client(&H.s, H.t, 0);
  char gid[96];
  h_unique("skip", gid, sizeof gid);
  idem_error e = {0};
  idem_begin b;
  /* the hotel is compensated before its forward: a null compensation and a tombstone */
  idem_step_key hotel = {gid, "hotel", "book", IDEM_COMPENSATION};
  cr_assert_eq(idem_step_begin(c, &hotel, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_SKIP_NULL_COMPENSATION);
  idem_begin_clear(&b);
  /* the car's forward lease runs out; its compensation (waiting for that) abandons it */
  b = begin(c, gid, "car", "rent", 1);
  idem_begin_clear(&b);
  idem_step_key car = {gid, "car", "rent", IDEM_COMPENSATION};
  cr_assert_eq(idem_step_begin_wait(c, &car, NULL, 0, 0, 5000, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(idem_step_complete(c, &car, b.attempt, IDEM_OUTCOME_SUCCEEDED, 200, "returned", 8,
                                  NULL, &e),
               IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);
  idem_close(c);

  h_ctl *r = calloc(1, sizeof *r);

  h_idemctl(r, H.s.addr, H.t, "step", gid, "hotel", "book", "--compensation", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_assert(strstr(r->out, "state       skipped: null compensation"), "%s", r->out);
  cr_assert(strstr(r->out, "stored as   succeeded (null_compensation)"), "%s", r->out);
  cr_assert(strstr(r->out, "attempt     - (none ran)"), "%s", r->out);
  cr_assert(strstr(r->out, "outcome     none: no compensation ran"), "%s", r->out);
  cr_assert(!strstr(r->out, "code        0"), "not a result of a run:\n%s", r->out);
  h_idemctl(r, H.s.addr, H.t, "step", gid, "hotel", "book", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_assert(strstr(r->out, "state       skipped: never ran"), "%s", r->out);

  h_idemctl(r, H.s.addr, H.t, "saga", gid, NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  const char *line = strstr(r->out, "hotel");
  cr_assert_not_null(line, "%s", r->out);
  for (; line; line = strstr(line + 1, "hotel")) { /* each hotel row: skipped, attempt "-" */
    const char *eol = strchr(line, '\n');
    char row[512];
    snprintf(row, sizeof row, "%.*s", (int)(eol ? eol - line : (long)strlen(line)), line);
    cr_assert(strstr(row, "skipped: "), "%s", row);
    cr_assert(!strstr(row, "succeeded 0") && !strstr(row, " 0 "), "never as run: %s", row);
  }
  cr_assert(strstr(r->out, "abandoned after its compensation"), "the car's forward:\n%s", r->out);
  cr_assert(strstr(r->out, "succeeded 200 returned"), "its real compensation:\n%s", r->out);

  h_idemctl(r, H.s.addr, H.t, "--json", "saga", gid, NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cJSON *o = cJSON_Parse(r->out);
  cr_assert_not_null(o, "%s", r->out);
  int seen = 0;
  cJSON *it;
  cJSON_ArrayForEach(it, cJSON_GetObjectItem(o, "steps")) {
    const char *svc = cJSON_GetObjectItem(it, "service")->valuestring;
    const char *ph = cJSON_GetObjectItem(it, "phase")->valuestring;
    cJSON *sk = cJSON_GetObjectItem(it, "skipped");
    const char *want = !strcmp(svc, "hotel") ? (!strcmp(ph, "compensation") ? "null_compensation"
                                                                             : "never_ran")
                       : !strcmp(ph, "forward") ? "abandoned"
                                                : NULL;
    if (want) {
      cr_assert(cJSON_IsString(sk) && !strcmp(sk->valuestring, want), "%s %s: %s", svc, ph,
                r->out);
    } else {
      cr_assert(cJSON_IsNull(sk), "the car's compensation ran: %s", r->out);
    }
    seen++;
  }
  cr_assert_eq(seen, 4, "%s", r->out);
  cJSON_Delete(o);
  free(r);
}

/* A resolve whose answer is lost (the lossy front of the conformance scenarios passes it on,
 * the coordinator acts, the answer is dropped) ends with idemctl's OUTCOME line: libidem does
 * not repeat a RETRYABLE resolve, and the operator must look before resolving again, since the
 * lost try did release the step. A refusal that is an answer prints no such line. */
Test(incident, a_lost_resolve_says_the_outcome_is_unknown) {
  idem_client *c = h_client(&H.s, H.t, 0);
  const char *gid = "lost-resolve-1";
  idem_begin b = begin(c, gid, "payment", "charge", 30000);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);

  char tag[64], rules[128], log[128], addr[32];
  h_unique("lossy", tag, sizeof tag);
  snprintf(rules, sizeof rules, "/tmp/idem-%s.json", tag);
  snprintf(log, sizeof log, "/tmp/idem-%s.log", tag);
  FILE *f = fopen(rules, "w");
  cr_assert_not_null(f);
  fputs("{\"rules\": [{\"method\": \"ResolveStep\", \"fault\": \"lose-after\"}]}\n", f);
  fclose(f);
  int port = h_free_port();
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  char lossy[512];
  snprintf(lossy, sizeof lossy, "%s/client-lib/conformance/lossy.py", h_env("IDEM_SOURCE_DIR"));
  const char *argv[] = {"/usr/bin/python3", lossy, addr, H.s.addr, rules, NULL};
  pid_t pid = spawn_start(argv, &(spawn_opts){.log = log});
  h_wait_listening(pid, log, port, 0, 0, "lossy.py");

  h_ctl *r = calloc(1, sizeof *r);
  h_idemctl(r, addr, H.t, "--deadline-ms", "3000", "resolve", gid, "payment", "charge",
            "--outcome", "retryable", "--reason", "no charge at the gateway", NULL);
  spawn_stop(pid, 5000);
  unlink(rules);
  unlink(log);
  cr_expect_neq(r->status, 0, "%s%s", r->out, r->err);
  cr_expect(strstr(r->err, "OUTCOME:  unknown"), "no OUTCOME line in:\n%s", r->err);

  /* the lost try did act: the step is released, as the line warned */
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  idem_record rec;
  idem_error e = {0};
  cr_assert_eq(idem_step_lookup(c, &k, &rec, &e), IDEM_OK, "%s", e.message);
  cr_expect_eq(rec.state, IDEM_STATE_RELEASED, "state %d", rec.state);
  idem_record_clear(&rec);

  /* an answer, even a refusal, is no lost try */
  h_idemctl(r, H.s.addr, H.t, "resolve", gid, "payment", "charge", "--outcome", "failed",
            "--reason", "again", NULL);
  cr_expect_neq(r->status, 0, "%s", r->out);
  cr_expect(strstr(r->err, "not-resolvable") || strstr(r->err, "can be resolved"), "%s", r->err);
  cr_expect_null(strstr(r->err, "OUTCOME:"), "%s", r->err);
  free(r);
  idem_close(c);
}
