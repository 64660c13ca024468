/* harness.c — see harness.h: the coordinator as a process, clients, the tenant fingerprint,
 * raw gRPC calls. */
#include "harness.h"

#include <criterion/criterion.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

idem_client *h_client(const srv *s, const char *tenant, int64_t deadline_ms) {
  idem_options o = {.address = s->addr, .tenant = tenant, .deadline_ms = deadline_ms};
  idem_client *c = NULL;
  idem_error e = {0};
  int rc = idem_connect(&o, &c, &e);
  cr_assert_eq(rc, IDEM_OK, "idem_connect: %s", e.message);
  return c;
}

void h_srv_dump_log(const srv *s) {
  h_dump_log(s->log_path);
}

static void srv_start(srv *s, const char *pg_url, const char *const *extra_args,
                      const idem_options *probe, const char *const *env);

void h_srv_start(srv *s, const char *pg_url, const char *const *extra_args) {
  srv_start(s, pg_url, extra_args, NULL, NULL);
}

void h_srv_start_env(srv *s, const char *pg_url, const char *const *extra_args,
                     const char *const *env) {
  srv_start(s, pg_url, extra_args, NULL, env);
}

void h_srv_start_probe(srv *s, const char *pg_url, const char *const *extra_args,
                       const idem_options *probe) {
  srv_start(s, pg_url, extra_args, probe, NULL);
}

/* Ready = this coordinator logged "listening", then Admin.GetStatus answers; on another port
 * when the one chosen was taken (h_wait_listening). */
static void srv_start(srv *s, const char *pg_url, const char *const *extra_args,
                      const idem_options *probe, const char *const *env) {
  const char *bin = h_env("IDEM_COORDINATOR_BIN");
  if (!pg_url) pg_url = h_env("IDEM_TEST_PG_URL");
  memset(s, 0, sizeof *s);
  char tag[64];
  h_unique("srv", tag, sizeof tag);
  snprintf(s->log_path, sizeof s->log_path, "/tmp/idem-%s.log", tag);
  for (int attempt = 1;; attempt++) {
    s->port = h_free_port();
    snprintf(s->addr, sizeof s->addr, "127.0.0.1:%d", s->port);
    const char *argv[32];
    int argc = 0;
    argv[argc++] = bin;
    argv[argc++] = "--listen";
    argv[argc++] = s->addr;
    if (pg_url[0]) { /* "": the caller names the stores (--store) */
      argv[argc++] = "--pg";
      argv[argc++] = pg_url;
    }
    for (int i = 0; extra_args && extra_args[i] && argc < 30; i++) argv[argc++] = extra_args[i];
    argv[argc] = NULL;
    s->pid = spawn_start(argv, &(spawn_opts){.log = s->log_path, .env = env});
    if (h_wait_listening(s->pid, s->log_path, s->port, 0, 0, "idem-coordinator")) break;
    s->pid = 0;
    if (attempt == H_START_TRIES) {
      h_srv_dump_log(s);
      cr_assert_fail("idem-coordinator found no free port in %d tries", H_START_TRIES);
    }
  }
  /* a readiness probe, not a latency claim: a loaded machine (the sanitizer build beside the
   * suites) has taken more than 2 s for a node's first answer */
  idem_options o = {.tenant = "default", .deadline_ms = 10000};
  if (probe) o = *probe;
  o.address = s->addr;
  idem_client *c = NULL;
  idem_error ce = {0};
  int crc = idem_connect(&o, &c, &ce);
  cr_assert_eq(crc, IDEM_OK, "idem_connect: %s", ce.message);
  idem_status st;
  idem_error e = {0};
  int rc = idem_get_status(c, &st, &e);
  idem_close(c);
  if (rc != IDEM_OK) h_srv_dump_log(s);
  cr_assert_eq(rc, IDEM_OK, "GetStatus after start-up: %s", e.message);
}

