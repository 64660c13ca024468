/* server.c — the echo server of bench/stream-cpu: one completion queue drained by one thread,
 * as in the coordinator (server/rpc/rpc_server.c), and no work beyond the reply.
 *
 * Unary (Begin, Complete): the request arrives with its payload read (as the coordinator
 * registers its methods), which is read out; one batch answers it: initial metadata, a reply of
 * the response's size, OK, and the close.
 * Steps (bidirectional): initial metadata and the first read in one batch, the close watched in
 * another; each message read is answered by a reply with its id and the response's size for its
 * kind, queued while an earlier reply is being sent (gRPC allows one send and one read in flight
 * per call); the next read is posted at once. When the client half-closes and the queue is empty
 * the server sends OK. StepsBuffered is the same with GRPC_WRITE_BUFFER_HINT on a reply that has
 * more queued behind it. Everything runs on the cq thread: no locks. */
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream_cpu.h"

#define UNARY_REQUESTS 80 /* calls requested ahead per unary method: more than 64 in flight */
#define STREAM_REQUESTS 2 /* per stream method */

enum {
  T_REQ_UNARY,
  T_UNARY_DONE,
  T_REQ_STREAM,
  T_S_START,
  T_S_RECV,
  T_S_SEND,
  T_S_CLOSE,
  T_S_STATUS,
  T_SHUTDOWN
};

typedef struct tag {
  int kind;
  void *obj;
} tag;

typedef struct server {
  grpc_server *srv;
  grpc_completion_queue *cq;
  void *method[4]; /* SC_BEGIN, SC_COMPLETE, Steps, StepsBuffered */
  sc_sizes sz;
  atomic_bool stopping; /* set by main on SIGTERM; the cq thread then requests no more calls */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool shutdown_seen;
  tag shutdown;
} server;

typedef struct ucall {
  tag t;
  server *s;
  int kind; /* sc_kind */
  grpc_call *call;
  gpr_timespec deadline;
  grpc_metadata_array md;
  grpc_byte_buffer *payload, *reply;
  int cancelled;
} ucall;

typedef struct sstream {
  tag req, start, recv, send, close, status;
  server *s;
  grpc_call *call;
  gpr_timespec deadline;
  grpc_metadata_array md;
  grpc_byte_buffer *in;     /* the message being read */
  grpc_byte_buffer *out;    /* the reply being sent */
  grpc_byte_buffer **queue; /* replies waiting for the send in flight (a ring) */
  size_t head, count, cap;
  bool buffered; /* StepsBuffered: a send with more queued behind it carries the buffer hint */
  bool sending, client_done, status_sent;
  int pending; /* batches in flight */
  int cancelled;
} sstream;

/* A reply of n bytes: the header (id, kind) when stream, filler after it. */
static grpc_byte_buffer *reply_of(size_t n, bool stream, uint64_t id, int kind) {
  grpc_slice sl = grpc_slice_malloc(n);
  uint8_t *p = GRPC_SLICE_START_PTR(sl);
  memset(p, 0x5a, n);
  if (stream) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(id >> (8 * i));
    p[8] = (uint8_t)kind;
  }
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sl, 1);
  grpc_slice_unref(sl);
  return bb;
}

/* Reads bb whole; the stream's header into *id and *kind. False when it is too short. */
static bool read_in(grpc_byte_buffer *bb, bool stream, uint64_t *id, int *kind) {
  grpc_byte_buffer_reader r;
  if (!grpc_byte_buffer_reader_init(&r, bb)) return false;
  grpc_slice sl = grpc_byte_buffer_reader_readall(&r);
  grpc_byte_buffer_reader_destroy(&r);
  bool ok = true;
  if (stream) {
    const uint8_t *p = GRPC_SLICE_START_PTR(sl);
    ok = GRPC_SLICE_LENGTH(sl) >= SC_HEADER && p[8] <= SC_COMPLETE;
    if (ok) {
      *id = 0;
      for (int i = 0; i < 8; i++) *id |= (uint64_t)p[i] << (8 * i);
      *kind = p[8];
    }
  }
  grpc_slice_unref(sl);
  return ok;
}

static void start_batch(grpc_call *call, const grpc_op *ops, size_t n, tag *t) {
  grpc_call_error ce = grpc_call_start_batch(call, ops, n, t, NULL);
  if (ce != GRPC_CALL_OK) {
    fprintf(stderr, "stream-cpu server: grpc_call_start_batch: %d\n", (int)ce);
    abort(); /* a bug in this bench: every batch here is well-formed */
  }
}

/* --- unary --- */

static void ucall_free(ucall *c);

