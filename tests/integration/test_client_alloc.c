/* test_client_alloc.c — libidem's calls when memory runs out, against a real coordinator: for
 * N = 1, 2, ... the Nth allocation made by libidem's own code fails (unit/support_alloc.c,
 * -Wl,--wrap; gRPC's and protobuf-c's allocations are not counted), until the call completes
 * without reaching N. At every N: no crash, nothing left allocated once the outputs are
 * cleared, and IDEM_NOMEM with the outputs zeroed (IDEM_DATA_LOSS, report filled, when only the
 * journal line could not be written). The calls without a coordinator are in
 * unit/test_client_alloc.c.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "idem_internal.h"

/* unit/support_alloc.c */
size_t alloc_live(void);
long alloc_walk(const char *name, void *ctx, void (*setup)(void *ctx), int (*run)(void *ctx),
                void (*check)(void *ctx, int rc, bool failed, long n));

#define BODY "the stored body"

static void begin_ok(idem_client *c, const idem_step_key *k, idem_begin *b) {
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(c, k, NULL, 0, 0, b, &e), IDEM_OK, "%s", e.message);
}

/* A step of c's tenant left IN_PROGRESS; returns its attempt. */
static uint64_t step_begun(idem_client *c, const idem_step_key *k) {
  idem_begin b;
  begin_ok(c, k, &b);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
  uint64_t attempt = b.attempt;
  idem_begin_clear(&b);
  return attempt;
}

/* A step of c's tenant completed SUCCEEDED 200 with body. */
static void step_done(idem_client *c, const idem_step_key *k, const char *body) {
  uint64_t attempt = step_begun(c, k);
  idem_error e = {0};
  cr_assert_eq(
      idem_step_complete(c, k, attempt, IDEM_OUTCOME_SUCCEEDED, 200, body, strlen(body), NULL, &e),
      IDEM_OK, "%s", e.message);
}

static bool zero(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i]) return false;
  return true;
}

/* The error every failed N must give (unless a walk allows another). */
static void assert_nomem(int rc, const idem_error *e, long n) {
  cr_assert_eq(rc, IDEM_NOMEM, "N = %ld: rc %d (%s)", n, rc, e->message);
  cr_assert_eq(e->code, IDEM_NOMEM, "N = %ld", n);
}

static void assert_ok(int rc, const idem_error *e, long n) {
  cr_assert_eq(rc, IDEM_OK, "N = %ld: rc %d (%s)", n, rc, e->message);
}

/* What every walk of the calls test shares. */
typedef struct calls {
  srv s;
  char t[64];
  idem_client *c;
  idem_error e;
  char gid[IDEM_GLOBAL_ID_MAX + 1];
  idem_step_key key;
  char key_gid[96];
  uint64_t attempt;
  bool created;
  idem_saga saga;
  idem_begin begin;
  idem_record rec;
  idem_step_page page;
  idem_audit_page audit;
  idem_policies policies;
  idem_reconcile_report rep;
  char journal[128];
} calls;

/* --- BeginSaga with labels --- */

static int run_saga_begin(void *p) {
  calls *x = p;
  idem_label labels[] = {{"customer", "c-1"}, {"channel", "web"}, {"region", "eu"}};
  return idem_saga_begin(x->c, NULL, "order", labels, 3, x->gid, &x->created, NULL, &x->e);
}

static void check_saga_begin(void *p, int rc, bool failed, long n) {
  calls *x = p;
  if (failed) {
    assert_nomem(rc, &x->e, n);
    cr_assert_eq(x->gid[0], '\0', "N = %ld", n);
    cr_assert_not(x->created, "N = %ld", n);
    return;
  }
  assert_ok(rc, &x->e, n);
  cr_assert(x->created && x->gid[0]);
}

/* --- GetSaga: steps with bodies, labels --- */

static int run_saga_get(void *p) {
  calls *x = p;
  return idem_saga_get(x->c, x->gid, &x->saga, &x->e);
}

