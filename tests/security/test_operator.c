/* The operator role (docs/api.md §9, §18): slots serve every tenant, so
 * Admin.MoveSlots — its dry run included — needs role operator. One coordinator with two store
 * groups (a database each on the test Postgres), a private etcd, TLS with client certificates
 * and a tokens file, all real, over loopback:
 *  - a tenant's admin token and a service token are refused MoveSlots (dry run or not):
 *    PERMISSION_DENIED, reason permission-denied, the message naming the role operator; nothing
 *    moves (the map's version stays, no move is under way);
 *  - an operator token's dry run runs and counts every tenant's rows of those slots; the operator
 *    may call the admin methods too;
 *  - a client certificate named in --operators is an operator (its dry run runs), one not named
 *    is a service (refused);
 *  - --operators needs --tls-client-ca and names that a certificate can carry.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "etcd_proc.h"
#include "groups.h"
#include "pgexec.h"
#include "sec.h"

static sec_pki P;
static etcd_proc E;
static char DB[2][64], URL[2][256], STORE[2][600];
static char TOKENS[SEC_PATH + 16];
static char SVC[64], ADM[64], OPS[64], OTHER[64]; /* tokens */
static char T_OPS[64], T_OTHER[64];               /* tenants (P.tenant_san: SVC's and ADM's) */
static srv S;

static void setup(void) {
  sec_pki_make(&P);
  snprintf(TOKENS, sizeof TOKENS, "%s/tokens", P.dir);
  sec_token("svc", SVC);
  sec_token("adm", ADM);
  sec_token("ops", OPS);
  sec_token("oth", OTHER);
  h_tenant(T_OPS);
  h_tenant(T_OTHER);
  char l1[160], l2[160], l3[160], l4[160];
  snprintf(l1, sizeof l1, "%s %s service", SVC, P.tenant_san);
  snprintf(l2, sizeof l2, "%s %s admin", ADM, P.tenant_san);
  snprintf(l3, sizeof l3, "%s %s operator   # moves slots", OPS, T_OPS);
  snprintf(l4, sizeof l4, "%s %s service", OTHER, T_OTHER);
  const char *lines[] = {l1, l2, l3, l4, NULL};
  sec_write_file(TOKENS, lines);
  etcd_start(&E);
  for (int g = 0; g < 2; g++) {
    pgx_db_create("op", DB[g], sizeof DB[g], URL[g], sizeof URL[g]);
    snprintf(STORE[g], sizeof STORE[g], "g%d=%.255s", g + 1, URL[g]);
  }
  char slots[16];
  snprintf(slots, sizeof slots, "%d", H_GROUPS_SLOTS);
  const char *args[] = {"--store",
                        STORE[0],
                        "--store",
                        STORE[1],
                        "--etcd",
                        E.url,
                        "--slots",
                        slots,
                        "--election-ttl",
                        "2",
                        "--reaper-interval",
                        "0",
                        "--tls-cert",
                        P.server.cert,
                        "--tls-key",
                        P.server.key,
                        "--tls-client-ca",
                        P.ca,
                        "--tokens",
                        TOKENS,
                        "--operators",
                        P.tenant_cn,
                        NULL};
  idem_options probe = {.token = SVC,
                        .tls_ca_file = P.ca,
                        .tls_cert_file = P.client_san.cert,
                        .tls_key_file = P.client_san.key};
  h_srv_start_probe(&S, "", args, &probe);
}

static void teardown(void) {
  cr_expect_eq(h_srv_stop(&S), 0, "the coordinator exits 0");
  etcd_stop(&E);
  for (int g = 0; g < 2; g++) pgx_db_drop(DB[g]);
  sec_pki_free(&P);
}

/* Steps in slots from..to in the database url. */
static long long count_steps(const char *url, int from, int to) {
  char a[16], b[16];
  snprintf(a, sizeof a, "%d", from);
  snprintf(b, sizeof b, "%d", to);
  const char *p[] = {a, b};
  return pgx_sql(url, "SELECT count(*) FROM idem_steps WHERE slot BETWEEN $1::int AND $2::int", 2,
                 p);
}

/* A client with the certificate client (every connection needs one) and token (NULL = none). */
static idem_client *client(const sec_pair *cert, const char *token) {
  idem_options o = sec_opts(&S, P.ca, cert, token, NULL);
  o.deadline_ms = 30000;
  return sec_connect(&o);
}

