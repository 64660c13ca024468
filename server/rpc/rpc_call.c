/* rpc_call.c — per-call state: allocation, deadline, tenant, decoding, the reply batch, and
 * the early close batch of a call that may wait. See rpc_internal.h for the life of a call. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "../metrics/metrics.h"
#include "../util/clock.h"
#include "../util/log.h"
#include "../util/traceparent.h"
#include "../validate/validate.h"
#include "rpc_internal.h"

rpc_call *rpc__call_new(rpc_server *srv, int method) {
  rpc_call *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->tag.kind = method >= 0 ? RPC_TAG_REQUEST : RPC_TAG_GENERIC;
  c->srv = srv;
  c->method = method;
  c->close_tag.kind = RPC_TAG_CLOSE;
  atomic_init(&c->batches, 1);
  grpc_metadata_array_init(&c->md);
  grpc_call_details_init(&c->details);
  return c;
}

/* Drops the reply (if any) and its share of the server's reply buffer. */
static void reply_drop(rpc_call *c) {
  if (c->reply) grpc_byte_buffer_destroy(c->reply);
  c->reply = NULL;
  atomic_fetch_sub(&c->srv->reply_bytes, c->reply_bytes);
  c->reply_bytes = 0;
}

void rpc__call_free(rpc_call *c) {
  if (!c) return;
  if (c->payload) grpc_byte_buffer_destroy(c->payload);
  reply_drop(c);
  for (size_t i = 0; i < c->n_trailing; i++) {
    grpc_slice_unref(c->trailing[i].key);
    grpc_slice_unref(c->trailing[i].value);
  }
  grpc_metadata_array_destroy(&c->md);
  grpc_call_details_destroy(&c->details);
  if (c->call) grpc_call_unref(c->call);
  free(c);
}

void rpc__call_batch_done(rpc_call *c) {
  if (atomic_fetch_sub(&c->batches, 1) == 1) rpc__call_free(c);
}

void rpc__call_sent(rpc_call *c) {
  if (c->staged && c->replied_us)
    metrics_stage_observe(c->method, METRICS_STAGE_SEND, rpc__mono_us() - c->replied_us);
}

bool rpc__call_watch_close(rpc_call *c) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  op.data.recv_close_on_server.cancelled = &c->cancelled;
  atomic_store(&c->batches, 2);
  c->close_early = true;
  if (grpc_call_start_batch(c->call, &op, 1, &c->close_tag, NULL) == GRPC_CALL_OK) return true;
  c->close_early = false;
  atomic_store(&c->batches, 1);
  return false;
}

void rpc__call_closed(rpc_call *c) {
  /* cancelled: the client went away (or the server cancelled the call) before the status
   * went out; a parked wait is answered at once, freeing its place (c lives on until the reply
   * batch completes too) */
  const coord_ctx *coord = c->srv->groups[c->group].g.coord;
  if (c->cancelled && coord) coord_waiters_cancel(coord->waiters, &c->cell);
  if (c->cancelled && c->on_cancel) c->on_cancel(c); /* a kept call: answered now, if still kept */
  rpc__call_batch_done(c);
}

/* --- deadline --- */

#define DEADLINE_MAX_MS (24LL * 3600 * 1000) /* longer client deadlines are clamped to a day */

int64_t rpc__deadline_mono(gpr_timespec dl, int64_t default_ms) {
  int64_t now_mono = clock_mono_ms();
  if (dl.tv_sec == INT64_MAX || dl.clock_type == GPR_TIMESPAN) return now_mono + default_ms;
  gpr_timespec rem = gpr_time_sub(dl, gpr_now(dl.clock_type));
  int64_t ms;
  if (rem.tv_sec > DEADLINE_MAX_MS / 1000)
    ms = DEADLINE_MAX_MS;
  else if (rem.tv_sec < -DEADLINE_MAX_MS / 1000)
    ms = -1;
  else
    ms = (int64_t)rem.tv_sec * 1000 + rem.tv_nsec / 1000000;
  return now_mono + ms;
}

