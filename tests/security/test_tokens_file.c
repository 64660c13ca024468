/* The rules of auth/ without a network: the tokens-file parser (errors name the line, never
 * the token), lookup, the per-call decision (roles service < admin < operator; a client
 * certificate named in --operators is an operator), and reloads racing lookups. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h" /* h_now_ms, H_WAIT */
#include "auth/auth.h"

#define TOK_A "aaaaaaaaaaaaaaaa-service"
#define TOK_B "bbbbbbbbbbbbbbbb-admin"
#define TOK_C "cccccccccccccccc-operator"

static err_code parse(const char *text, auth_tokens **t, err_t *err) {
  err_clear(err);
  return auth_tokens_parse(text, strlen(text), "tokens.txt", t, err);
}

Test(tokens_file, comments_blank_lines_and_tabs) {
  const char *text =
      "# idem tokens\n"
      "\n"
      "   # indented comment\n" TOK_A
      " shop service\n"
      "\t" TOK_B
      "\tops-1\tadmin   # trailing comment\r\n"
      "   \n";
  auth_tokens *t;
  err_t err;
  cr_assert_eq(parse(text, &t, &err), ERR_OK, "%s", err.msg);
  cr_expect_eq(auth_tokens_count(t), 2);
  char tenant[REC_GLOBAL_ID_MAX + 1];
  auth_role role;
  cr_assert(auth_tokens_lookup(t, TOK_A, strlen(TOK_A), tenant, &role));
  cr_expect_str_eq(tenant, "shop");
  cr_expect_eq(role, AUTH_ROLE_SERVICE);
  cr_assert(auth_tokens_lookup(t, TOK_B, strlen(TOK_B), tenant, &role));
  cr_expect_str_eq(tenant, "ops-1");
  cr_expect_eq(role, AUTH_ROLE_ADMIN);
  cr_expect(!auth_tokens_lookup(t, TOK_A, strlen(TOK_A) - 1, tenant, &role), "a prefix");
  cr_expect(!auth_tokens_lookup(t, TOK_A "x", strlen(TOK_A) + 1, tenant, &role), "longer");
  cr_expect(!auth_tokens_lookup(t, "", 0, tenant, &role));
  auth_tokens_release(t);
}

/* A bad file: the error is exactly `want`, and never holds the token. */
static void expect_bad(const char *text, const char *want) {
  auth_tokens *t = (auth_tokens *)1;
  err_t err;
  cr_expect_eq(parse(text, &t, &err), ERR_INVALID, "accepted: %s", text);
  cr_expect_null(t);
  cr_expect_str_eq(err.msg, want);
  cr_expect(!strstr(err.msg, "aaaaaaaa") && !strstr(err.msg, "bbbbbbbb") &&
                !strstr(err.msg, "cccccccc"),
            "%s", err.msg);
}

Test(tokens_file, operator_is_a_role) {
  const char *text = TOK_A " shop service\n" TOK_C " ops operator # moves slots\n";
  auth_tokens *t;
  err_t err;
  cr_assert_eq(parse(text, &t, &err), ERR_OK, "%s", err.msg);
  cr_expect_eq(auth_tokens_count(t), 2);
  char tenant[REC_GLOBAL_ID_MAX + 1];
  auth_role role = AUTH_ROLE_NONE;
  cr_assert(auth_tokens_lookup(t, TOK_C, strlen(TOK_C), tenant, &role));
  cr_expect_str_eq(tenant, "ops");
  cr_expect_eq(role, AUTH_ROLE_OPERATOR);
  cr_expect_str_eq(auth_role_name(role), "operator");
  auth_tokens_release(t);
  expect_bad(TOK_C " ops Operator\n", "tokens.txt:1: role must be service, admin or operator");
  expect_bad(TOK_C " ops operators\n", "tokens.txt:1: role must be service, admin or operator");
  /* the order every check relies on */
  cr_expect(auth_role_at_least(AUTH_ROLE_OPERATOR, AUTH_ROLE_ADMIN));
  cr_expect(auth_role_at_least(AUTH_ROLE_ADMIN, AUTH_ROLE_ADMIN));
  cr_expect(!auth_role_at_least(AUTH_ROLE_ADMIN, AUTH_ROLE_OPERATOR));
  cr_expect(!auth_role_at_least(AUTH_ROLE_SERVICE, AUTH_ROLE_ADMIN));
  cr_expect(!auth_role_at_least(AUTH_ROLE_NONE, AUTH_ROLE_SERVICE));
}

