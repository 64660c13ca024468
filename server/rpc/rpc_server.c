/* rpc_server.c — server lifecycle and the completion-queue thread.
 *
 * One completion queue (next-only, never plucked) and one thread draining it. The thread only
 * does non-blocking work: re-post requests, hand arrived calls to the worker pool, answer
 * unknown methods, free calls whose reply batch completed. Everything that waits on Postgres
 * runs on the workers (rpc_workers.c).
 */
#include <errno.h>
#include <grpc/grpc_security.h>
#include <grpc/support/log.h>
#include <limits.h>
#include <netdb.h>
#include <sys/socket.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../metrics/metrics.h"
#include "../util/clock.h"
#include "../util/hostport.h"
#include "../util/log.h"
#include "rpc_internal.h"

#define DEFAULT_WORKERS 8
#define DEFAULT_MAX_RECV (256 * 1024)
/* gRPC's own receive cap: above it the transport answers RESOURCE_EXHAUSTED by itself. Between
 * max_recv_bytes and this, rpc_call.c answers INVALID_ARGUMENT "message too large" (docs/api.md
 * §5). */
#define HARD_MAX_RECV (1024 * 1024)
#define DEFAULT_DEADLINE_MS 2000
/* gRPC core refuses request metadata above this itself, without idem-reason; from
 * RPC_MAX_METADATA_BYTES up to it, rpc_call.c refuses it with one (docs/limits.md) */
#define TRANSPORT_MAX_METADATA_BYTES (64 * 1024)
#define MAX_CONCURRENT_STREAMS 100

/* --- requests --- */

static void post_request(rpc_server *s, int method) {
  rpc_call *c = rpc__call_new(s, method);
  if (!c) {
    log_kv(LOG_ERROR, "out of memory posting a call request", (const char *)NULL);
    return;
  }
  grpc_call_error ce;
  if (method >= 0) {
    ce = grpc_server_request_registered_call(s->server, s->registered[method], &c->call,
                                             &c->deadline_ts, &c->md, &c->payload, s->cq, s->cq,
                                             &c->tag);
  } else {
    ce = grpc_server_request_call(s->server, &c->call, &c->details, &c->md, s->cq, s->cq, &c->tag);
  }
  if (ce != GRPC_CALL_OK) {
    char num[16];
    snprintf(num, sizeof num, "%d", (int)ce);
    log_kv(LOG_ERROR, "cannot request a call", "code", num, (const char *)NULL);
    rpc__call_free(c);
  }
}

/* A call arrived: its time, and a signal to rpc_server_quiesce when it waits. */
static void note_arrival(rpc_server *s) {
  atomic_store(&s->last_call_ms, clock_mono_ms());
  if (!atomic_load(&s->quiescing)) return;
  pthread_mutex_lock(&s->mu);
  pthread_cond_broadcast(&s->arrived);
  pthread_mutex_unlock(&s->mu);
}

/* A registered call arrived: hand it to a worker (or refuse it when they are swamped). */
static void on_registered(rpc_server *s, rpc_call *c) {
  note_arrival(s);
  if (!atomic_load(&s->shutting_down)) post_request(s, c->method);
  c->deadline = rpc__deadline_mono(c->deadline_ts, s->default_deadline_ms);
  c->arrived_us = rpc__mono_us();
  if (rpc__call_try_async(c)) return; /* no worker; the store's thread answers */
  if (!rpc__pool_push(&s->pool, c)) {
    err_t err;
    err_fail(&err, ERR_RESOURCE, ERR_R_OVERLOADED, "server overloaded: too many calls waiting");
    rpc__call_finish(c, &err);
  }
}

/* A call to a method we did not register: UNIMPLEMENTED, answered right here (no store). */
static void on_generic(rpc_server *s, rpc_call *c) {
  note_arrival(s);
  if (!atomic_load(&s->shutting_down)) post_request(s, -1);
  const grpc_slice m = c->details.method;
  int n = (int)GRPC_SLICE_LENGTH(m);
  if (n > 128) n = 128;
  err_t err;
  err_set(&err, ERR_UNIMPLEMENTED, "unknown method %.*s", n, (const char *)GRPC_SLICE_START_PTR(m));
  rpc__call_finish(c, &err);
}

/* --- the cq thread --- */

