/* test_store_pg.c — the PostgreSQL store against a real Postgres ($IDEM_TEST_PG_URL).
 * Every test uses its own tenant, so the tests may run in parallel on one database. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"
#include "store/store_pg_internal.h"
#include "util/clock.h"
#include "support_pg.h"

/* --- helpers --- */

static char tenant[64];

static void setup(void) {
  sp_setup("t", tenant, sizeof tenant);
}

TestSuite(store_pg, .init = setup, .timeout = 60);

static step_key mkkey(const char *gid, const char *svc, const char *op, step_phase ph) {
  step_key k = sp_key(tenant, gid, svc, op);
  k.phase = ph;
  return k;
}

/* --- step transaction callbacks --- */

typedef struct write_arg {
  step_rec recs[2];
  int n;
  err_code ret; /* what fn answers */
  int calls;
  step_pair seen; /* copies of what fn saw (bodies owned) */
} write_arg;

static err_code fn_write(void *arg, const step_pair *cur, step_writes *w, err_t *err) {
  write_arg *a = arg;
  a->calls++;
  step_rec_clear(&a->seen.fwd);
  step_rec_clear(&a->seen.comp);
  cr_assert(step_rec_copy(&a->seen.fwd, &cur->fwd));
  cr_assert(step_rec_copy(&a->seen.comp, &cur->comp));
  a->seen.now_ms = cur->now_ms;
  w->n = a->n;
  for (int i = 0; i < a->n; i++) w->recs[i] = a->recs[i];
  if (a->ret != ERR_OK) return err_set(err, a->ret, "step in progress: global_id");
  return ERR_OK;
}

static void assert_rec_eq(const step_rec *got, const step_rec *want) {
  cr_assert(got->present);
  cr_assert_eq(got->key.phase, want->key.phase);
  cr_assert_eq(got->state, want->state);
  cr_assert_eq(got->attempt, want->attempt);
  cr_assert_eq(got->fp_len, want->fp_len);
  cr_assert_eq(memcmp(got->fp, want->fp, want->fp_len), 0);
  cr_assert_eq(got->outcome, want->outcome);
  cr_assert_eq(got->code, want->code);
  cr_assert_eq(got->body_len, want->body_len);
  if (want->body_len) cr_assert_eq(memcmp(got->body, want->body, want->body_len), 0);
  cr_assert_eq(got->completed_ms, want->completed_ms);
  cr_assert_eq(got->created_ms, want->created_ms);
  cr_assert_eq(got->updated_ms, want->updated_ms);
  cr_assert_eq(got->lease_expires_ms, want->lease_expires_ms);
  cr_assert_eq(got->expires_ms, want->expires_ms);
  cr_assert_str_eq(got->begin_trace_id, want->begin_trace_id);
  cr_assert_str_eq(got->complete_trace_id, want->complete_trace_id);
}

Test(store_pg, ping_and_migrate_twice) {
  err_t e;
  cr_assert_eq(store_pg_migrate(pgx_url(), sp_in_ms(5000), &e), ERR_OK, "%s", e.msg);
  cr_assert_eq(store_pg_migrate(pgx_url(), sp_in_ms(5000), &e), ERR_OK, "%s", e.msg);
  store *s = store_pg_open(pgx_url());
  cr_assert_not_null(s);
  cr_assert_eq(store_ping(s, sp_in_ms(2000), &e), ERR_OK, "%s", e.msg);
  cr_assert_eq(store_ping(s, sp_in_ms(2000), &e), ERR_OK, "%s", e.msg);
  store_close(s);
  cr_assert_eq(pgx_sql(NULL, "SELECT 1 FROM idem_schema_version WHERE version = 1", 0, NULL), 1);
  cr_assert_eq(pgx_sql(NULL, "SELECT epoch FROM idem_fence WHERE id = 1", 0, NULL), 0);
}

/* Every index on idem_steps costs each step write; version 5 drops the two of version 1
 * that nothing reads. A fresh schema runs version 1 (which creates them) and then 5, so this
 * also checks the upgrade of a database at version 4. Version 7's body index is partial: only
 * rows whose key outlives their body (key_retention_s) are in it; so is version 8's: only rows
 * written before slots existed, until they are given theirs; and version 9's by slot: a move
 * counts and deletes its slots' rows (docs/api.md §18); version 11's two by trace id are partial:
 * only rows a traced call began or finished (ListSteps' trace_id, docs/api.md §22). */
