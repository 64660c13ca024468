/* client.c — the channel and the unary call over gRPC core (errors, clock and jitter: support.c).
 *
 * The only file of libidem that includes <grpc/grpc.h>. Each call gets its own pluck
 * completion queue (a shared pluck queue allows only a handful of concurrent pluckers), so any
 * number of threads may call through one client. Methods are registered once per client.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "idem_build_version.h"
#include "idem_internal.h"

#define DEFAULT_DEADLINE_MS 2000

struct idem_client {
  /* failover: one channel per coordinator address (the list given, plus leaders named by
   * idem-leader), created on first use; cur is the one calls go to first. */
  pthread_mutex_t mu;
  int n_eps, cur;
  struct idem__ep {
    char *addr;
    grpc_channel *channel;
    void *registered[IDEM__M_COUNT];
    /* the last call here (docs/api.md §20): when (monotonic ms, 0 = never) and what it heard */
    int64_t heard_ms;
    idem__heard heard;
    int sent_to; /* heard IDEM__HEARD_SENT: the endpoint of the leader it named, -1 unknown */
  } eps[IDEM__MAX_ENDPOINTS];
  char *tenant;                    /* NULL = send no idem-tenant */
  char *auth;                      /* "Bearer <token>", NULL = none */
  grpc_channel_credentials *creds; /* shared by every channel, insecure or TLS */
  char *server_name;               /* TLS name override, NULL = the address's host */
  int64_t deadline_ms;
  /* policies and fail-open: the unguarded-execution journal and the policy cache */
  char *journal_path; /* NULL = none */
  int64_t policy_refresh_ms;
  idem__pcache *pcache;
  idem__topo *topo; /* slot groups: where each saga's group is led (route.c) */
  int64_t lost_ms;  /* monotonic ms of the last lost try (lost_try) on any address, 0 = none (mu) */
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

int64_t idem__client_deadline_ms(const idem_client *c) {
  return c->deadline_ms;
}

idem__pcache *idem__client_pcache(const idem_client *c) {
  return c->pcache;
}
const char *idem__client_tenant(const idem_client *c) {
  return c->tenant ? c->tenant : "default";
}
const char *idem__client_journal(const idem_client *c) {
  return c->journal_path;
}
int64_t idem__client_policy_refresh_ms(const idem_client *c) {
  return c->policy_refresh_ms;
}

/* --- connect / close --------------------------------------------------------------------- */

/* --- endpoints ---------------------------------------------------------------------------- */

#define EP_NOMEM (-2)

/* The endpoint for addr[0..len) (added, with its channel, if new); -1 when the list is full or
 * the channel cannot be made, EP_NOMEM when there is no memory for it. Reconnects are retried
 * quickly: a restarted or newly elected node must not sit behind gRPC's default reconnect
 * backoff (up to 120 s). */
static int ep_add(idem_client *c, const char *addr, size_t len) {
  while (len > 0 && addr[0] == ' ') addr++, len--;
  while (len > 0 && addr[len - 1] == ' ') len--;
  if (len == 0) return -1;
  pthread_mutex_lock(&c->mu);
  int found = -1;
  for (int i = 0; i < c->n_eps && found < 0; i++)
    if (strlen(c->eps[i].addr) == len && memcmp(c->eps[i].addr, addr, len) == 0) found = i;
  if (found < 0 && c->n_eps < IDEM__MAX_ENDPOINTS) {
    struct idem__ep *e = &c->eps[c->n_eps];
    e->addr = malloc(len + 1);
    if (!e->addr) {
      found = EP_NOMEM;
    } else {
      memcpy(e->addr, addr, len);
      e->addr[len] = '\0';
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
      if (c->server_name) { /* the name the server's certificate must carry */
        args[3].type = GRPC_ARG_STRING;
        args[3].key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
        args[3].value.string = c->server_name;
        nargs = 4;
      }
      grpc_channel_args chargs = {.num_args = nargs, .args = args};
      e->channel = grpc_channel_create(e->addr, c->creds, &chargs);
      if (e->channel) {
        for (int m = 0; m < IDEM__M_COUNT; m++)
          e->registered[m] = grpc_channel_register_call(e->channel, method_paths[m], NULL, NULL);
        found = c->n_eps++;
      } else {
        free(e->addr);
        e->addr = NULL;
      }
    }
  }
  pthread_mutex_unlock(&c->mu);
  return found;
}

/* Frees the client's own strings and caches (not the channels, mutex or credentials). The
 * token is wiped first. */