static void request_unary(server *s, int kind) {
  ucall *c = calloc(1, sizeof *c);
  if (!c) abort();
  c->t = (tag){T_REQ_UNARY, c};
  c->s = s;
  c->kind = kind;
  grpc_metadata_array_init(&c->md);
  if (grpc_server_request_registered_call(s->srv, s->method[kind], &c->call, &c->deadline, &c->md,
                                          &c->payload, s->cq, s->cq, &c->t) != GRPC_CALL_OK)
    ucall_free(c); /* the server is shutting down */
}

static void ucall_free(ucall *c) {
  if (c->payload) grpc_byte_buffer_destroy(c->payload);
  if (c->reply) grpc_byte_buffer_destroy(c->reply);
  grpc_metadata_array_destroy(&c->md);
  if (c->call) grpc_call_unref(c->call);
  free(c);
}

static void on_unary(server *s, ucall *c) {
  if (!atomic_load(&s->stopping)) request_unary(s, c->kind);
  uint64_t id;
  int kind;
  if (c->payload) read_in(c->payload, false, &id, &kind);
  c->reply = reply_of(s->sz.size[c->kind][1], false, 0, 0);
  grpc_op ops[4];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = c->reply;
  ops[2].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[2].data.send_status_from_server.status = GRPC_STATUS_OK;
  ops[3].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[3].data.recv_close_on_server.cancelled = &c->cancelled;
  c->t.kind = T_UNARY_DONE;
  start_batch(c->call, ops, 4, &c->t);
}

/* --- the stream --- */

static void stream_free(sstream *st);

static void request_stream(server *s, bool buffered) {
  sstream *st = calloc(1, sizeof *st);
  if (!st) abort();
  st->req = (tag){T_REQ_STREAM, st};
  st->start = (tag){T_S_START, st};
  st->recv = (tag){T_S_RECV, st};
  st->send = (tag){T_S_SEND, st};
  st->close = (tag){T_S_CLOSE, st};
  st->status = (tag){T_S_STATUS, st};
  st->s = s;
  st->buffered = buffered;
  grpc_metadata_array_init(&st->md);
  if (grpc_server_request_registered_call(s->srv, s->method[buffered ? 3 : 2], &st->call,
                                          &st->deadline, &st->md, NULL, s->cq, s->cq,
                                          &st->req) != GRPC_CALL_OK)
    stream_free(st); /* the server is shutting down */
}

static void stream_free(sstream *st) {
  for (size_t i = 0; i < st->count; i++)
    grpc_byte_buffer_destroy(st->queue[(st->head + i) % st->cap]);
  free(st->queue);
  if (st->in) grpc_byte_buffer_destroy(st->in);
  if (st->out) grpc_byte_buffer_destroy(st->out);
  grpc_metadata_array_destroy(&st->md);
  if (st->call) grpc_call_unref(st->call);
  free(st);
}

static void post_recv(sstream *st) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &st->in;
  st->pending++;
  start_batch(st->call, &op, 1, &st->recv);
}

/* Sends the next queued reply, or OK once the client is done and nothing is left. */
static void send_next(sstream *st) {
  if (st->sending || st->status_sent) return;
  grpc_op op;
  memset(&op, 0, sizeof op);
  if (st->count > 0) {
    st->out = st->queue[st->head];
    st->head = (st->head + 1) % st->cap;
    st->count--;
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = st->out;
    if (st->buffered && st->count > 0) op.flags = GRPC_WRITE_BUFFER_HINT;
    st->sending = true;
    st->pending++;
    start_batch(st->call, &op, 1, &st->send);
  } else if (st->client_done) {
    op.op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    op.data.send_status_from_server.status = GRPC_STATUS_OK;
    st->status_sent = true;
    st->pending++;
    start_batch(st->call, &op, 1, &st->status);
  }
}

static void enqueue(sstream *st, grpc_byte_buffer *bb) {
  if (st->count == st->cap) {
    size_t cap = st->cap ? 2 * st->cap : 64;
    grpc_byte_buffer **q = malloc(cap * sizeof *q);
    if (!q) abort();
    for (size_t i = 0; i < st->count; i++) q[i] = st->queue[(st->head + i) % st->cap];
    free(st->queue);
    st->queue = q;
    st->head = 0;
    st->cap = cap;
  }
  st->queue[(st->head + st->count) % st->cap] = bb;
  st->count++;
}

static void on_stream(server *s, sstream *st) {
  if (!atomic_load(&s->stopping)) request_stream(s, st->buffered);
  grpc_op ops[2];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_RECV_MESSAGE;
  ops[1].data.recv_message.recv_message = &st->in;
  st->pending++;
  start_batch(st->call, ops, 2, &st->start); /* completes as a read */
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[0].data.recv_close_on_server.cancelled = &st->cancelled;
  st->pending++;
  start_batch(st->call, ops, 1, &st->close);
}

