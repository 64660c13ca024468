/* test_trace.c — trace context through the real coordinator (docs/api.md §22): libidem sends the
 * thread's traceparent (idem_trace_set) and the coordinator keeps the trace id of the call that
 * began each attempt and of the call that finished it; LookupStep, ListSteps (and its trace_id
 * filter) and GetSaga return them; a malformed traceparent is ignored and counted. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "harness.h"
#include "idem/v1/coordinator.pb-c.h"
#include "util/clock.h"

#define TA "4bf92f3577b34da6a3ce929d0e0e4736"
#define TB "0af7651916cd43dd8448eb211c80319c"
#define TC "c0ffee00c0ffee00c0ffee00c0ffee00"
#define TP(t) "00-" t "-00f067aa0ba902b7-01"

static void setup(void) {
  h_fixture_start(&H, &(h_fixture_conf){.metrics = true});
}

TestSuite(trace, .init = setup, .fini = h_teardown, .timeout = 60);

static void trace(const char *traceparent) {
  idem_error e = {0};
  cr_assert_eq(idem_trace_set(traceparent, traceparent ? "vendor=opaque" : NULL, &e), IDEM_OK, "%s",
               e.message);
}

static idem_trace_ids ids_of(const idem_step_key *k) {
  idem_record r;
  idem_trace_ids ids;
  idem_error e = {0};
  cr_assert_eq(idem_step_lookup_traced(H.c, k, &r, &ids, &e), IDEM_OK, "%s", e.message);
  idem_record_clear(&r);
  return ids;
}

static size_t listed(const char *trace_id, idem_trace_ids *first) {
  idem_traced_page p;
  idem_error e = {0};
  cr_assert_eq(idem_steps_list_traced(H.c, NULL, trace_id, &p, &e), IDEM_OK, "%s", e.message);
  size_t n = p.page.n_steps;
  if (n > 0 && first) *first = p.ids[0];
  idem_traced_page_clear(&p);
  return n;
}

Test(trace, lookup_list_and_get_saga_return_both_ids) {
  char gid[64];
  h_unique("g", gid, sizeof gid);
  idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD};
  idem_begin b;
  idem_error e = {0};
  trace(TP(TA));
  cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);
  idem_trace_ids ids = ids_of(&k);
  cr_assert_str_eq(ids.begin, TA);
  cr_assert_str_eq(ids.complete, "");

  trace(TP(TB));
  cr_assert_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_SUCCEEDED, 201, "ok", 2, NULL, &e),
               IDEM_OK, "%s", e.message);
  trace(NULL);
  ids = ids_of(&k);
  cr_assert_str_eq(ids.begin, TA);
  cr_assert_str_eq(ids.complete, TB);

  /* ListSteps: by either id, nothing for another, and a malformed filter named */
  idem_trace_ids got;
  cr_assert_eq(listed(TA, &got), 1);
  cr_assert_str_eq(got.begin, TA);
  cr_assert_str_eq(got.complete, TB);
  cr_assert_eq(listed(TB, NULL), 1);
  cr_assert_eq(listed(TC, NULL), 0);
  idem_traced_page p;
  cr_assert_eq(idem_steps_list_traced(H.c, NULL, "4BF92F3577B34DA6A3CE929D0E0E4736", &p, &e),
               IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "trace_id"), "%s", e.message);

  /* GetSaga, raw: the same ids on the saga's step */
  Idem__V1__GetSagaRequest req = IDEM__V1__GET_SAGA_REQUEST__INIT;
  req.global_id = gid;
  uint8_t buf[256];
  size_t len = idem__v1__get_saga_request__pack(&req, buf);
  void *resp = NULL;
  h_raw_opts o = {.resp = &resp};
  char details[256];
  cr_assert_eq(h_raw_call_opts(H.s.addr, "/idem.v1.Coordinator/GetSaga", H.t, buf, len, details,
                               sizeof details, &o),
               0, "%s", details);
  Idem__V1__GetSagaResponse *saga = idem__v1__get_saga_response__unpack(NULL, o.resp_len, resp);
  cr_assert_not_null(saga);
  cr_assert_eq(saga->n_steps, 1);
  cr_assert_str_eq(saga->steps[0]->begin_trace_id, TA);
  cr_assert_str_eq(saga->steps[0]->complete_trace_id, TB);
  idem__v1__get_saga_response__free_unpacked(saga, NULL);
  free(resp);
}

