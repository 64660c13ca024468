/* test_policy.c — policies without a network or a database: validation of a policy
 * (coord_policy_validate), precedence in the server's cache (policy_cache_resolve), the
 * fail-open answer of BeginStep when the store is unreachable (coord over the memstore), and
 * the --config file parser (libinih). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config_file.h"
#include "coord/coord.h"
#include "coord/coord_policy.h"
#include "metrics/metrics.h"
#include "policy/policy_cache.h"
#include "support_memstore.h"
#include "util/clock.h"

static policy pol(const char *svc, const char *op, failure_mode m, uint32_t ret, uint32_t lease) {
  policy p;
  memset(&p, 0, sizeof p);
  snprintf(p.service, sizeof p.service, "%s", svc);
  snprintf(p.operation, sizeof p.operation, "%s", op);
  p.mode = m;
  p.retention_s = ret;
  p.lease_ms = lease;
  return p;
}

static void invalid(policy p, const char *field) {
  err_t e;
  err_clear(&e);
  cr_assert_eq(coord_policy_validate(&p, &e), ERR_INVALID, "%s/%s accepted", p.service,
               p.operation);
  cr_assert(strstr(e.msg, field), "message \"%s\" lacks %s", e.msg, field);
}

Test(policy_validate, ranges_and_wildcards) {
  err_t e;
  policy ok[] = {
      pol("payment", "charge", FAILURE_MODE_FAIL_OPEN, 1, 1),
      pol("payment", "*", FAILURE_MODE_FAIL_CLOSED, POLICY_RETENTION_MAX_S, POLICY_LEASE_MAX_MS),
      pol("*", "*", FAILURE_MODE_FAIL_CLOSED, 86400, 30000),
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    cr_assert_eq(coord_policy_validate(&ok[i], &e), ERR_OK, "%s", e.msg);

  invalid(pol("payment", "charge", FAILURE_MODE_FAIL_OPEN, 0, 1000), "retention_s");
  invalid(pol("payment", "charge", FAILURE_MODE_FAIL_OPEN, POLICY_RETENTION_MAX_S + 1, 1000),
          "retention_s");
  invalid(pol("payment", "charge", FAILURE_MODE_FAIL_OPEN, 60, 0), "lease_ms");
  invalid(pol("payment", "charge", FAILURE_MODE_FAIL_OPEN, 60, POLICY_LEASE_MAX_MS + 1),
          "lease_ms");
  invalid(pol("payment", "charge", FAILURE_MODE_UNSPECIFIED, 60, 1000), "failure_mode");
  invalid(pol("payment", "charge", (failure_mode)7, 60, 1000), "failure_mode");
  invalid(pol("*", "charge", FAILURE_MODE_FAIL_OPEN, 60, 1000), "service");
  invalid(pol("Payment", "charge", FAILURE_MODE_FAIL_OPEN, 60, 1000), "service");
  invalid(pol("payment", "", FAILURE_MODE_FAIL_OPEN, 60, 1000), "operation");
  invalid(pol("payment", "**", FAILURE_MODE_FAIL_OPEN, 60, 1000), "operation");
}

/* Attempt numbers start again at 1 once a key is forgotten: the lease must end before the key
 * in effect does (docs/limits.md "Attempt numbers"). */
Test(policy_validate, the_lease_is_shorter_than_the_key_retention) {
  err_t e;
  policy p = pol("payment", "charge", FAILURE_MODE_FAIL_CLOSED, 2, 1999);
  cr_assert_eq(coord_policy_validate(&p, &e), ERR_OK, "%s", e.msg);
  p.lease_ms = 2000;
  invalid(p, "key_retention_s");
  p.key_retention_s = 3; /* the key outlives the lease again */
  cr_assert_eq(coord_policy_validate(&p, &e), ERR_OK, "%s", e.msg);
  p.lease_ms = POLICY_LEASE_MAX_MS;
  invalid(p, "key_retention_s");
}

