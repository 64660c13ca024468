/* client.c — the load side of bench/stream-cpu: one thread, one completion queue, one channel
 * (as idem-bench's async driver, bench/bench_async.c, with --channels 1).
 *
 *   stream-cpu client --addr HOST:PORT --server-pid PID [--seconds S] [--warmup W]
 *                     [--inflight 1,16,64] [--modes unary,stream,buffered]
 *
 * For each in-flight level and each mode (a level's modes back to back): W seconds of warm-up,
 * then a window of S seconds in which it counts the answers and takes the CPU (user + system) of
 * itself (getrusage RUSAGE_SELF) and of the server (/proc/PID/stat), then lets what is in flight
 * finish. Each slot alternates a BeginStep and a CompleteStep of the sizes sc_step_sizes gives,
 * so two messages are a pair.
 * - unary: N slots, each one unary call in flight, a new call per message (10 s deadline and the
 *   idem-tenant header, as libidem sends them)
 * - stream: one Steps stream (the idem-tenant header once), N slots each with one message in
 *   flight; answers are matched to slots by id; one send in flight at a time (gRPC's rule), the
 *   others queued
 * - buffered: the same on StepsBuffered: a send with more queued behind it carries
 *   GRPC_WRITE_BUFFER_HINT, on both sides (gRPC may then write several messages at once)
 * Prints one row per point: mode, in flight, messages/s, CPU µs per message of the client, of the
 * server, and of both. A message is one request and its answer. */
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "stream_cpu.h"

enum { T_UNARY, T_INIT, T_RECV, T_SEND, T_HALF_CLOSE, T_STATUS };

typedef struct tag {
  int kind;
  void *obj;
} tag;

typedef struct slot {
  tag t;
  int idx;
  int kind; /* sc_kind of the message in flight */
  bool busy;
  uint64_t id; /* stream: the id of the message in flight */
  /* unary */
  grpc_call *call;
  grpc_metadata_array init_md, trail_md;
  grpc_byte_buffer *send, *recv;
  grpc_status_code status;
  grpc_slice details;
} slot;

typedef struct point {
  /* what the window measured */
  double t0, t1;
  long n0, n1;
  double cpu_c0, cpu_c1, cpu_s0, cpu_s1; /* µs */
} point;

typedef struct client {
  grpc_channel *ch;
  grpc_completion_queue *cq;
  grpc_metadata tenant;
  sc_sizes sz;
  int pid; /* the server's */
  double seconds, warmup;
  int n; /* in flight */
  slot *slots;
  long done; /* answers, all phases */
  int phase; /* 0 warm-up, 1 window, 2 draining */
  double t_start;
  point pt;
  int errors;
  /* the stream */
  grpc_call *call;
  tag t_init, t_recv, t_send, t_half, t_status;
  grpc_metadata_array s_init_md, s_trail_md;
  grpc_status_code s_status;
  grpc_slice s_details;
  grpc_byte_buffer *in, *out;
  grpc_byte_buffer **queue;
  size_t head, count;
  bool buffered; /* the stream is StepsBuffered */
  bool sending, half_closed;
  int pending; /* batches in flight */
} client;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double self_cpu_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec +
         ru.ru_stime.tv_usec;
}

/* utime + stime of pid from /proc, in µs (clock-tick resolution); -1 when unreadable. */
static double proc_cpu_us(int pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* the command may hold spaces */
  if (!p) return -1;
  unsigned long ut = 0, st = 0;
  /* after ") ": state(3) ... utime is field 14, stime 15 */
  if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
    return -1;
  return (double)(ut + st) * 1e6 / (double)sysconf(_SC_CLK_TCK);
}

static grpc_byte_buffer *message(size_t n, bool stream, uint64_t id, int kind) {
  grpc_slice sl = grpc_slice_malloc(n);
  uint8_t *p = GRPC_SLICE_START_PTR(sl);
  memset(p, 0xa5, n);
  if (stream) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(id >> (8 * i));
    p[8] = (uint8_t)kind;
  }
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sl, 1);
  grpc_slice_unref(sl);
  return bb;
}

/* Reads bb whole: its length, and the stream's header. */
static size_t read_msg(grpc_byte_buffer *bb, uint64_t *id, int *kind) {
  grpc_byte_buffer_reader r;
  if (!grpc_byte_buffer_reader_init(&r, bb)) return 0;
  grpc_slice sl = grpc_byte_buffer_reader_readall(&r);
  grpc_byte_buffer_reader_destroy(&r);
  size_t n = GRPC_SLICE_LENGTH(sl);
  const uint8_t *p = GRPC_SLICE_START_PTR(sl);
  if (id && n >= SC_HEADER) {
    *id = 0;
    for (int i = 0; i < 8; i++) *id |= (uint64_t)p[i] << (8 * i);
    *kind = p[8];
  }
  grpc_slice_unref(sl);
  return n;
}

