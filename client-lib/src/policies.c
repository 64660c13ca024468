/* policies.c — Admin.SetPolicy / DeletePolicy / ListPolicies; the client's policy cache,
 * (service, operation) -> the failure mode last fetched and when, filled by GetPolicy and by
 * every BeginStep answer; and the fail-open rule idem_step_run applies when no coordinator can
 * decide (see idem.h, docs/api.md §20). Thread-safe. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem_internal.h"

#define UNARY(c, m, req, T, timeout, out, err)                          \
  idem__unary((c), (m), &(req).base, NULL, &T##__descriptor, (timeout), \
              (ProtobufCMessage **)(out), (err))

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

/* --- the cache ------------------------------------------------------------------------------ */

typedef struct pentry {
  char service[IDEM_NAME_MAX + 1];
  char operation[IDEM_NAME_MAX + 1];
  int mode;           /* 0 = never fetched successfully */
  int64_t fetched_ms; /* monotonic, last success */
  int64_t tried_ms;   /* monotonic, last attempt */
} pentry;

struct idem__pcache {
  pthread_mutex_t mu;
  pentry *e;
  size_t n, cap;
};

idem__pcache *idem__pcache_new(void) {
  idem__pcache *p = calloc(1, sizeof *p);
  if (p) pthread_mutex_init(&p->mu, NULL);
  return p;
}

void idem__pcache_free(idem__pcache *p) {
  if (!p) return;
  pthread_mutex_destroy(&p->mu);
  free(p->e);
  free(p);
}

/* Under mu. NULL when absent and create is false, or on allocation failure. */
static pentry *lookup(idem__pcache *p, const char *svc, const char *op, bool create) {
  for (size_t i = 0; i < p->n; i++)
    if (strcmp(p->e[i].service, svc) == 0 && strcmp(p->e[i].operation, op) == 0) return &p->e[i];
  if (!create || strlen(svc) > IDEM_NAME_MAX || strlen(op) > IDEM_NAME_MAX) return NULL;
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 8;
    pentry *grown = realloc(p->e, cap * sizeof *grown);
    if (!grown) return NULL;
    p->e = grown;
    p->cap = cap;
  }
  pentry *e = &p->e[p->n++];
  memset(e, 0, sizeof *e);
  memcpy(e->service, svc, strlen(svc) + 1);
  memcpy(e->operation, op, strlen(op) + 1);
  return e;
}

static bool pcache_note(idem__pcache *p, const char *svc, const char *op, int64_t now_ms,
                        int mode) {
  pthread_mutex_lock(&p->mu);
  pentry *e = lookup(p, svc, op, true);
  if (e) {
    e->tried_ms = now_ms;
    if (mode) {
      e->mode = mode;
      e->fetched_ms = now_ms;
    }
  }
  pthread_mutex_unlock(&p->mu);
  return e != NULL;
}

static bool pcache_claim(idem__pcache *p, const char *svc, const char *op, int64_t now_ms,
                         int64_t every_ms) {
  bool stale = true;
  pthread_mutex_lock(&p->mu);
  pentry *e = lookup(p, svc, op, false);
  if (e && now_ms - e->tried_ms < every_ms) stale = false;
  if (e && stale) e->tried_ms = now_ms; /* one fetch per period, even with many threads */
  pthread_mutex_unlock(&p->mu);
  return stale;
}

static int pcache_mode(idem__pcache *p, const char *svc, const char *op) {
  pthread_mutex_lock(&p->mu);
  pentry *e = lookup(p, svc, op, false);
  int mode = e ? e->mode : 0;
  pthread_mutex_unlock(&p->mu);
  return mode;
}

/* --- fetching into the cache, and the fail-open rule ------------------------------------- */

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
  bool kept = pcache_note(c->pcache, svc, op, now, mode);
  if (rc == IDEM_OK) idem__v1__policy__free_unpacked(resp, NULL);
  /* fetched but not kept: no memory for the entry (the coordinator refuses names too long) */
  if (rc == IDEM_OK && !kept) rc = idem__fail(err, IDEM_NOMEM, "out of memory");
  return rc;
}

void idem__policy_heard(idem_client *c, const char *service, const char *operation, int mode) {
  if ((mode == IDEM_FAIL_CLOSED || mode == IDEM_FAIL_OPEN) && service && operation &&
      c->policy_refresh_ms >= 0)
    (void)pcache_note(c->pcache, service, operation, idem__now_ms(), mode);
}

void idem__policy_learn(idem_client *c, const char *service, const char *operation,
                        int64_t timeout_ms) {
  if (c->policy_refresh_ms < 0 || !service || !operation) return;
  if (pcache_mode(c->pcache, service, operation) != 0) return;
  if (!pcache_claim(c->pcache, service, operation, idem__now_ms(), c->policy_refresh_ms)) return;
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
  return pcache_mode(c->pcache, service, operation);
}

bool idem__fail_open(idem_client *c, const char *service, const char *operation,
                     const idem_error *err, int64_t since_ms) {
  return c->journal_path && idem__policy_cached_mode(c, service, operation) == IDEM_FAIL_OPEN &&
         idem__unreachable(c->route, err, since_ms);
}