int h_srv_stop(srv *s) {
  if (s->pid <= 0) return -1;
  int st = spawn_stop(s->pid, 20000);
  s->pid = 0;
  if (st == 0 && !s->keep_log) unlink(s->log_path);
  return st;
}

int h_raw_call(const char *addr, const char *method, const char *tenant, const void *req,
               size_t req_len, char *details, size_t details_len) {
  return h_raw_call_reason(addr, method, tenant, req, req_len, details, details_len, NULL, 0);
}

int h_raw_call_reason(const char *addr, const char *method, const char *tenant, const void *req,
                      size_t req_len, char *details, size_t details_len, char *reason,
                      size_t reason_len) {
  return h_raw_call_trailer(addr, method, tenant, req, req_len, details, details_len, "idem-reason",
                            reason, reason_len);
}

int h_raw_call_trailer(const char *addr, const char *method, const char *tenant, const void *req,
                       size_t req_len, char *details, size_t details_len, const char *trailer,
                       char *value, size_t value_len) {
  h_raw_opts o = {.trailer = trailer, .value = value, .value_len = value_len};
  return h_raw_call_opts(addr, method, tenant, req, req_len, details, details_len, &o);
}

void h_trailer_of(const char *lines, const char *key, char *out, size_t cap) {
  out[0] = '\0';
  size_t kl = strlen(key);
  for (const char *p = lines; p && *p;) {
    const char *end = strchr(p, '\n');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n > kl + 2 && strncmp(p, key, kl) == 0 && p[kl] == ':' && p[kl + 1] == ' ') {
      snprintf(out, cap, "%.*s", (int)(n - kl - 2), p + kl + 2);
      return;
    }
    p = end ? end + 1 : NULL;
  }
}

int h_raw_call_opts(const char *addr, const char *method, const char *tenant, const void *req,
                    size_t req_len, char *details, size_t details_len, h_raw_opts *o) {
  const char *want = o->trailer ? o->trailer : "idem-reason";
  char *value = o->value;
  size_t value_len = o->value_len;
  char *reason = value;
  size_t reason_len = value_len;
  grpc_init();
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  grpc_channel *ch = grpc_channel_create(addr, creds, NULL);
  grpc_channel_credentials_release(creds);
  grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
  gpr_timespec deadline =
      gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                   gpr_time_from_millis(o->deadline_ms ? o->deadline_ms : 5000, GPR_TIMESPAN));
  grpc_slice mslice = grpc_slice_from_copied_string(method);
  grpc_call *call =
      grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, mslice, NULL, deadline, NULL);
  grpc_slice_unref(mslice);

  grpc_metadata md = {0};
  md.key = grpc_slice_from_static_string("idem-tenant");
  md.value = grpc_slice_from_copied_string(tenant ? tenant : "default");
  grpc_slice payload = grpc_slice_from_copied_buffer(req, req_len);
  grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&payload, 1);
  grpc_slice_unref(payload);
  grpc_byte_buffer *recv = NULL;
  grpc_metadata_array init_md, trail_md;
  grpc_metadata_array_init(&init_md);
  grpc_metadata_array_init(&trail_md);
  grpc_status_code status = GRPC_STATUS_UNKNOWN;
  grpc_slice status_details = grpc_empty_slice();

  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].data.send_initial_metadata.count = 1;
  ops[0].data.send_initial_metadata.metadata = &md;
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
  ops[5].data.recv_status_on_client.status_details = &status_details;
  int tag = 1;
  cr_assert_eq(grpc_call_start_batch(call, ops, 6, &tag, NULL), GRPC_CALL_OK);
  grpc_event ev = grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  cr_assert_eq(ev.type, GRPC_OP_COMPLETE);

  if (details && details_len) {
    size_t n = GRPC_SLICE_LENGTH(status_details);
    if (n >= details_len) n = details_len - 1;
    memcpy(details, GRPC_SLICE_START_PTR(status_details), n);
    details[n] = '\0';
  }
  if (reason && reason_len) {
    reason[0] = '\0';
    for (size_t i = 0; i < trail_md.count; i++) {
      if (grpc_slice_str_cmp(trail_md.metadata[i].key, want) != 0) continue;
      size_t n = GRPC_SLICE_LENGTH(trail_md.metadata[i].value);
      if (n >= reason_len) n = reason_len - 1;
      memcpy(reason, GRPC_SLICE_START_PTR(trail_md.metadata[i].value), n);
      reason[n] = '\0';
    }
  }
  if (o->trailers && o->trailers_len) { /* every entry, "key: value\n" */
    size_t at = 0;
    o->trailers[0] = '\0';
    for (size_t i = 0; i < trail_md.count && at + 1 < o->trailers_len; i++) {
      const grpc_metadata *m = &trail_md.metadata[i];
      int n = snprintf(o->trailers + at, o->trailers_len - at, "%.*s: %.*s\n",
                       (int)GRPC_SLICE_LENGTH(m->key), (const char *)GRPC_SLICE_START_PTR(m->key),
                       (int)GRPC_SLICE_LENGTH(m->value),
                       (const char *)GRPC_SLICE_START_PTR(m->value));
      at += n > 0 ? (size_t)n : 0;
    }
  }
  if (o->resp && recv) { /* the answer's bytes */
    grpc_byte_buffer_reader rd;
    cr_assert(grpc_byte_buffer_reader_init(&rd, recv));
    grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
    grpc_byte_buffer_reader_destroy(&rd);
    o->resp_len = GRPC_SLICE_LENGTH(all);
    *o->resp = malloc(o->resp_len ? o->resp_len : 1);
    memcpy(*o->resp, GRPC_SLICE_START_PTR(all), o->resp_len);
    grpc_slice_unref(all);
  }
  grpc_slice_unref(status_details);
  grpc_slice_unref(md.value);
  grpc_metadata_array_destroy(&init_md);
  grpc_metadata_array_destroy(&trail_md);
  grpc_byte_buffer_destroy(send);
  if (recv) grpc_byte_buffer_destroy(recv);
  grpc_call_unref(call);
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
  grpc_channel_destroy(ch);
  grpc_shutdown();
  return (int)status;
}