static void check_saga_get(void *p, int rc, bool failed, long n) {
  calls *x = p;
  if (failed) {
    assert_nomem(rc, &x->e, n);
    cr_assert(zero(&x->saga, sizeof x->saga), "N = %ld: the saga holds something", n);
    return;
  }
  assert_ok(rc, &x->e, n);
  cr_assert_str_eq(x->saga.saga_type, "order");
  cr_assert_eq(x->saga.n_steps, 3);
  cr_assert_eq(x->saga.n_labels, 3);
  size_t bodies = 0;
  for (size_t i = 0; i < x->saga.n_steps; i++) bodies += x->saga.steps[i].result.body_len > 0;
  cr_assert_eq(bodies, 2);
  idem_saga_clear(&x->saga);
}

/* --- BeginStep answering REPLAY with the stored body --- */

static int run_begin_replay(void *p) {
  calls *x = p;
  return idem_step_begin(x->c, &x->key, NULL, 0, 0, &x->begin, &x->e);
}

static void check_begin_replay(void *p, int rc, bool failed, long n) {
  calls *x = p;
  if (failed) {
    assert_nomem(rc, &x->e, n);
    cr_assert(zero(&x->begin, sizeof x->begin), "N = %ld: the answer holds something", n);
    return;
  }
  assert_ok(rc, &x->e, n);
  cr_assert_eq(x->begin.decision, IDEM_DECISION_REPLAY);
  cr_assert(x->begin.has_result);
  cr_assert_eq(x->begin.result.body_len, strlen(BODY));
  cr_assert_eq(memcmp(x->begin.result.body, BODY, strlen(BODY)), 0);
  idem_begin_clear(&x->begin);
}

/* --- LookupStep --- */

static int run_lookup(void *p) {
  calls *x = p;
  return idem_step_lookup(x->c, &x->key, &x->rec, &x->e);
}

static void check_record(void *p, int rc, bool failed, long n) {
  calls *x = p;
  if (failed) {
    assert_nomem(rc, &x->e, n);
    cr_assert(zero(&x->rec, sizeof x->rec), "N = %ld: the record holds something", n);
    return;
  }
  assert_ok(rc, &x->e, n);
  cr_assert(x->rec.has_result);
  cr_assert_eq(x->rec.result.body_len, strlen(BODY));
  idem_record_clear(&x->rec);
}

/* --- CompleteStep and ResolveStep (out filled): a fresh IN_PROGRESS step every N --- */

static void setup_fresh_step(void *p) {
  calls *x = p;
  h_unique("alloc-step", x->key_gid, sizeof x->key_gid);
  x->key = (idem_step_key){x->key_gid, "svc", "fresh", IDEM_FORWARD};
  x->attempt = step_begun(x->c, &x->key);
}

static int run_complete(void *p) {
  calls *x = p;
  return idem_step_complete(x->c, &x->key, x->attempt, IDEM_OUTCOME_SUCCEEDED, 200, BODY,
                            strlen(BODY), &x->rec, &x->e);
}

static int run_resolve(void *p) {
  calls *x = p;
  idem_resolution res = {.outcome = IDEM_OUTCOME_SUCCEEDED,
                         .code = 200,
                         .body = BODY,
                         .body_len = strlen(BODY),
                         .reason = "settled by hand while memory ran out",
                         .actor = "alloc-test"};
  return idem_step_resolve(x->c, &x->key, &res, &x->rec, &x->e);
}

/* --- ListSteps, ListAudit, ListPolicies --- */

static int run_steps_list(void *p) {
  calls *x = p;
  idem_steps_filter f = {.global_id = x->gid};
  return idem_steps_list(x->c, &f, &x->page, &x->e);
}

static void check_steps_list(void *p, int rc, bool failed, long n) {
  calls *x = p;
  if (failed) {
    assert_nomem(rc, &x->e, n);
    cr_assert(zero(&x->page, sizeof x->page), "N = %ld: the page holds something", n);
    return;
  }
  assert_ok(rc, &x->e, n);
  cr_assert_eq(x->page.n_steps, 3);
  cr_assert_str_eq(x->page.next_page_token, "");
  idem_step_page_clear(&x->page);
}

static int run_audit_list(void *p) {
  calls *x = p;
  return idem_audit_list(x->c, NULL, 0, NULL, &x->audit, &x->e);
}