static void start_batch(grpc_call *call, const grpc_op *ops, size_t n, tag *t) {
  grpc_call_error ce = grpc_call_start_batch(call, ops, n, t, NULL);
  if (ce != GRPC_CALL_OK) {
    fprintf(stderr, "stream-cpu client: grpc_call_start_batch: %d\n", (int)ce);
    abort(); /* a bug in this bench */
  }
}

/* One answer arrived: counts it, opens and closes the window. False when the slot stops. */
static bool answered(client *c) {
  c->done++;
  double t = now_s();
  if (c->phase == 0 && t >= c->t_start + c->warmup) {
    c->phase = 1;
    c->pt.t0 = t;
    c->pt.n0 = c->done;
    c->pt.cpu_c0 = self_cpu_us();
    c->pt.cpu_s0 = proc_cpu_us(c->pid);
  } else if (c->phase == 1 && t >= c->pt.t0 + c->seconds) {
    c->phase = 2;
    c->pt.t1 = t;
    c->pt.n1 = c->done;
    c->pt.cpu_c1 = self_cpu_us();
    c->pt.cpu_s1 = proc_cpu_us(c->pid);
  }
  return c->phase < 2;
}

/* --- unary --- */

static void unary_start(client *c, slot *s) {
  gpr_timespec dl =
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_seconds(10, GPR_TIMESPAN));
  grpc_slice m =
      grpc_slice_from_static_string(s->kind == SC_BEGIN ? SC_METHOD_BEGIN : SC_METHOD_COMPLETE);
  s->call =
      grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq, m, NULL, dl, NULL);
  grpc_slice_unref(m);
  grpc_metadata_array_init(&s->init_md);
  grpc_metadata_array_init(&s->trail_md);
  s->send = message(c->sz.size[s->kind][0], false, 0, 0);
  s->recv = NULL;
  s->details = grpc_empty_slice();
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].data.send_initial_metadata.count = 1;
  ops[0].data.send_initial_metadata.metadata = &c->tenant;
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
  s->busy = true;
  start_batch(s->call, ops, 6, &s->t);
}

static void unary_done(client *c, slot *s, bool ok) {
  size_t want = c->sz.size[s->kind][1];
  if (!ok || s->status != GRPC_STATUS_OK || !s->recv || read_msg(s->recv, NULL, NULL) != want)
    c->errors++;
  grpc_metadata_array_destroy(&s->init_md);
  grpc_metadata_array_destroy(&s->trail_md);
  grpc_byte_buffer_destroy(s->send);
  if (s->recv) grpc_byte_buffer_destroy(s->recv);
  grpc_slice_unref(s->details);
  grpc_call_unref(s->call);
  s->call = NULL;
  s->busy = false;
  if (answered(c)) {
    s->kind ^= 1;
    unary_start(c, s);
  }
}

/* --- the stream --- */

static void stream_send_next(client *c) {
  if (c->sending || c->count == 0) return;
  c->out = c->queue[c->head];
  c->head = (c->head + 1) % (size_t)c->n;
  c->count--;
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_SEND_MESSAGE;
  op.data.send_message.send_message = c->out;
  if (c->buffered && c->count > 0) op.flags = GRPC_WRITE_BUFFER_HINT;
  c->sending = true;
  c->pending++;
  start_batch(c->call, &op, 1, &c->t_send);
}

static void stream_put(client *c, slot *s) {
  s->id += (uint64_t)c->n; /* id % n is the slot */
  s->busy = true;
  c->queue[(c->head + c->count) % (size_t)c->n] =
      message(SC_HEADER + c->sz.size[s->kind][0], true, s->id, s->kind);
  c->count++;
  stream_send_next(c);
}

static void stream_post_recv(client *c) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &c->in;
  c->pending++;
  start_batch(c->call, &op, 1, &c->t_recv);
}

/* Half-closes once the window is over and nothing is in flight or queued. */
static void stream_maybe_close(client *c) {
  if (c->phase < 2 || c->half_closed || c->sending || c->count > 0) return;
  for (int i = 0; i < c->n; i++)
    if (c->slots[i].busy) return;
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  c->half_closed = true;
  c->pending++;
  start_batch(c->call, &op, 1, &c->t_half);
}