static void free_client(idem_client *c) {
  if (c->auth) memset(c->auth, 0, strlen(c->auth));
  free(c->auth);
  free(c->tenant);
  free(c->server_name);
  free(c->journal_path);
  idem__pcache_free(c->pcache);
  idem__topo_free(c->topo);
  free(c);
}

int idem_connect(const idem_options *opt, idem_client **out, idem_error *err) {
  idem__err_reset(err);
  if (out) *out = NULL;
  if (!out) return idem__fail(err, IDEM_INVALID_ARGUMENT, "out is null");
  if (!opt || !opt->address || !*opt->address)
    return idem__fail(err, IDEM_INVALID_ARGUMENT, "address is missing");
  if (opt->deadline_ms < 0)
    return idem__fail(err, IDEM_INVALID_ARGUMENT, "deadline_ms is negative");

  idem_client *c = calloc(1, sizeof *c);
  if (!c) return idem__fail(err, IDEM_NOMEM, "out of memory");
  c->deadline_ms = opt->deadline_ms > 0 ? opt->deadline_ms : DEFAULT_DEADLINE_MS;
  if (opt->tenant && !(c->tenant = strdup(opt->tenant))) goto nomem;
  c->policy_refresh_ms = opt->policy_refresh_ms ? opt->policy_refresh_ms : 30000;
  if (opt->journal_path && *opt->journal_path && !(c->journal_path = strdup(opt->journal_path)))
    goto nomem;
  if (!(c->pcache = idem__pcache_new())) goto nomem;
  if (!(c->topo = idem__topo_new())) goto nomem;
  if (opt->token) {
    size_t n = strlen(opt->token) + sizeof "Bearer ";
    if (!(c->auth = malloc(n))) goto nomem;
    snprintf(c->auth, n, "Bearer %s", opt->token);
  }
  if (opt->tls_server_name && *opt->tls_server_name &&
      !(c->server_name = strdup(opt->tls_server_name)))
    goto nomem;

  grpc_init();
  int crc = idem__credentials(opt, &c->creds, err); /* reads the TLS files */
  if (crc != IDEM_OK) {
    grpc_shutdown();
    free_client(c);
    return crc;
  }
  pthread_mutex_init(&c->mu, NULL);
  int bad = 0; /* "h1:p1,h2:p2": every address gets its channel now; bad = ep_add's error */
  for (const char *p = opt->address; *p && !bad;) {
    size_t len = strcspn(p, ",");
    int i = len > 0 ? ep_add(c, p, len) : 0;
    if (i < 0) bad = i;
    p += len;
    if (*p == ',') p++;
  }
  if (bad || c->n_eps == 0) {
    idem_close(c);
    if (bad == EP_NOMEM) return idem__fail(err, IDEM_NOMEM, "out of memory");
    return idem__fail(err, IDEM_INTERNAL, "cannot create a channel to %s", opt->address);
  }
  *out = c;
  return IDEM_OK;

nomem:
  free_client(c);
  return idem__fail(err, IDEM_NOMEM, "out of memory");
}

void idem_close(idem_client *c) {
  if (!c) return;
  for (int i = 0; i < c->n_eps; i++) {
    grpc_channel_destroy(c->eps[i].channel);
    free(c->eps[i].addr);
  }
  pthread_mutex_destroy(&c->mu);
  grpc_channel_credentials_release(c->creds);
  grpc_shutdown();
  free_client(c);
}

/* --- the unary call ------------------------------------------------------------------------ */

static void copy_slice(char *dst, size_t cap, grpc_slice s) {
  size_t n = GRPC_SLICE_LENGTH(s);
  if (n >= cap) n = cap - 1;
  memcpy(dst, GRPC_SLICE_START_PTR(s), n);
  dst[n] = '\0';
}

#define GROUP_CAP (IDEM_GROUP_NAME_MAX + 1)

/* Reads the trailing metadata the coordinator attaches to its errors; idem-group (slot groups)
 * into group (GROUP_CAP bytes, may be NULL): idem_error stays as it was (its size is libidem0's
 * ABI). Returns whether an idem-leader entry was present (the call was answered by a standby:
 * nothing was done). */
static bool parse_trailers(const grpc_metadata_array *md, idem_error *err, char *group) {
  bool standby = false;
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
      copy_slice(group, GROUP_CAP, e->value);
    }
  }
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

/* A try that gRPC ended without an answer from the coordinator and without saying whether the
 * coordinator had it: CANCELLED with no idem-reason. The coordinator never answers CANCELLED and
 * libidem never cancels a call; a server's gRPC core does, for a call that reached a node after
 * that node began to shut down (docs/upgrading.md). Retried like an UNAVAILABLE without a
 * leader: on another node, only when repeating the call is harmless (repeatable), its outcome
 * unknown until an answer says otherwise. */