Test(store_pg, steps_carry_only_the_indexes_something_reads) {
  err_t e;
  cr_assert_eq(store_pg_migrate(pgx_url(), sp_in_ms(5000), &e), ERR_OK, "%s", e.msg);
  cr_assert_eq(pgx_sql(NULL, "SELECT 1 FROM idem_schema_version WHERE version = 5", 0, NULL), 1);
  PGconn *c = pgx_connect(NULL);
  PGresult *r = pgx_run(c,
                        "SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes"
                        " WHERE tablename = 'idem_steps' AND schemaname = current_schema()",
                        0, NULL);
  cr_assert_str_eq(PQgetvalue(r, 0, 0),
                   "idem_steps_begin_trace_idx,idem_steps_body_reap_idx,"
                   "idem_steps_complete_trace_idx,idem_steps_list_state_idx,idem_steps_noslot_idx,"
                   "idem_steps_open_idx,idem_steps_pkey,idem_steps_reap_idx,idem_steps_slot_idx");
  PQclear(r);
  PQfinish(c);
}

typedef struct mig_arg {
  const char *url;
  err_code rc;
  err_t e;
} mig_arg;

static void *mig_thread(void *p) {
  mig_arg *a = p;
  a->rc = store_pg_migrate(a->url, sp_in_ms(20000), &a->e);
  return NULL;
}

