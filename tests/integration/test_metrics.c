/* test_metrics.c — /metrics (--metrics HOST:PORT) scraped during a load and parsed: counters
 * per RPC and code, BeginStep decisions, the latency histogram and the resolution counter rise
 * by exactly the number of calls made; the gauges are present; no label carries a key, a
 * global id or a tenant; other paths are 404. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "util/clock.h"

#define THREADS 4
#define PAIRS 50   /* per thread: BeginStep + CompleteStep on fresh keys */
#define REPLAYS 25 /* per thread: BeginStep on a finished key */
#define NOT_FOUND_CALLS 10

static void setup(void) {
  h_fixture_start(&H, &(h_fixture_conf){.metrics = true, .no_client = true, .any_exit = true});
}

TestSuite(metrics, .init = setup, .fini = h_teardown, .timeout = 120);

/* GET path from the fixture's /metrics port. */
static int http_get(const char *path, char **body) {
  return h_http_get(H.metrics_port, path, body);
}

static char *scrape(void) {
  char *body;
  cr_assert_eq(http_get("/metrics", &body), 200);
  return body;
}

/* The value of the sample whose name-and-labels text is exactly series; -1 if absent. Every
 * non-comment line must parse as "series value". */
static double sample(const char *text, const char *series) {
  double found = -1;
  const char *p = text;
  while (*p) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    if (len > 0 && p[0] != '#') {
      const char *sp = memchr(p, ' ', len);
      cr_assert(sp, "malformed line: %.*s", (int)len, p);
      char *end;
      double v = strtod(sp + 1, &end);
      cr_assert(end == p + len, "malformed value: %.*s", (int)len, p);
      if ((size_t)(sp - p) == strlen(series) && strncmp(p, series, (size_t)(sp - p)) == 0)
        found = v;
    }
    p = eol ? eol + 1 : p + len;
  }
  return found;
}

static double zero_if_absent(double v) {
  return v < 0 ? 0 : v;
}

typedef struct load_arg {
  int id;
} load_arg;

static void *load(void *argp) {
  load_arg *a = argp;
  idem_client *c = h_client(&H.s, H.t, 5000);
  char gid[64];
  h_unique("g", gid, sizeof gid);
  for (int i = 0; i < PAIRS; i++) {
    char op[32];
    snprintf(op, sizeof op, "op-%d-%d", a->id, i);
    idem_step_key k = {gid, "svc", op, IDEM_FORWARD};
    idem_begin b;
    idem_error e = {0};
    cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
    cr_assert_eq(
        idem_step_complete(c, &k, b.attempt, IDEM_OUTCOME_SUCCEEDED, 200, NULL, 0, NULL, &e),
        IDEM_OK);
    idem_begin_clear(&b);
  }
  for (int i = 0; i < REPLAYS; i++) {
    idem_step_key k = {gid, "svc", "op-0-0", IDEM_FORWARD};
    char op[32];
    snprintf(op, sizeof op, "op-%d-0", a->id);
    k.operation = op;
    idem_begin b;
    idem_error e = {0};
    cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 0, &b, &e), IDEM_OK);
    cr_assert_eq(b.decision, IDEM_DECISION_REPLAY);
    idem_begin_clear(&b);
  }
  idem_close(c);
  return NULL;
}

#define BEGIN_OK "idem_rpc_calls_total{method=\"Coordinator/BeginStep\",code=\"OK\"}"
#define COMPLETE_OK "idem_rpc_calls_total{method=\"Coordinator/CompleteStep\",code=\"OK\"}"
#define SAGA_NF "idem_rpc_calls_total{method=\"Coordinator/GetSaga\",code=\"NOT_FOUND\"}"
#define PROCEED "idem_begin_step_decisions_total{decision=\"proceed\"}"
#define REPLAY "idem_begin_step_decisions_total{decision=\"replay\"}"
#define BEGIN_COUNT "idem_rpc_duration_seconds_count{method=\"Coordinator/BeginStep\"}"
#define BEGIN_INF "idem_rpc_duration_seconds_bucket{method=\"Coordinator/BeginStep\",le=\"+Inf\"}"
#define RESOLVED "idem_resolved_steps_total{outcome=\"failed\"}"