static int move(idem_client *c, uint32_t from, uint32_t to, const char *rid, bool dry,
                idem_move_result *r, idem_error *e) {
  idem_move m = {.from = from, .to = to, .group = "g2", .request_id = rid, .dry_run = dry};
  memset(r, 0, sizeof *r);
  memset(e, 0, sizeof *e);
  return idem_move_slots(c, &m, r, e);
}

/* The operator's dry run of g1's slots once the node has its slot map and leads both groups
 * (UNAVAILABLE until then; polled against a deadline). */
static int dry_run_when_ready(idem_client *c, idem_move_result *r, idem_error *e) {
  int rc;
  bool ready;
  H_WAITED_EVERY(100, ready, (rc = move(c, 0, 31, "dry", true, r, e)) != IDEM_UNAVAILABLE, 30000);
  if (!ready) cr_log_warn("the node still answers UNAVAILABLE after 30 s");
  return rc;
}

static void expect_refused(idem_client *c, const char *who) {
  idem_move_result r;
  idem_error e;
  for (int dry = 1; dry >= 0; dry--) {
    int rc = move(c, 0, 3, "refused", dry, &r, &e);
    cr_expect_eq(rc, IDEM_PERMISSION_DENIED, "%s, dry run %d: %d %s", who, dry, rc, e.message);
    cr_expect_str_eq(e.reason, "permission-denied", "%s, dry run %d", who, dry);
    cr_expect(strstr(e.message, "role operator"), "%s: names the role: %s", who, e.message);
  }
}

/* Admin.ListPolicies (an admin method) through c: whether it was allowed. */
static bool admin_call_ok(idem_client *c) {
  idem_policies l = {0};
  idem_error e = {0};
  int rc = idem_policy_list(c, &l, &e);
  idem_policies_clear(&l);
  if (rc != IDEM_OK) cr_log_info("ListPolicies: %d %s", rc, e.message);
  return rc == IDEM_OK;
}

/* How many groups the node that c talks to leads (its GetTopology; 0 when it does not answer). */
static int groups_led_here(idem_client *c) {
  idem_topology t = {0};
  idem_error e = {0};
  int led = 0;
  if (idem_get_topology(c, &t, &e) == IDEM_OK)
    for (size_t i = 0; i < t.n_groups; i++) led += t.groups[i].led_here;
  idem_topology_clear(&t);
  return led;
}

/* Waits until the node leads both groups (a step goes to its group's leader). */
static void wait_leads_both(idem_client *c) {
  H_WAIT_EVERY(100, groups_led_here(c) == 2, 30000, "the node leads both groups");
}

/* BeginStep + CompleteStep of n keys of g1 (slots 0-31) for c's tenant. */
static int steps_in_g1(idem_client *c, const char *tenant, int n) {
  int made = 0;
  for (int k = 0; made < n; k++) {
    char id[48];
    snprintf(id, sizeof id, "op-%d", k);
    if (h_groups_group_of(tenant, id) != 0) continue;
    sec_step_done(c, id);
    made++;
  }
  return made;
}

Test(operator, a_tenant_admin_may_not_move_slots_an_operator_token_may, .init = setup,
     .fini = teardown, .timeout = 120) {
  idem_client *ops = client(&P.client_san, OPS);
  idem_move_result r;
  idem_error e;
  cr_assert_eq(dry_run_when_ready(ops, &r, &e), IDEM_OK, "operator's dry run: %s", e.message);
  /* rows of two tenants in g1: the operator's dry run counts them all */
  idem_client *svc = client(&P.client_san, SVC), *other = client(&P.client_san, OTHER);
  wait_leads_both(svc);
  int made = steps_in_g1(svc, P.tenant_san, 3) + steps_in_g1(other, T_OTHER, 2);
  idem_topology before = {0};
  cr_assert_eq(idem_get_topology(ops, &before, &e), IDEM_OK, "%s", e.message);

  idem_client *adm = client(&P.client_san, ADM);
  expect_refused(adm, "a tenant's admin token");
  expect_refused(svc, "a service token");
  /* the admin is still an admin elsewhere: the refusal is MoveSlots's alone */
  cr_expect(admin_call_ok(adm), "a tenant's admin may list its policies");
  cr_expect(!admin_call_ok(svc), "a service may not");

  cr_assert_eq(move(ops, 0, 31, "dry-2", true, &r, &e), IDEM_OK, "%s", e.message);
  cr_expect_eq(r.steps_moved, (uint64_t)count_steps(URL[0], 0, 31));
  cr_expect_geq(r.steps_moved, (uint64_t)made, "both tenants' steps are counted");
  cr_expect(!r.replayed);
  /* an operator passes the admin checks too */
  cr_expect(admin_call_ok(ops), "an operator token may call admin methods");

  idem_topology after = {0};
  idem_slot_move mv = {0};
  cr_assert_eq(idem_get_topology_move(ops, &after, &mv, &e), IDEM_OK, "%s", e.message);
  cr_expect_eq(after.version, before.version, "nothing moved: no map version was written");
  cr_expect(!mv.active, "no move under way");
  cr_expect_eq(after.n_ranges, 2, "g1 0-31, g2 32-63 still");
  cr_expect_eq(count_steps(URL[1], 0, 31), 0, "g2 holds none of g1's slots");
  idem_topology_clear(&before);
  idem_topology_clear(&after);
  idem_close(adm);
  idem_close(svc);
  idem_close(other);
  idem_close(ops);
}