Test(store_pg, migrate_concurrently_into_a_fresh_schema) {
  /* a private schema (search_path) so that both threads really create the tables */
  char schema[80], create[128], drop[128], url[1024];
  snprintf(schema, sizeof schema, "mig_%d_%d", (int)getpid(), rand() % 100000);
  snprintf(create, sizeof create, "CREATE SCHEMA %s", schema);
  snprintf(drop, sizeof drop, "DROP SCHEMA %s CASCADE", schema);
  pgx_sql(NULL, create, 0, NULL);
  const char *base = pgx_url();
  snprintf(url, sizeof url, "%s%soptions=-csearch_path%%3D%s", base, strchr(base, '?') ? "&" : "?",
           schema);
  mig_arg a[2] = {{.url = url}, {.url = url}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, mig_thread, &a[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++) cr_expect_eq(a[i].rc, ERR_OK, "thread %d: %s", i, a[i].e.msg);
  char q[160];
  snprintf(q, sizeof q, "SELECT 1 FROM %s.idem_steps LIMIT 1", schema);
  pgx_sql(NULL, q, 0, NULL);
  pgx_sql(NULL, drop, 0, NULL);
}

static step_rec mkrec(step_phase ph, step_state st, uint64_t attempt, const void *fp, size_t fp_len,
                      const void *body, size_t body_len, int64_t base) {
  step_rec r;
  memset(&r, 0, sizeof r);
  r.present = true;
  r.key.phase = ph;
  r.state = st;
  r.attempt = attempt;
  if (fp_len) memcpy(r.fp, fp, fp_len);
  r.fp_len = fp_len;
  r.outcome = st == STATE_SUCCEEDED ? OUTCOME_SUCCEEDED : OUTCOME_UNSPECIFIED;
  r.code = -42;
  r.body = (uint8_t *)body;
  r.body_len = body_len;
  r.completed_ms = base + 1;
  r.created_ms = base + 2;
  r.updated_ms = base + 3;
  r.lease_expires_ms = base + 4;
  r.expires_ms = base + 5 + 86400000LL;
  /* docs/api.md §22: distinct trace ids per record (the store keeps them as given) */
  snprintf(r.begin_trace_id, sizeof r.begin_trace_id, "%032llx", (unsigned long long)base + 6);
  if (st != STATE_IN_PROGRESS)
    snprintf(r.complete_trace_id, sizeof r.complete_trace_id, "%032llx",
             (unsigned long long)base + 7);
  return r;
}

Test(store_pg, step_txn_insert_then_update_round_trips_every_field) {
  store *s = store_pg_open(pgx_url());
  err_t e;
  step_key k = mkkey("g-rt", "payments", "charge", PHASE_FORWARD);
  static const uint8_t fp1[] = {0, 1, 2, 0, 255, 0};
  static const uint8_t body1[] = {'a', 0, 'b', 0, 0, 0xff, '\n', 'c'};
  int64_t base = clock_wall_ms();

  write_arg a;
  memset(&a, 0, sizeof a);
  a.recs[0] =
      mkrec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, fp1, sizeof fp1, body1, sizeof body1, base);
  a.n = 1;
  cr_assert_eq(store_step_txn(s, &k, sp_in_ms(5000), fn_write, &a, &e), ERR_OK, "%s", e.msg);
  cr_assert_eq(a.calls, 1);
  cr_assert_not(a.seen.fwd.present);
  cr_assert_not(a.seen.comp.present);
  int64_t wall = clock_wall_ms();
  cr_assert(a.seen.now_ms > wall - 60000 && a.seen.now_ms < wall + 60000, "db clock %lld",
            (long long)a.seen.now_ms);

  /* lookup sees the insert */
  step_rec got;
  cr_assert_eq(store_lookup_step(s, &k, sp_in_ms(2000), &got, &e), ERR_OK, "%s", e.msg);
  assert_rec_eq(&got, &a.recs[0]);
  cr_assert_str_eq(got.key.tenant, tenant);
  cr_assert_str_eq(got.key.operation, "charge");
  step_rec_clear(&got);

  /* the next transaction reads it back, and replaces every field, plus a compensation */
  static const uint8_t fp2[] = {9, 0, 9};
  static const uint8_t body2[] = {0, 0, 0, 'z'};
  write_arg b;
  memset(&b, 0, sizeof b);
  b.recs[0] =
      mkrec(PHASE_FORWARD, STATE_SUCCEEDED, 7, fp2, sizeof fp2, body2, sizeof body2, base + 1000);
  b.recs[0].code = 2147483647;
  b.recs[1] = mkrec(PHASE_COMPENSATION, STATE_SUCCEEDED, 0, NULL, 0, NULL, 0, base + 2000);
  b.n = 2;
  cr_assert_eq(store_step_txn(s, &k, sp_in_ms(5000), fn_write, &b, &e), ERR_OK, "%s", e.msg);
  assert_rec_eq(&b.seen.fwd, &a.recs[0]);
  cr_assert_not(b.seen.comp.present);

  cr_assert_eq(store_lookup_step(s, &k, sp_in_ms(2000), &got, &e), ERR_OK, "%s", e.msg);
  assert_rec_eq(&got, &b.recs[0]);
  step_rec_clear(&got);
  step_key kc = k;
  kc.phase = PHASE_COMPENSATION;
  cr_assert_eq(store_lookup_step(s, &kc, sp_in_ms(2000), &got, &e), ERR_OK, "%s", e.msg);
  assert_rec_eq(&got, &b.recs[1]);
  cr_assert_null(got.body);
  step_rec_clear(&got);

  /* a third transaction sees both phases */
  write_arg c;
  memset(&c, 0, sizeof c);
  cr_assert_eq(store_step_txn(s, &kc, sp_in_ms(5000), fn_write, &c, &e), ERR_OK, "%s", e.msg);
  assert_rec_eq(&c.seen.fwd, &b.recs[0]);
  assert_rec_eq(&c.seen.comp, &b.recs[1]);
  cr_assert_eq(c.seen.comp.key.phase, PHASE_COMPENSATION);
  cr_assert_str_eq(c.seen.fwd.key.global_id, "g-rt");

  for (write_arg *x = &a; x; x = x == &a ? &b : x == &b ? &c : NULL) {
    step_rec_clear(&x->seen.fwd);
    step_rec_clear(&x->seen.comp);
  }
  store_close(s);
}

Test(store_pg, fn_error_is_returned_and_writes_are_committed) {
  store *s = store_pg_open(pgx_url());
  err_t e;
  step_key k = mkkey("g-err", "inventory", "reserve", PHASE_FORWARD);
  write_arg a;
  memset(&a, 0, sizeof a);
  a.recs[0] = mkrec(PHASE_FORWARD, STATE_ABANDONED, 3, NULL, 0, "x", 1, clock_wall_ms());
  a.n = 1;
  a.ret = ERR_ABORTED;
  cr_assert_eq(store_step_txn(s, &k, sp_in_ms(5000), fn_write, &a, &e), ERR_ABORTED);
  cr_assert_str_eq(e.msg, "step in progress: global_id");
  step_rec got;
  cr_assert_eq(store_lookup_step(s, &k, sp_in_ms(2000), &got, &e), ERR_OK, "%s", e.msg);
  assert_rec_eq(&got, &a.recs[0]);
  step_rec_clear(&got);
  step_rec_clear(&a.seen.fwd);
  step_rec_clear(&a.seen.comp);
  store_close(s);
}

