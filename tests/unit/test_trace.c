/* test_trace.c — trace context (docs/api.md §22) without a network: the traceparent parser
 * (util/traceparent.h), and which call's trace id each record keeps, through coord_* over the
 * in-memory store (BeginStep, a takeover, CompleteStep, ResolveStep, a compensation that
 * abandons its forward) and ListSteps' trace_id filter. */
#include <criterion/criterion.h>
#include <string.h>

#include "coord/coord.h"
#include "coord/coord_admin.h"
#include "support_memstore.h"
#include "util/clock.h"
#include "util/traceparent.h"

#define TA "4bf92f3577b34da6a3ce929d0e0e4736"
#define TB "0af7651916cd43dd8448eb211c80319c"
#define TC "00000000000000000000000000000abc"
#define SPAN "00f067aa0ba902b7"

/* ===================== the parser ===================== */

static bool parse(const char *v, char out[TRACE_ID_LEN + 1]) {
  return traceparent_parse(v, strlen(v), out);
}

Test(traceparent, accepts_version_00_and_copies_the_trace_id) {
  char t[TRACE_ID_LEN + 1];
  cr_assert(parse("00-" TA "-" SPAN "-01", t));
  cr_assert_str_eq(t, TA);
  cr_assert(parse("00-" TC "-" SPAN "-00", t)); /* leading zeros, not all zero */
  cr_assert_str_eq(t, TC);
}

Test(traceparent, a_later_version_may_carry_more_fields) {
  char t[TRACE_ID_LEN + 1];
  cr_assert(parse("01-" TA "-" SPAN "-01-what-comes-later", t));
  cr_assert_str_eq(t, TA);
  cr_assert(parse("cc-" TA "-" SPAN "-01", t));
}

Test(traceparent, refuses_what_w3c_calls_invalid) {
  static const char *const bad[] = {
      "",
      "00-" TA "-" SPAN,                                 /* no flags */
      "00-" TA "-" SPAN "-01-extra",                     /* 00 is exactly 55 bytes */
      "01-" TA "-" SPAN "-01x",                          /* more, but not after a dash */
      "ff-" TA "-" SPAN "-01",                           /* version ff */
      "00-00000000000000000000000000000000-" SPAN "-01", /* all-zero trace id */
      "00-" TA "-0000000000000000-01",                   /* all-zero parent id */
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-" SPAN "-01", /* upper case */
      "00-" TA "-" SPAN "-0g",                           /* flags not hex */
      "0-" TA "-" SPAN "-01",                            /* short version */
      "00_" TA "_" SPAN "_01",                           /* not dashes */
      "00-4bf92f3577b34da6a3ce929d0e0e473-" SPAN "-01x", /* 31-digit trace id */
      "xx-" TA "-" SPAN "-01",                           /* version not hex */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char t[TRACE_ID_LEN + 1] = "junk";
    cr_assert_not(parse(bad[i], t), "accepted \"%s\"", bad[i]);
    cr_assert_str_eq(t, "", "left \"%s\" for \"%s\"", t, bad[i]);
  }
  char t[TRACE_ID_LEN + 1];
  cr_assert_not(traceparent_parse(NULL, 0, t));
  /* not NUL-terminated input: only len bytes are read */
  char buf[64];
  memcpy(buf, "00-" TA "-" SPAN "-01", 55);
  cr_assert(traceparent_parse(buf, 55, t));
  cr_assert_not(traceparent_parse(buf, 54, t));
}

Test(traceparent, trace_id_valid) {
  cr_assert(trace_id_valid(TA));
  cr_assert_not(trace_id_valid(NULL));
  cr_assert_not(trace_id_valid(""));
  cr_assert_not(trace_id_valid("00000000000000000000000000000000"));
  cr_assert_not(trace_id_valid(TA "0"));
  cr_assert_not(trace_id_valid("4BF92F3577B34DA6A3CE929D0E0E4736"));
}

/* ===================== what each record keeps ===================== */

#define NOW 1700000000000LL

static memstore *m;
static coord_ctx ctx;
static int64_t far;

static void setup(void) {
  m = memstore_new(NOW);
  coord_ctx_init(&ctx);
  far = clock_mono_ms() + 3600 * 1000;
}
static void teardown(void) {
  if (m) store_close(&m->base);
  m = NULL;
}
TestSuite(trace, .init = setup, .fini = teardown);

static coord_key_in key(step_phase ph, const char *trace) {
  return (coord_key_in){.global_id = "g-1",
                        .service = "payments",
                        .operation = "charge",
                        .phase = ph,
                        .trace_id = trace};
}

static uint64_t begin(step_phase ph, const char *trace, uint32_t lease_ms) {
  coord_key_in k = key(ph, trace);
  coord_begin_result r;
  err_t e;
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &k, NULL, 0, lease_ms, far, &r, &e), ERR_OK,
               "%s", e.msg);
  uint64_t attempt = r.attempt;
  coord_begin_result_clear(&r);
  return attempt;
}

static step_rec lookup(step_phase ph) {
  coord_key_in k = key(ph, NULL);
  step_rec r;
  err_t e;
  cr_assert_eq(coord_lookup_step(&ctx, &m->base, "acme", &k, far, &r, &e), ERR_OK, "%s", e.msg);
  return r;
}