static void stream_event(client *c, int kind, bool ok) {
  c->pending--;
  if (kind == T_SEND) {
    grpc_byte_buffer_destroy(c->out);
    c->out = NULL;
    c->sending = false;
    if (!ok) c->errors++;
    stream_send_next(c);
  } else if (kind == T_RECV) {
    if (ok && c->in) {
      uint64_t id = 0;
      int k = -1;
      size_t n = read_msg(c->in, &id, &k);
      grpc_byte_buffer_destroy(c->in);
      c->in = NULL;
      slot *s = &c->slots[id % (uint64_t)c->n];
      if (!s->busy || s->id != id || k != s->kind || n != SC_HEADER + c->sz.size[k][1]) {
        c->errors++;
      } else {
        s->busy = false;
        if (answered(c)) {
          s->kind ^= 1;
          stream_put(c, s);
        }
      }
      stream_post_recv(c);
    } else if (!c->half_closed) {
      c->errors++; /* the server ended the stream early */
    }
  } else if (kind == T_STATUS) {
    if (c->s_status != GRPC_STATUS_OK) c->errors++;
  }
  stream_maybe_close(c);
}

static void stream_open(client *c) {
  grpc_slice m =
      grpc_slice_from_static_string(c->buffered ? SC_METHOD_STEPS_BUFFERED : SC_METHOD_STEPS);
  c->call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq, m, NULL,
                                     gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  grpc_slice_unref(m);
  grpc_metadata_array_init(&c->s_init_md);
  grpc_metadata_array_init(&c->s_trail_md);
  c->s_details = grpc_empty_slice();
  c->t_init = (tag){T_INIT, NULL};
  c->t_recv = (tag){T_RECV, NULL};
  c->t_send = (tag){T_SEND, NULL};
  c->t_half = (tag){T_HALF_CLOSE, NULL};
  c->t_status = (tag){T_STATUS, NULL};
  grpc_op ops[2];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].data.send_initial_metadata.count = 1;
  ops[0].data.send_initial_metadata.metadata = &c->tenant;
  ops[1].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[1].data.recv_initial_metadata.recv_initial_metadata = &c->s_init_md;
  c->pending++;
  start_batch(c->call, ops, 2, &c->t_init);
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[0].data.recv_status_on_client.trailing_metadata = &c->s_trail_md;
  ops[0].data.recv_status_on_client.status = &c->s_status;
  ops[0].data.recv_status_on_client.status_details = &c->s_details;
  c->pending++;
  start_batch(c->call, ops, 1, &c->t_status);
  stream_post_recv(c);
}

static void stream_end(client *c) {
  grpc_metadata_array_destroy(&c->s_init_md);
  grpc_metadata_array_destroy(&c->s_trail_md);
  grpc_slice_unref(c->s_details);
  grpc_call_unref(c->call);
  c->call = NULL;
}

/* --- one point --- */

static int busy_slots(const client *c) {
  int b = 0;
  for (int i = 0; i < c->n; i++) b += c->slots[i].busy;
  return b;
}

/* Runs one mode at n in flight; fills c->pt. */
static void run_point(client *c, bool stream, bool buffered, int n) {
  c->n = n;
  c->buffered = buffered;
  c->slots = calloc((size_t)n, sizeof *c->slots);
  c->queue = calloc((size_t)n, sizeof *c->queue);
  if (!c->slots || !c->queue) abort();
  c->head = c->count = 0;
  c->sending = c->half_closed = false;
  c->pending = 0;
  c->phase = 0;
  c->done = 0;
  memset(&c->pt, 0, sizeof c->pt);
  c->t_start = now_s();
  if (stream) stream_open(c);
  for (int i = 0; i < n; i++) {
    slot *s = &c->slots[i];
    s->idx = i;
    s->t = (tag){T_UNARY, s};
    s->kind = SC_BEGIN;
    s->id = (uint64_t)i;
    if (stream) {
      s->id -= (uint64_t)n; /* stream_put adds n: the first id is i (wraps below 0, harmless) */
      stream_put(c, s);
    } else {
      unary_start(c, s);
    }
  }
  for (;;) {
    if (stream ? c->pending == 0 : (c->phase == 2 && busy_slots(c) == 0)) break;
    grpc_event ev = grpc_completion_queue_next(
        c->cq, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(200, GPR_TIMESPAN)),
        NULL);
    if (ev.type == GRPC_QUEUE_TIMEOUT) {
      if (now_s() > c->t_start + c->warmup + c->seconds + 30) {
        fprintf(stderr, "stream-cpu client: stuck (%s, %d in flight)\n",
                stream ? "stream" : "unary", n);
        exit(1);
      }
      continue;
    }
    if (ev.type != GRPC_OP_COMPLETE) continue;
    tag *t = ev.tag;
    if (t->kind == T_UNARY)
      unary_done(c, t->obj, ev.success);
    else
      stream_event(c, t->kind, ev.success);
  }
  if (stream) stream_end(c);
  free(c->slots);
  free(c->queue);
  c->slots = NULL;
  c->queue = NULL;
}

