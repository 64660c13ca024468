/* Policies through the real server (docs/api.md §6): Admin.SetPolicy / DeletePolicy / ListPolicies
 * and Coordinator.GetPolicy, per tenant; validation; precedence; a changed policy takes effect
 * on the next call without a restart, and on a second node within its refresh period; the
 * --config file seeds policies and holds flags, and flags win over it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static idem_policy P(const char *svc, const char *op, int mode, uint32_t ret, uint32_t lease) {
  idem_policy p;
  memset(&p, 0, sizeof p);
  snprintf(p.service, sizeof p.service, "%s", svc);
  snprintf(p.operation, sizeof p.operation, "%s", op);
  p.failure_mode = mode;
  p.retention_s = ret;
  p.lease_ms = lease;
  return p;
}

static void set_ok(idem_client *c, idem_policy p) {
  idem_error e = {0};
  idem_policy out;
  cr_assert_eq(idem_policy_set(c, &p, &out, &e), IDEM_OK, "set %s/%s: %s", p.service,
               p.operation, e.message);
  cr_assert_gt(out.updated_unix_ms, 0);
}

static idem_policy get(idem_client *c, const char *svc, const char *op) {
  idem_policy p;
  idem_error e = {0};
  cr_assert_eq(idem_policy_get(c, svc, op, &p, &e), IDEM_OK, "get: %s", e.message);
  return p;
}

Test(policy, set_get_list_delete_precedence_and_tenants, .timeout = 60) {
  srv s;
  h_srv_start(&s, NULL, NULL);
  char t1[64], t2[64];
  h_tenant(t1);
  h_tenant(t2);
  idem_client *c = h_client(&s, t1, 0), *c2 = h_client(&s, t2, 0);

  idem_policy d = get(c, "payment", "charge"); /* built-in default */
  cr_assert_eq(d.failure_mode, IDEM_FAIL_CLOSED);
  cr_assert_eq(d.retention_s, 86400);
  cr_assert_eq(d.lease_ms, 30000);
  cr_assert_eq(d.updated_unix_ms, 0);

  set_ok(c, P("*", "*", IDEM_FAIL_CLOSED, 300, 3000));
  cr_assert_eq(get(c, "payment", "charge").retention_s, 300);
  set_ok(c, P("payment", "*", IDEM_FAIL_OPEN, 200, 2000));
  cr_assert_eq(get(c, "payment", "charge").retention_s, 200);
  cr_assert_eq(get(c, "payment", "charge").failure_mode, IDEM_FAIL_OPEN);
  cr_assert_eq(get(c, "mail", "send").retention_s, 300);
  set_ok(c, P("payment", "charge", IDEM_FAIL_CLOSED, 100, 1000));
  idem_policy x = get(c, "payment", "charge");
  cr_assert_eq(x.retention_s, 100);
  cr_assert_str_eq(x.service, "payment");
  cr_assert_str_eq(x.operation, "charge");
  cr_assert_eq(get(c, "payment", "refund").retention_s, 200);
  cr_assert_str_eq(get(c, "payment", "refund").operation, "*"); /* the row that matched */

  /* tenants are separate */
  cr_assert_eq(get(c2, "payment", "charge").retention_s, 86400);
  idem_policies l2 = {0};
  idem_error e = {0};
  cr_assert_eq(idem_policy_list(c2, &l2, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(l2.n, 0);

  idem_policies l = {0};
  cr_assert_eq(idem_policy_list(c, &l, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(l.n, 3);
  int found = 0;
  for (size_t i = 0; i < l.n; i++)
    if (strcmp(l.policies[i].service, "payment") == 0 &&
        strcmp(l.policies[i].operation, "*") == 0) {
      found++;
      cr_assert_eq(l.policies[i].failure_mode, IDEM_FAIL_OPEN);
      cr_assert_eq(l.policies[i].lease_ms, 2000);
    }
  cr_assert_eq(found, 1);
  idem_policies_clear(&l);

  /* the lease and the retention reach BeginStep at once (no restart) */
  char gid[96];
  h_unique("pol", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  idem_begin b = {0};
  cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
  idem_record r;
  cr_assert_eq(idem_step_lookup(c, &k, &r, &e), IDEM_OK);
  cr_assert_eq(r.lease_expires_unix_ms - r.updated_unix_ms, 1000, "lease from the exact row");
  idem_record_clear(&r);
  cr_assert_eq(idem_step_complete(c, &k, b.attempt, IDEM_OUTCOME_SUCCEEDED, 200, NULL, 0, &r, &e),
               IDEM_OK, "%s", e.message);
  cr_assert_eq(r.expires_unix_ms - r.result.completed_unix_ms, 100 * 1000, "retention 100 s");
  idem_record_clear(&r);
  idem_begin_clear(&b);

  set_ok(c, P("payment", "charge", IDEM_FAIL_CLOSED, 100, 4321));
  h_unique("pol", gid, sizeof gid);
  cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(idem_step_lookup(c, &k, &r, &e), IDEM_OK);
  cr_assert_eq(r.lease_expires_unix_ms - r.updated_unix_ms, 4321, "changed lease applies at once");
  idem_record_clear(&r);
  idem_begin_clear(&b);

  /* delete falls back to the next level */
  bool deleted = false;
  cr_assert_eq(idem_policy_delete(c, "payment", "charge", &deleted, &e), IDEM_OK, "%s", e.message);
  cr_assert(deleted);
  cr_assert_eq(get(c, "payment", "charge").retention_s, 200);
  cr_assert_eq(idem_policy_delete(c, "payment", "charge", &deleted, &e), IDEM_OK);
  cr_assert_not(deleted);
  cr_assert_eq(idem_policy_delete(c, "payment", "*", &deleted, &e), IDEM_OK);
  cr_assert_eq(idem_policy_delete(c, "*", "*", &deleted, &e), IDEM_OK);
  cr_assert_eq(get(c, "payment", "charge").retention_s, 86400);

  idem_close(c);
  idem_close(c2);
  cr_assert_eq(h_srv_stop(&s), 0);
}

static void refused(idem_client *c, idem_policy p, const char *field) {
  idem_error e = {0};
  idem_policy out;
  cr_assert_eq(idem_policy_set(c, &p, &out, &e), IDEM_INVALID_ARGUMENT, "%s/%s accepted",
               p.service, p.operation);
  cr_assert(strstr(e.message, field), "message \"%s\" lacks %s", e.message, field);
}

Test(policy, validation, .timeout = 60) {
  srv s;
  h_srv_start(&s, NULL, NULL);
  char t[64];
  h_tenant(t);
  idem_client *c = h_client(&s, t, 0);
  refused(c, P("payment", "charge", IDEM_FAIL_OPEN, 90 * 86400 + 1, 1000), "retention_s");
  refused(c, P("payment", "charge", IDEM_FAIL_OPEN, 60, 3600001), "lease_ms");
  refused(c, P("payment", "charge", 0, 60, 1000), "failure_mode");
  refused(c, P("payment", "charge", 9, 60, 1000), "failure_mode");
  refused(c, P("*", "charge", IDEM_FAIL_OPEN, 60, 1000), "service");
  refused(c, P("Pay ment", "charge", IDEM_FAIL_OPEN, 60, 1000), "service");
  refused(c, P("payment", "", IDEM_FAIL_OPEN, 60, 1000), "operation");
  set_ok(c, P("payment", "charge", IDEM_FAIL_OPEN, 1, 1));                /* the minimums */
  set_ok(c, P("payment", "charge", IDEM_FAIL_OPEN, 90 * 86400, 3600000)); /* the maximums */
  /* key_retention_s (docs/api.md §12): 0, or from retention_s to 400 days */
  idem_policy kr = P("payment", "refund", IDEM_FAIL_CLOSED, 3600, 1000);
  kr.key_retention_s = 3599;
  refused(c, kr, "key_retention_s");
  kr.key_retention_s = 400 * 86400 + 1;
  refused(c, kr, "key_retention_s");
  idem_policies l = {0};
  idem_error e = {0};
  cr_assert_eq(idem_policy_list(c, &l, &e), IDEM_OK);
  cr_assert_eq(l.n, 1, "nothing refused was stored");
  idem_policies_clear(&l);
  kr.key_retention_s = 400 * 86400; /* the maximum */
  set_ok(c, kr);
  cr_assert_eq(get(c, "payment", "refund").key_retention_s, 400 * 86400);
  cr_assert_eq(idem_policy_list(c, &l, &e), IDEM_OK);
  cr_assert_eq(l.n, 2);
  for (size_t i = 0; i < l.n; i++)
    if (strcmp(l.policies[i].operation, "refund") == 0)
      cr_assert_eq(l.policies[i].key_retention_s, 400 * 86400, "listed as stored");
    else
      cr_assert_eq(l.policies[i].key_retention_s, 0, "0 stored, listed as 0");
  idem_policies_clear(&l);
  /* GetPolicy answers the key retention in effect: 0 stored = the retention */
  cr_assert_eq(get(c, "payment", "charge").key_retention_s, 90 * 86400);
  bool deleted;
  cr_assert_eq(idem_policy_delete(c, "*", "charge", &deleted, &e), IDEM_INVALID_ARGUMENT);
  idem_close(c);
  cr_assert_eq(h_srv_stop(&s), 0);
}

Test(policy, second_node_converges_within_its_refresh, .timeout = 60) {
  srv a, b;
  h_srv_start(&a, NULL, NULL);
  h_srv_start(&b, NULL, NULL);
  char t[64];
  h_tenant(t);
  idem_client *ca = h_client(&a, t, 0), *cb = h_client(&b, t, 0);
  cr_assert_eq(get(cb, "ship", "label").failure_mode, IDEM_FAIL_CLOSED);
  int64_t t0 = h_now_ms();
  set_ok(ca, P("ship", "label", IDEM_FAIL_OPEN, 60, 1000));
  H_WAIT_EVERY(50, get(cb, "ship", "label").failure_mode == IDEM_FAIL_OPEN, 10000,
               "node b sees node a's policy change");
  printf("policy change on node a seen by node b after %lld ms\n",
         (long long)(h_now_ms() - t0));
  idem_close(ca);
  idem_close(cb);
  cr_assert_eq(h_srv_stop(&a), 0);
  cr_assert_eq(h_srv_stop(&b), 0);
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

Test(policy, config_file_seeds_policies_and_flags_win, .timeout = 60) {
  char t[64], path[128], text[1024], svc[64];
  h_tenant(t);
  h_unique("cfg", path, sizeof path);
  /* a service name unique to this run: seeds are server-wide rows in the shared database */
  h_unique("svc", svc, sizeof svc);
  for (char *p = svc; *p; p++)
    if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
  char file[160];
  snprintf(file, sizeof file, "/tmp/idem-%s.ini", path);
  snprintf(text, sizeof text,
           "# idem-coordinator test config\n"
           "workers = 2\n"
           "reaper-interval = 1\n"
           "store_timeout_ms = 1500\n"
           "listen = 127.0.0.1:1\n" /* overridden by the harness's --listen flag */
           "[policy \"%s charge\"]\n"
           "failure_mode = fail-open\n"
           "retention = 2h\n"
           "key_retention = 30d\n"
           "lease = 5s\n"
           "[policy %s/*]\n"
           "tenant = %s\n"
           "retention = 90s\n",
           svc, svc, t);
  write_text(file, text);
  const char *args[] = {"--config", file, NULL};
  srv s;
  h_srv_start(&s, NULL, args);
  idem_client *c = h_client(&s, t, 0);
  /* the tenant's own (svc, *) row wins over the server-wide exact row */
  idem_policy p = get(c, svc, "charge");
  cr_assert_eq(p.retention_s, 90);
  cr_assert_eq(p.failure_mode, IDEM_FAIL_CLOSED);
  char other[64];
  h_tenant(other);
  idem_client *co = h_client(&s, other, 0);
  p = get(co, svc, "charge");
  cr_assert_eq(p.failure_mode, IDEM_FAIL_OPEN);
  cr_assert_eq(p.retention_s, 7200);
  cr_assert_eq(p.key_retention_s, 30 * 86400, "seeded key_retention");
  cr_assert_eq(p.lease_ms, 5000);
  /* an Admin change survives a restart with the same file (seeds never overwrite) */
  set_ok(c, P(svc, "*", IDEM_FAIL_OPEN, 30, 1000));
  idem_close(c);
  idem_close(co);
  cr_assert_eq(h_srv_stop(&s), 0);
  h_srv_start(&s, NULL, args);
  c = h_client(&s, t, 0);
  cr_assert_eq(get(c, svc, "charge").retention_s, 30);
  idem_close(c);
  cr_assert_eq(h_srv_stop(&s), 0);

  /* a bad file: exit status 2 with the line named */
  write_text(file, "[policy a/b]\nretention = 91d\n");
  const char *argv[] = {h_env("IDEM_COORDINATOR_BIN"), "--pg", h_env("IDEM_TEST_PG_URL"),
                        "--config", file, NULL};
  const spawn_opts quiet = {.log = "/dev/null"};
  int st = spawn_run(argv, &quiet, 60000);
  cr_assert_eq(st, 2, "bad config: status %d", st);
  write_text(file, "reaper-interval = soon\n");
  st = spawn_run(argv, &quiet, 60000);
  cr_assert_eq(st, 2, "bad option value: status %d", st);
  /* a key retention shorter than the retention: refused at start, naming the field */
  char log[200];
  snprintf(log, sizeof log, "/tmp/idem-%s.log", path);
  write_text(file, "[policy a/b]\nretention = 2h\nkey_retention = 1h\n");
  st = spawn_run(argv, &(spawn_opts){.log = log}, 60000);
  cr_assert_eq(st, 2, "key_retention below retention: status %d", st);
  FILE *lf = fopen(log, "r");
  cr_assert_not_null(lf);
  char said[2048];
  size_t got = fread(said, 1, sizeof said - 1, lf);
  said[got] = '\0';
  fclose(lf);
  unlink(log);
  cr_assert(strstr(said, "key_retention_s"), "%s", said);
  unlink(file);
}

/* a retention or lease left at 0 is the built-in default (24 h, 30 s), as in every
 * SDK; the server itself still refuses 0 on the wire (hostile_python, bad input tables) */
Test(policy, zero_retention_and_lease_take_the_defaults, .timeout = 60) {
  srv s;
  h_srv_start(&s, NULL, NULL);
  char t[64];
  h_tenant(t);
  idem_client *c = h_client(&s, t, 0);
  idem_error e = {0};
  idem_policy out;
  idem_policy p = P("payment", "charge", IDEM_FAIL_OPEN, 0, 0);
  cr_assert_eq(idem_policy_set(c, &p, &out, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(out.retention_s, 86400);
  cr_assert_eq(out.lease_ms, 30000);
  cr_assert_eq(out.key_retention_s, 0);
  idem_close(c);
  cr_assert_eq(h_srv_stop(&s), 0);
}