static void on_read(sstream *st, bool ok) {
  uint64_t id = 0;
  int kind = 0;
  if (ok && st->in && !st->client_done && read_in(st->in, true, &id, &kind)) {
    grpc_byte_buffer_destroy(st->in);
    st->in = NULL;
    enqueue(st, reply_of(SC_HEADER + st->s->sz.size[kind][1], true, id, kind));
    post_recv(st);
  } else { /* the client half-closed (or went away, or sent garbage): no more reads */
    if (st->in) grpc_byte_buffer_destroy(st->in);
    st->in = NULL;
    st->client_done = true;
  }
  send_next(st);
}

static void stream_event(sstream *st, int kind, bool ok) {
  st->pending--;
  switch (kind) {
    case T_S_START:
    case T_S_RECV:
      on_read(st, ok);
      break;
    case T_S_SEND:
      grpc_byte_buffer_destroy(st->out);
      st->out = NULL;
      st->sending = false;
      if (!ok) st->client_done = true; /* the call died */
      send_next(st);
      break;
    case T_S_CLOSE:
    case T_S_STATUS:
      break;
  }
  if (st->pending == 0) stream_free(st);
}

/* --- the loop --- */

static void *cq_main(void *arg) {
  server *s = arg;
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) return NULL;
    if (ev.type != GRPC_OP_COMPLETE) continue;
    tag *t = ev.tag;
    switch (t->kind) {
      case T_SHUTDOWN:
        pthread_mutex_lock(&s->mu);
        s->shutdown_seen = true;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        break;
      case T_REQ_UNARY:
        if (ev.success)
          on_unary(s, t->obj);
        else
          ucall_free(t->obj);
        break;
      case T_UNARY_DONE:
        ucall_free(t->obj);
        break;
      case T_REQ_STREAM:
        if (ev.success)
          on_stream(s, t->obj);
        else
          stream_free(t->obj);
        break;
      default:
        stream_event(t->obj, t->kind, ev.success);
        break;
    }
  }
}

int sc_server_main(const char *addr) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL); /* gRPC's threads inherit the mask */
  grpc_init();
  server s;
  memset(&s, 0, sizeof s);
  atomic_init(&s.stopping, false);
  pthread_mutex_init(&s.mu, NULL);
  pthread_cond_init(&s.cv, NULL);
  s.shutdown = (tag){T_SHUTDOWN, NULL};
  sc_step_sizes(&s.sz);
  s.srv = grpc_server_create(NULL, NULL);
  s.cq = grpc_completion_queue_create_for_next(NULL);
  grpc_server_register_completion_queue(s.srv, s.cq, NULL);
  s.method[SC_BEGIN] = grpc_server_register_method(s.srv, SC_METHOD_BEGIN, NULL,
                                                   GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
  s.method[SC_COMPLETE] = grpc_server_register_method(s.srv, SC_METHOD_COMPLETE, NULL,
                                                      GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
  s.method[2] = grpc_server_register_method(s.srv, SC_METHOD_STEPS, NULL, GRPC_SRM_PAYLOAD_NONE, 0);
  s.method[3] =
      grpc_server_register_method(s.srv, SC_METHOD_STEPS_BUFFERED, NULL, GRPC_SRM_PAYLOAD_NONE, 0);
  grpc_server_credentials *cr = grpc_insecure_server_credentials_create();
  int port = grpc_server_add_http2_port(s.srv, addr, cr);
  grpc_server_credentials_release(cr);
  if (port == 0) {
    fprintf(stderr, "stream-cpu server: cannot listen on %s\n", addr);
    return 1;
  }
  grpc_server_start(s.srv);
  for (int i = 0; i < UNARY_REQUESTS; i++) {
    request_unary(&s, SC_BEGIN);
    request_unary(&s, SC_COMPLETE);
  }
  for (int i = 0; i < STREAM_REQUESTS; i++) {
    request_stream(&s, false);
    request_stream(&s, true);
  }
  pthread_t th;
  if (pthread_create(&th, NULL, cq_main, &s) != 0) return 1;
  printf("port %d\n", port);
  fflush(stdout);

  int sig;
  sigwait(&set, &sig);
  atomic_store(&s.stopping, true);
  grpc_server_shutdown_and_notify(s.srv, s.cq, &s.shutdown);
  grpc_server_cancel_all_calls(s.srv);
  pthread_mutex_lock(&s.mu);
  while (!s.shutdown_seen) pthread_cond_wait(&s.cv, &s.mu);
  pthread_mutex_unlock(&s.mu);
  grpc_server_destroy(s.srv);
  grpc_completion_queue_shutdown(s.cq);
  pthread_join(th, NULL);
  grpc_completion_queue_destroy(s.cq);
  grpc_shutdown();
  return 0;
}