Test(store_pg, lookup_of_missing_and_expired) {
  store *s = store_pg_open(pgx_url());
  err_t e;
  step_key k = mkkey("g-none", "svc", "op", PHASE_FORWARD);
  step_rec got;
  cr_assert_eq(store_lookup_step(s, &k, sp_in_ms(2000), &got, &e), ERR_OK, "%s", e.msg);
  cr_assert_not(got.present);

  /* a record past its retention reads as absent */
  write_arg a;
  memset(&a, 0, sizeof a);
  a.recs[0] = mkrec(PHASE_FORWARD, STATE_SUCCEEDED, 1, NULL, 0, NULL, 0, 1000);
  a.recs[0].expires_ms = 5000; /* 1970 */
  a.n = 1;
  cr_assert_eq(store_step_txn(s, &k, sp_in_ms(5000), fn_write, &a, &e), ERR_OK, "%s", e.msg);
  cr_assert_eq(store_lookup_step(s, &k, sp_in_ms(2000), &got, &e), ERR_OK, "%s", e.msg);
  cr_assert_not(got.present);
  store_close(s);
}

/* --- the race: 16 stores, one key, exactly one insert --- */

#define RACERS 16

typedef struct race_arg {
  pthread_barrier_t *bar;
  step_key key;
  bool inserted;
  err_code rc;
  err_t e;
} race_arg;

static err_code fn_insert_if_absent(void *arg, const step_pair *cur, step_writes *w, err_t *err) {
  race_arg *a = arg;
  a->inserted = false;
  if (cur->fwd.present) return ERR_OK;
  a->inserted = true;
  w->n = 1;
  w->recs[0] = cur->fwd;
  w->recs[0].present = true;
  w->recs[0].state = STATE_IN_PROGRESS;
  w->recs[0].attempt = 1;
  w->recs[0].created_ms = w->recs[0].updated_ms = cur->now_ms;
  w->recs[0].lease_expires_ms = cur->now_ms + 30000;
  return ERR_OK;
}

static void *race_thread(void *p) {
  race_arg *a = p;
  store *s = store_pg_open(pgx_url());
  err_t e;
  err_code prc = store_ping(s, sp_in_ms(5000), &e); /* connect before the start line */
  pthread_barrier_wait(a->bar);
  a->rc = prc != ERR_OK
              ? prc
              : store_step_txn(s, &a->key, sp_in_ms(10000), fn_insert_if_absent, a, &a->e);
  store_close(s);
  return NULL;
}

Test(store_pg, sixteen_racers_exactly_one_inserts) {
  for (int round = 0; round < 3; round++) {
    char gid[32];
    snprintf(gid, sizeof gid, "g-race-%d", round);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, RACERS);
    race_arg a[RACERS];
    pthread_t t[RACERS];
    memset(a, 0, sizeof a);
    for (int i = 0; i < RACERS; i++) {
      a[i].bar = &bar;
      a[i].key = mkkey(gid, "svc", "op", PHASE_FORWARD);
      pthread_create(&t[i], NULL, race_thread, &a[i]);
    }
    int inserted = 0;
    for (int i = 0; i < RACERS; i++) {
      pthread_join(t[i], NULL);
      cr_expect_eq(a[i].rc, ERR_OK, "racer %d: %s", i, a[i].e.msg);
      inserted += a[i].inserted;
    }
    pthread_barrier_destroy(&bar);
    cr_assert_eq(inserted, 1, "round %d: %d inserts", round, inserted);
  }
}

/* --- sagas --- */