static void on_event(rpc_server *s, void *tag, int ok) {
  rpc_tag *t = tag;
  switch (t->kind) {
    case RPC_TAG_SHUTDOWN:
      pthread_mutex_lock(&s->mu);
      s->shutdown_notified = true;
      pthread_cond_broadcast(&s->cv);
      pthread_mutex_unlock(&s->mu);
      break;
    case RPC_TAG_BATCH: /* the reply went out (ok) or the call died (!ok): either way, done */
      rpc__call_sent((rpc_call *)t);
      rpc__call_batch_done((rpc_call *)t);
      break;
    case RPC_TAG_CLOSE: /* a call that may wait: its client closed, or went away */
      rpc__call_closed((rpc_call *)((char *)t - offsetof(rpc_call, close_tag)));
      break;
    case RPC_TAG_REQUEST:
      if (ok)
        on_registered(s, (rpc_call *)t);
      else
        rpc__call_free((rpc_call *)t); /* shutdown: the request will never be filled */
      break;
    case RPC_TAG_GENERIC:
      if (ok)
        on_generic(s, (rpc_call *)t);
      else
        rpc__call_free((rpc_call *)t);
      break;
  }
}

/* Drains the cq until it is shut down; in the cq thread, or inline before it ever started. */
static void drain(rpc_server *s) {
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) return;
    if (ev.type == GRPC_OP_COMPLETE) on_event(s, ev.tag, ev.success);
  }
}

static void *cq_main(void *arg) {
  drain(arg);
  return NULL;
}

/* --- start --- */

/* The address clients reach this node at: --listen with the port actually bound (it may say :0);
 * a unix or unix-abstract socket as given. NULL on allocation failure or a malformed address. */
static char *address_with_port(const char *listen, int port) {
  hostport hp;
  char buf[300];
  if (!hostport_parse(listen, 0, &hp) || !hostport_format(&hp, port, buf, sizeof buf)) return NULL;
  return strdup(buf);
}

/* Closes every group's submit store. */
static void close_submit_stores(rpc_server *s) {
  for (size_t i = 0; i < s->n_groups; i++) {
    store_close(s->groups[i].submit_store);
    s->groups[i].submit_store = NULL;
  }
}

