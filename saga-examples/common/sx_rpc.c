/* sx_rpc.c — see sx_rpc.h. */
#include "sx_rpc.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_METHODS 8
#define DRAIN_GRACE_MS 5000

typedef enum { K_REQUEST, K_BATCH } kind_t;

typedef struct server server;

typedef struct scall {
  kind_t kind;
  size_t method;
  grpc_call *call;
  gpr_timespec deadline;
  grpc_metadata_array md;
  grpc_byte_buffer *payload;
  grpc_byte_buffer *reply;
  int cancelled;
} scall;

typedef struct worker {
  server *srv;
  grpc_completion_queue *cq;
  pthread_t thread;
} worker;

struct server {
  const sx_server_config *cfg;
  grpc_server *gs;
  void *registered[MAX_METHODS];
  worker *workers;
  int n_workers;
  atomic_bool stopping;
};

void sx_reply_set(sx_reply *r, const ProtobufCMessage *msg) {
  size_t n = protobuf_c_message_get_packed_size(msg);
  grpc_slice s = grpc_slice_malloc(n);
  protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(s));
  if (r->bb) grpc_byte_buffer_destroy(r->bb);
  r->bb = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
}

static void call_free(scall *c) {
  if (c->payload) grpc_byte_buffer_destroy(c->payload);
  if (c->reply) grpc_byte_buffer_destroy(c->reply);
  grpc_metadata_array_destroy(&c->md);
  if (c->call) grpc_call_unref(c->call);
  free(c);
}

static void post(worker *w, size_t method) {
  if (atomic_load(&w->srv->stopping)) return;
  scall *c = calloc(1, sizeof *c);
  if (!c) return;
  c->kind = K_REQUEST;
  c->method = method;
  grpc_metadata_array_init(&c->md);
  if (grpc_server_request_registered_call(w->srv->gs, w->srv->registered[method], &c->call,
                                          &c->deadline, &c->md, &c->payload, w->cq, w->cq,
                                          c) != GRPC_CALL_OK)
    call_free(c);
}

static ProtobufCMessage *decode(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *d) {
  if (!bb) return NULL;
  grpc_byte_buffer_reader rd;
  if (!grpc_byte_buffer_reader_init(&rd, bb)) return NULL;
  grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
  grpc_byte_buffer_reader_destroy(&rd);
  ProtobufCMessage *m =
      protobuf_c_message_unpack(d, NULL, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
  grpc_slice_unref(all);
  return m;
}

/* Runs the handler and starts the one reply batch (the call is freed when it completes). */
static void handle(worker *w, void *tls, scall *c) {
  const sx_method *m = &w->srv->cfg->methods[c->method];
  sx_reply r = {0};
  int status;
  ProtobufCMessage *in = decode(c->payload, m->in);
  if (!in) {
    status = GRPC_STATUS_INVALID_ARGUMENT;
    snprintf(r.msg, sizeof r.msg, "malformed request");
  } else {
    status = m->fn(w->srv->cfg->app, tls, in, &r);
    protobuf_c_message_free_unpacked(in, NULL);
    if (status == GRPC_STATUS_OK && !r.bb) {
      status = GRPC_STATUS_INTERNAL;
      snprintf(r.msg, sizeof r.msg, "no reply");
    }
  }
  if (status != GRPC_STATUS_OK && r.bb) {
    grpc_byte_buffer_destroy(r.bb);
    r.bb = NULL;
  }
  c->reply = r.bb;
  grpc_slice details = grpc_slice_from_copied_string(r.msg);
  grpc_op ops[4];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  if (c->reply) {
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = c->reply;
  }
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = (grpc_status_code)status;
  ops[n++].data.send_status_from_server.status_details = &details;
  ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
  c->kind = K_BATCH;
  grpc_call_error ce = grpc_call_start_batch(c->call, ops, n, c, NULL);
  grpc_slice_unref(details);
  if (ce != GRPC_CALL_OK) call_free(c);
}

static void *worker_main(void *arg) {
  worker *w = arg;
  const sx_server_config *cfg = w->srv->cfg;
  void *tls = cfg->thread_init ? cfg->thread_init(cfg->app) : NULL;
  for (size_t m = 0; m < cfg->n_methods; m++) post(w, m);
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
    if (ev.type != GRPC_OP_COMPLETE) continue;
    scall *c = ev.tag;
    if (c->kind == K_BATCH || !ev.success) {
      call_free(c);
      continue;
    }
    post(w, c->method); /* keep one request per method outstanding on this queue */
    handle(w, tls, c);
  }
  if (cfg->thread_fini) cfg->thread_fini(tls);
  return NULL;
}