/* --- tenant --- */

/* HTTP/2 header names are lower case (RFC 9113 §8.2.1); gRPC core 1.51 passes others through,
 * and an `IDEM-TENANT` would then be ignored: the call would run as tenant "default". */
static err_code metadata_names_lower(const grpc_metadata_array *md, err_t *err) {
  for (size_t i = 0; i < md->count; i++) {
    const grpc_slice k = md->metadata[i].key;
    const uint8_t *p = GRPC_SLICE_START_PTR(k);
    size_t n = GRPC_SLICE_LENGTH(k);
    for (size_t j = 0; j < n; j++)
      if (p[j] >= 'A' && p[j] <= 'Z')
        return err_set(err, ERR_INVALID,
                       "metadata name %.*s: must be lower case (HTTP/2 header names are)",
                       n > 64 ? 64 : (int)n, (const char *)p);
  }
  return ERR_OK;
}

/* Copies the idem-tenant metadata value into buf (cap >= REC_GLOBAL_ID_MAX + 2): a value longer
 * than the limit is cut one past it so that validation still refuses it. Without it: "default",
 * or refused when required. */
static err_code tenant_of(const grpc_metadata_array *md, bool required, char *buf, size_t cap,
                          err_t *err) {
  bool found = false;
  snprintf(buf, cap, "%s", RPC_TENANT_DEFAULT);
  for (size_t i = 0; i < md->count; i++) {
    if (grpc_slice_str_cmp(md->metadata[i].key, RPC_TENANT_MD) != 0) continue;
    if (found) return err_set(err, ERR_INVALID, "%s metadata: given more than once", RPC_TENANT_MD);
    found = true;
    const grpc_slice v = md->metadata[i].value;
    size_t n = GRPC_SLICE_LENGTH(v);
    if (memchr(GRPC_SLICE_START_PTR(v), '\0', n))
      return err_set(err, ERR_INVALID, "%s metadata: must not contain a NUL byte", RPC_TENANT_MD);
    if (n > cap - 1) n = cap - 1;
    memcpy(buf, GRPC_SLICE_START_PTR(v), n);
    buf[n] = '\0';
  }
  if (!found && required)
    return err_set(err, ERR_INVALID,
                   "%s metadata: required (the server runs with --require-tenant)", RPC_TENANT_MD);
  return ERR_OK;
}

/* The trace id of the call's traceparent metadata into buf (docs/api.md §22): "" when there is
 * none; a malformed one (or more than one) is ignored and counted, never an error. tracestate
 * is vendor data for the caller's tracer: the coordinator records only the trace id. */
static void trace_of(const grpc_metadata_array *md, char buf[TRACE_ID_LEN + 1]) {
  buf[0] = '\0';
  int seen = 0;
  bool ok = false;
  for (size_t i = 0; i < md->count; i++) {
    if (grpc_slice_str_cmp(md->metadata[i].key, RPC_TRACEPARENT_MD) != 0) continue;
    const grpc_slice v = md->metadata[i].value;
    ok = ++seen == 1 &&
         traceparent_parse((const char *)GRPC_SLICE_START_PTR(v), GRPC_SLICE_LENGTH(v), buf);
  }
  if (seen > 0 && !ok) {
    buf[0] = '\0';
    metrics_traceparent_invalid();
  }
}

/* --- the reply --- */

err_code rpc__call_reply(rpc_call *c, const ProtobufCMessage *msg, err_t *err) {
  reply_drop(c);
  size_t n = protobuf_c_message_get_packed_size(msg);
  size_t held = atomic_fetch_add(&c->srv->reply_bytes, n) + n;
  c->reply_bytes = n;
  if (held > RPC_REPLY_BUFFER_MAX && c->method >= 0 && rpc__methods[c->method].bulky) {
    reply_drop(c);
    return err_fail(err, ERR_RESOURCE, ERR_R_OVERLOADED,
                    "server overloaded: %zu MiB of replies wait for clients to read them "
                    "(limit %zu MiB); retry later",
                    (held - n) >> 20, RPC_REPLY_BUFFER_MAX >> 20);
  }
  grpc_slice s = grpc_slice_malloc(n);
  protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(s));
  c->reply = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  if (!c->reply) {
    reply_drop(c);
    return err_set(err, ERR_INTERNAL, "cannot encode the reply");
  }
  return ERR_OK;
}

