/* test_store_pg_admin.c — incident response in the PostgreSQL store ($IDEM_TEST_PG_URL):
 * ListSteps filters and keyset order, the audit row written in the step transaction (and not
 * written when the callback refuses), ListAudit paging, the step counts, and the query plans:
 * EXPLAIN of every common ListSteps filter must not contain a sequential scan of idem_steps.
 *
 * The plans are taken with enable_seqscan = off in the EXPLAIN session: on a small test table
 * the planner rightly prefers a sequential scan, and the setting makes it show which index it
 * can use instead (a filter no index serves would still show "Seq Scan"). */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pgexec.h"
#include "store/store.h"
#include "store/store_pg_internal.h"
#include "util/clock.h"

static char tenant[64];

static int64_t in_ms(int64_t ms) {
  return clock_mono_ms() + ms;
}

static void setup(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(tenant, sizeof tenant, "adm-%d-%ld", (int)getpid(), (long)ts.tv_nsec);
  err_t e;
  cr_assert_eq(store_pg_migrate(pgx_url(), in_ms(10000), &e), ERR_OK, "migrate: %s", e.msg);
}

TestSuite(store_pg_admin, .init = setup, .timeout = 120);

/* n steps g-00000.. of service svc-(i%3), op op, state (i%4==0 ? UNKNOWN : IN_PROGRESS with
 * lease expired when i%2 == 1, else running). */
static void seed(PGconn *c, int n) {
  char num[16];
  snprintf(num, sizeof num, "%d", n);
  const char *p[] = {tenant, num};
  pgx_exec(c,
           "INSERT INTO idem_steps (tenant, global_id, service, operation, phase, state, attempt,"
           " created_ms, updated_ms, lease_expires_ms, expires_ms)"
           " SELECT $1, 'g-' || lpad(i::text, 5, '0'), 'svc-' || (i % 3), 'op', 1,"
           " CASE WHEN i % 4 = 0 THEN 4 ELSE 1 END, 1, 1000, 1000 + i,"
           " CASE WHEN i % 4 = 0 THEN 0 WHEN i % 2 = 1 THEN 1 ELSE 9000000000000 END, 0"
           " FROM generate_series(0, $2::int - 1) i",
           2, p);
  pgx_exec(c, "ANALYZE idem_steps", 0, NULL);
}

static step_filter base_filter(void) {
  step_filter f;
  memset(&f, 0, sizeof f);
  f.tenant = tenant;
  f.service = "";
  f.operation = "";
  f.global_id = "";
  f.limit = 100;
  return f;
}

static void list(store *st, const step_filter *f, step_list *out) {
  err_t e;
  cr_assert_eq(store_list_steps(st, f, in_ms(5000), out, &e), ERR_OK, "list: %s", e.msg);
}

Test(store_pg_admin, filters_and_keyset_order) {
  PGconn *c = pgx_connect(NULL);
  seed(c, 400);
  PQfinish(c);
  store *st = store_pg_open(pgx_url());
  step_filter f = base_filter();
  step_list l = {0};
  list(st, &f, &l);
  cr_assert_eq(l.n, 100);
  cr_assert(l.more);
  for (size_t i = 1; i < l.n; i++)
    cr_assert(strcmp(l.recs[i - 1].key.global_id, l.recs[i].key.global_id) < 0);
  f.has_after = true;
  f.after = l.recs[l.n - 1].key;
  step_list_clear(&l);
  list(st, &f, &l);
  cr_assert_str_eq(l.recs[0].key.global_id, "g-00100");
  step_list_clear(&l);

  f = base_filter();
  f.state = STATE_UNKNOWN;
  f.limit = 1000;
  list(st, &f, &l);
  cr_assert_eq(l.n, 100); /* i % 4 == 0 */
  cr_assert(!l.more);
  step_list_clear(&l);

  f = base_filter();
  f.lease_expired_only = true; /* odd i */
  f.limit = 1000;
  list(st, &f, &l);
  cr_assert_eq(l.n, 200);
  for (size_t i = 0; i < l.n; i++) cr_assert_eq(l.recs[i].state, STATE_IN_PROGRESS);
  step_list_clear(&l);

  f = base_filter();
  f.service = "svc-1";
  f.updated_before_ms = 1000 + 30; /* i < 30 and i % 3 == 1: 10 rows */
  list(st, &f, &l);
  cr_assert_eq(l.n, 10);
  step_list_clear(&l);

  f = base_filter();
  f.global_id = "g-00007";
  list(st, &f, &l);
  cr_assert_eq(l.n, 1);
  cr_assert_str_eq(l.recs[0].key.service, "svc-1");
  step_list_clear(&l);

  step_counts n;
  err_t e;
  cr_assert_eq(store_count_steps(st, in_ms(5000), &n, &e), ERR_OK);
  cr_assert_geq(n.unknown, 100);
  cr_assert_geq(n.in_progress, 300);
  store_close(st);
}