Test(tokens_file, bad_lines_are_named_by_number) {
  expect_bad("# x\n" TOK_A " shop root\n", "tokens.txt:2: role must be service, admin or operator");
  expect_bad(TOK_A " shop Admin\n", "tokens.txt:1: role must be service, admin or operator");
  expect_bad("\n\n" TOK_A " shop\n", "tokens.txt:3: expected TOKEN TENANT ROLE, got 2 fields");
  expect_bad(TOK_A "\n", "tokens.txt:1: expected TOKEN TENANT ROLE, got 1 field");
  expect_bad(TOK_A " shop admin extra\n",
             "tokens.txt:1: expected TOKEN TENANT ROLE, got more fields");
  expect_bad(TOK_A " shop/x admin\n",
             "tokens.txt:1: tenant: must be 1 to 128 characters of [A-Za-z0-9._:-]");
  expect_bad("short shop admin\n",
             "tokens.txt:1: token must be 16 to 256 printable characters without spaces or #");
  expect_bad(TOK_A " shop admin\n" TOK_B " ops admin\n" TOK_A " other service\n",
             "tokens.txt:3: the same token as line 1");
  /* the '#' ends the token: what is left is one field */
  expect_bad("aaaaaaaa#aaaaaaaaaaaa shop admin\n",
             "tokens.txt:1: expected TOKEN TENANT ROLE, got 1 field");
  char big[AUTH_LINE_MAX + 40];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  char msg[64];
  snprintf(msg, sizeof msg, "tokens.txt:1: line longer than %d characters", AUTH_LINE_MAX);
  expect_bad(big, msg);
}

Test(tokens_file, an_empty_file_is_an_empty_table) {
  auth_tokens *t;
  err_t err;
  cr_assert_eq(parse("# nobody yet\n", &t, &err), ERR_OK);
  cr_expect_eq(auth_tokens_count(t), 0);
  auth_tokens_release(t);
}

Test(tokens_file, load_names_the_path) {
  auth_tokens *t;
  err_t err;
  err_clear(&err);
  cr_expect_eq(auth_tokens_load("/nonexistent/tokens", &t, &err), ERR_INVALID);
  cr_expect(strstr(err.msg, "/nonexistent/tokens: cannot open"), "%s", err.msg);
}

/* --- auth_decide --- */

static auth_keyring *keyring_of(char *path_out, const char *text) {
  snprintf(path_out, 64, "/tmp/idem-auth-unit-XXXXXX");
  int fd = mkstemp(path_out);
  cr_assert(fd >= 0);
  cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  err_t err;
  err_clear(&err);
  auth_keyring *k = auth_keyring_open(path_out, &err);
  cr_assert(k, "%s", err.msg);
  return k;
}

static auth_keyring *keyring(char *path_out) {
  return keyring_of(path_out, TOK_A " shop service\n" TOK_B " ops admin\n");
}

static err_code decide(const auth_config *cfg, auth_access a, const char *authz, const char *cert,
                       auth_identity *id, err_t *err) {
  auth_input in = {0};
  if (authz) {
    in.n_authorization = 1;
    in.authorization = authz;
    in.authorization_len = strlen(authz);
  }
  if (cert) {
    in.cert_name = cert;
    in.cert_name_len = strlen(cert);
  }
  err_clear(err);
  return auth_decide(cfg, a, &in, id, err);
}

