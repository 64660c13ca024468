/* transport.c — gRPC core under libidem: the channel credentials, one channel per address, and
 * one try of a unary call (pack, send with metadata, wait, read the status and the trailers,
 * unpack). It knows nothing of endpoints, failover or retries: that is route.c's.
 *
 * With tls.c the only file of libidem that includes <grpc/grpc.h>. Each try gets its own pluck
 * completion queue (a shared pluck queue allows only a handful of concurrent pluckers), so any
 * number of threads may send through one channel. Methods are registered once per channel.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "idem_build_version.h"
#include "idem_internal.h"

struct idem__transport {
  grpc_channel_credentials *creds; /* shared by every channel, insecure or TLS */
  char *server_name;               /* TLS name override, NULL = the address's host */
};

struct idem__chan {
  grpc_channel *channel;
  void *registered[IDEM__M_COUNT];
};

static const char *const method_paths[IDEM__M_COUNT] = {
    [IDEM__M_BEGIN_SAGA] = "/idem.v1.Coordinator/BeginSaga",
    [IDEM__M_BEGIN_STEP] = "/idem.v1.Coordinator/BeginStep",
    [IDEM__M_COMPLETE_STEP] = "/idem.v1.Coordinator/CompleteStep",
    [IDEM__M_EXTEND_LEASE] = "/idem.v1.Coordinator/ExtendLease",
    [IDEM__M_LOOKUP_STEP] = "/idem.v1.Coordinator/LookupStep",
    [IDEM__M_GET_SAGA] = "/idem.v1.Coordinator/GetSaga",
    [IDEM__M_GET_POLICY] = "/idem.v1.Coordinator/GetPolicy",
    [IDEM__M_LIST_STEPS] = "/idem.v1.Admin/ListSteps",
    [IDEM__M_RESOLVE_STEP] = "/idem.v1.Admin/ResolveStep",
    [IDEM__M_SET_POLICY] = "/idem.v1.Admin/SetPolicy",
    [IDEM__M_DELETE_POLICY] = "/idem.v1.Admin/DeletePolicy",
    [IDEM__M_LIST_POLICIES] = "/idem.v1.Admin/ListPolicies",
    [IDEM__M_LIST_AUDIT] = "/idem.v1.Admin/ListAudit",
    [IDEM__M_GET_STATUS] = "/idem.v1.Admin/GetStatus",
    [IDEM__M_RESOLVE_STEPS] = "/idem.v1.Admin/ResolveSteps",
    [IDEM__M_GET_TOPOLOGY] = "/idem.v1.Coordinator/GetTopology",
    [IDEM__M_MOVE_SLOTS] = "/idem.v1.Admin/MoveSlots",
};

const char *idem__method_path(idem__method m) {
  return (unsigned)m < IDEM__M_COUNT ? method_paths[m] : "";
}

/* --- the transport and its channels ------------------------------------------------------- */

/* gRPC core's lifetime under libidem. Each transport holds one grpc_init. A channel holds one
 * too, and gRPC may drop a destroyed channel's last reference later, on one of its own threads
 * (a connection attempt still in flight: a TLS handshake a server refuses, a reconnect after a
 * backoff); the grpc_shutdown that follows then runs on a detached thread. A program that exits
 * right after idem_close (idemctl) then ran OpenSSL's exit-time clean-up under a gRPC thread still
 * handshaking: a SEGV in RAND_priv_bytes_ex, or a leak report under LeakSanitizer. So when the
 * last transport closes and libidem was gRPC's only user (gRPC was not initialized when the first
 * transport opened), the close waits, 5 s at most, until gRPC has shut down (2 s was too short
 * once, under the sanitizers on a loaded machine). */
static pthread_mutex_t lib_mu = PTHREAD_MUTEX_INITIALIZER;
static int lib_open;       /* open transports */
static bool lib_foreign;   /* gRPC was initialized by someone else when the first one opened */
enum { LIB_SHUTDOWN_WAIT_MS = 5000 };

static void lib_hold(void) {
  pthread_mutex_lock(&lib_mu);
  if (lib_open++ == 0) lib_foreign = grpc_is_initialized();
  grpc_init();
  pthread_mutex_unlock(&lib_mu);
}