/* EXPLAIN of the statement the store runs, with its parameters. */
static char *explain(PGconn *c, const step_filter *f) {
  char q[2200], stmt[2048];
  pg_params p;
  cr_assert(store_pg__list_steps_sql(f, stmt, sizeof stmt, &p));
  snprintf(q, sizeof q, "EXPLAIN %s", stmt);
  PGresult *r = pgx_run(c, q, p.n, p.values);
  size_t cap = 8192, len = 0;
  char *plan = calloc(1, cap);
  for (int i = 0; i < PQntuples(r); i++)
    len += (size_t)snprintf(plan + len, cap - len, "%s\n", PQgetvalue(r, i, 0));
  PQclear(r);
  return plan;
}

/* docs/api.md §16: the store reads no more bodies than the page's byte bound, plus the row that
 * crosses it (coord measures that one exactly); `more` tells that rows were left. */
Test(store_pg_admin, body_bytes_bound_the_page) {
  PGconn *c = pgx_connect(NULL);
  seed(c, 20);
  pgx_exec(c, "UPDATE idem_steps SET body = decode(repeat('ab', 1000), 'hex') WHERE tenant = $1", 1,
           (const char *const[]){tenant});
  PQfinish(c);
  store *st = store_pg_open(pgx_url());
  step_filter f = base_filter();
  f.max_body_bytes = 2500; /* bodies of 1,000 bytes: the third crosses it */
  step_list l = {0};
  list(st, &f, &l);
  cr_assert_eq(l.n, 3);
  cr_assert(l.more);
  cr_assert_eq(l.recs[2].body_len, 1000);
  f.has_after = true;
  f.after = l.recs[2].key;
  step_list_clear(&l);
  f.max_body_bytes = 1000000; /* the rest fits */
  list(st, &f, &l);
  cr_assert_eq(l.n, 17);
  cr_assert(!l.more);
  cr_assert_str_eq(l.recs[0].key.global_id, "g-00003");
  step_list_clear(&l);
  f.has_after = false;
  f.limit = 5; /* the count still bounds it */
  list(st, &f, &l);
  cr_assert_eq(l.n, 5);
  cr_assert(l.more);
  step_list_clear(&l);
  store_close(st);
}

/* ResolveSteps' answers by request id: stored once (a twin gets the first), read back with the
 * sample, and reaped with the sagas once past their time. */