Test(decide, tokens) {
  char path[64];
  auth_config cfg = {
      .tokens = keyring_of(path, TOK_A " shop service\n" TOK_B " ops admin\n" TOK_C " root operator\n")};
  auth_identity id;
  err_t err;
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_SERVICE, NULL, NULL, &id, &err), ERR_UNAUTHENTICATED);
  cr_expect_str_eq(err.msg, "missing credentials");
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_SERVICE, "Bearer " TOK_A, NULL, &id, &err), ERR_OK);
  cr_expect_str_eq(id.tenant, "shop");
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_SERVICE, "bearer  " TOK_A " ", NULL, &id, &err), ERR_OK,
               "scheme case and spaces: %s", err.msg);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_SERVICE, "Basic " TOK_A, NULL, &id, &err),
               ERR_UNAUTHENTICATED);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_SERVICE, TOK_A, NULL, &id, &err), ERR_UNAUTHENTICATED);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_SERVICE, "Bearer nope-nope-nope-nope", NULL, &id, &err),
               ERR_UNAUTHENTICATED);
  cr_expect_str_eq(err.msg, "invalid token");
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_ADMIN, "Bearer " TOK_A, NULL, &id, &err), ERR_PERMISSION);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_ADMIN, "Bearer " TOK_B, NULL, &id, &err), ERR_OK);
  cr_expect_eq(id.role, AUTH_ROLE_ADMIN);
  /* Admin.MoveSlots: the operator role only; an operator passes every admin check too */
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_OPERATOR, "Bearer " TOK_B, NULL, &id, &err),
               ERR_PERMISSION, "a tenant's admin may not move slots");
  cr_expect_eq(err.reason, ERR_R_NONE);
  cr_expect_str_eq(err_wire_reason(&err), "permission-denied");
  cr_expect(strstr(err.msg, "role operator"), "names the role needed: %s", err.msg);
  cr_expect(strstr(err.msg, "(role admin)"), "names the caller's role: %s", err.msg);
  cr_expect(!strstr(err.msg, "bbbbbbbb"), "%s", err.msg);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_OPERATOR, "Bearer " TOK_A, NULL, &id, &err),
               ERR_PERMISSION);
  cr_expect(strstr(err.msg, "role operator"), "%s", err.msg);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_OPERATOR, "Bearer " TOK_C, NULL, &id, &err), ERR_OK,
               "%s", err.msg);
  cr_expect_str_eq(id.tenant, "root");
  cr_expect_eq(id.role, AUTH_ROLE_OPERATOR);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_ADMIN, "Bearer " TOK_C, NULL, &id, &err), ERR_OK,
               "an operator is an admin too: %s", err.msg);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_SERVICE, "Bearer " TOK_C, NULL, &id, &err), ERR_OK);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_OPEN, NULL, NULL, &id, &err), ERR_OK);
  /* without mTLS a certificate name is no credential */
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_SERVICE, NULL, "shop", &id, &err), ERR_UNAUTHENTICATED);
  auth_input two = {.n_authorization = 2,
                    .authorization = "Bearer " TOK_A,
                    .authorization_len = strlen("Bearer " TOK_A)};
  cr_expect_eq(auth_decide(&cfg, AUTH_ACCESS_SERVICE, &two, &id, &err), ERR_UNAUTHENTICATED);
  auth_keyring_free(cfg.tokens);
  unlink(path);
}

Test(decide, certificates) {
  auth_config cfg = {.mtls = true};
  auth_identity id;
  err_t err;
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_SERVICE, NULL, "shop-1", &id, &err), ERR_OK);
  cr_expect_str_eq(id.tenant, "shop-1");
  cr_expect_eq(id.role, AUTH_ROLE_SERVICE);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_ADMIN, NULL, "shop-1", &id, &err), ERR_PERMISSION);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_SERVICE, NULL, "spiffe://x/y", &id, &err),
               ERR_UNAUTHENTICATED, "not a tenant name");
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_SERVICE, NULL, NULL, &id, &err), ERR_UNAUTHENTICATED);
  /* a token with no tokens file configured is ignored: the certificate decides */
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_SERVICE, "Bearer " TOK_B, "shop-1", &id, &err), ERR_OK);
  cr_expect_str_eq(id.tenant, "shop-1");
}

