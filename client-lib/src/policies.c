/* policies.c — Admin.SetPolicy / DeletePolicy / ListPolicies, and fetching the effective policies
 * into the client's cache (pcache.c) that idem_step_run consults when the coordinator cannot be
 * reached (see idem.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem_internal.h"

#define UNARY(c, m, req, T, timeout, out, err) \
  idem__unary((c), (m), &(req).base, &T##__descriptor, (timeout), (ProtobufCMessage **)(out), (err))

/* SetPolicy's defaults for a field left at 0 (the coordinator's built-in policy's) */
#define POLICY_DEFAULT_RETENTION_S 86400u /* 24 h */
#define POLICY_DEFAULT_LEASE_MS 30000u    /* 30 s */

static char *str_or_empty(const char *s) {
  return (char *)(s ? s : "");
}

static int policy_from_pb(const Idem__V1__Policy *pb, idem_policy *out, idem_error *err) {
  memset(out, 0, sizeof *out);
  const char *svc = pb->service ? pb->service : "", *op = pb->operation ? pb->operation : "";
  if (strlen(svc) >= sizeof out->service || strlen(op) >= sizeof out->operation)
    return idem__fail(err, IDEM_BAD_RESPONSE, "service or operation in the response is too long");
  memcpy(out->service, svc, strlen(svc) + 1);
  memcpy(out->operation, op, strlen(op) + 1);
  out->failure_mode = (int)pb->failure_mode;
  out->retention_s = pb->retention_s;
  out->key_retention_s = pb->key_retention_s;
  out->lease_ms = pb->lease_ms;
  out->updated_unix_ms = pb->updated_unix_ms;
  return IDEM_OK;
}

/* --- Admin ---------------------------------------------------------------------------------- */

int idem_policy_set(idem_client *c, const idem_policy *p, idem_policy *out, idem_error *err) {
  if (out) memset(out, 0, sizeof *out);
  if (!p) return idem__fail(err, IDEM_INVALID_ARGUMENT, "policy is null");
  Idem__V1__Policy req = IDEM__V1__POLICY__INIT;
  req.service = (char *)p->service;
  req.operation = (char *)p->operation;
  req.failure_mode = (Idem__V1__FailureMode)p->failure_mode;
  /* 0 = the built-in default, as in every SDK (docs/api.md §20) */
  req.retention_s = p->retention_s ? p->retention_s : POLICY_DEFAULT_RETENTION_S;
  req.key_retention_s = p->key_retention_s;
  req.lease_ms = p->lease_ms ? p->lease_ms : POLICY_DEFAULT_LEASE_MS;
  Idem__V1__Policy *resp;
  int rc = UNARY(c, IDEM__M_SET_POLICY, req, idem__v1__policy, 0, &resp, err);
  if (rc != IDEM_OK) return rc;
  if (out) rc = policy_from_pb(resp, out, err);
  idem__v1__policy__free_unpacked(resp, NULL);
  return rc;
}

int idem_policy_delete(idem_client *c, const char *service, const char *operation, bool *deleted,
                       idem_error *err) {
  if (deleted) *deleted = false;
  Idem__V1__DeletePolicyRequest req = IDEM__V1__DELETE_POLICY_REQUEST__INIT;
  req.service = str_or_empty(service);
  req.operation = str_or_empty(operation);
  Idem__V1__DeletePolicyResponse *resp;
  int rc = UNARY(c, IDEM__M_DELETE_POLICY, req, idem__v1__delete_policy_response, 0, &resp, err);
  if (rc != IDEM_OK) return rc;
  if (deleted) *deleted = resp->deleted;
  idem__v1__delete_policy_response__free_unpacked(resp, NULL);
  return IDEM_OK;
}

void idem_policies_clear(idem_policies *l) {
  if (!l) return;
  free(l->policies);
  memset(l, 0, sizeof *l);
}

int idem_policy_list(idem_client *c, idem_policies *out, idem_error *err) {
  if (out) memset(out, 0, sizeof *out);
  Idem__V1__ListPoliciesRequest req = IDEM__V1__LIST_POLICIES_REQUEST__INIT;
  Idem__V1__ListPoliciesResponse *resp;
  int rc = UNARY(c, IDEM__M_LIST_POLICIES, req, idem__v1__list_policies_response, 0, &resp, err);
  if (rc != IDEM_OK) return rc;
  if (out && resp->n_policies > 0) {
    out->policies = calloc(resp->n_policies, sizeof *out->policies);
    if (!out->policies) {
      rc = idem__fail(err, IDEM_NOMEM, "out of memory");
    } else {
      for (size_t i = 0; i < resp->n_policies && rc == IDEM_OK; i++) {
        rc = policy_from_pb(resp->policies[i], &out->policies[i], err);
        out->n = i + 1;
      }
    }
    if (rc != IDEM_OK) idem_policies_clear(out);
  }
  idem__v1__list_policies_response__free_unpacked(resp, NULL);
  return rc;
}

/* --- the cache (pcache.c) and fetching into it ------------------------------------------ */

/* Fetches and stores; returns the call's code, or IDEM_NOMEM when the answer could not be kept. */
static int fetch(idem_client *c, const char *svc, const char *op, int64_t timeout_ms,
                 idem_error *err) {
  Idem__V1__GetPolicyRequest req = IDEM__V1__GET_POLICY_REQUEST__INIT;
  req.service = (char *)svc;
  req.operation = (char *)op;
  Idem__V1__Policy *resp;
  int64_t now = idem__now_ms();
  int rc = UNARY(c, IDEM__M_GET_POLICY, req, idem__v1__policy, timeout_ms, &resp, err);
  int mode = 0;
  if (rc == IDEM_OK &&
      (resp->failure_mode == IDEM_FAIL_CLOSED || resp->failure_mode == IDEM_FAIL_OPEN))
    mode = (int)resp->failure_mode;
  bool kept = idem__pcache_note(idem__client_pcache(c), svc, op, now, mode);
  if (rc == IDEM_OK) idem__v1__policy__free_unpacked(resp, NULL);
  /* fetched but not kept: no memory for the entry (the coordinator refuses names too long) */
  if (rc == IDEM_OK && !kept) rc = idem__fail(err, IDEM_NOMEM, "out of memory");
  return rc;
}

void idem__policy_refresh(idem_client *c, const char *service, const char *operation,
                          int64_t timeout_ms) {
  int64_t every = idem__client_policy_refresh_ms(c);
  if (every < 0 || !service || !operation) return;
  bool stale =
      idem__pcache_claim(idem__client_pcache(c), service, operation, idem__now_ms(), every);
  if (!stale) return;
  idem_error scratch;
  (void)fetch(c, service, operation, timeout_ms, &scratch);
}

int idem_policy_prefetch(idem_client *c, const char *service, const char *operation,
                         idem_error *err) {
  idem__err_reset(err);
  if (!c) return idem__fail(err, IDEM_INVALID_ARGUMENT, "client is null");
  if (!service || !operation)
    return idem__fail(err, IDEM_INVALID_ARGUMENT, "service and operation are required");
  return fetch(c, service, operation, 0, err);
}

int idem__policy_cached_mode(idem_client *c, const char *service, const char *operation) {
  if (!service || !operation) return 0;
  return idem__pcache_mode(idem__client_pcache(c), service, operation);
}

bool idem__unreachable(idem_client *c, const idem_error *err, int64_t since_ms) {
  if (!err || (err->code != IDEM_DEADLINE_EXCEEDED && err->code != IDEM_UNAVAILABLE)) return false;
  return idem__none_could_decide(c, since_ms);
}