/* Adds trailing metadata key with text as err_wire_text makes it; nothing when that is empty. */
static void add_text_trailer(rpc_call *c, const char *key, const char *text) {
  char v[ERR_DETAIL_MAX > ERR_HINT_MAX ? ERR_DETAIL_MAX : ERR_HINT_MAX];
  size_t n = err_wire_text(text, v, sizeof v);
  if (n == 0 || c->n_trailing >= sizeof c->trailing / sizeof c->trailing[0]) return;
  c->trailing[c->n_trailing].key = grpc_slice_from_static_string(key);
  c->trailing[c->n_trailing].value = grpc_slice_from_copied_buffer(v, n);
  c->n_trailing++;
}

/* One call less in group g's admitted count; rpc_server_settle is told when it was the last. */
static void uncount(rpc_server *srv, rpc_group_rt *g) {
  if (atomic_fetch_sub(&g->admitted, 1) == 1 && atomic_load(&srv->settling) > 0) {
    pthread_mutex_lock(&srv->mu);
    pthread_cond_broadcast(&srv->settled);
    pthread_mutex_unlock(&srv->mu);
  }
}

/* A call admitted as a group's leader is answered: uncounted. */
static void unled(rpc_call *c) {
  if (!c->led) return;
  uncount(c->srv, &c->srv->groups[c->led - 1]);
  c->led = 0;
}