Test(decide, certificates_named_in_operators) {
  auth_config cfg = {.mtls = true, .operators = "ops-a,ops-b"};
  auth_identity id;
  err_t err;
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_OPERATOR, NULL, "ops-b", &id, &err), ERR_OK, "%s",
               err.msg);
  cr_expect_str_eq(id.tenant, "ops-b");
  cr_expect_eq(id.role, AUTH_ROLE_OPERATOR);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_ADMIN, NULL, "ops-a", &id, &err), ERR_OK, "%s", err.msg);
  cr_expect_eq(id.role, AUTH_ROLE_OPERATOR);
  /* names are compared whole */
  const char *not_listed[] = {"shop-1", "ops", "ops-", "ops-ab", "OPS-A", "ops-a,ops-b"};
  for (size_t i = 0; i < sizeof not_listed / sizeof not_listed[0]; i++) {
    err_code rc = decide(&cfg, AUTH_ACCESS_OPERATOR, NULL, not_listed[i], &id, &err);
    if (rc == ERR_OK) cr_expect_neq(id.role, AUTH_ROLE_OPERATOR, "%s", not_listed[i]);
    cr_expect_neq(rc, ERR_OK, "%s is not an operator", not_listed[i]);
  }
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_OPERATOR, NULL, "shop-1", &id, &err), ERR_PERMISSION);
  cr_expect(strstr(err.msg, "role operator") && strstr(err.msg, "--operators"), "%s", err.msg);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_SERVICE, NULL, "shop-1", &id, &err), ERR_OK);
  cr_expect_eq(id.role, AUTH_ROLE_SERVICE);
  /* no list: every certificate is a service */
  auth_config none = {.mtls = true};
  cr_expect_eq(decide(&none, AUTH_ACCESS_OPERATOR, NULL, "ops-a", &id, &err), ERR_PERMISSION);
  cr_expect(auth_name_listed("a,bb,c", "bb", 2));
  cr_expect(!auth_name_listed("a,bb,c", "b", 1));
  cr_expect(!auth_name_listed("a,,c", "", 0));
  cr_expect(!auth_name_listed(NULL, "a", 1));
}

/* --- reload while lookups run --- */

static atomic_bool stop;
static atomic_int lost; /* lookups that failed during a reload (asserted in the test thread) */
static atomic_long looked; /* lookups done so far */

static void *lookups(void *arg) {
  auth_keyring *k = arg;
  long n = 0;
  while (!atomic_load(&stop)) {
    auth_tokens *t = auth_keyring_acquire(k);
    char tenant[REC_GLOBAL_ID_MAX + 1];
    auth_role role;
    if (!auth_tokens_lookup(t, TOK_B, strlen(TOK_B), tenant, &role)) atomic_fetch_add(&lost, 1);
    auth_tokens_release(t);
    atomic_fetch_add(&looked, 1);
    n++;
  }
  return (void *)n;
}

Test(keyring, reloads_race_lookups) {
  char path[64];
  auth_keyring *k = keyring(path);
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, lookups, k);
  /* reload at least 200 times, and on until the lookups ran through 2,000 of them (bounded) */
  int64_t deadline = h_now_ms() + 10000;
  H_WAIT(atomic_load(&looked) > 0, 10000, "the lookup threads made their first lookup");
  long before = atomic_load(&looked);
  err_t err;
  for (int i = 0; i < 200 || (atomic_load(&looked) - before < 2000 && h_now_ms() < deadline);
       i++) {
    err_clear(&err);
    cr_assert_eq(auth_keyring_reload(k, &err), ERR_OK, "%s", err.msg);
  }
  atomic_store(&stop, true);
  long n = 0;
  for (int i = 0; i < 2; i++) {
    void *r;
    pthread_join(th[i], &r);
    n += (long)r;
  }
  cr_expect_eq(atomic_load(&lost), 0, "lookups lost during reloads");
  cr_expect_gt(n, 2000, "lookups raced the reloads");
  /* a failed reload keeps the table */
  FILE *f = fopen(path, "w");
  fputs(TOK_B " ops boss\n", f);
  fclose(f);
  cr_expect_eq(auth_keyring_reload(k, &err), ERR_INVALID);
  auth_tokens *t = auth_keyring_acquire(k);
  cr_expect_eq(auth_tokens_count(t), 2);
  auth_tokens_release(t);
  auth_keyring_free(k);
  unlink(path);
}