static void lib_release(void) {
  pthread_mutex_lock(&lib_mu);
  grpc_shutdown();
  bool wait = --lib_open == 0 && !lib_foreign;
  /* grpc_is_initialized takes gRPC's init lock, which a shutdown in progress holds */
  for (int64_t end = idem__now_ms() + LIB_SHUTDOWN_WAIT_MS;
       wait && grpc_is_initialized() && idem__now_ms() < end;)
    idem__sleep_ms(2);
  pthread_mutex_unlock(&lib_mu);
}

int idem__transport_open(const idem_options *opt, idem__transport **out, idem_error *err) {
  *out = NULL;
  idem__transport *t = calloc(1, sizeof *t);
  if (!t) return idem__fail(err, IDEM_NOMEM, "out of memory");
  if (opt->tls_server_name && *opt->tls_server_name &&
      !(t->server_name = strdup(opt->tls_server_name))) {
    free(t);
    return idem__fail(err, IDEM_NOMEM, "out of memory");
  }
  lib_hold();
  int rc = idem__credentials(opt, &t->creds, err); /* reads the TLS files */
  if (rc != IDEM_OK) {
    lib_release();
    free(t->server_name);
    free(t);
    return rc;
  }
  *out = t;
  return IDEM_OK;
}

void idem__transport_close(idem__transport *t) {
  if (!t) return;
  grpc_channel_credentials_release(t->creds);
  lib_release();
  free(t->server_name);
  free(t);
}

