/* bench_async.c — the driver of `pairs` and `replay`: one thread on one completion queue,
 * --concurrency slots each keeping at most one operation in flight over --channels channels.
 * The threaded driver (a blocking libidem call per caller thread) costs the load generator
 * more CPU than the coordinator on a 2-core machine; this one measures the same operations
 * (same keys, same latency points) for less. With --rate a slot whose ticket starts later
 * waits (without a call in flight) until then; the loop wakes for the earliest such start.
 * With --rate an operation's latency, and its BeginStep's, count from the ticket's intended
 * start (no coordinated omission); begin_rpc is the BeginStep RPC on its own.
 * storm and saga keep the threaded driver. With --by-group (bench_route.h) there are
 * --concurrency slots per group: slot i works in group i mod G, on keys of that group, over
 * --channels channels to that group's leader. */
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "idem/v1/coordinator.pb-c.h"

typedef struct slot {
  int id;
  int group; /* --by-group: the group its keys are in (else 0) */
  long seq;
  double start_at; /* --rate: the claimed operation starts then (0: no operation waiting) */
  bool completing; /* pairs: the CompleteStep of the pair is in flight */
  double t_op;   /* the operation's intended start (--rate) or its start */
  double t_call; /* the current call's start */
  char gid[128];
  grpc_call *call;
  grpc_metadata_array init_md, trail_md;
  grpc_byte_buffer *send, *recv;
  grpc_status_code status;
  grpc_slice details;
} slot;

typedef struct driver {
  shared *sh;
  worker *w;
  grpc_completion_queue *cq;
  grpc_channel **ch; /* --channels, or --channels per group (group g's from g * --channels) */
  int n_slots;       /* --concurrency, or --concurrency per group */
  grpc_metadata tenant_md;
  slot *slots;
  int active;  /* calls in flight */
  int waiting; /* slots whose paced operation has not started yet */
  /* --rate: the timer thread, and the mutex every field above is used under once it runs */
  pthread_mutex_t mu;
  pthread_cond_t wake; /* a start earlier than tick_at was claimed, or the run ended */
  double tick_at;      /* the start the timer thread sleeps until (0: none) */
  bool ended;
} driver;

/* Packs msg into a byte buffer. */
static grpc_byte_buffer *pack(const ProtobufCMessage *msg) {
  size_t n = protobuf_c_message_get_packed_size(msg);
  grpc_slice s = grpc_slice_malloc(n);
  protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(s));
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  return bb;
}

/* Unpacks bb as desc (NULL when it does not decode). */
static ProtobufCMessage *unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *desc) {
  if (!bb) return NULL;
  grpc_byte_buffer_reader r;
  if (!grpc_byte_buffer_reader_init(&r, bb)) return NULL;
  grpc_slice s = grpc_byte_buffer_reader_readall(&r);
  grpc_byte_buffer_reader_destroy(&r);
  ProtobufCMessage *m =
      protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
  grpc_slice_unref(s);
  return m;
}

/* Starts one unary call of method with request msg on slot s. */
static bool start_call(driver *d, slot *s, const char *method, const ProtobufCMessage *msg) {
  int per = d->sh->cf->channels;
  const bench_route *rt = d->sh->route;
  grpc_channel *ch = rt ? d->ch[s->group * per + (s->id / rt->n_groups) % per] : d->ch[s->id % per];
  grpc_slice m = grpc_slice_from_static_string(method);
  gpr_timespec dl = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_seconds(10, GPR_TIMESPAN));
  s->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, d->cq, m, NULL, dl, NULL);
  grpc_slice_unref(m);
  if (!s->call) return false;
  grpc_metadata_array_init(&s->init_md);
  grpc_metadata_array_init(&s->trail_md);
  s->send = pack(msg);
  s->recv = NULL;
  s->details = grpc_empty_slice();
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].data.send_initial_metadata.count = 1;
  ops[0].data.send_initial_metadata.metadata = &d->tenant_md;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = s->send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->init_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &s->recv;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &s->trail_md;
  ops[5].data.recv_status_on_client.status = &s->status;
  ops[5].data.recv_status_on_client.status_details = &s->details;
  s->t_call = now_s();
  if (grpc_call_start_batch(s->call, ops, 6, s, NULL) != GRPC_CALL_OK) return false;
  d->active++;
  return true;
}

static void end_call(slot *s) {
  grpc_metadata_array_destroy(&s->init_md);
  grpc_metadata_array_destroy(&s->trail_md);
  grpc_byte_buffer_destroy(s->send);
  if (s->recv) grpc_byte_buffer_destroy(s->recv);
  grpc_slice_unref(s->details);
  grpc_call_unref(s->call);
  s->call = NULL;
}