static bool lost_try(int rc, const idem_error *err) {
  return rc == IDEM_CANCELLED && !err->reason[0];
}

/* What a call to an endpoint heard, for the fail-open rule (docs/api.md §20). */
static idem__heard heard_of(int rc, const idem_error *err) {
  if (rc == IDEM_OK) return IDEM__HEARD_DECIDER;
  if (rc == IDEM_DEADLINE_EXCEEDED) return IDEM__HEARD_NOTHING; /* no answer in time */
  if (!err->reason[0]) /* connection refused, reset: gRPC's, not a coordinator's */
    return rc == IDEM_UNAVAILABLE ? IDEM__HEARD_NOTHING : IDEM__HEARD_DECIDER;
  if (!strcmp(err->reason, IDEM_REASON_STORE_UNAVAILABLE) ||
      !strcmp(err->reason, IDEM_REASON_STORE_TIMEOUT) || !strcmp(err->reason, IDEM_REASON_NO_LEADER))
    return IDEM__HEARD_UNDECIDED;
  if (!strcmp(err->reason, IDEM_REASON_NOT_LEADER) && err->leader[0]) return IDEM__HEARD_SENT;
  return IDEM__HEARD_DECIDER; /* an answer, shutting-down, ...: this or another node decides */
}

/* The endpoint of address addr, -1 when the client does not know it (under c->mu). */
static int ep_find(const idem_client *c, const char *addr) {
  for (int i = 0; i < c->n_eps; i++)
    if (!strcmp(c->eps[i].addr, addr)) return i;
  return -1;
}

static void note_heard(idem_client *c, int ep, int rc, const idem_error *err) {
  idem__heard h = heard_of(rc, err);
  pthread_mutex_lock(&c->mu);
  if (lost_try(rc, err)) c->lost_ms = idem__now_ms();
  c->eps[ep].heard_ms = idem__now_ms();
  c->eps[ep].heard = h;
  c->eps[ep].sent_to = h == IDEM__HEARD_SENT ? ep_find(c, err->leader) : -1;
  pthread_mutex_unlock(&c->mu);
}

bool idem__lost_since(idem_client *c, int64_t since_ms) {
  pthread_mutex_lock(&c->mu);
  bool lost = c->lost_ms > 0 && c->lost_ms >= since_ms;
  pthread_mutex_unlock(&c->mu);
  return lost;
}

bool idem__none_could_decide(idem_client *c, int64_t since_ms) {
  if (idem__lost_since(c, since_ms)) return false; /* that node was up and may have decided */
  pthread_mutex_lock(&c->mu);
  bool none = c->n_eps > 0;
  for (int i = 0; i < c->n_eps && none; i++) {
    /* a standby's "not-leader" counts as what the node it names said (followed at most
     * n_eps times: a loop of standbys naming each other decides nothing either) */
    int j = i;
    for (int hops = 0; hops < c->n_eps && c->eps[j].heard == IDEM__HEARD_SENT; hops++) {
      if (c->eps[j].heard_ms < since_ms || c->eps[j].sent_to < 0) break;
      j = c->eps[j].sent_to;
    }
    none = c->eps[j].heard_ms >= since_ms &&
           (c->eps[j].heard == IDEM__HEARD_NOTHING || c->eps[j].heard == IDEM__HEARD_UNDECIDED);
  }
  pthread_mutex_unlock(&c->mu);
  return none;
}

int idem__client_endpoints(idem_client *c) {
  pthread_mutex_lock(&c->mu);
  int n = c->n_eps;
  pthread_mutex_unlock(&c->mu);
  return n;
}