static void check_audit_list(void *p, int rc, bool failed, long n) {
  calls *x = p;
  if (failed) {
    assert_nomem(rc, &x->e, n);
    cr_assert(zero(&x->audit, sizeof x->audit), "N = %ld: the page holds something", n);
    return;
  }
  assert_ok(rc, &x->e, n);
  cr_assert_geq(x->audit.n_entries, 2);
  cr_assert_str_eq(x->audit.entries[0].reason, "settled by hand while memory ran out");
  idem_audit_page_clear(&x->audit);
}

static int run_policy_list(void *p) {
  calls *x = p;
  return idem_policy_list(x->c, &x->policies, &x->e);
}

static void check_policy_list(void *p, int rc, bool failed, long n) {
  calls *x = p;
  if (failed) {
    assert_nomem(rc, &x->e, n);
    cr_assert(zero(&x->policies, sizeof x->policies), "N = %ld: the list holds something", n);
    return;
  }
  assert_ok(rc, &x->e, n);
  cr_assert_eq(x->policies.n, 3);
  idem_policies_clear(&x->policies);
}

/* --- idem_policy_prefetch: the client's policy cache (a fresh client every N) --- */

static void setup_fresh_client(void *p) {
  calls *x = p;
  x->c = h_client(&x->s, x->t, 0);
}

static int run_prefetch(void *p) {
  calls *x = p;
  return idem_policy_prefetch(x->c, "mail", "send", &x->e);
}

static void check_prefetch(void *p, int rc, bool failed, long n) {
  calls *x = p;
  if (failed) {
    assert_nomem(rc, &x->e, n);
  } else {
    assert_ok(rc, &x->e, n);
    cr_assert_eq(idem__policy_cached_mode(x->c, "mail", "send"), IDEM_FAIL_OPEN);
  }
  idem_close(x->c);
  x->c = NULL;
}

/* --- idem_journal_reconcile of lines that each need calls --- */

static int run_reconcile(void *p) {
  calls *x = p;
  return idem_journal_reconcile(x->c, x->journal, &x->rep, &x->e);
}

static void check_reconcile(void *p, int rc, bool failed, long n) {
  calls *x = p;
  if (failed) {
    assert_nomem(rc, &x->e, n);
    cr_assert(zero(&x->rep, sizeof x->rep), "N = %ld: the report holds something", n);
    return;
  }
  assert_ok(rc, &x->e, n);
  cr_assert_eq(x->rep.lines, 4);
  /* earlier N recorded some lines before running out: those read back as already present */
  cr_assert_eq(x->rep.recorded + x->rep.already_present, 3, "%zu + %zu", x->rep.recorded,
               x->rep.already_present);
  cr_assert_eq(x->rep.ran_twice, 1);
  idem_reconcile_report_clear(&x->rep);
}