Test(store_pg, begin_saga_request_id_is_idempotent_until_it_expires) {
  store *s = store_pg_open(pgx_url());
  err_t e;
  saga_label labels[] = {{"order", "o-1"}, {"region", "eu"}};
  saga_new in = {.tenant = tenant,
                 .global_id = "saga-1",
                 .request_id = "req-1",
                 .saga_type = "checkout",
                 .labels = labels,
                 .n_labels = 2,
                 .retention_s = 3600};
  saga_begun out;
  cr_assert_eq(store_begin_saga(s, &in, sp_in_ms(5000), &out, &e), ERR_OK, "%s", e.msg);
  cr_assert(out.created);
  cr_assert_str_eq(out.global_id, "saga-1");
  int64_t created = out.created_ms;
  cr_assert(created > clock_wall_ms() - 60000);

  in.global_id = "saga-2";
  cr_assert_eq(store_begin_saga(s, &in, sp_in_ms(5000), &out, &e), ERR_OK, "%s", e.msg);
  cr_assert_not(out.created);
  cr_assert_str_eq(out.global_id, "saga-1");
  cr_assert_eq(out.created_ms, created);

  /* without a request id: always a new saga */
  saga_new anon = {.tenant = tenant, .global_id = "saga-anon", .saga_type = "", .retention_s = 60};
  cr_assert_eq(store_begin_saga(s, &anon, sp_in_ms(5000), &out, &e), ERR_OK, "%s", e.msg);
  cr_assert(out.created);
  cr_assert_str_eq(out.global_id, "saga-anon");

  /* the request id's retention passes: the id is reused for a new saga */
  const char *v[] = {tenant};
  pgx_sql(NULL, "UPDATE idem_sagas SET expires_ms = 1 WHERE tenant = $1 AND global_id = 'saga-1'",
          1, v);
  in.global_id = "saga-3";
  cr_assert_eq(store_begin_saga(s, &in, sp_in_ms(5000), &out, &e), ERR_OK, "%s", e.msg);
  cr_assert(out.created);
  cr_assert_str_eq(out.global_id, "saga-3");
  in.global_id = "saga-4";
  cr_assert_eq(store_begin_saga(s, &in, sp_in_ms(5000), &out, &e), ERR_OK, "%s", e.msg);
  cr_assert_not(out.created);
  cr_assert_str_eq(out.global_id, "saga-3");
  store_close(s);
}

typedef struct saga_race_arg {
  pthread_barrier_t *bar;
  char gid[32];
  saga_begun out;
  err_code rc;
  err_t e;
} saga_race_arg;

static void *saga_race_thread(void *p) {
  saga_race_arg *a = p;
  store *s = store_pg_open(pgx_url());
  err_t e;
  store_ping(s, sp_in_ms(5000), &e);
  saga_new in = {.tenant = tenant,
                 .global_id = a->gid,
                 .request_id = "req-race",
                 .saga_type = "t",
                 .retention_s = 600};
  pthread_barrier_wait(a->bar);
  a->rc = store_begin_saga(s, &in, sp_in_ms(10000), &a->out, &a->e);
  store_close(s);
  return NULL;
}

Test(store_pg, begin_saga_racers_agree_on_one_saga) {
  enum { N = 8 };
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, N);
  saga_race_arg a[N];
  pthread_t t[N];
  memset(a, 0, sizeof a);
  for (int i = 0; i < N; i++) {
    a[i].bar = &bar;
    snprintf(a[i].gid, sizeof a[i].gid, "saga-r%d", i);
    pthread_create(&t[i], NULL, saga_race_thread, &a[i]);
  }
  int created = 0;
  for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(a[i].rc, ERR_OK, "racer %d: %s", i, a[i].e.msg);
    created += a[i].out.created;
    cr_assert_str_eq(a[i].out.global_id, a[0].out.global_id);
  }
  pthread_barrier_destroy(&bar);
  cr_assert_eq(created, 1);
}

static const saga_page all_steps = {.limit = REC_SAGA_PAGE_MAX};