void rpc__call_finish(rpc_call *c, const err_t *e) {
  unled(c); /* its handler's work is done: a step's transaction committed or rolled back */
  err_t internal;
  err_code code = e->code;
  const char *msg = e->msg;
  if (code == ERR_OK && !c->reply) { /* a handler bug: never answer OK without a message */
    err_set(&internal, ERR_INTERNAL, "no reply");
    code = internal.code;
    msg = internal.msg;
  }
  if (code != ERR_OK) reply_drop(c);
  /* docs/api.md §5: every non-OK answer says why in a word (set below, with the leader known) */
  const char *reason = err_wire_reason(code == e->code ? e : &internal);
  elect *elector = c->srv->groups[c->group].g.elector;
  if (code == ERR_UNAVAILABLE && err_is_not_leader(e) && elector) {
    /* refused (nothing done, or the fence refused the commit): send the caller to the leader */
    const char *leader = e->leader; /* set by the refusal before the handler */
    elect_status st;
    if (!leader[0]) { /* the fence refused the commit: ask the elector now */
      elect_status_get(elector, &st);
      leader = st.leader_addr;
    }
    c->trailing[0].key = grpc_slice_from_static_string(RPC_LEADER_MD);
    c->trailing[0].value = grpc_slice_from_copied_string(leader);
    c->n_trailing = 1;
    if (c->srv->n_groups > 1) { /* docs/api.md §17: which group's leader that is */
      c->trailing[1].key = grpc_slice_from_static_string(RPC_GROUP_MD);
      c->trailing[1].value = grpc_slice_from_copied_string(c->srv->groups[c->group].g.name);
      c->n_trailing = 2;
    }
    if (e->reason == ERR_R_NOT_LEADER) /* no leader known to this node: an election */
      reason = err_reason_word(leader[0] ? ERR_R_NOT_LEADER : ERR_R_NO_LEADER);
    if (!leader[0]) /* its client backs off and calls again (rpc_server_quiesce waits for it) */
      atomic_store(&c->srv->last_unnamed_ms, clock_mono_ms());
  } else if ((code == ERR_ABORTED || code == ERR_UNAVAILABLE) && e->retry_after_ms > 0) {
    char v[24];
    snprintf(v, sizeof v, "%" PRId64, e->retry_after_ms);
    c->trailing[0].key = grpc_slice_from_static_string(RPC_RETRY_AFTER_MD);
    c->trailing[0].value = grpc_slice_from_copied_string(v);
    c->n_trailing = 1;
  }
  if (code != ERR_OK) {
    metrics_rpc_error(reason);
    c->trailing[c->n_trailing].key = grpc_slice_from_static_string(RPC_REASON_MD);
    c->trailing[c->n_trailing].value = grpc_slice_from_copied_string(reason);
    c->n_trailing++;
    if (code == e->code) { /* docs/api.md §20: the error's detail and hint, when it has them */
      add_text_trailer(c, RPC_DETAIL_MD, e->detail);
      add_text_trailer(c, RPC_HINT_MD, e->hint);
    }
  }
  int64_t now_us = rpc__mono_us();
  if (c->method >= 0) /* incident response: calls per method and code, latency */
    metrics_rpc_done_traced(c->method, (int)rpc__status(code),
                            c->arrived_us ? now_us - c->arrived_us : 0, c->trace_id);
  if (c->staged) { /* the reply's stage (from the store's answer, on this thread) and the call */
    int64_t answered_us;
    if (metrics_stage_answer_get(c->method, &answered_us))
      metrics_stage_observe(c->method, METRICS_STAGE_REPLY, now_us - answered_us);
    metrics_stage_call(c->method, now_us - c->arrived_us);
    c->replied_us = now_us;
  }
  if (code == ERR_INTERNAL) {
    const char *path = c->method >= 0 ? rpc__methods[c->method].path : "generic";
    log_kv(LOG_ERROR, "internal error", "method", path, "error", msg, (const char *)NULL);
  }

  grpc_slice details = grpc_slice_from_copied_string(msg);
  grpc_op ops[4];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[n].data.send_initial_metadata.count = 0;
  n++;
  if (c->reply) {
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n].data.send_message.send_message = c->reply;
    n++;
  }
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.trailing_metadata_count = c->n_trailing;
  ops[n].data.send_status_from_server.trailing_metadata = c->n_trailing ? c->trailing : NULL;
  ops[n].data.send_status_from_server.status = rpc__status(code);
  ops[n].data.send_status_from_server.status_details = &details;
  n++;
  if (!c->close_early) { /* else in a batch of its own, started when the call arrived */
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n].data.recv_close_on_server.cancelled = &c->cancelled;
    n++;
  }

  c->tag.kind = RPC_TAG_BATCH;
  grpc_call_error ce = grpc_call_start_batch(c->call, ops, n, &c->tag, NULL);
  grpc_slice_unref(details); /* not retained past start_batch */
  if (ce != GRPC_CALL_OK) {  /* no completion will come: the call is ours to free */
    char num[16];
    snprintf(num, sizeof num, "%d", (int)ce);
    log_kv(LOG_ERROR, "cannot start reply batch", "code", num, (const char *)NULL);
    rpc__call_batch_done(c); /* freed now, or when the close batch completes */
  }
}

int64_t rpc__mono_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* --- the worker's part --- */

/* the calls every node answers, leader or not (docs/api.md §7). */
static bool leader_only(const rpc_method *m) {
  return strcmp(m->path, "/idem.v1.Admin/GetStatus") != 0 &&
         strcmp(m->path, "/idem.v1.Coordinator/GetTopology") != 0 &&
         strcmp(m->path, "/idem.v1.Admin/MoveSlots") != 0 && /* any node: the mover decides */
         strcmp(m->path, "/grpc.health.v1.Health/Check") != 0;
}

/* Whether the call's group is known only once its message is decoded (route_call). */
static bool routed(const rpc_server *srv, const rpc_method *m) {
  return srv->n_groups > 1 && (m->route || m->group_md);
}

/* Whether this node leads group g (elector el) and admits c as its leader: counted in the
 * group's admitted calls BEFORE the check, so that rpc_server_settle, which reads the count after
 * serving stopped, either sees c or c sees the node no longer leading. Uncounted again when not
 * (or when c is answered: unled). */