Test(metrics, counters_rise_by_the_calls_made) {
  char *before = scrape();
  pthread_t t[THREADS];
  load_arg args[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i].id = i;
    cr_assert_eq(pthread_create(&t[i], NULL, load, &args[i]), 0);
  }
  /* scrapes during the load parse and never go down */
  double last = sample(before, BEGIN_OK);
  for (int i = 0; i < 5; i++) {
    char *mid = scrape();
    double v = sample(mid, BEGIN_OK);
    cr_assert_geq(v, last);
    last = v;
    free(mid);
    h_sleep_ms(20); /* not a wait: the scrapes spread over the load */
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);

  idem_client *c = h_client(&H.s, H.t, 0);
  for (int i = 0; i < NOT_FOUND_CALLS; i++) {
    idem_saga sg;
    idem_error e = {0};
    cr_assert_eq(idem_saga_get(c, "no-such-saga", &sg, &e), IDEM_NOT_FOUND);
  }
  /* one in-progress and one unknown step for the gauges, one resolution */
  char gid[64];
  h_unique("g", gid, sizeof gid);
  idem_step_key k1 = {gid, "svc", "running", IDEM_FORWARD}, k2 = {gid, "svc", "lost", IDEM_FORWARD};
  idem_begin b;
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(c, &k1, NULL, 0, 0, &b, &e), IDEM_OK);
  idem_begin_clear(&b);
  cr_assert_eq(idem_step_begin(c, &k2, NULL, 0, 0, &b, &e), IDEM_OK);
  cr_assert_eq(idem_step_complete(c, &k2, b.attempt, IDEM_OUTCOME_UNKNOWN, 0, NULL, 0, NULL, &e),
               IDEM_OK);
  idem_begin_clear(&b);
  idem_resolution res = {.outcome = IDEM_OUTCOME_FAILED, .reason = "drill"};
  cr_assert_eq(idem_step_resolve(c, &k1, &res, NULL, &e), IDEM_OK, "%s", e.message);
  idem_close(c);

  char *after = scrape();
  const int begins = THREADS * (PAIRS + REPLAYS) + 2, completes = THREADS * PAIRS + 1;
  cr_assert_eq(sample(after, BEGIN_OK) - sample(before, BEGIN_OK), begins);
  cr_assert_eq(sample(after, COMPLETE_OK) - sample(before, COMPLETE_OK), completes);
  cr_assert_eq(sample(after, SAGA_NF) - zero_if_absent(sample(before, SAGA_NF)), NOT_FOUND_CALLS);
  cr_assert_eq(sample(after, PROCEED) - sample(before, PROCEED), THREADS * PAIRS + 2);
  cr_assert_eq(sample(after, REPLAY) - sample(before, REPLAY), THREADS * REPLAYS);
  cr_assert_eq(sample(after, BEGIN_COUNT) - sample(before, BEGIN_COUNT), begins);
  cr_assert_eq(sample(after, BEGIN_INF), sample(after, BEGIN_COUNT));
  cr_assert_eq(sample(after, RESOLVED) - sample(before, RESOLVED), 1);
  cr_assert_gt(sample(after, "idem_rpc_duration_seconds_sum{method=\"Coordinator/BeginStep\"}"), 0);
  cr_assert_eq(sample(after, "idem_leader"), 1);
  cr_assert_eq(sample(after, "idem_epoch"), 0);
  cr_assert_eq(sample(after, "idem_steps_scrape_ok"), 1);
  /* the step counts are read at most once a second: the next reading has the unknown step */
  H_WAIT((free(after), after = scrape(), sample(after, "idem_steps{state=\"unknown\"}") >= 1), 3000, "/metrics counts the unknown step (idem_steps{state=\"unknown\"})");
  cr_assert_geq(sample(after, "idem_steps{state=\"in_progress\"}"), 0);
  cr_assert_geq(sample(after, "idem_store_errors_total{kind=\"unavailable\"}"), 0);
  cr_assert_geq(sample(after, "idem_unguarded_executions_total"), 0);
  cr_assert_geq(sample(after, "idem_reaped_rows_total{kind=\"steps\"}"), 0);
  cr_assert(!strstr(after, H.t), "a label carries the tenant");
  cr_assert(!strstr(after, gid), "a label carries a global id");
  cr_assert(!strstr(after, "op-0-"), "a label carries an operation");
  free(before);
  free(after);

  char *body;
  cr_assert_eq(http_get("/nope", &body), 404);
  free(body);
}

