/* fuzz_rpc.c — libFuzzer target: every RPC the server registers (rpc_methods.c), from the
 * request bytes to the reply, without a network or a database.
 *
 * Input: byte 0 picks the method (byte 0 % number of methods, in rpc__methods order) and two
 * flags (byte 0 / number of methods: bit 0 = the store is unreachable, every call fails with
 * UNAVAILABLE; bit 1 = the idem-tenant metadata follows: one length byte, then that many bytes,
 * taken as rpc_call.c's tenant_of takes metadata; otherwise the tenant is "default"); the rest
 * is the protobuf request message.
 *
 * Path: the server's own code, as a worker runs it (rpc__call_handle) minus the gRPC call:
 * rpc__decode (protobuf-c unpack + the NUL-in-string check) → the method's handler
 * (rpc_handlers.c, rpc_admin*.c) → coord_* validation, policy resolution and decision →
 * a store (fuzz_store.h: in memory, seeded with a few records and a saga) → the encoded reply.
 *
 * Besides the sanitizers (ASan, UBSan, leaks), it aborts when: a decode failure is not
 * INVALID_ARGUMENT; a handler answers OK without a reply, or a reply that does not decode as
 * the method's response message; an error comes without a message; or INTERNAL comes back
 * while the store works (a bad request must never look like a server fault).
 * With FUZZ_RPC_VERBOSE=1 in the environment each input's method and answer is printed (to
 * check what the seeds reach: fuzz_rpc -runs=0 corpus/rpc).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_store.h"
#include "grpc/health/v1/health.pb-c.h"
#include "idem/v1/coordinator.pb-c.h"
#include "policy/policy_cache.h"
#include "rpc/rpc_internal.h"
#include "util/clock.h"
#include "util/log.h"

#define NOW_MS 1767225600000LL /* the store's clock: 2026-01-01T00:00:00Z */

static bool verbose;

static void fail(const char *method, const char *what, const err_t *err) {
  fprintf(stderr, "fuzz_rpc: %s: %s (code %d, \"%s\")\n", method, what, (int)err->code, err->msg);
  abort();
}

/* The response message of "/package.Service/Method", from the proto's service descriptors. */
static const ProtobufCMessageDescriptor *response_of(const char *path) {
  static const ProtobufCServiceDescriptor *services[] = {
      &idem__v1__coordinator__descriptor,
      &idem__v1__admin__descriptor,
      &grpc__health__v1__health__descriptor,
  };
  const char *slash = strrchr(path, '/');
  if (!slash || path[0] != '/') return NULL;
  size_t svc_len = (size_t)(slash - path - 1);
  for (size_t i = 0; i < sizeof services / sizeof services[0]; i++) {
    const char *name = services[i]->name;
    if (strlen(name) != svc_len || strncmp(name, path + 1, svc_len) != 0) continue;
    const ProtobufCMethodDescriptor *m =
        protobuf_c_service_descriptor_get_method_by_name(services[i], slash + 1);
    return m ? m->output : NULL;
  }
  return NULL;
}