static bool lead(rpc_call *c, size_t g, elect *el) {
  rpc_group_rt *gr = &c->srv->groups[g];
  atomic_fetch_add(&gr->admitted, 1);
  if (elect_is_leader(el, NULL)) {
    c->led = (int)g + 1;
    return true;
  }
  uncount(c->srv, gr);
  return false;
}

/* Fills err with a refusal by a node that does not lead (elector's view of the leader). */
static void not_leader(elect *elector, err_t *err) {
  err_fail(err, ERR_UNAVAILABLE, ERR_R_NOT_LEADER, "not the leader");
  elect_status es;
  elect_status_get(elector, &es);
  err_leader(err, es.leader_addr);
}

static const char *compression_name(grpc_compression_algorithm a) {
  const char *name = NULL;
  return grpc_compression_algorithm_name(a, &name) ? name : "unknown";
}

/* The request's metadata as HTTP/2 counts a header list (RFC 7540 §6.5.2: name, value and 32
 * bytes each). */
static size_t metadata_bytes(const grpc_metadata_array *md) {
  size_t n = 0;
  for (size_t i = 0; i < md->count; i++)
    n += GRPC_SLICE_LENGTH(md->metadata[i].key) + GRPC_SLICE_LENGTH(md->metadata[i].value) + 32;
  return n;
}

/* The checks every call passes before its handler runs, in order: deadline, handler,
 * identity, leadership, size (docs/api.md §5); a routed call's leadership is checked by
 * route_call once it is decoded. False with err filled. */
static bool admit(rpc_call *c, const rpc_method *m, char *tenant, size_t cap, err_t *err) {
  if (clock_mono_ms() >= c->deadline) {
    err_set(err, ERR_DEADLINE, "deadline exceeded before the call was handled");
  } else if (!m->handler) {
    err_set(err, ERR_UNIMPLEMENTED, "not implemented yet");
  } else if (c->payload && c->payload->type == GRPC_BB_RAW &&
             c->payload->data.raw.compression != GRPC_COMPRESS_NONE) {
    /* docs/api.md §16: identity only; gRPC core handed the message over still compressed
     * (rpc_server.c), and it is refused here, with a reason, without being inflated */
    err_set(err, ERR_UNIMPLEMENTED,
            "compressed request (%s): this server accepts only uncompressed (identity) messages",
            compression_name(c->payload->data.raw.compression));
  } else if (metadata_bytes(&c->md) > RPC_MAX_METADATA_BYTES) {
    err_set(err, ERR_RESOURCE, "request metadata of %zu bytes: the limit is %d bytes",
            metadata_bytes(&c->md), RPC_MAX_METADATA_BYTES);
  } else if (metadata_names_lower(&c->md, err) != ERR_OK) {
    /* refused: a header name HTTP/2 does not allow */
  } else if (auth_enabled(c->srv->auth) /* who is calling, before anything else */
                 ? rpc__authenticate(c, tenant, cap, err) != ERR_OK
                 : tenant_of(&c->md, c->srv->require_tenant && leader_only(m), tenant, cap, err) !=
                       ERR_OK) {
    /* refused: err says why */
  } else if (c->srv->elector && leader_only(m) && !routed(c->srv, m) &&
             !lead(c, 0, c->srv->elector)) {
    not_leader(c->srv->elector, err);
  } else if (c->payload && grpc_byte_buffer_length(c->payload) > c->srv->max_recv_bytes) {
    /* docs/api.md §5: over the limit is INVALID_ARGUMENT, checked before anything is unpacked */
    err_set(err, ERR_INVALID, "message too large: %zu bytes, limit %zu",
            grpc_byte_buffer_length(c->payload), c->srv->max_recv_bytes);
  } else {
    return true;
  }
  return false;
}

/* The group the call's idem-group metadata names; -1 with err filled when it names none (or
 * no group of this node). */