static void assert_ids(step_phase ph, const char *begun, const char *finished) {
  step_rec r = lookup(ph);
  cr_assert_str_eq(r.begin_trace_id, begun);
  cr_assert_str_eq(r.complete_trace_id, finished);
  step_rec_clear(&r);
}

Test(trace, begin_then_complete_keep_both_ids) {
  uint64_t a = begin(PHASE_FORWARD, TA, 0);
  assert_ids(PHASE_FORWARD, TA, "");
  coord_key_in k = key(PHASE_FORWARD, TB);
  step_rec out;
  err_t e;
  cr_assert_eq(coord_complete_step(&ctx, &m->base, "acme", &k, a, OUTCOME_SUCCEEDED, 200, NULL, 0,
                                   far, &out, &e),
               ERR_OK, "%s", e.msg);
  cr_assert_str_eq(out.begin_trace_id, TA); /* CompleteStep's reply carries them too */
  cr_assert_str_eq(out.complete_trace_id, TB);
  step_rec_clear(&out);
  assert_ids(PHASE_FORWARD, TA, TB);
  begin(PHASE_FORWARD, TC, 0); /* a REPLAY writes nothing */
  assert_ids(PHASE_FORWARD, TA, TB);
}

Test(trace, a_takeover_replaces_the_begin_id) {
  begin(PHASE_FORWARD, TA, 1000);
  m->now_ms += 2000; /* the lease ran out */
  cr_assert_eq(begin(PHASE_FORWARD, TB, 1000), 2);
  assert_ids(PHASE_FORWARD, TB, "");
  m->now_ms += 2000;
  cr_assert_eq(begin(PHASE_FORWARD, NULL, 1000), 3); /* a call without a trace clears it */
  assert_ids(PHASE_FORWARD, "", "");
}

Test(trace, an_invalid_id_reads_as_none) {
  begin(PHASE_FORWARD, "not-a-trace-id", 0);
  assert_ids(PHASE_FORWARD, "", "");
}

Test(trace, resolve_and_an_abandoning_compensation_record_their_call) {
  begin(PHASE_FORWARD, TA, 0);
  coord_resolve_in ri = {
      .key = key(PHASE_FORWARD, TB), .outcome = OUTCOME_SUCCEEDED, .reason = "checked by hand"};
  step_rec out;
  err_t e;
  cr_assert_eq(coord_resolve_step(&ctx, &m->base, "acme", &ri, far, &out, &e), ERR_OK, "%s", e.msg);
  step_rec_clear(&out);
  assert_ids(PHASE_FORWARD, TA, TB);

  /* another saga: its forward's lease runs out and the compensation abandons it */
  coord_key_in f = {.global_id = "g-2",
                    .service = "payments",
                    .operation = "charge",
                    .phase = PHASE_FORWARD,
                    .trace_id = TA};
  coord_begin_result r;
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &f, NULL, 0, 1000, far, &r, &e), ERR_OK);
  coord_begin_result_clear(&r);
  m->now_ms += 2000;
  coord_key_in c = f;
  c.phase = PHASE_COMPENSATION;
  c.trace_id = TC;
  cr_assert_eq(coord_begin_step(&ctx, &m->base, "acme", &c, NULL, 0, 0, far, &r, &e), ERR_OK);
  coord_begin_result_clear(&r);
  f.trace_id = NULL;
  step_rec fr;
  cr_assert_eq(coord_lookup_step(&ctx, &m->base, "acme", &f, far, &fr, &e), ERR_OK);
  cr_assert_eq(fr.state, STATE_ABANDONED);
  cr_assert_str_eq(fr.begin_trace_id, TA);
  cr_assert_str_eq(fr.complete_trace_id, TC);
  step_rec_clear(&fr);
}

static size_t list_by(const char *trace, err_code *rc, err_t *e) {
  coord_list_in in = {.trace_id = trace};
  step_list l;
  char next[COORD_TOKEN_MAX];
  *rc = coord_list_steps(&ctx, &m->base, "acme", &in, far, &l, next, e);
  size_t n = l.n;
  step_list_clear(&l);
  return n;
}

Test(trace, list_steps_filters_by_either_id) {
  uint64_t a = begin(PHASE_FORWARD, TA, 0);
  coord_key_in k = key(PHASE_FORWARD, TB);
  step_rec out;
  err_t e;
  cr_assert_eq(coord_complete_step(&ctx, &m->base, "acme", &k, a, OUTCOME_SUCCEEDED, 200, NULL, 0,
                                   far, &out, &e),
               ERR_OK);
  step_rec_clear(&out);
  err_code rc;
  cr_assert_eq(list_by(TA, &rc, &e), 1);
  cr_assert_eq(list_by(TB, &rc, &e), 1);
  cr_assert_eq(list_by(TC, &rc, &e), 0);
  cr_assert_eq(list_by("", &rc, &e), 1);
  list_by("4BF92F3577B34DA6A3CE929D0E0E4736", &rc, &e);
  cr_assert_eq(rc, ERR_INVALID);
  cr_assert(strstr(e.msg, "trace_id"), "%s", e.msg);
}