Test(store_pg, get_saga_with_steps_and_labels_and_not_found) {
  store *s = store_pg_open(pgx_url());
  err_t e;
  saga_view v;
  cr_assert_eq(store_get_saga(s, tenant, "nope", &all_steps, sp_in_ms(2000), &v, &e),
               ERR_NOT_FOUND);
  cr_assert_eq(e.code, ERR_NOT_FOUND);

  saga_label labels[] = {{"zeta", "last"}, {"alpha", ""}};
  saga_new in = {.tenant = tenant,
                 .global_id = "saga-g",
                 .request_id = NULL,
                 .saga_type = "trip",
                 .labels = labels,
                 .n_labels = 2,
                 .retention_s = 3600};
  saga_begun out;
  cr_assert_eq(store_begin_saga(s, &in, sp_in_ms(5000), &out, &e), ERR_OK, "%s", e.msg);

  /* three steps, written in created order b(fwd) < a(fwd) < b(comp) */
  int64_t base = clock_wall_ms();
  struct {
    const char *svc;
    step_phase ph;
    int64_t at;
  } steps[] = {{"b", PHASE_FORWARD, base},
               {"a", PHASE_FORWARD, base + 10},
               {"b", PHASE_COMPENSATION, base + 20}};
  for (int i = 0; i < 3; i++) {
    step_key k = mkkey("saga-g", steps[i].svc, "op", steps[i].ph);
    write_arg a;
    memset(&a, 0, sizeof a);
    a.recs[0] = mkrec(steps[i].ph, STATE_SUCCEEDED, 1, "f", 1, "body", 4, steps[i].at - 2);
    a.n = 1;
    cr_assert_eq(store_step_txn(s, &k, sp_in_ms(5000), fn_write, &a, &e), ERR_OK, "%s", e.msg);
    step_rec_clear(&a.seen.fwd);
    step_rec_clear(&a.seen.comp);
  }
  cr_assert_eq(store_get_saga(s, tenant, "saga-g", &all_steps, sp_in_ms(2000), &v, &e), ERR_OK,
               "%s", e.msg);
  cr_assert_str_eq(v.global_id, "saga-g");
  cr_assert_str_eq(v.saga_type, "trip");
  cr_assert_eq(v.created_ms, out.created_ms);
  cr_assert_eq(v.n_labels, 2);
  cr_assert_str_eq(v.labels[0].key, "alpha");
  cr_assert_str_eq(v.labels[0].value, "");
  cr_assert_str_eq(v.labels[1].key, "zeta");
  cr_assert_str_eq(v.labels[1].value, "last");
  cr_assert_eq(v.n_steps, 3);
  for (int i = 0; i < 3; i++) {
    cr_assert_str_eq(v.steps[i].key.service, steps[i].svc);
    cr_assert_eq(v.steps[i].key.phase, steps[i].ph);
    cr_assert_str_eq(v.steps[i].key.tenant, tenant);
    cr_assert_str_eq(v.steps[i].key.global_id, "saga-g");
    cr_assert_eq(v.steps[i].created_ms, steps[i].at);
    cr_assert_eq(v.steps[i].body_len, 4);
    cr_assert_eq(memcmp(v.steps[i].body, "body", 4), 0);
  }
  saga_view_clear(&v);
  cr_assert(!v.more);

  /* pages (docs/api.md §16): by count, then by the bodies' bytes; the saga's fields on every page
   */
  saga_page pg = {.limit = 2};
  cr_assert_eq(store_get_saga(s, tenant, "saga-g", &pg, sp_in_ms(2000), &v, &e), ERR_OK, "%s",
               e.msg);
  cr_assert_eq(v.n_steps, 2);
  cr_assert(v.more);
  pg = (saga_page){.limit = 2,
                   .has_after = true,
                   .after_created_ms = v.steps[1].created_ms,
                   .after_phase = v.steps[1].key.phase};
  snprintf(pg.after_service, sizeof pg.after_service, "%s", v.steps[1].key.service);
  snprintf(pg.after_operation, sizeof pg.after_operation, "%s", v.steps[1].key.operation);
  saga_view_clear(&v);
  cr_assert_eq(store_get_saga(s, tenant, "saga-g", &pg, sp_in_ms(2000), &v, &e), ERR_OK, "%s",
               e.msg);
  cr_assert_eq(v.n_steps, 1);
  cr_assert_str_eq(v.steps[0].key.service, "b");
  cr_assert_eq(v.steps[0].key.phase, PHASE_COMPENSATION);
  cr_assert_str_eq(v.saga_type, "trip");
  cr_assert_eq(v.n_labels, 2);
  cr_assert(!v.more);
  saga_view_clear(&v);
  /* bodies of 4 bytes, a bound of 5: the second body crosses it and is read, the third not */
  pg = (saga_page){.limit = REC_SAGA_PAGE_MAX, .max_body_bytes = 5};
  cr_assert_eq(store_get_saga(s, tenant, "saga-g", &pg, sp_in_ms(2000), &v, &e), ERR_OK, "%s",
               e.msg);
  cr_assert_eq(v.n_steps, 2);
  cr_assert(v.more);
  saga_view_clear(&v);

  /* steps without a saga row: found, with an empty saga_type */
  step_key k = mkkey("saga-steps-only", "svc", "op", PHASE_FORWARD);
  write_arg a;
  memset(&a, 0, sizeof a);
  a.recs[0] = mkrec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, NULL, 0, NULL, 0, base);
  a.n = 1;
  cr_assert_eq(store_step_txn(s, &k, sp_in_ms(5000), fn_write, &a, &e), ERR_OK, "%s", e.msg);
  step_rec_clear(&a.seen.fwd);
  step_rec_clear(&a.seen.comp);
  cr_assert_eq(store_get_saga(s, tenant, "saga-steps-only", &all_steps, sp_in_ms(2000), &v, &e),
               ERR_OK);
  cr_assert_str_eq(v.saga_type, "");
  cr_assert_eq(v.created_ms, 0);
  cr_assert_eq(v.n_steps, 1);
  cr_assert_eq(v.n_labels, 0);
  saga_view_clear(&v);

  /* another tenant sees nothing */
  cr_assert_eq(store_get_saga(s, "other-tenant-x", "saga-g", &all_steps, sp_in_ms(2000), &v, &e),
               ERR_NOT_FOUND);
  store_close(s);
}