static int group_named(rpc_call *c, err_t *err) {
  const rpc_server *srv = c->srv;
  for (size_t i = 0; i < c->md.count; i++) {
    if (grpc_slice_str_cmp(c->md.metadata[i].key, RPC_GROUP_MD) != 0) continue;
    const grpc_slice v = c->md.metadata[i].value;
    size_t n = GRPC_SLICE_LENGTH(v);
    for (size_t g = 0; g < srv->n_groups; g++)
      if (strlen(srv->groups[g].g.name) == n &&
          memcmp(srv->groups[g].g.name, GRPC_SLICE_START_PTR(v), n) == 0)
        return (int)g;
    err_set(err, ERR_INVALID, "%s metadata: no store group named %.*s", RPC_GROUP_MD,
            n > 63 ? 63 : (int)n, (const char *)GRPC_SLICE_START_PTR(v));
    return -1;
  }
  err_set(err, ERR_INVALID,
          "%s metadata: required with slot groups (each group's steps are resolved by its "
          "leader: send the call to each group, as libidem and idemctl do)",
          RPC_GROUP_MD);
  return -1;
}

/* The id a call is routed by obeys its rule (docs/api.md §1) before it picks a group, so that
 * a malformed one is INVALID_ARGUMENT on every node, not a redirect to some group's leader:
 * BeginSaga's request_id, or the saga's global id (key.global_id in the step calls). False with
 * err filled. */
static bool route_id_valid(const rpc_method *m, const char *id, err_t *err) {
  if (m->new_saga) return validate_request_id(id, err) == ERR_OK;
  const char *field =
      protobuf_c_message_descriptor_get_field_by_name(m->in, "key") ? "key.global_id" : "global_id";
  return validate_global_id(field, id, err) == ERR_OK;
}

/* docs/api.md §17: a routed call goes to its saga's group, served only by that group's leader;
 * anywhere else it is refused (idem-leader, idem-group) with nothing done. Sets c->group and
 * rq's group and rules. False with err filled. */
static bool route_call(rpc_call *c, const rpc_method *m, const ProtobufCMessage *in,
                       const char *tenant, rpc_req *rq, err_t *err) {
  rpc_server *srv = c->srv;
  c->group = 0;
  const char *id = routed(srv, m) && m->route ? m->route(in) : NULL;
  if (id && id[0] && !route_id_valid(m, id, err)) return false;
  if (id && (id[0] || m->new_saga)) {
    int g = srv->route(srv->route_arg, tenant, id, m->new_saga);
    if (g == RPC_ROUTE_MOVING) { /* docs/api.md §18: the handoff of the slot's move */
      err_fail(err, ERR_UNAVAILABLE, ERR_R_SLOT_MOVING,
               "slot moving: this saga's slot is being handed to another group");
      err->retry_after_ms = RPC_MOVING_RETRY_MS;
      return false;
    }
    if (g < 0 || (size_t)g >= srv->n_groups) {
      err_fail(err, ERR_UNAVAILABLE, ERR_R_NO_LEADER, "no group serves this saga's slot yet");
      return false;
    }
    c->group = g;
    elect *el = srv->groups[g].g.elector;
    if (el && !lead(c, (size_t)g, el)) {
      not_leader(el, err);
      return false;
    }
  } else if (srv->n_groups > 1 && m->group_md) {
    int g = group_named(c, err);
    if (g < 0) return false;
    c->group = g;
    elect *el = srv->groups[g].g.elector;
    if (el && !lead(c, (size_t)g, el)) {
      not_leader(el, err);
      return false;
    }
  } else if (routed(srv, m) && srv->elector && !lead(c, 0, srv->elector)) {
    not_leader(srv->elector, err); /* not routed by its message: the first group's leader */
    return false;
  }
  rq->group = (size_t)c->group;
  rq->coord = srv->groups[c->group].g.coord;
  return true;
}

/* The handler's answer in err (trusting its return value). */
static void settle(rpc_call *c, err_code code, err_t *err) {
  if (code == ERR_OK)
    err_clear(err);
  else if (err->code != code)
    err->code = code;
}

