/* test_wait.c — BeginStep with wait_ms (docs/api.md §12) over gRPC against a real coordinator and
 * Postgres: waiters released by a Complete (REPLAY), by a RETRYABLE Complete (exactly one
 * PROCEED with the next attempt), by the forward's Complete for a compensation, at the lease's
 * end (exactly one takeover), by their own wait_ms (ABORTED), by a shutdown (UNAVAILABLE); and
 * 10,000 calls against --max-waiters 100, every one answered. Waits are conditions polled
 * against deadlines (the waiter gauge on /metrics, the threads' own counts). */
#include <criterion/criterion.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "pbenc.h"

static void setup(void) {
  h_fixture_start(&H, &(h_fixture_conf){.metrics = true, .deadline_ms = 5000});
}
TestSuite(wait, .init = setup, .fini = h_teardown, .timeout = 180);

static double waiting(void) {
  return h_metric(H.metrics_port, "idem_begin_step_waiters");
}

/* H_WAIT, its failure saying how many calls the server had waiting then. */
#define WAIT_FOR(cond, ms) H_WAIT(cond, ms, "waiters on /metrics: %g", waiting())

typedef struct waiter {
  pthread_t th;
  const idem_step_key *key;
  uint32_t wait_ms, lease_ms;
  int rc;
  idem_begin b;
  idem_error e;
  int64_t answered_ms;
  atomic_bool done;
} waiter;

static const uint8_t FP[] = "fp-1";

static void *waiter_main(void *p) {
  waiter *w = p;
  w->rc = idem_step_begin_wait(H.c, w->key, FP, sizeof FP, w->lease_ms, w->wait_ms, &w->b, &w->e);
  w->answered_ms = h_now_ms();
  atomic_store(&w->done, true);
  return NULL;
}

static void start_waiters(waiter *v, int n, const idem_step_key *k, uint32_t wait_ms) {
  double before = waiting();
  for (int i = 0; i < n; i++) {
    v[i] = (waiter){.key = k, .wait_ms = wait_ms};
    cr_assert_eq(pthread_create(&v[i].th, NULL, waiter_main, &v[i]), 0);
  }
  WAIT_FOR(waiting() >= before + n, 10000);
}

static int n_done(waiter *v, int n) {
  int d = 0;
  for (int i = 0; i < n; i++) d += atomic_load(&v[i].done);
  return d;
}

static void join_all(waiter *v, int n) {
  for (int i = 0; i < n; i++) pthread_join(v[i].th, NULL);
}

static void clear_all(waiter *v, int n) {
  for (int i = 0; i < n; i++) idem_begin_clear(&v[i].b);
}