int sx_serve(const sx_server_config *cfg) {
  if (cfg->n_methods > MAX_METHODS) return 1;
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* every thread created from now on inherits it */

  grpc_init();
  server s = {.cfg = cfg, .n_workers = cfg->threads > 0 ? cfg->threads : 8};
  atomic_init(&s.stopping, false);
  s.gs = grpc_server_create(NULL, NULL);
  s.workers = calloc((size_t)s.n_workers, sizeof *s.workers);
  grpc_completion_queue *shutdown_cq = grpc_completion_queue_create_for_next(NULL);
  grpc_server_register_completion_queue(s.gs, shutdown_cq, NULL);
  for (int i = 0; i < s.n_workers; i++) {
    s.workers[i].srv = &s;
    s.workers[i].cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(s.gs, s.workers[i].cq, NULL);
  }
  for (size_t m = 0; m < cfg->n_methods; m++)
    s.registered[m] = grpc_server_register_method(s.gs, cfg->methods[m].path, NULL,
                                                  GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
  grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
  int port = grpc_server_add_http2_port(s.gs, cfg->listen, creds);
  grpc_server_credentials_release(creds);
  int rc = 0;
  if (port == 0) {
    fprintf(stderr, "cannot listen on %s\n", cfg->listen);
    rc = 1;
    atomic_store(&s.stopping, true);
  }
  grpc_server_start(s.gs);
  if (rc == 0) {
    for (int i = 0; i < s.n_workers; i++)
      pthread_create(&s.workers[i].thread, NULL, worker_main, &s.workers[i]);
    printf("listening on %s\n", cfg->listen);
    fflush(stdout);
    int sig = 0;
    sigwait(&sigs, &sig);
    atomic_store(&s.stopping, true);
  }

  /* drain: stop accepting, let calls in flight finish (bounded), then stop the queues */
  int tag = 0;
  grpc_server_shutdown_and_notify(s.gs, shutdown_cq, &tag);
  gpr_timespec grace = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                    gpr_time_from_millis(DRAIN_GRACE_MS, GPR_TIMESPAN));
  grpc_event ev = grpc_completion_queue_next(shutdown_cq, grace, NULL);
  if (ev.type != GRPC_OP_COMPLETE) {
    grpc_server_cancel_all_calls(s.gs);
    grpc_completion_queue_next(shutdown_cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  }
  grpc_server_destroy(s.gs);
  for (int i = 0; i < s.n_workers; i++) grpc_completion_queue_shutdown(s.workers[i].cq);
  if (rc == 0)
    for (int i = 0; i < s.n_workers; i++) pthread_join(s.workers[i].thread, NULL);
  for (int i = 0; i < s.n_workers; i++) {
    if (rc != 0) /* never started: drain inline */
      while (grpc_completion_queue_next(s.workers[i].cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
                 .type != GRPC_QUEUE_SHUTDOWN) {
      }
    grpc_completion_queue_destroy(s.workers[i].cq);
  }
  grpc_completion_queue_shutdown(shutdown_cq);
  while (grpc_completion_queue_next(shutdown_cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(shutdown_cq);
  free(s.workers);
  grpc_shutdown();
  return rc;
}

/* --- client ------------------------------------------------------------------------------ */

grpc_channel *sx_channel(const char *addr) {
  grpc_init();
  grpc_arg args[] = {
      {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, .value.integer = 50},
      {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, .value.integer = 50},
      {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, .value.integer = 250},
  };
  grpc_channel_args ca = {.num_args = sizeof args / sizeof args[0], .args = args};
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  grpc_channel *ch = grpc_channel_create(addr, creds, &ca);
  grpc_channel_credentials_release(creds);
  return ch;
}

void sx_channel_close(grpc_channel *ch) {
  if (!ch) return;
  grpc_channel_destroy(ch);
  grpc_shutdown();
}

int sx_call(grpc_channel *ch, const char *path, const ProtobufCMessage *req,
            const ProtobufCMessageDescriptor *out_desc, int64_t timeout_ms,
            ProtobufCMessage **out, char *msg, size_t msg_len) {
  *out = NULL;
  if (msg && msg_len) msg[0] = '\0';
  size_t len = protobuf_c_message_get_packed_size(req);
  grpc_slice payload = grpc_slice_malloc(len);
  protobuf_c_message_pack(req, GRPC_SLICE_START_PTR(payload));
  grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&payload, 1);
  grpc_slice_unref(payload);

  grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
  gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                       gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
  grpc_slice method = grpc_slice_from_static_string(path);
  grpc_call *call =
      grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL, deadline, NULL);
  grpc_metadata_array init_md, trail_md;
  grpc_metadata_array_init(&init_md);
  grpc_metadata_array_init(&trail_md);
  grpc_byte_buffer *recv = NULL;
  grpc_status_code status = GRPC_STATUS_UNKNOWN;
  grpc_slice details = grpc_empty_slice();
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &init_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &recv;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &trail_md;
  ops[5].data.recv_status_on_client.status = &status;
  ops[5].data.recv_status_on_client.status_details = &details;
  int tag;
  int rc;
  if (grpc_call_start_batch(call, ops, 6, &tag, NULL) != GRPC_CALL_OK ||
      grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
          GRPC_OP_COMPLETE) {
    rc = GRPC_STATUS_INTERNAL;
    if (msg && msg_len) snprintf(msg, msg_len, "cannot start the call");
  } else if (status != GRPC_STATUS_OK) {
    rc = (int)status;
    if (msg && msg_len) {
      size_t n = GRPC_SLICE_LENGTH(details);
      if (n >= msg_len) n = msg_len - 1;
      memcpy(msg, GRPC_SLICE_START_PTR(details), n);
      msg[n] = '\0';
    }
  } else if (!(*out = decode(recv, out_desc))) {
    rc = GRPC_STATUS_INTERNAL;
    if (msg && msg_len) snprintf(msg, msg_len, "cannot decode the reply");
  } else {
    rc = GRPC_STATUS_OK;
  }
  grpc_slice_unref(details);
  grpc_metadata_array_destroy(&init_md);
  grpc_metadata_array_destroy(&trail_md);
  if (recv) grpc_byte_buffer_destroy(recv);
  grpc_byte_buffer_destroy(send);
  grpc_call_unref(call);
  grpc_completion_queue_shutdown(cq);
  grpc_completion_queue_destroy(cq);
  return rc;
}