/* One attempt on endpoint ep (the body of the call before failover existed). */
static int unary_at(idem_client *c, int ep, idem__method m, const ProtobufCMessage *req,
                    const char *group, const ProtobufCMessageDescriptor *resp_desc,
                    int64_t timeout_ms, ProtobufCMessage **resp, idem_error *err,
                    char *heard_group) {
  idem_error scratch;
  if (!err) err = &scratch;
  idem__err_reset(err);
  *resp = NULL;
  if (!c) return idem__fail(err, IDEM_INVALID_ARGUMENT, "client is null");
  if ((unsigned)m >= IDEM__M_COUNT) return idem__fail(err, IDEM_INVALID_ARGUMENT, "unknown method");
  if (timeout_ms <= 0) timeout_ms = c->deadline_ms;

  size_t len = protobuf_c_message_get_packed_size(req);
  grpc_slice payload = grpc_slice_malloc(len);
  protobuf_c_message_pack(req, GRPC_SLICE_START_PTR(payload));
  grpc_byte_buffer *send_bb = grpc_raw_byte_buffer_create(&payload, 1);
  grpc_slice_unref(payload);

  grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
  gpr_timespec deadline =
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
  pthread_mutex_lock(&c->mu); /* eps[] only grows; an entry never changes once added */
  grpc_channel *ch = c->eps[ep].channel;
  void *reg = c->eps[ep].registered[m];
  pthread_mutex_unlock(&c->mu);
  grpc_call *call = grpc_channel_create_registered_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, reg,
                                                        deadline, NULL);

  /* Static slices over the client's own strings: they outlive every call (idem_close
   * requires that no call is in flight). */
  grpc_metadata md[5];
  size_t n_md = 0;
  memset(md, 0, sizeof md);
  n_md += idem__trace_md(md); /* the thread's trace context: thread-local strings */
  if (c->tenant) {
    md[n_md].key = grpc_slice_from_static_string("idem-tenant");
    md[n_md].value = grpc_slice_from_static_string(c->tenant);
    n_md++;
  }
  if (c->auth) {
    md[n_md].key = grpc_slice_from_static_string("authorization");
    md[n_md].value = grpc_slice_from_static_string(c->auth);
    n_md++;
  }
  if (group) { /* the caller's string outlives the call */
    md[n_md].key = grpc_slice_from_static_string("idem-group");
    md[n_md].value = grpc_slice_from_static_string(group);
    n_md++;
  }

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
     * handler had it (lost_try). */
    if (rc == IDEM_DEADLINE_EXCEEDED || (rc == IDEM_UNAVAILABLE && !standby) || lost_try(rc, err))
      err->outcome_unknown = true;
  }

  note_heard(c, ep, rc, err);
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

/* --- failover ----------------------------------------------------------------------------- */

/* Whether repeating m after an unknown outcome is harmless: the coordinator's own idempotency
 * makes a repeated request with the same key (or request id) answer as the first did, or refuse
 * it (a BeginStep whose first try did begin the step gets ABORTED "in progress"). Only a
 * BeginSaga without a request id would create a second saga. */
static bool repeatable(idem__method m, const ProtobufCMessage *req) {
  if (m != IDEM__M_BEGIN_SAGA) return true;
  const Idem__V1__BeginSagaRequest *r = (const Idem__V1__BeginSagaRequest *)req;
  return r->request_id && r->request_id[0];
}

/* The tenant whose slots the client can compute: the one it sends, unless a token decides
 * (then only redirects route its calls). */
static const char *route_tenant(const idem_client *c) {
  if (c->auth) return NULL;
  return c->tenant ? c->tenant : "default";
}

/* With slot groups: the endpoint of the leader of the group of the saga id names, -1 when the
 * client does not know it (no topology yet, or no leader). */
static int routed_ep(idem_client *c, const char *id) {
  char leader[128];
  const char *t = route_tenant(c);
  if (!t || !id[0] || !idem__topo_leader(c->topo, t, id, leader, sizeof leader)) return -1;
  return ep_add(c, leader, strlen(leader));
}

/* The endpoint of the named group's leader, -1 when not known. */
static int group_ep(idem_client *c, const char *group) {
  char leader[128];
  if (!idem__topo_group_leader(c->topo, group, leader, sizeof leader)) return -1;
  return ep_add(c, leader, strlen(leader));
}

/* Fetches the topology from endpoint ep into the client's map (best effort). */
static void fetch_topology(idem_client *c, int ep) {
  Idem__V1__GetTopologyRequest req = IDEM__V1__GET_TOPOLOGY_REQUEST__INIT;
  ProtobufCMessage *resp = NULL;
  idem_error e;
  if (unary_at(c, ep, IDEM__M_GET_TOPOLOGY, &req.base, NULL, &idem__v1__topology__descriptor,
               c->deadline_ms, &resp, &e, NULL) == IDEM_OK)
    idem__topo_set(c->topo, (const Idem__V1__Topology *)resp);
  if (resp) protobuf_c_message_free_unpacked(resp, NULL);
}

void idem__topology_taken(idem_client *c, const Idem__V1__Topology *t) {
  idem__topo_set(c->topo, t);
}

int idem__unary(idem_client *c, idem__method m, const ProtobufCMessage *req,
                const ProtobufCMessageDescriptor *resp_desc, int64_t timeout_ms,
                ProtobufCMessage **resp, idem_error *err) {
  return idem__unary_group(c, m, req, NULL, resp_desc, timeout_ms, resp, err);
}