/* docs/api.md §12: key_retention_s is 0 (as long as retention_s) or retention_s .. 400 days. */
Test(policy_validate, key_retention) {
  err_t e;
  policy p = pol("payment", "charge", FAILURE_MODE_FAIL_CLOSED, 3600, 1000);
  uint32_t ok[] = {0, 3600, 86400, POLICY_KEY_RETENTION_MAX_S};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    p.key_retention_s = ok[i];
    cr_assert_eq(coord_policy_validate(&p, &e), ERR_OK, "%u: %s", ok[i], e.msg);
  }
  p.key_retention_s = 3599; /* shorter than the results it would outlive */
  invalid(p, "key_retention_s");
  p.key_retention_s = 1;
  invalid(p, "key_retention_s");
  p.key_retention_s = POLICY_KEY_RETENTION_MAX_S + 1;
  invalid(p, "key_retention_s");
  cr_assert_eq(POLICY_KEY_RETENTION_MAX_S, 400u * 86400u);
  /* in effect: never below the retention */
  p.key_retention_s = 0;
  cr_assert_eq(policy_key_retention(&p), 3600);
  p.key_retention_s = 7200;
  cr_assert_eq(policy_key_retention(&p), 7200);
}

/* --- precedence --- */

static policy_row row(const char *tenant, policy p) {
  policy_row r;
  memset(&r, 0, sizeof r);
  snprintf(r.tenant, sizeof r.tenant, "%s", tenant);
  r.p = p;
  return r;
}

Test(policy_cache, precedence_exact_service_tenant_global_default) {
  policy_cache *c = policy_cache_new();
  policy_row rows[] = {
      row("acme", pol("payment", "charge", FAILURE_MODE_FAIL_OPEN, 11, 1)),
      row("acme", pol("payment", "*", FAILURE_MODE_FAIL_CLOSED, 12, 2)),
      row("acme", pol("*", "*", FAILURE_MODE_FAIL_OPEN, 13, 3)),
      row("*", pol("mail", "send", FAILURE_MODE_FAIL_OPEN, 21, 4)),
      row("*", pol("mail", "*", FAILURE_MODE_FAIL_CLOSED, 22, 5)),
      row("*", pol("*", "*", FAILURE_MODE_FAIL_CLOSED, 23, 6)),
      row("zeta", pol("payment", "charge", FAILURE_MODE_FAIL_CLOSED, 31, 7)),
  };
  cr_assert(policy_cache_set_rows(c, rows, sizeof rows / sizeof rows[0]));
  struct {
    const char *t, *s, *o;
    uint32_t want_retention;
  } cases[] = {
      {"acme", "payment", "charge", 11}, /* exact */
      {"acme", "payment", "refund", 12}, /* (service, *) */
      {"acme", "mail", "send", 13},      /* the tenant's (*, *) wins over every global row */
      {"other", "mail", "send", 21},     /* global exact */
      {"other", "mail", "bounce", 22},   /* global (service, *) */
      {"other", "ship", "label", 23},    /* global (*, *) */
      {"zeta", "payment", "charge", 31}, /* another tenant's own row */
      {"zeta", "payment", "refund", 23}, /* not acme's rows */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    policy out;
    policy_cache_resolve(c, cases[i].t, cases[i].s, cases[i].o, &out);
    cr_assert_eq(out.retention_s, cases[i].want_retention, "%s %s %s: got %u", cases[i].t,
                 cases[i].s, cases[i].o, out.retention_s);
  }
  /* no rows at all: the built-in default, with the names asked */
  cr_assert(policy_cache_set_rows(c, NULL, 0));
  policy out;
  policy_cache_resolve(c, "acme", "payment", "charge", &out);
  cr_assert_eq(out.mode, FAILURE_MODE_FAIL_CLOSED);
  cr_assert_eq(out.retention_s, POLICY_DEFAULT_RETENTION_S);
  cr_assert_eq(out.lease_ms, POLICY_DEFAULT_LEASE_MS);
  cr_assert_str_eq(out.service, "payment");
  cr_assert_eq(out.updated_ms, 0);
  cr_assert_eq(policy_cache_loads(c), 2);
  policy_cache_free(c);
}