Test(client_alloc_rpc, calls, .timeout = 300) {
  calls x;
  memset(&x, 0, sizeof x);
  h_srv_start(&x.s, NULL, NULL);
  h_tenant(x.t);
  x.c = h_client(&x.s, x.t, 0);
  long total = 0;

  total += alloc_walk("saga_begin", &x, NULL, run_saga_begin, check_saga_begin);

  /* the saga: two steps with a stored body, one in progress */
  const char *ops[] = {"create", "charge", "reserve"};
  for (int i = 0; i < 3; i++) {
    idem_step_key k = {x.gid, "svc", ops[i], IDEM_FORWARD};
    if (i < 2)
      step_done(x.c, &k, BODY);
    else
      step_begun(x.c, &k);
  }
  total += alloc_walk("saga_get", &x, NULL, run_saga_get, check_saga_get);
  total += alloc_walk("steps_list", &x, NULL, run_steps_list, check_steps_list);

  x.key = (idem_step_key){x.gid, "svc", "create", IDEM_FORWARD};
  total += alloc_walk("step_begin_replay", &x, NULL, run_begin_replay, check_begin_replay);
  total += alloc_walk("step_lookup", &x, NULL, run_lookup, check_record);
  total += alloc_walk("step_complete", &x, setup_fresh_step, run_complete, check_record);
  total += alloc_walk("step_resolve", &x, setup_fresh_step, run_resolve, check_record);
  total += alloc_walk("audit_list", &x, NULL, run_audit_list, check_audit_list);

  h_set_policy(x.c, "mail", "send", IDEM_FAIL_OPEN);
  h_set_policy(x.c, "mail", "*", IDEM_FAIL_CLOSED);
  h_set_policy(x.c, "payment", "*", IDEM_FAIL_CLOSED);
  total += alloc_walk("policy_list", &x, NULL, run_policy_list, check_policy_list);
  idem_client *kept = x.c;
  total += alloc_walk("policy_prefetch", &x, setup_fresh_client, run_prefetch, check_prefetch);
  x.c = kept;

  /* a journal of x.t's lines: new steps (forward, and a compensation with no forward: a null
   * compensation), and one whose key holds another result (ran twice) */
  h_unique("/tmp/idem-alloc-journal", x.journal, sizeof x.journal);
  char g1[96], g2[96];
  h_unique("alloc-j1", g1, sizeof g1);
  h_unique("alloc-j2", g2, sizeof g2);
  idem_step_key k1 = {g1, "mail", "send", IDEM_FORWARD};
  idem_step_key k2 = {g1, "mail", "other", IDEM_FORWARD};
  idem_step_key k3 = {g2, "mail", "send", IDEM_COMPENSATION};
  idem_step_key k4 = {x.gid, "svc", "charge", IDEM_FORWARD}; /* stored BODY, 200 */
  idem_result r = {.outcome = IDEM_OUTCOME_SUCCEEDED,
                   .code = 202,
                   .body = (uint8_t *)"journaled",
                   .body_len = 9};
  const idem_step_key *keys[] = {&k1, &k2, &k3, &k4};
  for (int i = 0; i < 4; i++)
    cr_assert_eq(idem__journal_append(x.journal, "client", x.t, keys[i], NULL, 0, &r, &x.e),
                 IDEM_OK, "%s", x.e.message);
  total += alloc_walk("journal_reconcile", &x, NULL, run_reconcile, check_reconcile);
  unlink(x.journal);

  fprintf(stderr, "alloc walks (calls): %ld N in all\n", total);
  idem_close(x.c);
  cr_assert_eq(h_srv_stop(&x.s), 0);
}

/* --- idem_step_run --- */

typedef struct run {
  srv s;
  char t[64];
  idem_options o;
  idem_client *c;
  bool fresh_client; /* a new client every N (its policy cache empty) */
  char gid[96];
  idem_step_key key;
  bool fresh_key; /* a new key every N */
  idem_run_options ro;
  idem_run_report rep;
  idem_error e;
  int calls;
  bool allow_data_loss; /* the journal line may be what failed */
  idem_decision want;
} run;

static void action(void *arg, const idem_step_ctx *ctx, idem_step_output *out) {
  run *x = arg;
  x->calls++;
  out->outcome = IDEM_OUTCOME_SUCCEEDED;
  out->code = 201;
  out->body = "the action's body";
  out->body_len = 17;
}

static void setup_run(void *p) {
  run *x = p;
  if (x->fresh_client) x->c = h_client(&x->s, x->t, 0);
  if (x->fresh_key) {
    h_unique("alloc-run", x->gid, sizeof x->gid);
    x->key = (idem_step_key){x->gid, "mail", "send", IDEM_FORWARD};
  }
  x->calls = 0;
}

static int run_step_run(void *p) {
  run *x = p;
  return idem_step_run(x->c, &x->key, NULL, 0, action, x, &x->ro, &x->rep, &x->e);
}

