/* Limits (docs/api.md §5, §16): receive-message size, metadata size, concurrent streams per
 * connection and idle connections (those two: test_limits_conns.c). Deadlines against a
 * stalled store are covered by test_pg_outage.c. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "idem/v1/coordinator.pb-c.h"

#define RECV_LIMIT (256 * 1024)
#define HARD_LIMIT (1024 * 1024) /* server/rpc/rpc_server.c HARD_MAX_RECV */

TestSuite(limits, .init = h_setup, .fini = h_teardown, .timeout = 60);

static long long step_rows(const char *tenant) {
  const char *p[] = {tenant};
  return pgx_sql(NULL, "select count(*) from idem_steps where tenant = $1", 1, p);
}

/* A CompleteStepRequest for key (attempt 1, SUCCEEDED) whose encoding is exactly total bytes. */
static uint8_t *complete_of_size(const char *gid, size_t total, size_t *len) {
  Idem__V1__StepKey k = IDEM__V1__STEP_KEY__INIT;
  k.global_id = (char *)gid;
  k.service = (char *)"svc";
  k.operation = (char *)"op";
  k.phase = IDEM__V1__PHASE__PHASE_FORWARD;
  Idem__V1__CompleteStepRequest r = IDEM__V1__COMPLETE_STEP_REQUEST__INIT;
  r.key = &k;
  r.attempt = 1;
  r.outcome = IDEM__V1__OUTCOME__OUTCOME_SUCCEEDED;
  uint8_t *body = calloc(1, total);
  r.body.data = body;
  for (r.body.len = total - 64; protobuf_c_message_get_packed_size(&r.base) < total;) r.body.len++;
  cr_assert_eq(protobuf_c_message_get_packed_size(&r.base), total, "cannot hit %zu", total);
  uint8_t *out = malloc(total);
  *len = protobuf_c_message_pack(&r.base, out);
  free(body);
  return out;
}

Test(limits, message_over_256_kib_is_invalid_argument_and_nothing_is_stored) {
  char gid[96], details[256];
  h_unique("g", gid, sizeof gid);
  idem_step_key k = {gid, "svc", "op", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  const char *m = "/idem.v1.Coordinator/CompleteStep";
  size_t len;

  uint8_t *over = complete_of_size(gid, RECV_LIMIT + 1, &len);
  int st = h_raw_call(H.s.addr, m, H.t, over, len, details, sizeof details);
  cr_assert_eq(st, IDEM_INVALID_ARGUMENT, "256 KiB + 1: %d (%s)", st, details);
  cr_assert_str_eq(details, "message too large: 262145 bytes, limit 262144");
  free(over);

  /* exactly at the limit: decoded and validated as usual (the body is over its own limit) */
  uint8_t *at = complete_of_size(gid, RECV_LIMIT, &len);
  st = h_raw_call(H.s.addr, m, H.t, at, len, details, sizeof details);
  cr_assert_eq(st, IDEM_INVALID_ARGUMENT, "256 KiB: %d (%s)", st, details);
  cr_assert(strstr(details, "body"), "%s", details);
  cr_assert_null(strstr(details, "too large"), "%s", details);
  free(at);

  /* over gRPC's own hard cap: the transport refuses it before the server sees it */
  uint8_t *huge = complete_of_size(gid, HARD_LIMIT + 1, &len);
  st = h_raw_call(H.s.addr, m, H.t, huge, len, details, sizeof details);
  cr_assert_eq(st, IDEM_RESOURCE_EXHAUSTED, "1 MiB + 1: %d (%s)", st, details);
  free(huge);

  /* nothing stored: the step is still in progress, attempt 1; the server still serves */
  idem_record r = {0};
  cr_assert_eq(idem_step_lookup(H.c, &k, &r, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(r.state, IDEM_STATE_IN_PROGRESS);
  cr_assert_eq(r.attempt, 1);
  cr_assert_eq(step_rows(H.t), 1);
  idem_record_clear(&r);
  cr_assert_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_SUCCEEDED, 0, "ok", 2, NULL, &e),
               IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);
}

Test(limits, metadata_over_8_kib_fails_the_call_and_the_server_keeps_serving) {
  /* a 9 KiB tenant: over the 8 KiB header-list limit */
  char *big = malloc(9 * 1024 + 1);
  memset(big, 't', 9 * 1024);
  big[9 * 1024] = '\0';
  idem_client *bc = h_client(&H.s, big, 0);
  char gid[96];
  h_unique("g", gid, sizeof gid);
  idem_step_key k = {gid, "svc", "op", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  int rc = idem_step_begin(bc, &k, NULL, 0, 0, &b, &e);
  printf("metadata over 8 KiB: %s (%s)\n", idem_strerror(rc), e.message);
  cr_assert_eq(rc, IDEM_RESOURCE_EXHAUSTED, "got %s (%s)", idem_strerror(rc), e.message);
  idem_close(bc);
  const char *p[] = {gid};
  cr_assert_eq(pgx_sql(NULL, "select count(*) from idem_steps where global_id = $1", 1, p), 0);

  /* a 7 KiB tenant fits the header limit: the server answers, and names the tenant */
  big[7 * 1024] = '\0';
  bc = h_client(&H.s, big, 0);
  rc = idem_step_begin(bc, &k, NULL, 0, 0, &b, &e);
  cr_assert_eq(rc, IDEM_INVALID_ARGUMENT, "got %s (%s)", idem_strerror(rc), e.message);
  cr_assert(strstr(e.message, "tenant"), "%s", e.message);
  idem_close(bc);
  free(big);

  /* the server goes on serving normal calls, on old and new connections */
  cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(b.attempt, 1);
  idem_client *fresh = h_client(&H.s, H.t, 0);
  idem_record r = {0};
  cr_assert_eq(idem_step_lookup(fresh, &k, &r, &e), IDEM_OK, "%s", e.message);
  idem_record_clear(&r);
  idem_close(fresh);
  cr_assert_eq(pgx_sql(NULL, "select count(*) from idem_steps where global_id = $1", 1, p), 1);
  idem_begin_clear(&b);
}
