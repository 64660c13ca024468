/* test_bulk.c — Admin.ResolveSteps over gRPC (docs/api.md §12), through libidem against the real
 * coordinator and Postgres: a dry run changes nothing, more matches than max_steps resolve
 * nothing, a bulk resolution writes one audit row per step with its batch id and the resolved
 * steps replay, the same request id answers the first answer and changes nothing, the filter
 * must select resolvable steps. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "util/clock.h"

TestSuite(bulk, .init = h_setup, .fini = h_teardown, .timeout = 120);

#define N_STUCK 30

/* Steps begun with a lease of 1 ms: in progress, and stuck as soon as the lease ran out. */
static void make_stuck(const char *svc, int n) {
  for (int i = 0; i < n; i++) {
    char gid[32];
    snprintf(gid, sizeof gid, "bulk-%s-%02d", svc, i);
    idem_step_key k = {gid, svc, "charge", IDEM_FORWARD};
    idem_begin b;
    idem_error e = {0};
    cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 1, &b, &e), IDEM_OK, "%s", e.message);
    idem_begin_clear(&b); /* a step resolved earlier replays its result */
  }
}

/* Stuck steps of svc, counted through ListSteps. */
static size_t count_stuck(const char *svc) {
  idem_steps_filter f = {.state = IDEM_STATE_IN_PROGRESS,
                         .service = svc,
                         .lease_expired_only = true,
                         .page_size = 1000};
  idem_step_page p;
  idem_error e = {0};
  cr_assert_eq(idem_steps_list(H.c, &f, &p, &e), IDEM_OK, "%s", e.message);
  size_t n = p.n_steps;
  idem_step_page_clear(&p);
  return n;
}

static void wait_stuck(const char *svc, size_t n) {
  size_t stuck = 0;
  H_WAIT((stuck = count_stuck(svc)) >= n, 10000, "the 1 ms leases run out: %zu of %zu stuck", stuck,
         n);
  cr_assert_eq(count_stuck(svc), n, "more steps stuck than begun");
}

static idem_bulk_resolution stuck_of(const char *svc, const char *request_id) {
  idem_bulk_resolution in;
  memset(&in, 0, sizeof in);
  in.filter.state = IDEM_STATE_IN_PROGRESS;
  in.filter.lease_expired_only = true;
  in.filter.service = svc;
  in.res.outcome = IDEM_OUTCOME_FAILED;
  in.res.code = 503;
  in.res.body = "outage: refunded";
  in.res.body_len = 16;
  in.res.reason = "gateway outage of 02:10";
  in.res.actor = "oncall";
  in.max_steps = 100;
  in.request_id = request_id;
  return in;
}

/* Audit rows of the tenant carrying batch_id. */
static int audit_rows(const char *batch_id) {
  idem_audit_page p;
  idem_error e = {0};
  cr_assert_eq(idem_audit_list(H.c, NULL, 1000, NULL, &p, &e), IDEM_OK, "%s", e.message);
  int n = 0;
  for (size_t i = 0; i < p.n_entries; i++) n += strcmp(p.entries[i].batch_id, batch_id) == 0;
  idem_audit_page_clear(&p);
  return n;
}

Test(bulk, dry_run_max_resolve_replay_and_repeat) {
  make_stuck("pay", N_STUCK);
  wait_stuck("pay", N_STUCK);
  idem_bulk_result r;
  idem_error e = {0};

  idem_bulk_resolution in = stuck_of("pay", "bulk-req-1");
  in.dry_run = true;
  cr_assert_eq(idem_steps_resolve(H.c, &in, 30000, &r, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(r.matched, N_STUCK);
  cr_assert_eq(r.resolved, 0);
  cr_assert_eq(r.n_sample, 20);
  cr_assert(r.dry_run);
  cr_assert_str_eq(r.sample[0].global_id, "bulk-pay-00");
  cr_assert_eq(count_stuck("pay"), N_STUCK, "a dry run resolved something");

  in = stuck_of("pay", "bulk-req-1");
  in.max_steps = N_STUCK - 1;
  cr_assert_eq(idem_steps_resolve(H.c, &in, 30000, &r, &e), IDEM_FAILED_PRECONDITION);
  cr_assert(strstr(e.message, "max_steps"), "%s", e.message);
  cr_assert_eq(count_stuck("pay"), N_STUCK, "a refused bulk resolution resolved something");

  in = stuck_of("pay", "bulk-req-1");
  cr_assert_eq(idem_steps_resolve(H.c, &in, 30000, &r, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(r.matched, N_STUCK);
  cr_assert_eq(r.resolved, N_STUCK);
  cr_assert(!r.replayed && !r.dry_run);
  cr_assert_eq(strlen(r.batch_id), 36);
  cr_assert_eq(count_stuck("pay"), 0);
  cr_assert_eq(audit_rows(r.batch_id), N_STUCK);

  /* a resolved step now replays the resolution to its callers */
  idem_step_key k = {"bulk-pay-07", "pay", "charge", IDEM_FORWARD};
  idem_begin b;
  cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_REPLAY);
  cr_assert_eq(b.result.code, 503);
  cr_assert_eq(b.result.body_len, 16);
  idem_begin_clear(&b);

  /* the same request id: the first answer, nothing new resolved */
  char batch[40];
  snprintf(batch, sizeof batch, "%s", r.batch_id);
  make_stuck("pay", N_STUCK + 2); /* bulk-pay-30, -31 are new; the others replay */
  wait_stuck("pay", 2);
  cr_assert_eq(idem_steps_resolve(H.c, &in, 30000, &r, &e), IDEM_OK, "%s", e.message);
  cr_assert(r.replayed);
  cr_assert_str_eq(r.batch_id, batch);
  cr_assert_eq(r.resolved, N_STUCK);
  cr_assert_eq(count_stuck("pay"), 2, "a repeated request id resolved new steps");
  cr_assert_eq(audit_rows(batch), N_STUCK);
}

Test(bulk, refusals_name_the_field) {
  idem_bulk_result r;
  idem_error e = {0};
  idem_bulk_resolution in = stuck_of("pay", "");
  cr_assert_eq(idem_steps_resolve(H.c, &in, 10000, &r, &e), IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "request_id"), "%s", e.message);
  in = stuck_of("pay", "x");
  in.filter.state = IDEM_STATE_SUCCEEDED;
  in.filter.lease_expired_only = false;
  cr_assert_eq(idem_steps_resolve(H.c, &in, 10000, &r, &e), IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "filter.state"), "%s", e.message);
  in = stuck_of("pay", "x");
  in.max_steps = 0;
  cr_assert_eq(idem_steps_resolve(H.c, &in, 10000, &r, &e), IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "max_steps"), "%s", e.message);
}