/* --- fail-open in coord --- */

Test(policy_fail_open, begin_step_when_the_store_is_unreachable) {
  memstore *m = memstore_new(1700000000000LL);
  policy_cache *c = policy_cache_new();
  policy_row rows[] = {row("acme", pol("payment", "charge", FAILURE_MODE_FAIL_OPEN, 60, 1000))};
  cr_assert(policy_cache_set_rows(c, rows, 1));
  coord_ctx ctx;
  coord_ctx_init(&ctx);
  ctx.resolve_policy = policy_cache_resolve;
  ctx.resolve_arg = c;
  int64_t far = clock_mono_ms() + 60000;
  coord_key_in open_key = {"g-1", "payment", "charge", PHASE_FORWARD, NULL};
  coord_key_in closed_key = {"g-1", "payment", "refund", PHASE_FORWARD, NULL};
  coord_begin_result r;
  err_t e;

  m->fail_rc = ERR_UNAVAILABLE;
  uint64_t before = metrics_unguarded_total();
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &open_key, NULL, 0, 0, far, &r, &e),
               ERR_OK, "%s", e.msg);
  cr_assert_eq(r.decision, DECISION_PROCEED_UNGUARDED);
  cr_assert_eq(r.attempt, 0);
  cr_assert_eq(r.mode, FAILURE_MODE_FAIL_OPEN);
  cr_assert_eq(metrics_unguarded_total(), before + 1);
  coord_begin_result_clear(&r);
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &closed_key, NULL, 0, 0, far, &r, &e),
               ERR_UNAVAILABLE);
  /* another tenant has no fail-open row: fail-closed */
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "other", &open_key, NULL, 0, 0, far, &r, &e),
               ERR_UNAVAILABLE);
  /* any other error is not a reason to run unguarded */
  m->fail_rc = ERR_INTERNAL;
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &open_key, NULL, 0, 0, far, &r, &e),
               ERR_INTERNAL);
  /* only BeginStep: CompleteStep stays unavailable */
  m->fail_rc = ERR_UNAVAILABLE;
  step_rec rec;
  cr_assert_eq(coord_complete_step(&ctx, &m->base, "acme", &open_key, 1, OUTCOME_SUCCEEDED, 0,
                                   NULL, 0, far, &rec, &e),
               ERR_UNAVAILABLE);
  cr_assert_eq(metrics_unguarded_total(), before + 1);
  store_close(&m->base);
  policy_cache_free(c);
}

/* --- the config file --- */

typedef struct seen {
  int n;
  char names[8][32], values[8][64];
} seen;

static int on_opt(void *arg, const char *name, const char *value) {
  seen *s = arg;
  if (strcmp(name, "bogus") == 0) return 1;
  snprintf(s->names[s->n], sizeof s->names[0], "%s", name);
  snprintf(s->values[s->n], sizeof s->values[0], "%s", value);
  s->n++;
  return 0;
}

static void write_file(char *path, const char *text) {
  snprintf(path, 64, "/tmp/idem-test-config-XXXXXX");
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
}