/* A fingerprint of everything tenant t has stored: rows and a hash of every column. */
long long h_tenant_hash(const char *t) {
  const char *p[] = {t};
  return pgx_sql(
      NULL,
      "select (select count(*) + coalesce(sum(hashtext(s::text)::bigint), 0) from idem_steps s"
      " where tenant = $1)"
      " + (select count(*) + coalesce(sum(hashtext(g::text)::bigint), 0) from idem_sagas g"
      " where tenant = $1)"
      " + (select count(*) + coalesce(sum(hashtext(l::text)::bigint), 0) from idem_saga_labels l"
      " where tenant = $1)"
      " + (select count(*) + coalesce(sum(hashtext(p::text)::bigint), 0) from idem_policies p"
      " where tenant = $1)"
      " + (select count(*) + coalesce(sum(hashtext(a::text)::bigint), 0) from idem_audit a"
      " where tenant = $1)",
      1, p);
}

void h_action_run(void *arg, const idem_step_ctx *ctx, idem_step_output *out) {
  h_action *a = arg;
  a->calls++;
  a->unguarded = ctx->unguarded;
  out->outcome = IDEM_OUTCOME_SUCCEEDED;
  out->code = a->code;
  out->body = "ok %ref";
  out->body_len = 7;
}

void h_set_policy(idem_client *c, const char *svc, const char *op, int mode) {
  idem_policy p = {.failure_mode = mode, .retention_s = 3600, .lease_ms = 5000};
  snprintf(p.service, sizeof p.service, "%s", svc);
  snprintf(p.operation, sizeof p.operation, "%s", op);
  idem_error e = {0};
  cr_assert_eq(idem_policy_set(c, &p, NULL, &e), IDEM_OK, "%s", e.message);
}