Test(trace, a_malformed_traceparent_is_ignored_and_counted) {
  double before = h_metric(H.metrics_port, "idem_traceparent_invalid_total");
  cr_assert_geq(before, 0, "idem_traceparent_invalid_total is missing");
  char gid[64];
  h_unique("g", gid, sizeof gid);
  idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD};
  idem_begin b;
  idem_error e = {0};
  trace("00-00000000000000000000000000000000-00f067aa0ba902b7-01"); /* all-zero trace id */
  cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);
  trace("ff-" TA "-00f067aa0ba902b7-01"); /* version ff */
  idem_record r;
  cr_assert_eq(idem_step_lookup(H.c, &k, &r, &e), IDEM_OK, "%s", e.message);
  idem_record_clear(&r);
  trace(NULL);
  cr_assert_str_eq(ids_of(&k).begin, "");
  cr_assert_eq(h_metric(H.metrics_port, "idem_traceparent_invalid_total"), before + 2);
  /* what cannot travel as metadata is refused by libidem, naming the field */
  cr_assert_eq(idem_trace_set("00-\n", NULL, &e), IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "traceparent"), "%s", e.message);
}

/* idemctl (the real binary): `step` prints both ids, `steps --trace-id` lists by either, and
 * refuses a malformed id naming trace_id. */
Test(trace, idemctl_prints_and_filters_by_the_ids) {
  char gid[64], other[64];
  h_unique("g", gid, sizeof gid);
  h_unique("g", other, sizeof other);
  idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD},
                k2 = {other, "pay", "charge", IDEM_FORWARD};
  idem_begin b;
  idem_error e = {0};
  trace(TP(TA));
  cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);
  trace(TP(TC)); /* another saga, another trace: not listed under TA or TB */
  cr_assert_eq(idem_step_begin(H.c, &k2, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);
  trace(TP(TB));
  cr_assert_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_FAILED, 402, NULL, 0, NULL, &e), IDEM_OK,
               "%s", e.message);
  trace(NULL);

  h_ctl *r = calloc(1, sizeof *r);
  h_idemctl(r, H.s.addr, H.t, "step", gid, "pay", "charge", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_assert(strstr(r->out, "begin trace " TA "\n"), "%s", r->out);
  cr_assert(strstr(r->out, "end trace   " TB "\n"), "%s", r->out);
  h_idemctl(r, H.s.addr, H.t, "step", other, "pay", "charge", NULL);
  cr_assert(strstr(r->out, "begin trace " TC "\n") && strstr(r->out, "end trace   -\n"), "%s",
            r->out);

  const char *const traces[] = {TA, TB};
  for (int i = 0; i < 2; i++) {
    h_idemctl(r, H.s.addr, H.t, "--json", "steps", "--trace-id", traces[i], NULL);
    cr_assert_eq(r->status, 0, "%s", r->err);
    cJSON *arr = cJSON_Parse(r->out);
    cr_assert(cJSON_IsArray(arr), "%s", r->out);
    cr_assert_eq(cJSON_GetArraySize(arr), 1, "%s", r->out);
    cJSON *s = cJSON_GetArrayItem(arr, 0);
    cr_assert_str_eq(cJSON_GetObjectItem(s, "global_id")->valuestring, gid);
    cr_assert_str_eq(cJSON_GetObjectItem(s, "begin_trace_id")->valuestring, TA);
    cr_assert_str_eq(cJSON_GetObjectItem(s, "complete_trace_id")->valuestring, TB);
    cJSON_Delete(arr);
  }
  h_idemctl(r, H.s.addr, H.t, "steps", "--trace-id", "nope", NULL);
  cr_assert_neq(r->status, 0);
  cr_assert(strstr(r->err, "trace_id"), "%s", r->err);
  free(r);
}

/* idem_step_run: its BeginStep and CompleteStep carry the thread's trace; a takeover's BeginStep
 * replaces the begin id. */
static void act(void *arg, const idem_step_ctx *ctx, idem_step_output *out) {
  (void)arg;
  (void)ctx;
  out->outcome = IDEM_OUTCOME_SUCCEEDED;
  out->code = 200;
}

Test(trace, a_takeover_replaces_the_begin_id_and_step_run_carries_the_thread_trace) {
  char gid[64];
  h_unique("g", gid, sizeof gid);
  idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD};
  idem_begin b;
  idem_error e = {0};
  trace(TP(TA));
  cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 300, &b, &e), IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);
  trace(TP(TC));
  /* the 300 ms lease runs out; until then the step is in progress (ABORTED) */
  idem_run_report rep;
  idem_run_options ro = {.deadline_ms = 20000, .lease_ms = 5000};
  cr_assert_eq(idem_step_run(H.c, &k, NULL, 0, act, NULL, &ro, &rep, &e), IDEM_OK, "%s", e.message);
  cr_assert(rep.ran);
  cr_assert(rep.takeover);
  cr_assert_eq(rep.attempt, 2);
  idem_run_report_clear(&rep);
  trace(NULL);
  idem_trace_ids ids = ids_of(&k);
  cr_assert_str_eq(ids.begin, TC);
  cr_assert_str_eq(ids.complete, TC);
}