Test(config_file, options_and_policy_seeds) {
  char path[64];
  write_file(path,
             "# comment\n"
             "listen = 127.0.0.1:1234\n"
             "reaper_interval = 5\n"
             "[server]\n"
             "workers = 3\n"
             "[policy \"payment charge\"]\n"
             "failure_mode = fail-open\n"
             "retention = 7d\n"
             "key_retention = 365d\n"
             "lease = 45s\n"
             "[policy mail/*]\n"
             "tenant = shop\n"
             "lease = 250ms\n");
  seen s = {0};
  config_seeds seeds;
  char msg[256] = "";
  cr_assert_eq(config_file_load(path, on_opt, &s, &seeds, msg, sizeof msg), 0, "%s", msg);
  cr_assert_eq(s.n, 3);
  cr_assert_str_eq(s.names[0], "listen");
  cr_assert_str_eq(s.values[0], "127.0.0.1:1234");
  cr_assert_str_eq(s.names[1], "reaper-interval"); /* underscores read as dashes */
  cr_assert_str_eq(s.names[2], "workers");
  cr_assert_eq(seeds.n, 2);
  cr_assert_str_eq(seeds.rows[0].tenant, "*");
  cr_assert_str_eq(seeds.rows[0].p.service, "payment");
  cr_assert_str_eq(seeds.rows[0].p.operation, "charge");
  cr_assert_eq(seeds.rows[0].p.mode, FAILURE_MODE_FAIL_OPEN);
  cr_assert_eq(seeds.rows[0].p.retention_s, 7 * 86400);
  cr_assert_eq(seeds.rows[0].p.lease_ms, 45000);
  cr_assert_eq(seeds.rows[0].p.key_retention_s, 365 * 86400);
  cr_assert_eq(seeds.rows[1].p.key_retention_s, 0, "unset: as long as the retention");
  cr_assert_str_eq(seeds.rows[1].tenant, "shop");
  cr_assert_str_eq(seeds.rows[1].p.operation, "*");
  cr_assert_eq(seeds.rows[1].p.mode, FAILURE_MODE_FAIL_CLOSED); /* default */
  cr_assert_eq(seeds.rows[1].p.retention_s, POLICY_DEFAULT_RETENTION_S);
  cr_assert_eq(seeds.rows[1].p.lease_ms, 250);
  free(seeds.rows);
  unlink(path);
}

Test(config_file, errors_name_the_line) {
  static const char *const bad[] = {
      "bogus = 1\n",
      "listen = x\n[policy payment]\nlease = 1s\n",
      "[policy a/b]\nfailure_mode = sometimes\n",
      "[policy a/b]\nretention = 91d\n",
      "[policy a/b]\nretention = 1500ms\n",
      "[policy a/b]\nkey_retention = 401d\n",
      "[policy a/b]\nkey-retention = 2500ms\n",
      "[policy a/b]\ncolour = blue\n",
      "[nonsense]\nx = 1\n",
      "no equals sign here\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char path[64];
    write_file(path, bad[i]);
    seen s = {0};
    config_seeds seeds;
    char msg[256] = "";
    cr_assert_eq(config_file_load(path, on_opt, &s, &seeds, msg, sizeof msg), -1, "%s accepted",
                 bad[i]);
    cr_assert(strstr(msg, path) && strchr(msg, ':'), "message \"%s\"", msg);
    cr_assert_null(seeds.rows);
    unlink(path);
  }
  char msg[256];
  config_seeds seeds;
  seen s = {0};
  cr_assert_eq(config_file_load("/nonexistent/idem.ini", on_opt, &s, &seeds, msg, sizeof msg), -1);
  cr_assert(strstr(msg, "cannot open"), "%s", msg);
}

Test(config_file, durations) {
  int64_t ms;
  cr_assert_eq(config_parse_duration_ms("30s", 1000000, &ms), 0);
  cr_assert_eq(ms, 30000);
  cr_assert_eq(config_parse_duration_ms("24h", 1LL << 40, &ms), 0);
  cr_assert_eq(ms, 86400000);
  cr_assert_eq(config_parse_duration_ms("5", 1000000, &ms), 0);
  cr_assert_eq(ms, 5000);
  cr_assert_eq(config_parse_duration_ms("2m", 1000000, &ms), 0);
  cr_assert_eq(ms, 120000);
  cr_assert_eq(config_parse_duration_ms("2 h", 1LL << 40, &ms), 0);
  cr_assert_eq(config_parse_duration_ms("1h", 1000, &ms), -1);
  cr_assert_eq(config_parse_duration_ms("-1s", 1000000, &ms), -1);
  cr_assert_eq(config_parse_duration_ms("3 weeks", 1LL << 40, &ms), -1);
  cr_assert_eq(config_parse_duration_ms("", 1000, &ms), -1);
}