Test(store_pg_admin, bulk_answers_stored_once_and_reaped) {
  store *st = store_pg_open(pgx_url());
  err_t e;
  bulk_rec in, out;
  memset(&in, 0, sizeof in);
  snprintf(in.tenant, sizeof in.tenant, "%s", tenant);
  snprintf(in.request_id, sizeof in.request_id, "req-1");
  snprintf(in.batch_id, sizeof in.batch_id, "batch-a");
  in.matched = 3;
  in.resolved = 2;
  in.n_sample = 2;
  snprintf(in.sample[0].global_id, sizeof in.sample[0].global_id, "g-1");
  snprintf(in.sample[0].service, sizeof in.sample[0].service, "payment");
  snprintf(in.sample[0].operation, sizeof in.sample[0].operation, "charge");
  in.sample[0].phase = PHASE_FORWARD;
  in.sample[1] = in.sample[0];
  in.sample[1].phase = PHASE_COMPENSATION;
  bool stored = false, found = false;
  cr_assert_eq(store_bulk_put(st, &in, 0, in_ms(5000), &out, &stored, &e), ERR_OK, "%s", e.msg);
  cr_assert(stored);
  bulk_rec twin = in;
  snprintf(twin.batch_id, sizeof twin.batch_id, "batch-b");
  cr_assert_eq(store_bulk_put(st, &twin, 0, in_ms(5000), &out, &stored, &e), ERR_OK, "%s", e.msg);
  cr_assert(!stored, "a second answer under one request id was stored");
  cr_assert_str_eq(out.batch_id, "batch-a");
  cr_assert_eq(out.matched, 3);
  cr_assert_eq(out.resolved, 2);
  cr_assert_eq(out.n_sample, 2);
  cr_assert_str_eq(out.sample[1].operation, "charge");
  cr_assert_eq(out.sample[1].phase, PHASE_COMPENSATION);
  uint64_t deleted = 0;
  cr_assert_eq(store_reap_sagas(st, 1000, in_ms(5000), &deleted, &e), ERR_OK, "%s", e.msg);
  cr_assert_eq(store_bulk_get(st, tenant, "req-1", in_ms(5000), &out, &found, &e), ERR_OK);
  cr_assert(!found, "an answer past its time was not reaped");
  store_close(st);
}

Test(store_pg_admin, common_filters_use_indexes) {
  PGconn *c = pgx_connect(NULL);
  seed(c, 2000);
  pgx_exec(c, "SET enable_seqscan = off", 0, NULL);
  struct {
    const char *what;
    step_filter f;
  } cases[8];
  size_t n = 0;
  cases[n].what = "no filter";
  cases[n++].f = base_filter();
  cases[n].what = "state";
  cases[n].f = base_filter();
  cases[n++].f.state = STATE_UNKNOWN;
  cases[n].what = "stuck (lease expired)";
  cases[n].f = base_filter();
  cases[n++].f.lease_expired_only = true;
  cases[n].what = "state + service + operation + older than";
  cases[n].f = base_filter();
  cases[n].f.state = STATE_IN_PROGRESS;
  cases[n].f.service = "svc-1";
  cases[n].f.operation = "op";
  cases[n++].f.updated_before_ms = 2000;
  cases[n].what = "global id";
  cases[n].f = base_filter();
  cases[n++].f.global_id = "g-00042";
  cases[n].what = "service";
  cases[n].f = base_filter();
  cases[n++].f.service = "svc-2";
  cases[n].what = "state, second page";
  cases[n].f = base_filter();
  cases[n].f.state = STATE_IN_PROGRESS;
  cases[n].f.has_after = true;
  strcpy(cases[n].f.after.global_id, "g-00500");
  strcpy(cases[n].f.after.service, "svc-2");
  strcpy(cases[n].f.after.operation, "op");
  cases[n++].f.after.phase = PHASE_FORWARD;
  for (size_t i = 0; i < n; i++) {
    cases[i].f.max_body_bytes = 3u << 20; /* as the server runs them (docs/api.md §16) */
    char *plan = explain(c, &cases[i].f);
    fprintf(stderr, "--- EXPLAIN ListSteps, %s:\n%s", cases[i].what, plan);
    cr_assert(!strstr(plan, "Seq Scan on idem_steps"), "%s: %s", cases[i].what, plan);
    cr_assert(strstr(plan, "Index"), "%s: %s", cases[i].what, plan);
    free(plan);
  }
  PQfinish(c);
}