int idem__chan_new(idem__transport *t, const char *addr, idem__chan **out) {
  *out = NULL;
  idem__chan *ch = calloc(1, sizeof *ch);
  if (!ch) return IDEM_NOMEM;
  grpc_arg args[4];
  args[0].type = GRPC_ARG_STRING;
  args[0].key = (char *)GRPC_ARG_PRIMARY_USER_AGENT_STRING;
  args[0].value.string = (char *)"libidem/" IDEM_VERSION;
  args[1].type = GRPC_ARG_INTEGER;
  args[1].key = (char *)GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS;
  args[1].value.integer = 100;
  args[2].type = GRPC_ARG_INTEGER;
  args[2].key = (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
  args[2].value.integer = 1000;
  size_t nargs = 3;
  if (t->server_name) { /* the name the server's certificate must carry */
    args[3].type = GRPC_ARG_STRING;
    args[3].key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
    args[3].value.string = t->server_name;
    nargs = 4;
  }
  grpc_channel_args chargs = {.num_args = nargs, .args = args};
  ch->channel = grpc_channel_create(addr, t->creds, &chargs);
  if (!ch->channel) {
    free(ch);
    return IDEM_INTERNAL;
  }
  for (int m = 0; m < IDEM__M_COUNT; m++)
    ch->registered[m] = grpc_channel_register_call(ch->channel, method_paths[m], NULL, NULL);
  *out = ch;
  return IDEM_OK;
}

void idem__chan_free(idem__chan *ch) {
  if (!ch) return;
  grpc_channel_destroy(ch->channel);
  free(ch);
}

/* --- one try ------------------------------------------------------------------------------- */

static void copy_slice(char *dst, size_t cap, grpc_slice s) {
  size_t n = GRPC_SLICE_LENGTH(s);
  if (n >= cap) n = cap - 1;
  memcpy(dst, GRPC_SLICE_START_PTR(s), n);
  dst[n] = '\0';
}

/* Reads the trailing metadata the coordinator attaches to its errors; idem-group (slot groups)
 * into group (IDEM__GROUP_CAP bytes, may be NULL): idem_error stays as it was (its size is
 * libidem0's ABI). Returns whether an idem-leader entry was present (the call was answered by a
 * standby: nothing was done). */
static bool parse_trailers(const grpc_metadata_array *md, idem_error *err, char *group) {
  bool standby = false;
  char detail[IDEM__NOTE_MAX] = "", hint[IDEM__NOTE_MAX] = "";
  for (size_t i = 0; i < md->count; i++) {
    const grpc_metadata *e = &md->metadata[i];
    if (grpc_slice_str_cmp(e->key, "idem-retry-after-ms") == 0) {
      char buf[32];
      copy_slice(buf, sizeof buf, e->value);
      char *end;
      errno = 0;
      long long v = strtoll(buf, &end, 10);
      if (errno == 0 && end != buf && v > 0) err->retry_after_ms = v;
    } else if (grpc_slice_str_cmp(e->key, "idem-leader") == 0) {
      copy_slice(err->leader, sizeof err->leader, e->value);
      standby = true;
    } else if (grpc_slice_str_cmp(e->key, "idem-reason") == 0) {
      copy_slice(err->reason, sizeof err->reason, e->value);
    } else if (group && grpc_slice_str_cmp(e->key, "idem-group") == 0) {
      copy_slice(group, IDEM__GROUP_CAP, e->value);
    } else if (grpc_slice_str_cmp(e->key, "idem-detail") == 0) {
      copy_slice(detail, sizeof detail, e->value);
    } else if (grpc_slice_str_cmp(e->key, "idem-hint") == 0) {
      copy_slice(hint, sizeof hint, e->value);
    }
  }
  if (err->reason[0]) idem__err_notes(err, detail, hint); /* beside err: its size is the ABI */
  return standby;
}

static int unpack_reply(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *desc,
                        ProtobufCMessage **resp, idem_error *err) {
  grpc_byte_buffer_reader reader;
  if (!grpc_byte_buffer_reader_init(&reader, bb))
    return idem__fail(err, IDEM_BAD_RESPONSE, "cannot read the response");
  grpc_slice all = grpc_byte_buffer_reader_readall(&reader);
  grpc_byte_buffer_reader_destroy(&reader);
  *resp = protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
  grpc_slice_unref(all);
  if (!*resp) return idem__fail(err, IDEM_BAD_RESPONSE, "cannot decode the %s", desc->name);
  return IDEM_OK;
}

bool idem__lost_try(int rc, const idem_error *err) {
  return rc == IDEM_CANCELLED && !err->reason[0];
}

/* Adds one metadata entry over a string that outlives the call. */
static void md_add(grpc_metadata *md, size_t *n, const char *key, const char *value) {
  if (!value) return;
  md[*n].key = grpc_slice_from_static_string(key);
  md[*n].value = grpc_slice_from_static_string(value);
  (*n)++;
}

/* Whether ch is connected (READY) before a try is sent on it, connecting it if need be by
 * deadline. First it reads what its server already sent: libidem polls a connection only while a
 * call is in flight, so a draining node's GOAWAY can sit unread on an idle connection for as long
 * as the caller does not call; a call written on that connection reaches a server whose gRPC core
 * has begun its shutdown and ends it CANCELLED, never handled (server.cc, StartNewRpc: a call
 * that arrives after ShutdownAndNotify is a zombie), a lost try. Read first, the GOAWAY leaves
 * the channel without a connection, and the connection it then tries finds the drained node's
 * listener closed. false (TRANSIENT_FAILURE: refused, unreachable; or the deadline came first):
 * nothing was sent. */
static bool connected(idem__chan *ch, grpc_completion_queue *cq, gpr_timespec deadline) {
  int probe; /* a tag nothing completes: one poll of every connection, without waiting */
  grpc_completion_queue_pluck(cq, &probe, gpr_inf_past(GPR_CLOCK_MONOTONIC), NULL);
  grpc_connectivity_state st = grpc_channel_check_connectivity_state(ch->channel, 1);
  while (st != GRPC_CHANNEL_READY) {
    if (st == GRPC_CHANNEL_TRANSIENT_FAILURE || st == GRPC_CHANNEL_SHUTDOWN) return false;
    grpc_channel_watch_connectivity_state(ch->channel, st, deadline, cq, &st);
    grpc_event ev = grpc_completion_queue_pluck(cq, &st, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type != GRPC_OP_COMPLETE || !ev.success) return false; /* the deadline */
    st = grpc_channel_check_connectivity_state(ch->channel, 1);
  }
  return true;
}

int idem__send(idem__chan *ch, idem__method m, const ProtobufCMessage *req, const idem__md *meta,
               const ProtobufCMessageDescriptor *resp_desc, int64_t timeout_ms,
               ProtobufCMessage **resp, idem_error *err, char *heard_group) {
  idem__err_reset(err);
  *resp = NULL;
  if ((unsigned)m >= IDEM__M_COUNT) return idem__fail(err, IDEM_INVALID_ARGUMENT, "unknown method");
  gpr_timespec deadline =
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
  grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
  if (!connected(ch, cq, deadline)) { /* not sent: the outcome is known (nothing happened) */
    grpc_completion_queue_shutdown(cq);
    grpc_completion_queue_destroy(cq);
    bool late = gpr_time_cmp(gpr_now(GPR_CLOCK_MONOTONIC), deadline) >= 0;
    char *target = grpc_channel_get_target(ch->channel);
    int rc = idem__fail(err, late ? IDEM_DEADLINE_EXCEEDED : IDEM_UNAVAILABLE,
                        "cannot connect to %s%s: nothing was sent", target ? target : "the address",
                        late ? " before the deadline" : "");
    gpr_free(target);
    return rc;
  }

  size_t len = protobuf_c_message_get_packed_size(req);
  grpc_slice payload = grpc_slice_malloc(len);
  protobuf_c_message_pack(req, GRPC_SLICE_START_PTR(payload));
  grpc_byte_buffer *send_bb = grpc_raw_byte_buffer_create(&payload, 1);
  grpc_slice_unref(payload);

  grpc_call *call = grpc_channel_create_registered_call(ch->channel, NULL, GRPC_PROPAGATE_DEFAULTS,
                                                        cq, ch->registered[m], deadline, NULL);

  /* Static slices over the caller's strings: they outlive the call. */
  grpc_metadata md[5];
  size_t n_md = 0;
  memset(md, 0, sizeof md);
  n_md += idem__trace_md(md); /* the thread's trace context: thread-local strings */
  md_add(md, &n_md, "idem-tenant", meta->tenant);
  md_add(md, &n_md, "authorization", meta->auth);
  md_add(md, &n_md, "idem-group", meta->group);

  grpc_metadata_array initial_md, trailing_md;
  grpc_metadata_array_init(&initial_md);
  grpc_metadata_array_init(&trailing_md);
  grpc_byte_buffer *recv_bb = NULL;
  grpc_status_code status = GRPC_STATUS_UNKNOWN;
  grpc_slice details = grpc_empty_slice();

  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].data.send_initial_metadata.count = n_md;
  ops[0].data.send_initial_metadata.metadata = n_md ? md : NULL;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send_bb;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &recv_bb;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &trailing_md;
  ops[5].data.recv_status_on_client.status = &status;
  ops[5].data.recv_status_on_client.status_details = &details;

  int rc;
  void *tag = &ops; /* any unique address */
  grpc_call_error ce = grpc_call_start_batch(call, ops, 6, tag, NULL);
  if (ce != GRPC_CALL_OK) {
    rc = idem__fail(err, IDEM_INTERNAL, "cannot start the call (%d)", (int)ce);
    goto done;
  }
  grpc_event ev = grpc_completion_queue_pluck(cq, tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  if (ev.type != GRPC_OP_COMPLETE) {
    rc = idem__fail(err, IDEM_INTERNAL, "completion queue failed");
    goto done;
  }

  if (status == GRPC_STATUS_OK) {
    if (!recv_bb)
      rc = idem__fail(err, IDEM_BAD_RESPONSE, "the response has no message");
    else
      rc = unpack_reply(recv_bb, resp_desc, resp, err);
  } else {
    rc = (int)status;
    err->code = rc;
    if (GRPC_SLICE_LENGTH(details) > 0)
      copy_slice(err->message, sizeof err->message, details);
    else
      snprintf(err->message, sizeof err->message, "%s", idem_strerror(rc));
    bool standby = parse_trailers(&trailing_md, err, heard_group);
    /* Be conservative: gRPC cannot tell us whether an UNAVAILABLE came before or after the
     * request reached the coordinator, unless a standby named the leader (it did nothing). A
     * CANCELLED is never the coordinator's answer, nor ours (libidem cancels no call): gRPC
     * core of a server that is shutting down killed the call, and it does not say whether the
     * handler had it (idem__lost_try). */
    if (rc == IDEM_DEADLINE_EXCEEDED || (rc == IDEM_UNAVAILABLE && !standby) ||
        idem__lost_try(rc, err))
      err->outcome_unknown = true;
  }

done:
  grpc_metadata_array_destroy(&initial_md);
  grpc_metadata_array_destroy(&trailing_md);
  grpc_slice_unref(details);
  if (recv_bb) grpc_byte_buffer_destroy(recv_bb);
  grpc_byte_buffer_destroy(send_bb);
  grpc_call_unref(call);
  grpc_completion_queue_shutdown(cq);
  grpc_completion_queue_destroy(cq);
  return rc;
}