/* --- availability --- */

/* A loopback port nobody listens on: one the kernel just handed out, closed again. */
static int closed_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

Test(store_pg, unreachable_server_fails_fast_then_a_real_one_works) {
  char url[128];
  snprintf(url, sizeof url, "postgresql://postgres@127.0.0.1:%d/idem_store", closed_port());
  store *bad = store_pg_open(url);
  err_t e;
  int64_t t0 = clock_mono_ms();
  cr_assert_eq(store_ping(bad, t0 + 2000, &e), ERR_UNAVAILABLE);
  int64_t took = clock_mono_ms() - t0;
  cr_assert(took < 1000, "took %lld ms", (long long)took);
  cr_assert(strncmp(e.msg, "store unavailable: ", 19) == 0, "msg: %s", e.msg);
  cr_log_info("unreachable: %lld ms, \"%s\"", (long long)took, e.msg);
  step_key k = mkkey("g-down", "svc", "op", PHASE_FORWARD);
  write_arg a;
  memset(&a, 0, sizeof a);
  cr_assert_eq(store_step_txn(bad, &k, clock_mono_ms() + 2000, fn_write, &a, &e), ERR_UNAVAILABLE);
  cr_assert_eq(a.calls, 0);
  step_rec r;
  cr_assert_eq(store_lookup_step(bad, &k, clock_mono_ms() + 2000, &r, &e), ERR_UNAVAILABLE);
  store_close(bad);

  store *good = store_pg_open(pgx_url());
  cr_assert_eq(store_ping(good, sp_in_ms(2000), &e), ERR_OK, "%s", e.msg);
  store_close(good);
}

Test(store_pg, passed_deadline_is_a_timeout) {
  store *s = store_pg_open(pgx_url());
  err_t e;
  cr_assert_eq(store_ping(s, clock_mono_ms() - 1, &e), ERR_UNAVAILABLE);
  cr_assert_str_eq(e.msg, "store timeout");
  cr_assert_eq(store_ping(s, sp_in_ms(2000), &e), ERR_OK, "%s", e.msg);
  store_close(s);
}

Test(store_pg, lock_wait_past_the_deadline_is_cancelled_and_the_store_recovers) {
  store *s = store_pg_open(pgx_url());
  err_t e;
  step_key k = mkkey("g-lock", "svc", "op", PHASE_FORWARD);
  /* another session holds the pair's lock */
  PGconn *c = hold_pair_lock(pgx_url(), &k);

  write_arg a;
  memset(&a, 0, sizeof a);
  a.recs[0] = mkrec(PHASE_FORWARD, STATE_IN_PROGRESS, 1, NULL, 0, NULL, 0, clock_wall_ms());
  a.n = 1;
  int64_t t0 = clock_mono_ms();
  cr_assert_eq(store_step_txn(s, &k, t0 + 300, fn_write, &a, &e), ERR_UNAVAILABLE);
  int64_t took = clock_mono_ms() - t0;
  cr_assert_str_eq(e.msg, "store timeout");
  cr_assert_eq(a.calls, 0);
  cr_assert(took >= 290 && took < 1000, "took %lld ms", (long long)took);
  cr_log_info("lock wait timeout after %lld ms (deadline 300)", (long long)took);

  release_pair_lock(c);
  PQfinish(c);
  /* the same store reconnects; nothing was written by the cancelled call */
  step_rec got;
  cr_assert_eq(store_lookup_step(s, &k, sp_in_ms(2000), &got, &e), ERR_OK, "%s", e.msg);
  cr_assert_not(got.present);
  cr_assert_eq(store_step_txn(s, &k, sp_in_ms(5000), fn_write, &a, &e), ERR_OK, "%s", e.msg);
  cr_assert_eq(store_lookup_step(s, &k, sp_in_ms(2000), &got, &e), ERR_OK, "%s", e.msg);
  cr_assert(got.present);
  step_rec_clear(&got);
  step_rec_clear(&a.seen.fwd);
  step_rec_clear(&a.seen.comp);
  store_close(s);
}