/* A step transaction callback: resolves the forward record when *ok, else refuses. */
typedef struct res_arg {
  bool ok;
  audit_rec *audit;
} res_arg;

static err_code resolve_cb(void *argp, const step_pair *cur, step_writes *w, err_t *err) {
  res_arg *a = argp;
  if (!a->ok) return err_set(err, ERR_PRECONDITION, "refused");
  w->n = 1;
  w->recs[0] = cur->fwd;
  w->recs[0].state = STATE_SUCCEEDED;
  w->recs[0].outcome = OUTCOME_SUCCEEDED;
  a->audit->from_state = cur->fwd.state;
  a->audit->to_state = STATE_SUCCEEDED;
  return ERR_OK;
}

Test(store_pg_admin, audit_row_in_the_step_transaction) {
  PGconn *c = pgx_connect(NULL);
  seed(c, 30);
  PQfinish(c);
  store *st = store_pg_open(pgx_url());
  audit_rec a;
  memset(&a, 0, sizeof a);
  snprintf(a.key.tenant, sizeof a.key.tenant, "%s", tenant);
  strcpy(a.key.global_id, "g-00001");
  strcpy(a.key.service, "svc-1");
  strcpy(a.key.operation, "op");
  a.key.phase = PHASE_FORWARD;
  strcpy(a.actor, "alice");
  strcpy(a.action, "resolve");
  strcpy(a.reason, "confirmed with the gateway");
  res_arg arg = {.ok = false, .audit = &a};
  err_t e;
  cr_assert_eq(store_step_txn_audit(st, &a.key, in_ms(5000), resolve_cb, &arg, &a, &e),
               ERR_PRECONDITION);
  audit_list al = {0};
  cr_assert_eq(store_list_audit(st, tenant, "", 0, 10, in_ms(5000), &al, &e), ERR_OK);
  cr_assert_eq(al.n, 0, "a refused resolution leaves no audit row");
  arg.ok = true;
  for (int i = 0; i < 3; i++) /* the second and third find it SUCCEEDED: still ok here */
    cr_assert_eq(store_step_txn_audit(st, &a.key, in_ms(5000), resolve_cb, &arg, &a, &e), ERR_OK,
                 "%s", e.msg);
  cr_assert_eq(store_list_audit(st, tenant, "g-00001", 0, 2, in_ms(5000), &al, &e), ERR_OK);
  cr_assert_eq(al.n, 2);
  cr_assert(al.more);
  cr_assert_gt(al.recs[0].id, al.recs[1].id, "newest first");
  cr_assert_str_eq(al.recs[1].actor, "alice");
  cr_assert_str_eq(al.recs[1].reason, "confirmed with the gateway");
  cr_assert_eq(al.recs[1].from_state, STATE_SUCCEEDED); /* the second call */
  cr_assert_gt(al.recs[1].at_ms, 1600000000000LL);
  int64_t before = al.recs[1].id;
  audit_list_clear(&al);
  cr_assert_eq(store_list_audit(st, tenant, "g-00001", before, 10, in_ms(5000), &al, &e), ERR_OK);
  cr_assert_eq(al.n, 1);
  cr_assert(!al.more);
  cr_assert_eq(al.recs[0].from_state, STATE_IN_PROGRESS); /* the first call */
  cr_assert_eq(al.recs[0].to_state, STATE_SUCCEEDED);
  audit_list_clear(&al);
  cr_assert_eq(store_list_audit(st, tenant, "g-00002", 0, 10, in_ms(5000), &al, &e), ERR_OK);
  cr_assert_eq(al.n, 0);
  audit_list_clear(&al);
  step_rec r = {0};
  cr_assert_eq(store_lookup_step(st, &a.key, in_ms(5000), &r, &e), ERR_OK);
  cr_assert_eq(r.state, STATE_SUCCEEDED);
  step_rec_clear(&r);
  store_close(st);
}