/* Frees the request bytes (before the reply is in flight) and sends the reply. */
static void done(rpc_call *c, const err_t *err) {
  if (c->payload) {
    grpc_byte_buffer_destroy(c->payload);
    c->payload = NULL;
  }
  rpc__call_finish(c, err);
}

void rpc__call_handle(rpc_call *c, store **st) {
  const rpc_method *m = &rpc__methods[c->method];
  err_t err;
  err_clear(&err);
  char tenant[REC_GLOBAL_ID_MAX + 2];
  trace_of(&c->md, c->trace_id);
  if (admit(c, m, tenant, sizeof tenant, &err)) {
    ProtobufCMessage *in = rpc__decode(c->payload, m->in, &err);
    bool kept = false;
    rpc_req rq = {.srv = c->srv,
                  .tenant = tenant,
                  .deadline = c->deadline,
                  .trace_id = c->trace_id,
                  .kept = &kept};
    if (in && route_call(c, m, in, tenant, &rq, &err)) {
      rq.st = st[rq.group];
      rq.stores = st;
      settle(c, m->handler(&rq, in, c, &err), &err);
    }
    if (in) protobuf_c_message_free_unpacked(in, NULL);
    if (kept) return; /* answered by rpc__async_done, maybe already: c is not ours any more */
  }
  done(c, &err);
}

void rpc__call_keep(rpc_call *c) {
  rpc_server *srv = c->srv;
  pthread_mutex_lock(&srv->mu);
  srv->async_pending++;
  pthread_mutex_unlock(&srv->mu);
}

void rpc__call_unkeep(rpc_call *c) {
  rpc_server *srv = c->srv;
  pthread_mutex_lock(&srv->mu);
  if (--srv->async_pending == 0) pthread_cond_broadcast(&srv->cv);
  pthread_mutex_unlock(&srv->mu);
}

bool rpc__call_try_async(rpc_call *c) {
  rpc_server *srv = c->srv;
  const rpc_method *m = &rpc__methods[c->method];
  if (!m->async || !srv->submits) return false;
  err_t err;
  err_clear(&err);
  char tenant[REC_GLOBAL_ID_MAX + 2];
  rpc_req rq = {.srv = srv,
                .tenant = tenant,
                .trace_id = c->trace_id,
                .deadline = c->deadline,
                .no_deadline = c->deadline_ts.tv_sec == INT64_MAX ||
                               c->deadline_ts.clock_type == GPR_TIMESPAN};
  trace_of(&c->md, c->trace_id);
  if (!admit(c, m, tenant, sizeof tenant, &err) ||
      !(c->in = rpc__decode(c->payload, m->in, &err)) ||
      !route_call(c, m, c->in, tenant, &rq, &err)) {
    if (c->in) protobuf_c_message_free_unpacked(c->in, NULL);
    c->in = NULL;
    done(c, &err);
    return true;
  }
  rq.st = srv->groups[rq.group].submit_store;
  pthread_mutex_lock(&srv->mu);
  srv->async_pending++;
  pthread_mutex_unlock(&srv->mu);
  int method = c->method;
  int64_t handler_us = rpc__mono_us();
  if (c->arrived_us) {
    c->staged = true;
    metrics_stage_observe(method, METRICS_STAGE_ARRIVE, handler_us - c->arrived_us);
    metrics_stage_handler_set(method, handler_us); /* read by the store when it queues */
  }
  m->async(&rq, c->in, c); /* c may be ended, even freed, when it returns */
  metrics_stage_handler_set(-1, 0);
  return true;
}

void rpc__async_done(rpc_call *c, err_code code, err_t *err) {
  rpc_server *srv = c->srv;
  settle(c, code, err);
  protobuf_c_message_free_unpacked(c->in, NULL);
  c->in = NULL;
  done(c, err); /* c belongs to the cq thread from here on */
  pthread_mutex_lock(&srv->mu);
  if (--srv->async_pending == 0) pthread_cond_broadcast(&srv->cv);
  pthread_mutex_unlock(&srv->mu);
}
