/* test_stages.c — the stages of a step call (docs/observability.md "Stages of a step call"),
 * scraped from a real coordinator on a real PostgreSQL: after N BeginSteps and N CompleteSteps
 * on fresh keys, every stage histogram of each method counted N more, and the stages within the
 * RPC's clock (arrive to reply) add up to no more than the RPC's own duration. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util/clock.h"

#define THREADS 4
#define PAIRS 40 /* per thread */
#define N (THREADS * PAIRS)

static void setup(void) {
  h_fixture_start(&H, &(h_fixture_conf){.metrics = true, .no_client = true, .any_exit = true});
}

TestSuite(stages, .init = setup, .fini = h_teardown, .timeout = 120);

static char *scrape(void) {
  char *body;
  cr_assert_eq(h_http_get(H.metrics_port, "/metrics", &body), 200);
  return body;
}

/* The value of the sample whose name-and-labels text is exactly series; 0 if absent. */
static double sample(const char *text, const char *series) {
  size_t n = strlen(series);
  for (const char *p = text; p && *p;) {
    if (strncmp(p, series, n) == 0 && p[n] == ' ') return strtod(p + n + 1, NULL);
    p = strchr(p, '\n');
    if (p) p++;
  }
  return 0;
}

static void *load(void *argp) {
  int id = *(int *)argp;
  idem_client *c = h_client(&H.s, H.t, 5000);
  char gid[64];
  h_unique("g", gid, sizeof gid);
  for (int i = 0; i < PAIRS; i++) {
    char op[32];
    snprintf(op, sizeof op, "op-%d-%d", id, i);
    idem_step_key k = {gid, "svc", op, IDEM_FORWARD};
    idem_begin b;
    idem_error e = {0};
    cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
    cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
    cr_assert_eq(
        idem_step_complete(c, &k, b.attempt, IDEM_OUTCOME_SUCCEEDED, 200, NULL, 0, NULL, &e),
        IDEM_OK, "%s", e.message);
    idem_begin_clear(&b);
  }
  idem_close(c);
  return NULL;
}

static const char *const STAGES[] = {"arrive", "handler", "queue", "read", "write",
                                     "commit", "answer",  "reply", "send"};
#define N_STAGES (sizeof STAGES / sizeof STAGES[0])
#define N_IN_RPC (N_STAGES - 1) /* send comes after the RPC's clock stops */

/* sample(after) - sample(before) for the series printf'd from fmt, method and stage. */
static double delta(const char *before, const char *after, const char *fmt, const char *method,
                    const char *stage) {
  char series[256];
  snprintf(series, sizeof series, fmt, method, stage);
  return sample(after, series) - sample(before, series);
}

static void check_method(const char *before, const char *after, const char *method) {
  double stage_sum = 0;
  for (size_t s = 0; s < N_STAGES; s++) {
    double count = delta(before, after, "idem_stage_seconds_count{method=\"%s\",stage=\"%s\"}",
                         method, STAGES[s]);
    double inf =
        delta(before, after, "idem_stage_seconds_bucket{method=\"%s\",stage=\"%s\",le=\"+Inf\"}",
              method, STAGES[s]);
    double sum = delta(before, after, "idem_stage_seconds_sum{method=\"%s\",stage=\"%s\"}", method,
                       STAGES[s]);
    cr_log_info("%s %-7s count %.0f sum %.6f s", method, STAGES[s], count, sum);
    cr_expect_eq(count, N, "%s stage %s counted %.0f calls, expected %d", method, STAGES[s], count,
                 N);
    cr_expect_eq(inf, count, "%s stage %s: +Inf bucket %.0f != count %.0f", method, STAGES[s], inf,
                 count);
    cr_expect_geq(sum, 0);
    if (s < N_IN_RPC) stage_sum += sum;
  }
  double rpc = delta(before, after, "idem_rpc_duration_seconds_sum{method=\"%s\"%s}", method, "");
  double rpc_n =
      delta(before, after, "idem_rpc_duration_seconds_count{method=\"%s\"%s}", method, "");
  double call = delta(before, after, "idem_stage_call_seconds_sum{method=\"%s\"%s}", method, "");
  double call_n =
      delta(before, after, "idem_stage_call_seconds_count{method=\"%s\"%s}", method, "");
  cr_log_info("%s stages arrive..reply %.6f s, call %.6f s, rpc %.6f s", method, stage_sum, call,
              rpc);
  cr_expect_eq(rpc_n, N);
  cr_expect_eq(call_n, N);
  /* each sum is printed to the microsecond: allow one microsecond of rounding per series */
  double slack = (N_IN_RPC + 1) * 1e-6;
  cr_expect_leq(stage_sum, rpc + slack, "%s: the stages sum to %.6f s, more than the RPC's %.6f s",
                method, stage_sum, rpc);
  cr_expect_leq(stage_sum, call + slack,
                "%s: the stages sum to %.6f s, more than the call's %.6f s", method, stage_sum,
                call);
  cr_expect_gt(stage_sum, 0.5 * rpc, "%s: the stages (%.6f s) explain under half the RPC's %.6f s",
               method, stage_sum, rpc);
}

Test(stages, every_stage_counts_each_call_and_they_add_up_within_the_rpc) {
  char *before = scrape();
  pthread_t t[THREADS];
  int ids[THREADS];
  for (int i = 0; i < THREADS; i++) {
    ids[i] = i;
    cr_assert_eq(pthread_create(&t[i], NULL, load, &ids[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  /* the send stage ends when gRPC reports the last reply sent, just after the client got it */
  char *after = NULL;
  int64_t give_up = clock_mono_ms() + 5000;
  for (;;) {
    after = scrape();
    if (delta(before, after, "idem_stage_seconds_count{method=\"%s\",stage=\"%s\"}",
              "Coordinator/CompleteStep", "send") >= N ||
        clock_mono_ms() > give_up)
      break;
    free(after);
    h_sleep_ms(10);
  }
  check_method(before, after, "Coordinator/BeginStep");
  check_method(before, after, "Coordinator/CompleteStep");
  free(before);
  free(after);
}