/* Where the time goes (docs/observability.md): every step transaction of the group commit is
 * counted once in the queue-wait histogram and once in the batch sizes' sum; each committed
 * batch once in the round trips (at least two: read, then write and commit) and commit time. */
Test(metrics, the_group_commit_histograms_count_every_transaction) {
  double waits0 = zero_if_absent(h_metric(H.metrics_port, "idem_store_queue_wait_seconds_count"));
  double steps0 = zero_if_absent(h_metric(H.metrics_port, "idem_store_batch_size_sum"));
  idem_client *c = h_client(&H.s, H.t, 5000);
  char gid[64];
  h_unique("g", gid, sizeof gid);
  for (int i = 0; i < 20; i++) {
    char op[32];
    snprintf(op, sizeof op, "op-%d", i);
    idem_step_key k = {gid, "svc", op, IDEM_FORWARD};
    idem_begin b;
    idem_error e = {0};
    cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
    cr_assert_eq(
        idem_step_complete(c, &k, b.attempt, IDEM_OUTCOME_SUCCEEDED, 200, NULL, 0, NULL, &e),
        IDEM_OK, "%s", e.message);
    idem_begin_clear(&b);
  }
  idem_close(c);
  char *text = scrape();
  cr_assert_eq(sample(text, "idem_store_queue_wait_seconds_count") - waits0, 40);
  cr_assert_eq(sample(text, "idem_store_batch_size_sum") - steps0, 40);
  double batches = sample(text, "idem_store_batch_size_count");
  cr_assert_eq(sample(text, "idem_store_commit_seconds_count"), batches);
  cr_assert_eq(sample(text, "idem_store_round_trips_count"), batches);
  cr_assert_eq(sample(text, "idem_store_round_trips_bucket{le=\"+Inf\"}"), batches);
  cr_assert_geq(sample(text, "idem_store_round_trips_sum"), 2 * batches);
  cr_assert_eq(sample(text, "idem_store_round_trips_bucket{le=\"2\"}") >= 0, true);
  free(text);
}

/* The series the alerts read (deploy/prometheus/): an error counted by its reason, and a step
 * whose lease ran out counted in idem_steps_lease_expired (the counts are read at most once a
 * second: polled until they show it). */
Test(metrics, errors_by_reason_and_steps_past_their_lease) {
  idem_client *c = h_client(&H.s, H.t, 5000);
  char gid[64];
  h_unique("g", gid, sizeof gid);
  double nf0 =
      zero_if_absent(h_metric(H.metrics_port, "idem_rpc_errors_total{reason=\"not-found\"}"));
  double exp0 = h_metric(H.metrics_port, "idem_steps_lease_expired");
  cr_assert_geq(exp0, 0, "idem_steps_lease_expired is missing");
  idem_step_key k = {gid, "svc", "leased", IDEM_FORWARD}, none = {gid, "svc", "none", IDEM_FORWARD};
  idem_record r;
  idem_error e = {0};
  cr_assert_eq(idem_step_lookup(c, &none, &r, &e), IDEM_NOT_FOUND);
  cr_assert_eq(h_metric(H.metrics_port, "idem_rpc_errors_total{reason=\"not-found\"}"), nf0 + 1);
  idem_begin b;
  cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 200, &b, &e), IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);
  double now = exp0;
  H_WAIT((now = h_metric(H.metrics_port, "idem_steps_lease_expired")) >= exp0 + 1, 15000,
         "the expired lease was counted (idem_steps_lease_expired %g, before %g)", now, exp0);
  idem_close(c);
}