static void key_of(const slot *s, Idem__V1__StepKey *k, const char *op) {
  k->global_id = (char *)s->gid;
  k->service = "bench";
  k->operation = (char *)op;
  k->phase = IDEM__V1__PHASE__PHASE_FORWARD;
}

/* Starts the operation s claimed (false when the call cannot start). */
static bool start_op(driver *d, slot *s) {
  const conf *cf = d->sh->cf;
  s->start_at = 0;
  s->seq++;
  s->completing = false;
  Idem__V1__StepKey k = IDEM__V1__STEP_KEY__INIT;
  Idem__V1__BeginStepRequest req = IDEM__V1__BEGIN_STEP_REQUEST__INIT;
  if (cf->w == W_PAIRS && d->sh->route) {
    char base[128];
    bench_key_name(d->sh, "p", s->id, s->seq, base, sizeof base);
    bench_route_key(d->sh->route, cf->tenant, s->group, base, s->gid, sizeof s->gid);
    key_of(s, &k, "pair");
  } else if (cf->w == W_PAIRS) {
    bench_key_name(d->sh, "p", s->id, s->seq, s->gid, sizeof s->gid);
    key_of(s, &k, "pair");
  } else {
    bench_key_name(d->sh, "r", 0, (s->seq * cf->concurrency + s->id) % cf->keys, s->gid,
                   sizeof s->gid);
    key_of(s, &k, "replay");
  }
  req.key = &k;
  return start_call(d, s, "/idem.v1.Coordinator/BeginStep", &req.base);
}

/* Claims s's next operation: starts it now, or (--rate) leaves it waiting for its time.
 * False when the run is over for s. */
static bool next_op(driver *d, slot *s) {
  double at, now = now_s();
  if (!bench_claim_op(d->sh, 1, &at)) return false;
  /* the operation's latency counts from when it should have started (--rate), so a start
   * delayed by a busy slot is measured, not omitted */
  s->t_op = at > 0 ? at : now;
  if (at > now) {
    s->start_at = at;
    d->waiting++;
    if (d->tick_at == 0 || at < d->tick_at) pthread_cond_signal(&d->wake);
    return true;
  }
  return start_op(d, s);
}

/* Starts the waiting slots whose time has come; returns the earliest start still ahead
 * (0: none). */
static double start_due(driver *d) {
  double now = now_s(), next = 0;
  for (int i = 0; i < d->n_slots && d->waiting > 0; i++) {
    slot *s = &d->slots[i];
    if (s->start_at == 0) continue;
    if (s->start_at <= now) {
      d->waiting--;
      lat_add(&d->w->late, (now - s->start_at) * 1000.0);
      start_op(d, s);
    } else if (next == 0 || s->start_at < next) {
      next = s->start_at;
    }
  }
  return next;
}

/* Ends an operation: its latency, its error (IDEM_* code, IDEM_OK for none). */
static void op_done(driver *d, slot *s, int rc) {
  lat_add(&d->w->lat, (now_s() - s->t_op) * 1000.0);
  d->w->ops++;
  if (d->sh->route) atomic_fetch_add(&d->sh->group_ops[s->group], 1);
  if (rc != IDEM_OK) bench_count_error(d->sh, rc);
}

/* A call of s finished (ok: the batch completed). Starts what comes next. */
static void on_done(driver *d, slot *s, bool ok) {
  d->active--;
  double now = now_s(), ms = (now - s->t_call) * 1000.0;
  int rc = !ok ? IDEM_UNKNOWN : (int)s->status;
  bool was_complete = s->completing;
  uint64_t attempt = 0;
  bool proceed = false;
  if (!was_complete) {
    lat_add(&d->w->begin_rpc, ms);
    lat_add(&d->w->begin, (now - s->t_op) * 1000.0);
    Idem__V1__BeginStepResponse *r = NULL;
    if (rc == IDEM_OK) {
      r = (Idem__V1__BeginStepResponse *)unpack(s->recv, &idem__v1__begin_step_response__descriptor);
      if (!r) rc = IDEM_UNKNOWN;
    }
    if (r) {
      bool want = d->sh->cf->w == W_PAIRS ? r->decision == IDEM__V1__DECISION__DECISION_PROCEED
                                           : r->decision == IDEM__V1__DECISION__DECISION_REPLAY;
      if (!want && d->sh->cf->w == W_REPLAY) rc = IDEM_UNKNOWN;
      proceed = d->sh->cf->w == W_PAIRS && r->decision == IDEM__V1__DECISION__DECISION_PROCEED;
      attempt = r->attempt;
      protobuf_c_message_free_unpacked(&r->base, NULL);
    }
  }
  end_call(s);
  if (proceed) { /* the pair's second half */
    Idem__V1__StepKey k = IDEM__V1__STEP_KEY__INIT;
    Idem__V1__CompleteStepRequest req = IDEM__V1__COMPLETE_STEP_REQUEST__INIT;
    key_of(s, &k, "pair");
    req.key = &k;
    req.attempt = attempt;
    req.outcome = IDEM__V1__OUTCOME__OUTCOME_SUCCEEDED;
    req.code = 200;
    req.body.data = (uint8_t *)"ok";
    req.body.len = 2;
    s->completing = true;
    if (start_call(d, s, "/idem.v1.Coordinator/CompleteStep", &req.base)) return;
    rc = IDEM_UNKNOWN;
  }
  op_done(d, s, rc);
  next_op(d, s);
}

