/* Tenant isolation, every RPC (docs/api.md §1, §9): two tenants (idem-tenant metadata, insecure mode)
 * use the same global ids, services, operations and request id. Tenant B never sees, completes,
 * extends or resolves tenant A's steps, sagas, policies or audit entries; B's answer on A's key
 * is exactly B's answer on a key that never existed (same code, same message once the id B sent
 * is blanked out); and A's rows are byte-for-byte unchanged afterwards (a hash of every column). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

static idem_client *A, *B;
static char TA[64], TB[64];

static void setup(void) {
  h_fixture_start(&H, &(h_fixture_conf){.no_client = true});
  h_tenant(TA);
  h_tenant(TB);
  A = h_client(&H.s, TA, 0);
  B = h_client(&H.s, TB, 0);
}
static void teardown(void) {
  idem_close(A);
  idem_close(B);
  h_teardown();
}

TestSuite(isolation, .init = setup, .fini = teardown, .timeout = 120);


static long long tenant_rows(const char *table, const char *t) {
  char sql[128];
  snprintf(sql, sizeof sql, "select count(*) from %s where tenant = $1", table);
  const char *p[] = {t};
  return pgx_sql(NULL, sql, 1, p);
}

/* msg with every occurrence of id replaced by "<id>" (so two answers that only echo the id the
 * caller sent compare equal). */
static void blank(const char *msg, const char *id, char *out, size_t cap) {
  size_t n = 0, idl = strlen(id);
  for (const char *p = msg; *p && n + 5 < cap;) {
    if (idl && strncmp(p, id, idl) == 0) {
      memcpy(out + n, "<id>", 4);
      n += 4;
      p += idl;
    } else {
      out[n++] = *p++;
    }
  }
  out[n] = '\0';
}

/* B's answer on A's key must be NOT_FOUND, exactly like B's answer on a never-used key. */
static void same_not_found(const char *what, int rc_a, const idem_error *ea, const char *id_a,
                           int rc_n, const idem_error *en, const char *id_n) {
  cr_expect_eq(rc_a, IDEM_NOT_FOUND, "%s on A's key: %s (%s)", what, idem_strerror(rc_a),
               ea->message);
  cr_expect_eq(rc_a, rc_n, "%s: code differs from a never-used key (%d vs %d)", what, rc_a, rc_n);
  char ma[300], mn[300];
  blank(ea->message, id_a, ma, sizeof ma);
  blank(en->message, id_n, mn, sizeof mn);
  cr_expect_str_eq(ma, mn, "%s: message differs from a never-used key", what);
}