Test(operator, a_certificate_named_in_operators_is_an_operator, .init = setup, .fini = teardown,
     .timeout = 120) {
  idem_client *named = client(&P.client_cn, NULL); /* CN = P.tenant_cn, in --operators */
  idem_move_result r;
  idem_error e;
  cr_assert_eq(dry_run_when_ready(named, &r, &e), IDEM_OK, "listed certificate: %s", e.message);
  cr_expect(admin_call_ok(named), "an operator's certificate may call admin methods");
  idem_client *unnamed = client(&P.client_san, NULL); /* SAN = P.tenant_san: not listed */
  expect_refused(unnamed, "a certificate not in --operators");
  /* a token still wins over the certificate it comes with */
  idem_client *adm = client(&P.client_cn, ADM);
  expect_refused(adm, "an admin token over an operator's certificate");
  idem_close(adm);
  idem_close(unnamed);
  idem_close(named);
}

Test(operator, operators_needs_client_certificates_and_valid_names, .timeout = 60) {
  sec_pki_make(&P);
  char out[4096];
  const char *no_ca[] = {"--tls-cert",  P.server.cert, "--tls-key", P.server.key,
                         "--operators", "ops",         NULL};
  cr_expect_eq(sec_run_to_exit(no_ca, out, sizeof out), 2, "%s", out);
  cr_expect(strstr(out, "--operators") && strstr(out, "--tls-client-ca"), "%s", out);
  const char *bad[] = {"--tls-cert",  P.server.cert,      "--tls-key",
                       P.server.key,  "--tls-client-ca",  P.ca,
                       "--operators", "ops,spiffe://x/y", NULL};
  cr_expect_eq(sec_run_to_exit(bad, out, sizeof out), 2, "%s", out);
  cr_expect(strstr(out, "--operators") && strstr(out, "spiffe://x/y"), "%s", out);
  sec_pki_free(&P);
}

/* The tokens file maps certificate names to roles ("cert NAME ROLE"), reloaded with SIGHUP like
 * its tokens: a certificate not in --operators becomes an operator once the file names it so,
 * and the file's line for a name in --operators wins (here: admin, so refused). */
Test(operator, the_tokens_file_maps_certificate_names_to_roles, .init = setup, .fini = teardown,
     .timeout = 120) {
  idem_client *san = client(&P.client_san, NULL); /* SAN = P.tenant_san: not in --operators */
  idem_client *cn = client(&P.client_cn, NULL);   /* CN = P.tenant_cn: in --operators */
  idem_move_result r;
  idem_error e;
  cr_assert_eq(dry_run_when_ready(cn, &r, &e), IDEM_OK, "listed certificate: %s", e.message);
  expect_refused(san, "a certificate neither listed nor mapped");
  char l1[160], l2[160], l3[160];
  snprintf(l1, sizeof l1, "%s %s service", SVC, P.tenant_san);
  snprintf(l2, sizeof l2, "cert %s operator", P.tenant_san);
  snprintf(l3, sizeof l3, "cert %s admin   # wins over --operators", P.tenant_cn);
  const char *lines[] = {l1, l2, l3, NULL};
  sec_write_file(TOKENS, lines);
  cr_assert_eq(kill(S.pid, SIGHUP), 0);
  int rc;
  bool reloaded;
  H_WAITED_EVERY(100, reloaded,
                 (rc = move(san, 0, 31, "dry-san", true, &r, &e)) != IDEM_PERMISSION_DENIED, 20000);
  cr_expect(reloaded, "the node reloads its tokens file after SIGHUP within 20 s");
  cr_expect_eq(rc, IDEM_OK, "a certificate the file maps to operator: %d %s", rc, e.message);
  expect_refused(cn, "a certificate the file maps to admin, though in --operators");
  cr_expect(admin_call_ok(cn), "its role is admin: it may call admin methods");
  idem_close(cn);
  idem_close(san);
}