static void free_server(rpc_server *s) {
  for (size_t i = 0; i < s->n_groups; i++) free((char *)s->groups[i].g.name);
  free(s->groups);
  free(s->listen);
  free(s->node_id);
  free(s->address);
  pthread_cond_destroy(&s->arrived);
  pthread_cond_destroy(&s->settled);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

/* Tears down a server whose grpc_server was created but never started (no listener bound). */
static void abort_unstarted(rpc_server *s) {
  grpc_server_destroy(s->server);
  grpc_completion_queue_shutdown(s->cq);
  drain(s);
  grpc_completion_queue_destroy(s->cq);
  if (s->pool.workers) rpc__pool_stop(&s->pool);
  close_submit_stores(s);
  free_server(s);
}

/* gRPC core's own log lines go through ours: one line each, in --log-format (a JSON log stays
 * JSON), with gRPC's source position as a field. */
static void grpc_log_line(gpr_log_func_args *a) {
  char where[160];
  const char *file = a->file ? strrchr(a->file, '/') : NULL;
  snprintf(where, sizeof where, "%s:%d", file ? file + 1 : a->file ? a->file : "?", a->line);
  log_level lvl = a->severity == GPR_LOG_SEVERITY_ERROR  ? LOG_ERROR
                  : a->severity == GPR_LOG_SEVERITY_INFO ? LOG_INFO
                                                         : LOG_DEBUG;
  log_kv(lvl, "grpc", "at", where, "detail", a->message, (const char *)NULL);
}

void rpc_init(void) {
  gpr_set_log_function(grpc_log_line);
  grpc_init();
}

/* Why host:port cannot be bound, found by binding it once ourselves (gRPC only says that no
 * address was added): "Address already in use", "Cannot assign requested address", ... */
static const char *bind_failure(const char *listen, char *buf, size_t cap) {
  snprintf(buf, cap, "gRPC could not bind it");
  hostport hp;
  struct sockaddr_storage ss;
  socklen_t len;
  if (!hostport_parse(listen, 0, &hp) || hp.kind != HOSTPORT_TCP) return buf;
  if (!hostport_sockaddr(&hp, &ss, &len, buf, cap)) return buf;
  int fd = socket(ss.ss_family, SOCK_STREAM, 0);
  if (fd >= 0 && bind(fd, (struct sockaddr *)&ss, len) != 0)
    snprintf(buf, cap, "%s", strerror(errno));
  if (fd >= 0) close(fd);
  return buf;
}

void rpc_shutdown(void) {
  grpc_shutdown();
}

/* The groups of cfg (one made of coord, elector and open_store when none is given), copied. */
static bool copy_groups(rpc_server *s, const rpc_config *cfg) {
  rpc_group one = {"default", cfg->coord, cfg->elector, cfg->open_store, cfg->open_store_arg,
                   NULL};
  const rpc_group *g = cfg->n_groups ? cfg->groups : &one;
  size_t n = cfg->n_groups ? cfg->n_groups : 1;
  s->groups = calloc(n, sizeof *s->groups);
  if (!s->groups) return false;
  s->n_groups = n;
  for (size_t i = 0; i < n; i++) {
    s->groups[i].g = g[i];
    s->groups[i].g.name = strdup(g[i].name ? g[i].name : "default");
    if (!s->groups[i].g.name) return false;
  }
  s->coord = s->groups[0].g.coord;
  s->elector = s->groups[0].g.elector;
  s->open_store = s->groups[0].g.open_store;
  s->open_store_arg = s->groups[0].g.open_store_arg;
  return true;
}

/* Whether every group can serve: rules and stores, and a route when there are several. */
static bool config_ok(const rpc_config *cfg) {
  if (!cfg || !cfg->listen) return false;
  if (!cfg->n_groups) return cfg->open_store && cfg->coord;
  if (cfg->n_groups > RPC_GROUPS_MAX || (cfg->n_groups > 1 && !cfg->route)) return false;
  for (size_t i = 0; i < cfg->n_groups; i++)
    if (!cfg->groups[i].open_store || !cfg->groups[i].coord) return false;
  return true;
}

rpc_server *rpc_server_start(const rpc_config *cfg, err_t *err) {
  if (!config_ok(cfg)) {
    err_set(err, ERR_INVALID, "invalid rpc configuration");
    return NULL;
  }
  rpc_server *s = calloc(1, sizeof *s);
  if (!s) {
    err_oom(err);
    return NULL;
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  pthread_cond_init(&s->arrived, NULL);
  pthread_cond_init(&s->settled, NULL);
  atomic_init(&s->quiescing, false);
  atomic_init(&s->shutting_down, false);
  atomic_init(&s->reply_bytes, 0);
  atomic_init(&s->last_call_ms, 0);
  atomic_init(&s->last_unnamed_ms, 0);
  s->shutdown_tag.kind = RPC_TAG_SHUTDOWN;
  s->listen = cfg->listen ? strdup(cfg->listen) : NULL;
  if (cfg->node_id && cfg->node_id[0]) {
    s->node_id = strdup(cfg->node_id);
  } else {
    char host[256] = "unknown";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    s->node_id = strdup(host);
  }
  if (!s->listen || !s->node_id || !copy_groups(s, cfg)) {
    err_oom(err);
    free_server(s);
    return NULL;
  }
  s->route = cfg->route;
  s->route_arg = cfg->route_arg;
  s->slots_hold = cfg->slots_hold;
  s->slotmap_arg = cfg->slotmap_arg;
  s->move_slots = cfg->move_slots;
  s->move_cancel = cfg->move_cancel;
  s->move_progress = cfg->move_progress;
  s->move_arg = cfg->move_arg;
  s->workers = cfg->workers > 0 ? cfg->workers : DEFAULT_WORKERS;
  s->max_recv_bytes = cfg->max_recv_bytes > 0 ? cfg->max_recv_bytes : DEFAULT_MAX_RECV;
  if (s->max_recv_bytes > INT_MAX) s->max_recv_bytes = INT_MAX;
  s->default_deadline_ms =
      cfg->default_deadline_ms > 0 ? cfg->default_deadline_ms : DEFAULT_DEADLINE_MS;
  s->drain_timeout_ms = cfg->drain_timeout_ms > 0 ? cfg->drain_timeout_ms : RPC_DRAIN_TIMEOUT_MS;
  s->started_unix_ms = clock_wall_ms();
  s->schema_version = cfg->schema_version;
  s->schema_newest = cfg->schema_newest;
  s->auth = cfg->auth;
  s->require_tenant = cfg->require_tenant;

  grpc_arg args[] = {
      {.type = GRPC_ARG_INTEGER,
       .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
       .value.integer = s->max_recv_bytes > HARD_MAX_RECV ? (int)s->max_recv_bytes : HARD_MAX_RECV},
      {.type = GRPC_ARG_INTEGER,
       .key = GRPC_ARG_MAX_METADATA_SIZE,
       .value.integer = TRANSPORT_MAX_METADATA_BYTES},
      {.type = GRPC_ARG_INTEGER,
       .key = GRPC_ARG_MAX_CONCURRENT_STREAMS,
       .value.integer = MAX_CONCURRENT_STREAMS},
      /* identity only (docs/api.md §16): gRPC core would inflate a compressed message whole
       * before the handler sees it, and refusing the algorithms here makes gRPC core answer
       * without idem-reason; so core accepts every algorithm but hands the message over still
       * compressed, and rpc_call.c refuses it (UNIMPLEMENTED, with a reason) without reading it */
      {.type = GRPC_ARG_INTEGER,
       .key = GRPC_COMPRESSION_CHANNEL_ENABLED_ALGORITHMS_BITSET,
       .value.integer = (1u << GRPC_COMPRESS_ALGORITHMS_COUNT) - 1},
      {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION, .value.integer = 0},
      /* a second server on the same port must fail to bind, not share it silently */
      {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ALLOW_REUSEPORT, .value.integer = 0},
  };
  grpc_channel_args chargs = {.num_args = sizeof args / sizeof args[0], .args = args};
  s->server = grpc_server_create(&chargs, NULL);
  s->cq = grpc_completion_queue_create_for_next(NULL);
  grpc_server_register_completion_queue(s->server, s->cq, NULL);

  for (size_t i = 0; i < rpc__n_methods; i++) {
    /* metrics label: "Service/Method" (the path after the package), a static string */
    metrics_rpc_name((int)i, strrchr(rpc__methods[i].path, '.') + 1);
    s->registered[i] = grpc_server_register_method(s->server, rpc__methods[i].path, NULL,
                                                   GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
    if (!s->registered[i]) {
      err_set(err, ERR_INTERNAL, "cannot register method %s", rpc__methods[i].path);
      abort_unstarted(s);
      return NULL;
    }
  }

  /* Stores first (they connect lazily, so this cannot block), then the port: once a port is
   * bound the server must go through a full shutdown, so nothing may fail after it. */
  if (rpc__pool_start(&s->pool, s, s->workers, err) != ERR_OK) {
    abort_unstarted(s);
    return NULL;
  }
  for (size_t i = 0; cfg->submit_steps && i < s->n_groups; i++) {
    rpc_group_rt *g = &s->groups[i];
    if (!(g->submit_store = g->g.open_store(g->g.open_store_arg))) {
      err_set(err, ERR_INTERNAL, "cannot open the store for submitted steps of group %s",
              g->g.name);
      abort_unstarted(s);
      return NULL;
    }
  }
  s->submits = cfg->submit_steps;
  grpc_server_credentials *creds = rpc__server_credentials(cfg); /* TLS */
  s->port = grpc_server_add_http2_port(s->server, s->listen, creds);
  grpc_server_credentials_release(creds);
  if (s->port == 0) {
    char why[128];
    err_set(err, ERR_UNAVAILABLE, "cannot listen on %s: %s", s->listen,
            bind_failure(s->listen, why, sizeof why));
    err_hint(err, "another process may hold the port: choose another with --listen (IDEM_LISTEN)");
    abort_unstarted(s);
    return NULL;
  }
  s->address = address_with_port(s->listen, s->port);

  grpc_server_start(s->server);
  for (size_t i = 0; i < rpc__n_methods; i++)
    for (int k = 0; k < RPC_REQUESTS_PER_METHOD; k++) post_request(s, (int)i);
  for (int k = 0; k < RPC_GENERIC_REQUESTS; k++) post_request(s, -1);

  if (pthread_create(&s->cq_thread, NULL, cq_main, s) != 0) {
    err_set(err, ERR_INTERNAL, "cannot start the completion-queue thread");
    rpc_server_stop(s); /* drains inline */
    rpc_server_free(s);
    return NULL;
  }
  s->cq_started = true;
  return s;
}

int rpc_server_port(const rpc_server *s) {
  return s ? s->port : 0;
}

/* --- stop --- */

int64_t rpc_server_quiesce(rpc_server *s, int64_t quiet_ms, int64_t backoff_ms, int64_t max_ms) {
  if (!s || s->stopped) return 0;
  int64_t t0 = clock_mono_ms(), now = t0;
  atomic_store(&s->quiescing, true);
  pthread_mutex_lock(&s->mu);
  /* each arrival (note_arrival) wakes it to recompute when the quiet period ends; otherwise it
   * sleeps until then (or until max_ms) */
  for (;;) {
    int64_t quiet_at = atomic_load(&s->last_call_ms) + quiet_ms, give_up = t0 + max_ms;
    int64_t back_at = atomic_load(&s->last_unnamed_ms) + backoff_ms; /* 0 + b: long past */
    if (atomic_load(&s->last_unnamed_ms) > 0 && back_at > quiet_at) quiet_at = back_at;
    int64_t until = quiet_at < give_up ? quiet_at : give_up;
    if (now >= until) break;
    struct timespec ts = clock_after_us(CLOCK_REALTIME, (until - now) * 1000);
    pthread_cond_timedwait(&s->arrived, &s->mu, &ts);
    now = clock_mono_ms();
  }
  pthread_mutex_unlock(&s->mu);
  atomic_store(&s->quiescing, false);
  return now - t0;
}

bool rpc_server_settle(rpc_server *s, size_t group, int64_t max_ms) {
  if (!s || group >= s->n_groups) return true;
  rpc_group_rt *g = &s->groups[group];
  int64_t give_up = clock_mono_ms() + max_ms;
  atomic_fetch_add(&s->settling, 1); /* before the count is read: the last answer signals */
  pthread_mutex_lock(&s->mu);
  for (;;) {
    int64_t left = give_up - clock_mono_ms();
    if (atomic_load(&g->admitted) <= 0 || left <= 0) break;
    struct timespec ts = clock_after_us(CLOCK_REALTIME, left * 1000);
    pthread_cond_timedwait(&s->settled, &s->mu, &ts);
  }
  bool settled = atomic_load(&g->admitted) <= 0;
  pthread_mutex_unlock(&s->mu);
  atomic_fetch_sub(&s->settling, 1);
  return settled;
}

static bool wait_notified(rpc_server *s, int64_t timeout_ms) {
  struct timespec ts = clock_after_us(CLOCK_REALTIME, timeout_ms * 1000);
  pthread_mutex_lock(&s->mu);
  int rc = 0;
  while (!s->shutdown_notified && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&s->cv, &s->mu, &ts);
  bool done = s->shutdown_notified;
  pthread_mutex_unlock(&s->mu);
  return done;
}

void rpc_server_stop(rpc_server *s) {
  if (!s || s->stopped) return;
  s->stopped = true;
  atomic_store(&s->shutting_down, true);
  /* GOAWAY to every connection and no new one (gRPC core's graceful shutdown: a GOAWAY, a ping,
   * then the final GOAWAY naming the last call it took). The tag fires only once every call in
   * flight has been answered AND every connection is closed: gRPC core publishes it when its
   * list of channels is empty (server.cc, Server::MaybeFinishShutdown). docs/internals.md, "The
   * drain", says what closes a connection and when. */
  int64_t t0 = clock_mono_ms();
  grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
  if (s->cq_started) {
    if (!wait_notified(s, s->drain_timeout_ms)) {
      char ms[24];
      snprintf(ms, sizeof ms, "%lld", (long long)s->drain_timeout_ms);
      log_kv(LOG_WARN,
             "drain timeout: calls still in flight or clients still connected, cancelling the "
             "calls and closing the connections",
             "drain_timeout_ms", ms, (const char *)NULL);
      grpc_server_cancel_all_calls(s->server);
      wait_notified(s, INT32_MAX);
    } else {
      char ms[24];
      snprintf(ms, sizeof ms, "%lld", (long long)(clock_mono_ms() - t0));
      log_kv(LOG_INFO, "drained: every call answered, every connection closed", "drain_ms", ms,
             (const char *)NULL);
    }
  } else {
    while (!s->shutdown_notified) {
      grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
      if (ev.type == GRPC_OP_COMPLETE) on_event(s, ev.tag, ev.success);
    }
  }
  /* calls handed to the store end once it answers (by their store deadline at the
   * latest), even those cancelled above; their reply batches need the server and the cq */
  pthread_mutex_lock(&s->mu);
  while (s->async_pending > 0) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
  grpc_server_destroy(s->server);
  s->server = NULL;
  /* workers finish whatever is queued (nothing, once the tag fired), then close their stores */
  rpc__pool_stop(&s->pool);
  close_submit_stores(s);
  grpc_completion_queue_shutdown(s->cq);
  if (s->cq_started)
    pthread_join(s->cq_thread, NULL);
  else
    drain(s);
  grpc_completion_queue_destroy(s->cq);
  s->cq = NULL;
}

void rpc_server_free(rpc_server *s) {
  if (!s) return;
  if (!s->stopped) rpc_server_stop(s);
  free_server(s);
}