Test(isolation, same_names_run_independently_and_no_rpc_crosses_tenants) {
  char g_run[96], g_held[96], g_res[96], g_never[96];
  h_unique("gr", g_run, sizeof g_run);
  h_unique("gh", g_held, sizeof g_held);
  h_unique("gs", g_res, sizeof g_res);
  h_unique("gn", g_never, sizeof g_never);
  idem_error e = {0}, en = {0};
  idem_begin b = {0};

  /* BeginSaga with the same request id: each tenant gets its own saga */
  char sa[IDEM_GLOBAL_ID_MAX + 1], sb[IDEM_GLOBAL_ID_MAX + 1], sa2[IDEM_GLOBAL_ID_MAX + 1];
  bool created = false;
  idem_label lab[] = {{"owner", "tenant-a-secret"}};
  cr_assert_eq(idem_saga_begin(A, "req-1", "order", lab, 1, sa, &created, NULL, &e), IDEM_OK);
  cr_assert(created);
  cr_assert_eq(idem_saga_begin(B, "req-1", "order", NULL, 0, sb, &created, NULL, &e), IDEM_OK);
  cr_assert(created, "B's request id must not find A's saga");
  cr_assert_str_neq(sa, sb);
  cr_assert_eq(idem_saga_begin(A, "req-1", "order", NULL, 0, sa2, &created, NULL, &e), IDEM_OK);
  cr_assert(!created);
  cr_assert_str_eq(sa, sa2);

  /* BeginStep: same key in both tenants, both PROCEED with attempt 1 */
  idem_step_key run = {g_run, "pay", "charge", IDEM_FORWARD};
  cr_assert_eq(idem_step_begin(A, &run, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(b.attempt, 1);
  cr_assert_eq(idem_step_complete(A, &run, 1, IDEM_OUTCOME_SUCCEEDED, 200, "a", 1, NULL, &e),
               IDEM_OK);
  cr_assert_eq(idem_step_begin(B, &run, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED, "B must not replay A's result");
  cr_assert_eq(b.attempt, 1);
  cr_assert(!b.has_result);
  cr_assert_eq(idem_step_complete(B, &run, 1, IDEM_OUTCOME_FAILED, 500, "b", 1, NULL, &e), IDEM_OK);

  /* A holds one step in progress, resolves another (audit row), sets policies */
  idem_step_key held = {g_held, "pay", "charge", IDEM_FORWARD};
  idem_step_key never = {g_never, "pay", "charge", IDEM_FORWARD};
  cr_assert_eq(idem_step_begin(A, &held, NULL, 0, 0, &b, &e), IDEM_OK);
  idem_step_key res = {g_res, "pay", "charge", IDEM_FORWARD};
  cr_assert_eq(idem_step_begin(A, &res, NULL, 0, 0, &b, &e), IDEM_OK);
  idem_resolution rs = {IDEM_OUTCOME_SUCCEEDED, 200, "x", 1, "a's secret reason", "alice"};
  cr_assert_eq(idem_step_resolve(A, &res, &rs, NULL, &e), IDEM_OK, "%s", e.message);
  idem_policy pa = {"pay", "charge", IDEM_FAIL_OPEN, 7200, 12345, 0, 0};
  cr_assert_eq(idem_policy_set(A, &pa, NULL, &e), IDEM_OK, "%s", e.message);
  idem_policy pa2 = {"only-a", "op", IDEM_FAIL_OPEN, 3600, 4321, 0, 0};
  cr_assert_eq(idem_policy_set(A, &pa2, NULL, &e), IDEM_OK, "%s", e.message);
  long long before = h_tenant_hash(TA);
  cr_assert_gt(tenant_rows("idem_audit", TA), 0);

  /* CompleteStep, ExtendLease, LookupStep, ResolveStep on A's in-progress step */
  int ra = idem_step_complete(B, &held, 1, IDEM_OUTCOME_SUCCEEDED, 0, NULL, 0, NULL, &e);
  int rn = idem_step_complete(B, &never, 1, IDEM_OUTCOME_SUCCEEDED, 0, NULL, 0, NULL, &en);
  same_not_found("CompleteStep", ra, &e, g_held, rn, &en, g_never);
  ra = idem_step_extend(B, &held, 1, 60000, NULL, &e);
  rn = idem_step_extend(B, &never, 1, 60000, NULL, &en);
  same_not_found("ExtendLease", ra, &e, g_held, rn, &en, g_never);
  idem_record r = {0};
  ra = idem_step_lookup(B, &held, &r, &e);
  rn = idem_step_lookup(B, &never, &r, &en);
  same_not_found("LookupStep", ra, &e, g_held, rn, &en, g_never);
  ra = idem_step_lookup(B, &res, &r, &e); /* A's finished step */
  same_not_found("LookupStep (finished)", ra, &e, g_res, rn, &en, g_never);
  idem_resolution rb = {IDEM_OUTCOME_FAILED, 1, NULL, 0, "b tries", "bob"};
  ra = idem_step_resolve(B, &held, &rb, NULL, &e);
  rn = idem_step_resolve(B, &never, &rb, NULL, &en);
  same_not_found("ResolveStep", ra, &e, g_held, rn, &en, g_never);

  /* GetSaga: A's BeginSaga id, and the id A's steps live under */
  idem_saga sg = {0};
  ra = idem_saga_get(B, sa, &sg, &e);
  rn = idem_saga_get(B, g_never, &sg, &en);
  same_not_found("GetSaga (A's saga)", ra, &e, sa, rn, &en, g_never);
  ra = idem_saga_get(B, g_held, &sg, &e);
  same_not_found("GetSaga (A's steps)", ra, &e, g_held, rn, &en, g_never);
  /* the shared key: B sees only its own step */
  cr_assert_eq(idem_saga_get(B, g_run, &sg, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(sg.n_steps, 1);
  cr_assert_str_eq(sg.steps[0].tenant, TB);
  cr_assert_eq(sg.steps[0].result.code, 500);
  idem_saga_clear(&sg);

  /* GetPolicy: B gets the built-in default, as for a pair nobody configured */
  idem_policy gb, gn;
  cr_assert_eq(idem_policy_get(B, "pay", "charge", &gb, &e), IDEM_OK);
  cr_assert_eq(idem_policy_get(B, "never-set", "charge", &gn, &e), IDEM_OK);
  cr_assert_eq(gb.failure_mode, gn.failure_mode, "B sees A's fail-open policy");
  cr_assert_eq(gb.lease_ms, gn.lease_ms);
  cr_assert_eq(gb.retention_s, gn.retention_s);
  cr_assert_eq(gb.updated_unix_ms, gn.updated_unix_ms);
  cr_assert_eq(gb.failure_mode, IDEM_FAIL_CLOSED);

  /* ListSteps: B's pages hold B's rows only; filtered by A's id, nothing */
  idem_step_page pg = {0};
  idem_steps_filter f = {0};
  f.global_id = g_held;
  cr_assert_eq(idem_steps_list(B, &f, &pg, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(pg.n_steps, 0);
  idem_step_page_clear(&pg);
  f.global_id = NULL;
  f.state = IDEM_STATE_IN_PROGRESS;
  cr_assert_eq(idem_steps_list(B, &f, &pg, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(pg.n_steps, 0, "A's in-progress step listed for B");
  idem_step_page_clear(&pg);
  memset(&f, 0, sizeof f);
  cr_assert_eq(idem_steps_list(B, &f, &pg, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(pg.n_steps, 1);
  cr_assert_str_eq(pg.steps[0].tenant, TB);
  idem_step_page_clear(&pg);
  /* A's page token is not B's: refused, never read as a position in A's rows */
  memset(&f, 0, sizeof f);
  f.page_size = 1;
  cr_assert_eq(idem_steps_list(A, &f, &pg, &e), IDEM_OK);
  cr_assert_str_neq(pg.next_page_token, "", "A has 3 steps, page size 1");
  memset(&f, 0, sizeof f);
  f.page_size = 1;
  f.page_token = pg.next_page_token;
  idem_step_page pb = {0};
  cr_assert_eq(idem_steps_list(B, &f, &pb, &e), IDEM_INVALID_ARGUMENT, "%s", e.message);
  idem_step_page_clear(&pb);
  idem_step_page_clear(&pg);

  /* ListAudit: A's resolution is not in B's trail, whole tenant or by A's id */
  idem_audit_page au = {0}, aun = {0};
  cr_assert_eq(idem_audit_list(B, g_res, 0, NULL, &au, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(idem_audit_list(B, g_never, 0, NULL, &aun, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(au.n_entries, 0);
  cr_assert_eq(aun.n_entries, 0);
  cr_assert_str_eq(au.next_page_token, aun.next_page_token);
  idem_audit_page_clear(&au);
  idem_audit_page_clear(&aun);
  cr_assert_eq(idem_audit_list(B, NULL, 0, NULL, &au, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(au.n_entries, 0, "A's audit rows listed for B");
  idem_audit_page_clear(&au);

  /* SetPolicy / DeletePolicy / ListPolicies: B's rows are B's own */
  bool deleted = true;
  cr_assert_eq(idem_policy_delete(B, "only-a", "op", &deleted, &e), IDEM_OK, "%s", e.message);
  cr_assert(!deleted, "B deleted A's policy row");
  deleted = true;
  cr_assert_eq(idem_policy_delete(B, "never-set", "op", &deleted, &e), IDEM_OK);
  cr_assert(!deleted);
  idem_policies pl = {0};
  cr_assert_eq(idem_policy_list(B, &pl, &e), IDEM_OK);
  cr_assert_eq(pl.n, 0, "A's policies listed for B");
  idem_policies_clear(&pl);
  idem_policy pbset = {"pay", "charge", IDEM_FAIL_CLOSED, 60, 999, 0, 0};
  cr_assert_eq(idem_policy_set(B, &pbset, NULL, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(idem_policy_list(B, &pl, &e), IDEM_OK);
  cr_assert_eq(pl.n, 1);
  cr_assert_eq(pl.policies[0].lease_ms, 999);
  idem_policies_clear(&pl);

  /* GetStatus: node facts only, the same for both tenants */
  idem_status sta, stb;
  cr_assert_eq(idem_get_status(A, &sta, &e), IDEM_OK);
  cr_assert_eq(idem_get_status(B, &stb, &e), IDEM_OK);
  cr_assert_str_eq(sta.node_id, stb.node_id);
  cr_assert_eq(sta.started_unix_ms, stb.started_unix_ms);
  cr_assert_eq(sta.epoch, stb.epoch);
  cr_assert_null(strstr(stb.node_id, TA));
  cr_assert_null(strstr(stb.leader_address, TA));

  /* A's rows are untouched, and A still sees its own state */
  cr_assert_eq(h_tenant_hash(TA), before, "tenant A's rows changed");
  cr_assert_eq(idem_step_lookup(A, &held, &r, &e), IDEM_OK);
  cr_assert_eq(r.state, IDEM_STATE_IN_PROGRESS);
  cr_assert_eq(r.attempt, 1);
  idem_record_clear(&r);
  cr_assert_eq(idem_step_lookup(A, &run, &r, &e), IDEM_OK);
  cr_assert_eq(r.state, IDEM_STATE_SUCCEEDED);
  cr_assert_eq(r.result.code, 200);
  idem_record_clear(&r);
  idem_policy ga;
  cr_assert_eq(idem_policy_get(A, "pay", "charge", &ga, &e), IDEM_OK);
  cr_assert_eq(ga.failure_mode, IDEM_FAIL_OPEN);
  cr_assert_eq(ga.lease_ms, 12345);
  idem_policies_clear(&pl);
  cr_assert_eq(idem_policy_list(A, &pl, &e), IDEM_OK);
  cr_assert_eq(pl.n, 2);
  idem_policies_clear(&pl);
  cr_assert_eq(idem_audit_list(A, g_res, 0, NULL, &au, &e), IDEM_OK);
  cr_assert_eq(au.n_entries, 1);
  cr_assert_str_eq(au.entries[0].reason, "a's secret reason");
  idem_audit_page_clear(&au);
  /* and B only ever wrote under its own name */
  cr_assert_eq(tenant_rows("idem_steps", TB), 1);
  cr_assert_eq(tenant_rows("idem_sagas", TB), 1);
  cr_assert_eq(tenant_rows("idem_audit", TB), 0);
  idem_begin_clear(&b);
}

/* Compensation, tombstones and lease takeover look only at the caller's own tenant. */
Test(isolation, compensation_and_takeover_stay_within_the_tenant) {
  char g[96];
  h_unique("gc", g, sizeof g);
  idem_error e = {0};
  idem_begin b = {0};
  idem_step_key fwd = {g, "ship", "send", IDEM_FORWARD};
  idem_step_key comp = {g, "ship", "send", IDEM_COMPENSATION};
  /* A compensates first (null compensation + forward tombstone in A) */
  cr_assert_eq(idem_step_begin(A, &comp, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_SKIP_NULL_COMPENSATION);
  /* B's forward step must not see A's tombstone */
  cr_assert_eq(idem_step_begin(B, &fwd, NULL, 0, 1, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED, "B's forward saw A's compensation");
  cr_assert_eq(b.attempt, 1);
  long long a_before = h_tenant_hash(TA);
  /* B's 1 ms lease expires: only B's own caller may take it over (attempt 2), A cannot see it */
  int rc;
  H_WAIT((rc = idem_step_begin(B, &fwd, NULL, 0, 0, &b, &e)) != IDEM_ABORTED, 5000,
         "B's 1 ms lease runs out: BeginStep no longer ABORTED");
  cr_assert_eq(rc, IDEM_OK, "%s", e.message);
  cr_assert(b.takeover);
  cr_assert_eq(b.attempt, 2);
  cr_assert_eq(idem_step_begin(A, &fwd, NULL, 0, 0, &b, &e), IDEM_OK);
  cr_assert_eq(b.decision, IDEM_DECISION_SKIP_ALREADY_COMPENSATED, "A's own tombstone decides");
  cr_assert_eq(h_tenant_hash(TA), a_before);
  idem_begin_clear(&b);
}