/* --rate: starts each waiting slot at its time, sleeping on d->wake until the earliest. */
static void *tick_main(void *arg) {
  driver *d = arg;
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); /* wake within a microsecond, not 50 */
  pthread_mutex_lock(&d->mu);
  while (!d->ended) {
    double next = d->waiting > 0 ? start_due(d) : 0;
    d->tick_at = next;
    if (next == 0) {
      pthread_cond_wait(&d->wake, &d->mu);
      continue;
    }
    struct timespec ts = {.tv_sec = (time_t)next};
    ts.tv_nsec = (long)((next - (double)ts.tv_sec) * 1e9);
    pthread_cond_timedwait(&d->wake, &d->mu, &ts);
  }
  pthread_mutex_unlock(&d->mu);
  return NULL;
}

int bench_run_async(shared *sh, worker *w) {
  const conf *cf = sh->cf;
  driver d = {.sh = sh, .w = w};
  pthread_mutex_init(&d.mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* now_s's clock */
  pthread_cond_init(&d.wake, &ca);
  pthread_condattr_destroy(&ca);
  d.cq = grpc_completion_queue_create_for_next(NULL);
  int groups = sh->route ? sh->route->n_groups : 1, n_ch = cf->channels * groups;
  d.n_slots = cf->concurrency * groups;
  d.ch = calloc((size_t)n_ch, sizeof *d.ch);
  d.slots = calloc((size_t)d.n_slots, sizeof *d.slots);
  if (!d.ch || !d.slots) {
    fprintf(stderr, "idem-bench: out of memory for %d channels and %d calls\n", n_ch, d.n_slots);
    free(d.ch);
    free(d.slots);
    return 3;
  }
  grpc_channel_credentials *cr = grpc_insecure_credentials_create();
  for (int i = 0; i < n_ch; i++) {
    /* a channel argument of its own per channel, so they do not share one connection */
    grpc_arg a = {.type = GRPC_ARG_INTEGER, .key = "idem.bench.channel", .value.integer = i};
    grpc_channel_args args = {.num_args = 1, .args = &a};
    const char *addr = sh->route ? sh->route->leader[i / cf->channels] : cf->addr;
    d.ch[i] = grpc_channel_create(addr, cr, &args);
  }
  grpc_channel_credentials_release(cr);
  d.tenant_md.key = grpc_slice_from_static_string("idem-tenant");
  d.tenant_md.value = grpc_slice_from_copied_string(cf->tenant);
  pthread_t ticker;
  bool paced = cf->rate > 0, started = !paced || pthread_create(&ticker, NULL, tick_main, &d) == 0;
  pthread_mutex_lock(&d.mu);
  for (int i = 0; started && i < d.n_slots; i++) {
    d.slots[i].id = i;
    d.slots[i].group = i % groups;
    d.slots[i].seq = -1;
    next_op(&d, &d.slots[i]);
  }
  while (d.active > 0 || d.waiting > 0) {
    pthread_mutex_unlock(&d.mu);
    gpr_timespec dl =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(50, GPR_TIMESPAN));
    grpc_event ev = grpc_completion_queue_next(d.cq, dl, NULL);
    pthread_mutex_lock(&d.mu);
    if (ev.type == GRPC_OP_COMPLETE) on_done(&d, (slot *)ev.tag, ev.success != 0);
    if (paced && d.waiting > 0) start_due(&d); /* awake anyway: the timer need not wake */
  }
  d.ended = true;
  pthread_cond_signal(&d.wake);
  pthread_mutex_unlock(&d.mu);
  if (paced && started) pthread_join(ticker, NULL);
  if (!started) fprintf(stderr, "idem-bench: cannot start the pacing timer's thread\n");
  pthread_cond_destroy(&d.wake);
  pthread_mutex_destroy(&d.mu);
  grpc_completion_queue_shutdown(d.cq);
  while (grpc_completion_queue_next(d.cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(d.cq);
  for (int i = 0; i < n_ch; i++) grpc_channel_destroy(d.ch[i]);
  grpc_slice_unref(d.tenant_md.value);
  free(d.ch);
  free(d.slots);
  return started ? 0 : 3;
}