static void check_step_run(void *p, int rc, bool failed, long n) {
  run *x = p;
  if (failed && rc == IDEM_DATA_LOSS && x->allow_data_loss) {
    /* idem.h: a journal that cannot be written: DATA_LOSS, *rep filled (the action ran) */
    cr_assert(strstr(x->e.message, "out of memory"), "N = %ld: %s", n, x->e.message);
    cr_assert(x->rep.ran && x->rep.unguarded && !x->rep.journaled, "N = %ld", n);
    cr_assert_eq(x->rep.result.body_len, 17, "N = %ld", n);
  } else if (failed && rc != IDEM_OK) {
    assert_nomem(rc, &x->e, n);
    cr_assert(zero(&x->rep, sizeof x->rep), "N = %ld: the report holds something", n);
  } else {
    /* complete: also when the failed allocation was the policy cache's (a refresh never
     * fails the run: the step is then just not cached) */
    assert_ok(rc, &x->e, n);
    cr_assert_eq(x->rep.decision, x->want, "N = %ld: decision %d", n, x->rep.decision);
    cr_assert_eq(x->rep.ran, x->want != IDEM_DECISION_REPLAY, "N = %ld", n);
    cr_assert_eq(x->rep.result.outcome, IDEM_OUTCOME_SUCCEEDED, "N = %ld", n);
    cr_assert_gt(x->rep.result.body_len, 0, "N = %ld", n);
    if (x->want == IDEM_DECISION_PROCEED_UNGUARDED) cr_assert(x->rep.journaled, "N = %ld", n);
  }
  cr_assert_leq(x->calls, 1, "N = %ld: the action ran %d times", n, x->calls);
  idem_run_report_clear(&x->rep);
  if (x->fresh_client) {
    idem_close(x->c);
    x->c = NULL;
  }
}

Test(client_alloc_rpc, step_run, .timeout = 300) {
  run x;
  memset(&x, 0, sizeof x);
  h_srv_start(&x.s, NULL, NULL);
  h_tenant(x.t);
  idem_client *admin = h_client(&x.s, x.t, 0);
  h_set_policy(admin, "mail", "send", IDEM_FAIL_OPEN);

  /* PROCEED: the policy refresh, the action's body, the completed record */
  x.fresh_client = x.fresh_key = true;
  x.want = IDEM_DECISION_PROCEED;
  long n1 = alloc_walk("step_run_proceed", &x, setup_run, run_step_run, check_step_run);

  /* REPLAY: the policy refresh, the stored body */
  x.fresh_key = false;
  h_unique("alloc-replay", x.gid, sizeof x.gid);
  x.key = (idem_step_key){x.gid, "mail", "send", IDEM_FORWARD};
  step_done(admin, &x.key, BODY);
  x.want = IDEM_DECISION_REPLAY;
  long n2 = alloc_walk("step_run_replay", &x, setup_run, run_step_run, check_step_run);
  cr_assert_geq(n1 + n2, 5);

  idem_close(admin);
  cr_assert_eq(h_srv_stop(&x.s), 0);
}

/* Fail-open with the coordinator stopped: the action runs unguarded and is journaled. */
Test(client_alloc_rpc, step_run_fail_open, .timeout = 300) {
  run x;
  memset(&x, 0, sizeof x);
  h_srv_start(&x.s, NULL, NULL);
  h_tenant(x.t);
  char journal[128];
  h_unique("/tmp/idem-alloc-journal", journal, sizeof journal);
  x.o = (idem_options){.address = x.s.addr,
                       .tenant = x.t,
                       .journal_path = journal,
                       .deadline_ms = 200,
                       .policy_refresh_ms = 3600000}; /* no refresh during the walk */
  idem_error e = {0};
  cr_assert_eq(idem_connect(&x.o, &x.c, &e), IDEM_OK, "%s", e.message);
  /* the set-up's calls on a client of the default deadline, or retried: the walk's 200 ms is
   * for the stopped coordinator, and a first call under the sanitizers may take longer */
  idem_client *admin = h_client(&x.s, x.t, 0);
  h_set_policy(admin, "mail", "send", IDEM_FAIL_OPEN);
  idem_close(admin);
  H_WAIT(idem_policy_prefetch(x.c, "mail", "send", &e) == IDEM_OK, 10000,
         "the policy is prefetched (last: %s)", e.message);
  cr_assert_eq(h_srv_stop(&x.s), 0);

  x.fresh_key = true;
  x.ro = (idem_run_options){.deadline_ms = 300, .backoff_base_ms = 20, .backoff_max_ms = 50};
  x.allow_data_loss = true;
  x.want = IDEM_DECISION_PROCEED_UNGUARDED;
  long n = alloc_walk("step_run_fail_open", &x, setup_run, run_step_run, check_step_run);
  cr_assert_geq(n, 3); /* the action's body, the journal line */
  idem_close(x.c);
  unlink(journal);
}