int sc_client_main(int argc, char **argv) {
  const char *addr = NULL, *inflight = "1,16,64", *modes = "unary,stream";
  client c;
  memset(&c, 0, sizeof c);
  c.seconds = 4;
  c.warmup = 1;
  static const struct option opts[] = {{"addr", required_argument, 0, 'a'},
                                       {"server-pid", required_argument, 0, 'p'},
                                       {"seconds", required_argument, 0, 's'},
                                       {"warmup", required_argument, 0, 'w'},
                                       {"inflight", required_argument, 0, 'n'},
                                       {"modes", required_argument, 0, 'm'},
                                       {0, 0, 0, 0}};
  int o;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
      case 'a':
        addr = optarg;
        break;
      case 'p':
        c.pid = atoi(optarg);
        break;
      case 's':
        c.seconds = atof(optarg);
        break;
      case 'w':
        c.warmup = atof(optarg);
        break;
      case 'n':
        inflight = optarg;
        break;
      case 'm':
        modes = optarg;
        break;
      default:
        return 2;
    }
  }
  if (!addr || c.pid <= 0 || !(c.seconds > 0) || c.warmup < 0 || proc_cpu_us(c.pid) < 0) {
    fprintf(stderr,
            "stream-cpu client: --addr HOST:PORT --server-pid PID (a live process) "
            "[--seconds S > 0] [--warmup W >= 0] [--inflight 1,16,64] [--modes "
            "unary,stream,buffered]\n");
    return 2;
  }
  grpc_init();
  sc_step_sizes(&c.sz);
  c.cq = grpc_completion_queue_create_for_next(NULL);
  grpc_channel_credentials *cr = grpc_insecure_credentials_create();
  c.ch = grpc_channel_create(addr, cr, NULL);
  grpc_channel_credentials_release(cr);
  c.tenant.key = grpc_slice_from_static_string("idem-tenant");
  c.tenant.value = grpc_slice_from_static_string("bench");
  printf(
      "sizes (bytes): BeginStep request %zu, response %zu; CompleteStep request %zu, response %zu;"
      " stream messages +%d (id, kind)\n",
      c.sz.size[SC_BEGIN][0], c.sz.size[SC_BEGIN][1], c.sz.size[SC_COMPLETE][0],
      c.sz.size[SC_COMPLETE][1], SC_HEADER);
  printf("%-8s %9s %11s %10s %10s %10s\n", "mode", "in-flight", "msgs/s", "client us", "server us",
         "both us");
  int rc = 0;
  char nbuf[64];
  snprintf(nbuf, sizeof nbuf, "%s", inflight);
  char *save_n = NULL;
  /* the modes of one level back to back, so that a change in the machine's load weighs on a
   * level's modes alike */
  for (char *tok = strtok_r(nbuf, ",", &save_n); tok; tok = strtok_r(NULL, ",", &save_n)) {
    int n = atoi(tok);
    if (n < 1 || n > 4096) {
      fprintf(stderr, "stream-cpu client: --inflight: 1-4096 each, not %s\n", tok);
      return 2;
    }
    char mbuf[64];
    snprintf(mbuf, sizeof mbuf, "%s", modes);
    char *save_m = NULL;
    for (char *mode = strtok_r(mbuf, ",", &save_m); mode; mode = strtok_r(NULL, ",", &save_m)) {
      bool buffered = strcmp(mode, "buffered") == 0,
           stream = buffered || strcmp(mode, "stream") == 0;
      if (!stream && strcmp(mode, "unary") != 0) {
        fprintf(stderr, "stream-cpu client: --modes: unary, stream or buffered, not %s\n", mode);
        return 2;
      }
      c.errors = 0;
      run_point(&c, stream, buffered, n);
      point *p = &c.pt;
      double msgs = (double)(p->n1 - p->n0);
      if (msgs <= 0 || c.errors > 0 || p->cpu_s0 < 0 || p->cpu_s1 < 0) {
        fprintf(stderr, "stream-cpu client: %s at %d: %.0f answers, %d errors\n", mode, n, msgs,
                c.errors);
        rc = 1;
        continue;
      }
      double cu = (p->cpu_c1 - p->cpu_c0) / msgs, su = (p->cpu_s1 - p->cpu_s0) / msgs;
      printf("%-8s %9d %11.0f %10.2f %10.2f %10.2f\n", mode, n, msgs / (p->t1 - p->t0), cu, su,
             cu + su);
      fflush(stdout);
    }
  }
  grpc_channel_destroy(c.ch);
  grpc_completion_queue_shutdown(c.cq);
  while (grpc_completion_queue_next(c.cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(c.cq);
  grpc_shutdown();
  return rc;
}