int idem__unary_group(idem_client *c, idem__method m, const ProtobufCMessage *req,
                      const char *group, const ProtobufCMessageDescriptor *resp_desc,
                      int64_t timeout_ms, ProtobufCMessage **resp, idem_error *err) {
  idem_error scratch;
  if (!err) err = &scratch;
  *resp = NULL;
  if (!c) return idem__fail(err, IDEM_INVALID_ARGUMENT, "client is null");
  if (timeout_ms <= 0) timeout_ms = c->deadline_ms;
  int64_t deadline = idem__now_ms() + timeout_ms;
  bool unknown = false; /* an earlier try may have acted */
  const char *rid = idem__route_id(m, req);
  /* docs/api.md §17: straight to the leader of the saga's (or the named) group */
  int want = group ? group_ep(c, group) : routed_ep(c, rid);
  int fetch_from = -1; /* a redirect named a group: fetch the topology after the call */
  idem_error said;     /* the last UNAVAILABLE a coordinator answered (reason set) */
  bool have_said = false;
  int64_t try_ms = 0; /* how long the last try took: a try that cannot fit is not started */
  for (int tries = 0;; tries++) {
    pthread_mutex_lock(&c->mu);
    int ep = want >= 0 ? want : c->cur, n = c->n_eps;
    pthread_mutex_unlock(&c->mu);
    want = -1;
    int64_t left = deadline - idem__now_ms();
    if (left < 1) left = 1;
    char heard[GROUP_CAP] = ""; /* the group a redirect names (idem-group) */
    int64_t t0 = idem__now_ms();
    int rc = unary_at(c, ep, m, req, group, resp_desc, left, resp, err, heard);
    try_ms = idem__now_ms() - t0;
    if (rc == IDEM_DEADLINE_EXCEEDED && have_said) {
      /* the last try ran out of time: answer with what a coordinator last said, not a bare
       * timeout (its outcome is unknown, so this one's is too) */
      *err = said;
      err->outcome_unknown = true;
      rc = err->code;
    }
    if (rc == IDEM_DEADLINE_EXCEEDED && n > 1) { /* no answer: the next call starts elsewhere */
      pthread_mutex_lock(&c->mu);
      if (c->cur == ep) c->cur = (ep + 1) % n;
      pthread_mutex_unlock(&c->mu);
    }
    if (rc != IDEM_UNAVAILABLE && !lost_try(rc, err)) {
      /* a refusal after a try that may have acted does not prove nothing happened */
      if (rc != IDEM_OK && unknown) err->outcome_unknown = true;
      if (fetch_from >= 0) fetch_topology(c, fetch_from);
      return rc;
    }
    if (err->reason[0]) said = *err, have_said = true;
    bool standby = !err->outcome_unknown; /* idem-leader came with it: nothing was done */
    if (!standby) {
      unknown = true;
      if (!err->reason[0]) { /* gRPC's: its groups' next calls go elsewhere, not here again */
        char addr[128];      /* a topology leader's size */
        pthread_mutex_lock(&c->mu);
        snprintf(addr, sizeof addr, "%s", c->eps[ep].addr);
        pthread_mutex_unlock(&c->mu);
        idem__topo_unreachable(c->topo, addr);
      }
      if (!repeatable(m, req)) return rc;
    }
    int next = ep;
    if (standby && err->leader[0]) {
      int i = ep_add(c, err->leader, strlen(err->leader));
      if (i >= 0) next = want = i;
      if (heard[0] && idem__topo_redirect(c->topo, route_tenant(c) ? route_tenant(c) : "", rid,
                                          heard, err->leader))
        fetch_from = ep;
    } else if (n > 1) {
      next = (ep + 1) % n; /* no leader named, or this node is unreachable: the next one */
    }
    pthread_mutex_lock(&c->mu);
    if (c->cur == ep) c->cur = next;
    pthread_mutex_unlock(&c->mu);
    /* straight to a named leader; otherwise back off (full jitter) */
    int64_t wait = (standby && err->leader[0] && next != ep) ? 0 : idem__backoff_ms(25, 500, tries);
    int64_t need = try_ms > IDEM__MIN_TRY_MS ? try_ms : IDEM__MIN_TRY_MS;
    if (idem__now_ms() + wait + need >= deadline) {
      if (unknown) err->outcome_unknown = true;
      if (fetch_from >= 0) fetch_topology(c, fetch_from);
      return rc;
    }
    idem__sleep_ms(wait);
  }
}