Test(store_pg, a_killed_connection_is_replaced_on_the_next_call) {
  store *s = store_pg_open(pgx_url());
  err_t e;
  cr_assert_eq(store_ping(s, sp_in_ms(2000), &e), ERR_OK, "%s", e.msg);
  for (int round = 0; round < 3; round++) {
    int pid = store_pg__backend_pid(s);
    cr_assert(pid > 0);
    char pidtxt[16];
    snprintf(pidtxt, sizeof pidtxt, "%d", pid);
    const char *v[] = {pidtxt};
    pgx_sql(NULL, "SELECT pg_terminate_backend($1::int, 5000)", 1, v);
    step_key k = mkkey("g-kill", "svc", "op", PHASE_FORWARD);
    err_code rc;
    if (round == 0) {
      rc = store_ping(s, sp_in_ms(2000), &e);
    } else if (round == 1) {
      step_rec got;
      rc = store_lookup_step(s, &k, sp_in_ms(2000), &got, &e);
    } else {
      write_arg a;
      memset(&a, 0, sizeof a);
      rc = store_step_txn(s, &k, sp_in_ms(2000), fn_write, &a, &e);
      step_rec_clear(&a.seen.fwd);
      step_rec_clear(&a.seen.comp);
    }
    /* a connection found dead before anything was sent is replaced within the call */
    cr_assert_eq(rc, ERR_OK, "round %d: %s", round, e.msg);
    cr_assert_neq(store_pg__backend_pid(s), pid);
  }
  store_close(s);
}

/* --- retries: a racing insert (23505) re-runs the whole transaction --- */

typedef struct sneaky_arg {
  int calls;
  bool saw_present;
} sneaky_arg;

static err_code fn_sneaky(void *arg, const step_pair *cur, step_writes *w, err_t *err) {
  sneaky_arg *a = arg;
  a->calls++;
  a->saw_present = cur->fwd.present;
  if (a->calls == 1) {
    /* someone who ignores the pair lock inserts the row between our read and our write */
    const char *v[] = {cur->fwd.key.tenant, cur->fwd.key.global_id, cur->fwd.key.service,
                       cur->fwd.key.operation};
    pgx_sql(NULL,
            "INSERT INTO idem_steps (tenant, global_id, service, operation, phase, state, attempt,"
            " created_ms, updated_ms) VALUES ($1, $2, $3, $4, 1, 1, 99, 1, 1)",
            4, v);
  }
  w->n = 1;
  w->recs[0] = cur->fwd;
  w->recs[0].present = true;
  w->recs[0].state = STATE_SUCCEEDED;
  w->recs[0].attempt = cur->fwd.present ? cur->fwd.attempt + 1 : 1;
  w->recs[0].created_ms = w->recs[0].updated_ms = cur->now_ms;
  return ERR_OK;
}

Test(store_pg, a_unique_violation_reruns_the_transaction) {
  store *s = store_pg_open(pgx_url());
  err_t e;
  step_key k = mkkey("g-retry", "svc", "op", PHASE_FORWARD);
  sneaky_arg a = {0};
  cr_assert_eq(store_step_txn(s, &k, sp_in_ms(5000), fn_sneaky, &a, &e), ERR_OK, "%s", e.msg);
  cr_assert_eq(a.calls, 2);
  cr_assert(a.saw_present);
  step_rec got;
  cr_assert_eq(store_lookup_step(s, &k, sp_in_ms(2000), &got, &e), ERR_OK, "%s", e.msg);
  cr_assert(got.present);
  cr_assert_eq(got.attempt, 100);
  cr_assert_eq(got.state, STATE_SUCCEEDED);
  step_rec_clear(&got);
  store_close(s);
}