static void begin_first(const idem_step_key *k, uint32_t lease_ms, uint64_t attempt) {
  idem_begin b = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(H.c, k, FP, sizeof FP, lease_ms, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(b.attempt, attempt);
  idem_begin_clear(&b);
}

static void complete(const idem_step_key *k, uint64_t attempt, idem_outcome o, const char *body) {
  idem_error e = {0};
  cr_assert_eq(idem_step_complete(H.c, k, attempt, o, 200, body, strlen(body), NULL, &e), IDEM_OK,
               "%s", e.message);
}

Test(wait, a_complete_answers_every_waiter_with_the_replay_at_once) {
  char gid[96];
  h_unique("w-replay", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  begin_first(&k, 30000, 1);
  waiter v[5];
  start_waiters(v, 5, &k, 20000);
  cr_assert_eq(n_done(v, 5), 0);
  int64_t t = h_now_ms();
  complete(&k, 1, IDEM_OUTCOME_SUCCEEDED, "paid");
  join_all(v, 5);
  for (int i = 0; i < 5; i++) {
    cr_assert_eq(v[i].rc, IDEM_OK, "%s", v[i].e.message);
    cr_assert_eq(v[i].b.decision, IDEM_DECISION_REPLAY);
    cr_assert_eq(v[i].b.result.body_len, 4);
    cr_assert_eq(memcmp(v[i].b.result.body, "paid", 4), 0);
    cr_assert_lt(v[i].answered_ms - t, 2000, "answered when the step finished, not at a timeout");
  }
  WAIT_FOR(waiting() == 0, 5000);
  clear_all(v, 5);
}

Test(wait, a_retryable_complete_gives_exactly_one_waiter_the_next_attempt) {
  char gid[96];
  h_unique("w-retry", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  begin_first(&k, 30000, 1);
  waiter v[4];
  start_waiters(v, 4, &k, 20000);
  complete(&k, 1, IDEM_OUTCOME_RETRYABLE, "busy");
  WAIT_FOR(n_done(v, 4) >= 1, 5000);
  h_sleep_ms(200); /* not a wait: a window in which a second (wrong) PROCEED would show up */
  int winner = -1;
  for (int i = 0; i < 4; i++)
    if (atomic_load(&v[i].done)) {
      cr_assert_eq(winner, -1, "only one waiter is answered");
      winner = i;
    }
  cr_assert_eq(v[winner].rc, IDEM_OK, "%s", v[winner].e.message);
  cr_assert_eq(v[winner].b.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(v[winner].b.attempt, 2);
  cr_assert_not(v[winner].b.takeover);
  /* the others wait on attempt 2 and replay its result */
  complete(&k, 2, IDEM_OUTCOME_SUCCEEDED, "ok");
  join_all(v, 4);
  for (int i = 0; i < 4; i++) {
    if (i == winner) continue;
    cr_assert_eq(v[i].rc, IDEM_OK, "%s", v[i].e.message);
    cr_assert_eq(v[i].b.decision, IDEM_DECISION_REPLAY);
  }
  clear_all(v, 4);
}

Test(wait, a_compensation_waits_for_its_forward_and_proceeds_when_it_succeeded) {
  char gid[96];
  h_unique("w-comp", gid, sizeof gid);
  idem_step_key f = {gid, "payment", "charge", IDEM_FORWARD};
  idem_step_key c = {gid, "payment", "charge", IDEM_COMPENSATION};
  begin_first(&f, 30000, 1);
  waiter v[1];
  start_waiters(v, 1, &c, 20000);
  cr_assert_eq(n_done(v, 1), 0);
  complete(&f, 1, IDEM_OUTCOME_SUCCEEDED, "charged");
  join_all(v, 1);
  cr_assert_eq(v[0].rc, IDEM_OK, "%s", v[0].e.message);
  cr_assert_eq(v[0].b.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(v[0].b.attempt, 1);
  clear_all(v, 1);
}

Test(wait, at_the_lease_end_exactly_one_waiter_takes_over) {
  char gid[96];
  h_unique("w-lease", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  begin_first(&k, 1500, 1); /* its owner "crashes": nobody completes attempt 1 */
  waiter v[4];
  start_waiters(v, 4, &k, 20000);
  WAIT_FOR(n_done(v, 4) >= 1, 6000);
  h_sleep_ms(300); /* not a wait: a window in which a second (wrong) takeover would show up */
  cr_assert_eq(n_done(v, 4), 1, "exactly one waiter takes the lease over");
  int winner = -1;
  for (int i = 0; i < 4; i++)
    if (atomic_load(&v[i].done)) winner = i;
  cr_assert_eq(v[winner].rc, IDEM_OK, "%s", v[winner].e.message);
  cr_assert_eq(v[winner].b.decision, IDEM_DECISION_PROCEED);
  cr_assert_eq(v[winner].b.attempt, 2);
  cr_assert(v[winner].b.takeover);
  WAIT_FOR(waiting() == 3, 5000); /* the others wait on attempt 2 */
  complete(&k, 2, IDEM_OUTCOME_SUCCEEDED, "ok");
  join_all(v, 4);
  for (int i = 0; i < 4; i++)
    if (i != winner) cr_assert_eq(v[i].b.decision, IDEM_DECISION_REPLAY);
  clear_all(v, 4);
}

Test(wait, a_wait_that_runs_out_is_answered_aborted_and_counted) {
  char gid[96];
  h_unique("w-timeout", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  begin_first(&k, 30000, 1);
  double timeouts = h_metric(H.metrics_port, "idem_begin_step_wait_timeouts_total");
  idem_begin b = {0};
  idem_error e = {0};
  int64_t t = h_now_ms();
  int rc = idem_step_begin_wait(H.c, &k, FP, sizeof FP, 0, 300, &b, &e);
  int64_t took = h_now_ms() - t;
  cr_assert_eq(rc, IDEM_ABORTED, "%s", e.message);
  cr_assert_gt(e.retry_after_ms, 0);
  cr_assert_geq(took, 250, "answered after its wait, took %lld ms", (long long)took);
  cr_assert_lt(took, 3000);
  WAIT_FOR(h_metric(H.metrics_port, "idem_begin_step_wait_timeouts_total") >= timeouts + 1, 5000);
  /* over the limit: refused, naming the field */
  rc = idem_step_begin_wait(H.c, &k, FP, sizeof FP, 0, 60001, &b, &e);
  cr_assert_eq(rc, IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "wait_ms") != NULL, "%s", e.message);
}

/* A raw BeginStep with wait_ms (no client retries: the server's answer as it is). */
typedef struct raw_waiter {
  pthread_t th;
  const char *gid;
  int status;
  char details[256];
  int64_t answered_ms;
} raw_waiter;

static void *raw_waiter_main(void *p) {
  raw_waiter *w = p;
  pbuf *req = pb_new();
  pb_sub(req, 1, pb_key(w->gid, "payment", "charge", 1));
  pb_len(req, 2, FP, sizeof FP);
  pb_varint(req, 4, 30000);
  w->status = h_raw_call(H.s.addr, "/idem.v1.Coordinator/BeginStep", H.t, req->b, req->n,
                         w->details, sizeof w->details);
  w->answered_ms = h_now_ms();
  pb_free(req);
  return NULL;
}

Test(wait, a_draining_server_answers_its_waiters_unavailable) {
  char gid[96];
  h_unique("w-stop", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  begin_first(&k, 30000, 1);
  raw_waiter v[2];
  for (int i = 0; i < 2; i++) {
    v[i] = (raw_waiter){.gid = gid};
    cr_assert_eq(pthread_create(&v[i].th, NULL, raw_waiter_main, &v[i]), 0);
  }
  WAIT_FOR(waiting() == 2, 5000);
  int64_t t = h_now_ms();
  cr_assert_eq(kill(H.s.pid, SIGTERM), 0);
  for (int i = 0; i < 2; i++) {
    pthread_join(v[i].th, NULL);
    cr_assert_eq(v[i].status, GRPC_STATUS_UNAVAILABLE, "status %d %s", v[i].status, v[i].details);
    cr_assert_lt(v[i].answered_ms - t, 4000, "answered at the drain, not at its deadline");
  }
}

/* --- raw BeginStep calls on a completion queue (10,000 at once; hang-ups) --- */

#define N_CALLS 10000
#define N_CHANNELS 100 /* the server allows 100 streams per connection */

typedef struct raw_call {
  grpc_call *call;
  grpc_metadata_array init_md, trail_md;
  grpc_byte_buffer *send, *recv;
  grpc_status_code status;
  grpc_slice details;
  grpc_metadata md;
} raw_call;

/* A BeginStep request for (gid, payment, charge, FORWARD) with FP, waiting up to wait_ms. */
static pbuf *begin_req(const char *gid, int64_t wait_ms) {
  pbuf *req = pb_new();
  pb_sub(req, 1, pb_key(gid, "payment", "charge", 1));
  pb_len(req, 2, FP, sizeof FP);
  pb_varint(req, 4, (uint64_t)wait_ms);
  return req;
}

/* Starts c: BeginStep with req as tenant H.t on ch, every op in one batch tagged c on cq. */
static void raw_call_start(raw_call *c, grpc_channel *ch, grpc_completion_queue *cq,
                           const pbuf *req, gpr_timespec deadline) {
  grpc_slice method = grpc_slice_from_static_string("/idem.v1.Coordinator/BeginStep");
  c->call =
      grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL, deadline, NULL);
  c->md.key = grpc_slice_from_static_string("idem-tenant");
  c->md.value = grpc_slice_from_copied_string(H.t);
  grpc_slice payload = grpc_slice_from_copied_buffer((const char *)req->b, req->n);
  c->send = grpc_raw_byte_buffer_create(&payload, 1);
  grpc_slice_unref(payload);
  grpc_metadata_array_init(&c->init_md);
  grpc_metadata_array_init(&c->trail_md);
  c->details = grpc_empty_slice();
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].data.send_initial_metadata.count = 1;
  ops[0].data.send_initial_metadata.metadata = &c->md;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = c->send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &c->init_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &c->recv;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &c->trail_md;
  ops[5].data.recv_status_on_client.status = &c->status;
  ops[5].data.recv_status_on_client.status_details = &c->details;
  cr_assert_eq(grpc_call_start_batch(c->call, ops, 6, c, NULL), GRPC_CALL_OK);
}

/* Frees what raw_call_start made, once its batch has completed. */
static void raw_call_free(raw_call *c) {
  grpc_call_unref(c->call);
  grpc_byte_buffer_destroy(c->send);
  if (c->recv) grpc_byte_buffer_destroy(c->recv);
  grpc_metadata_array_destroy(&c->init_md);
  grpc_metadata_array_destroy(&c->trail_md);
  grpc_slice_unref(c->details);
  grpc_slice_unref(c->md.value);
}

/* Shuts cq down, drains it, destroys it, and ends the grpc_init of the test. */
static void cq_close(grpc_completion_queue *cq) {
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
  grpc_shutdown();
}

/* The decision of a BeginStepResponse (field 1, first on the wire), 0 if none. */
static int decision_of(grpc_byte_buffer *bb) {
  if (!bb) return 0;
  grpc_byte_buffer_reader r;
  if (!grpc_byte_buffer_reader_init(&r, bb)) return 0;
  grpc_slice s = grpc_byte_buffer_reader_readall(&r);
  grpc_byte_buffer_reader_destroy(&r);
  int d = GRPC_SLICE_LENGTH(s) >= 2 && GRPC_SLICE_START_PTR(s)[0] == 0x08
              ? GRPC_SLICE_START_PTR(s)[1]
              : 0;
  grpc_slice_unref(s);
  return d;
}

/* --- 10,000 calls at --max-waiters 100 --- */

Test(wait, ten_thousand_calls_at_max_waiters_100_are_each_answered) {
  h_teardown();
  h_fixture_start(&H,
                  &(h_fixture_conf){.metrics = true,
                                    .deadline_ms = 5000,
                                    .args = (const char *const[]){"--max-waiters", "100", NULL}});
  char gid[96];
  h_unique("w-10k", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  begin_first(&k, 60000, 1);

  pbuf *req = begin_req(gid, 30000);

  grpc_init();
  grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
  grpc_channel *ch[N_CHANNELS];
  grpc_arg arg = {.type = GRPC_ARG_INTEGER,
                  .key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL,
                  .value.integer = 1};
  grpc_channel_args args = {.num_args = 1, .args = &arg};
  for (int i = 0; i < N_CHANNELS; i++) {
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    ch[i] = grpc_channel_create(H.s.addr, creds, &args);
    grpc_channel_credentials_release(creds);
  }
  raw_call *calls = calloc(N_CALLS, sizeof *calls);
  cr_assert_not_null(calls);
  gpr_timespec deadline =
      gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(60000, GPR_TIMESPAN));
  int64_t t = h_now_ms();
  for (int i = 0; i < N_CALLS; i++) {
    raw_call_start(&calls[i], ch[i % N_CHANNELS], cq, req, deadline);
  }
  pb_free(req);

  /* every call but the 100 waiting ones is answered ABORTED at once */
  int answered = 0, aborted = 0, ok_replay = 0, other = 0;
  bool completed = false;
  int64_t end = h_now_ms() + 90000;
  while (answered < N_CALLS && h_now_ms() < end) {
    if (!completed && answered == N_CALLS - 100) {
      cr_assert_eq(waiting(), 100, "the 100 waiters are parked");
      cr_assert_eq(aborted, N_CALLS - 100);
      fprintf(stderr, "9,900 calls answered ABORTED in %lld ms\n", (long long)(h_now_ms() - t));
      complete(&k, 1, IDEM_OUTCOME_SUCCEEDED, "paid");
      completed = true;
    }
    grpc_event ev = grpc_completion_queue_next(
        cq, gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(100, GPR_TIMESPAN)),
        NULL);
    if (ev.type != GRPC_OP_COMPLETE) continue;
    raw_call *c = ev.tag;
    answered++;
    if (c->status == GRPC_STATUS_ABORTED)
      aborted++;
    else if (c->status == GRPC_STATUS_OK && decision_of(c->recv) == 2)
      ok_replay++;
    else
      other++;
  }
  cr_assert_eq(answered, N_CALLS, "every call is answered (%d)", answered);
  cr_assert_eq(other, 0);
  cr_assert_eq(aborted, N_CALLS - 100);
  cr_assert_eq(ok_replay, 100, "the waiters replay the result");
  cr_assert(completed);

  for (int i = 0; i < N_CALLS; i++) raw_call_free(&calls[i]);
  free(calls);
  for (int i = 0; i < N_CHANNELS; i++) grpc_channel_destroy(ch[i]);
  cq_close(cq);
  WAIT_FOR(waiting() == 0, 5000);
}

/* --- a waiter whose client hangs up gives back its place at once --- */

#define N_HANGUP 50

Test(wait, waiters_whose_clients_hang_up_free_their_places_within_a_second) {
  h_teardown();
  h_fixture_start(&H, &(h_fixture_conf){.metrics = true,
                                        .deadline_ms = 5000,
                                        .args = (const char *const[]){"--max-waiters", "50", NULL}});
  char gid[96];
  h_unique("w-hangup", gid, sizeof gid);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  begin_first(&k, 60000, 1);

  pbuf *req = begin_req(gid, 60000); /* wait_ms: the longest there is */

  grpc_init();
  grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  grpc_channel *ch = grpc_channel_create(H.s.addr, creds, NULL);
  grpc_channel_credentials_release(creds);
  raw_call calls[N_HANGUP];
  memset(calls, 0, sizeof calls);
  gpr_timespec deadline =
      gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(90000, GPR_TIMESPAN));
  for (int i = 0; i < N_HANGUP; i++) {
    raw_call_start(&calls[i], ch, cq, req, deadline);
  }
  pb_free(req);
  WAIT_FOR(waiting() == N_HANGUP, 30000); /* parking 50 calls: slow under ASan on a loaded machine */

  /* the table is full: one more waiter is refused at once */
  waiter full = {.key = &k, .wait_ms = 20000};
  cr_assert_eq(pthread_create(&full.th, NULL, waiter_main, &full), 0);
  pthread_join(full.th, NULL);
  cr_assert_eq(full.rc, IDEM_ABORTED, "rc %d", full.rc);

  /* every client hangs up: each place is given back at once, not when wait_ms runs out */
  int64_t t = h_now_ms();
  for (int i = 0; i < N_HANGUP; i++) grpc_call_cancel(calls[i].call, NULL);
  WAIT_FOR(waiting() == 0, 1000);
  fprintf(stderr, "%d waiters whose clients hung up freed their places in %lld ms\n", N_HANGUP,
          (long long)(h_now_ms() - t));
  for (int done = 0; done < N_HANGUP;) {
    grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type != GRPC_OP_COMPLETE) continue;
    cr_assert_eq(((raw_call *)ev.tag)->status, GRPC_STATUS_CANCELLED);
    done++;
  }

  /* and the next waiter parks again, answered by the step's end */
  waiter next = {.key = &k, .wait_ms = 20000};
  cr_assert_eq(pthread_create(&next.th, NULL, waiter_main, &next), 0);
  WAIT_FOR(waiting() == 1, 5000);
  complete(&k, 1, IDEM_OUTCOME_SUCCEEDED, "paid");
  pthread_join(next.th, NULL);
  cr_assert_eq(next.rc, IDEM_OK, "%s", next.e.message);
  cr_assert_eq(next.b.decision, IDEM_DECISION_REPLAY);
  idem_begin_clear(&next.b);

  for (int i = 0; i < N_HANGUP; i++) raw_call_free(&calls[i]);
  grpc_channel_destroy(ch);
  cq_close(cq);
}