static void check_reply(const char *path, rpc_call *c, const err_t *err) {
  if (!c->reply) fail(path, "OK without a reply", err);
  const ProtobufCMessageDescriptor *out = response_of(path);
  if (!out) fail(path, "no response message in the service descriptors", err);
  grpc_byte_buffer_reader r;
  if (!grpc_byte_buffer_reader_init(&r, c->reply)) fail(path, "unreadable reply", err);
  grpc_slice s = grpc_byte_buffer_reader_readall(&r);
  grpc_byte_buffer_reader_destroy(&r);
  ProtobufCMessage *m =
      protobuf_c_message_unpack(out, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
  grpc_slice_unref(s);
  if (!m) fail(path, "the reply does not decode as the response message", err);
  protobuf_c_message_free_unpacked(m, NULL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  log_init(LOG_TEXT, LOG_ERROR); /* fail-open and similar warnings would flood the output */
  const char *v = getenv("FUZZ_RPC_VERBOSE");
  verbose = v && *v && strcmp(v, "0") != 0;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t mi = data[0] % rpc__n_methods;
  unsigned flags = data[0] / (unsigned)rpc__n_methods;
  const rpc_method *m = &rpc__methods[mi];
  if (!m->handler) return 0;
  data++;
  size--;

  /* the tenant as tenant_of (rpc_call.c) hands it over: a NUL byte is refused there; a value
   * longer than the limit is cut one past it so that validation still refuses it */
  char tenant[REC_GLOBAL_ID_MAX + 2] = RPC_TENANT_DEFAULT;
  if (flags & 2) {
    if (size < 1 || size - 1 < data[0]) return 0;
    size_t n = data[0];
    if (memchr(data + 1, '\0', n)) return 0;
    if (n > sizeof tenant - 1) n = sizeof tenant - 1;
    memcpy(tenant, data + 1, n);
    tenant[n] = '\0';
    size -= 1 + (size_t)data[0];
    data += 1 + (size_t)data[0];
  }

  err_t err;
  err_clear(&err);
  grpc_slice s = grpc_slice_from_copied_buffer((const char *)data, size);
  grpc_byte_buffer *payload = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  ProtobufCMessage *in = rpc__decode(payload, m->in, &err);
  grpc_byte_buffer_destroy(payload);
  if (verbose && !in) fprintf(stderr, "fuzz_rpc: %s: decode: %s\n", m->path, err.msg);
  if (!in) {
    if (err.code != ERR_INVALID || !err.msg[0]) fail(m->path, "decode failure not INVALID", &err);
    return 0;
  }

  memstore *st = fuzz_store_new(NOW_MS);
  if (flags & 1) st->fail_rc = ERR_UNAVAILABLE;
  policy_cache *pc = policy_cache_new();
  /* (*, payment, charge) fail-open; (default, inventory, any) fail-closed, 5 s lease */
  policy_row rows[2];
  memset(rows, 0, sizeof rows);
  snprintf(rows[0].tenant, sizeof rows[0].tenant, "%s", POLICY_ANY);
  policy_default("payment", "charge", &rows[0].p);
  rows[0].p.mode = FAILURE_MODE_FAIL_OPEN;
  snprintf(rows[1].tenant, sizeof rows[1].tenant, "default");
  policy_default("inventory", POLICY_ANY, &rows[1].p);
  rows[1].p.lease_ms = 5000;
  if (!pc || !policy_cache_set_rows(pc, rows, 2)) abort();

  coord_ctx ctx;
  coord_ctx_init(&ctx);
  ctx.resolve_policy = policy_cache_resolve;
  ctx.resolve_arg = pc;
  ctx.policies_changed = policy_cache_changed;

  rpc_group_rt group;
  memset(&group, 0, sizeof group);
  group.g = (rpc_group){.name = "default", .coord = &ctx};
  rpc_server srv;
  memset(&srv, 0, sizeof srv);
  srv.coord = &ctx;
  srv.groups = &group; /* one store group, as a node with --pg */
  srv.n_groups = 1;
  srv.node_id = (char *)"fuzz";
  srv.address = (char *)"127.0.0.1:50051";
  srv.started_unix_ms = NOW_MS;

  rpc_call *c = rpc__call_new(&srv, (int)mi);
  if (!c) abort();
  store *stores[1] = {&st->base};
  rpc_req rq = {.srv = &srv,
                .coord = &ctx,
                .st = &st->base,
                .stores = stores,
                .tenant = tenant,
                .deadline = clock_mono_ms() + 60000};
  err_code rc = m->handler(&rq, in, c, &err);
  if (verbose)
    fprintf(stderr, "fuzz_rpc: %s%s: %s %s\n", m->path, (flags & 1) ? " (store down)" : "",
            err_name(rc), rc == ERR_OK ? "" : err.msg);
  if (rc == ERR_OK)
    check_reply(m->path, c, &err);
  else if (!err.msg[0])
    fail(m->path, "an error without a message", &err);
  else if (rc == ERR_INTERNAL && st->fail_rc == ERR_OK)
    fail(m->path, "INTERNAL with a working store", &err);

  rpc__call_free(c);
  protobuf_c_message_free_unpacked(in, NULL);
  policy_cache_free(pc);
  store_close(&st->base);
  return 0;
}