/* --- client-certificate names mapped to roles in the tokens file ("cert NAME ROLE") --- */

Test(tokens_file, cert_lines_map_names_to_roles_and_are_no_tokens) {
  const char *text = TOK_A " shop service\n"
                           "cert platform-ops operator   # the cluster's operators\n"
                           "cert shop-ops admin\n";
  auth_tokens *t;
  err_t err;
  cr_assert_eq(parse(text, &t, &err), ERR_OK, "%s", err.msg);
  cr_expect_eq(auth_tokens_count(t), 1, "certificate lines are not tokens");
  auth_role role = AUTH_ROLE_NONE;
  cr_expect(auth_tokens_cert_role(t, "platform-ops", 12, &role));
  cr_expect_eq(role, AUTH_ROLE_OPERATOR);
  cr_expect(auth_tokens_cert_role(t, "shop-ops", 8, &role));
  cr_expect_eq(role, AUTH_ROLE_ADMIN);
  cr_expect(!auth_tokens_cert_role(t, "shop", 4, &role), "a token's tenant is no certificate");
  cr_expect(!auth_tokens_cert_role(t, "platform-op", 11, &role), "names are compared whole");
  char tenant[REC_GLOBAL_ID_MAX + 1];
  cr_expect(!auth_tokens_lookup(t, "cert", 4, tenant, &role), "\"cert\" is no token");
  cr_expect(!auth_tokens_lookup(t, "platform-ops", 12, tenant, &role));
  auth_tokens_release(t);
  struct {
    const char *text, *want;
  } bad[] = {
      {"cert ops-1 operator\ncert ops-1 admin\n", "tokens.txt:2: the same certificate name as line 1"},
      {"cert spiffe://x/y operator\n", "tokens.txt:1: "},
      {"cert ops-1 root\n", "tokens.txt:1: role must be service, admin or operator"},
      {"cert ops-1\n", "tokens.txt:1: expected TOKEN TENANT ROLE, got 2 fields"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_expect_eq(parse(bad[i].text, &t, &err), ERR_INVALID, "case %zu", i);
    cr_expect(strncmp(err.msg, bad[i].want, strlen(bad[i].want)) == 0, "case %zu: %s", i,
              err.msg);
  }
}

Test(decide, certificates_mapped_in_the_tokens_file) {
  char path[64];
  auth_config cfg = {.mtls = true,
                     .operators = "listed-ops",
                     .tokens = keyring_of(path, TOK_B " ops admin\n"
                                                "cert platform-ops operator\n"
                                                "cert shop-ops admin\n"
                                                "cert listed-ops service\n")};
  auth_identity id;
  err_t err;
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_OPERATOR, NULL, "platform-ops", &id, &err), ERR_OK, "%s",
               err.msg);
  cr_expect_str_eq(id.tenant, "platform-ops");
  cr_expect_eq(id.role, AUTH_ROLE_OPERATOR);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_ADMIN, NULL, "shop-ops", &id, &err), ERR_OK, "%s", err.msg);
  cr_expect_eq(id.role, AUTH_ROLE_ADMIN);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_OPERATOR, NULL, "shop-ops", &id, &err), ERR_PERMISSION);
  cr_expect(strstr(err.msg, "(role admin)"), "%s", err.msg);
  /* the file's line for a name wins over --operators */
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_ADMIN, NULL, "listed-ops", &id, &err), ERR_PERMISSION);
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_SERVICE, NULL, "unmapped", &id, &err), ERR_OK);
  cr_expect_eq(id.role, AUTH_ROLE_SERVICE);
  /* a token still decides over the certificate it comes with */
  cr_expect_eq(decide(&cfg, AUTH_ACCESS_OPERATOR, "Bearer " TOK_B, "platform-ops", &id, &err),
               ERR_PERMISSION);
  auth_keyring_free(cfg.tokens);
  unlink(path);
}
