/* admin.c — Admin calls for incident response: ListSteps, ResolveStep, ResolveSteps,
 * ListAudit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem_internal.h"

static char *str_or_empty(const char *s) {
  return (char *)(s ? s : "");
}

void idem_step_page_clear(idem_step_page *p) {
  if (!p) return;
  for (size_t i = 0; i < p->n_steps; i++) idem_record_clear(&p->steps[i]);
  free(p->steps);
  free(p->next_page_token);
  memset(p, 0, sizeof *p);
}

void idem_audit_page_clear(idem_audit_page *p) {
  if (!p) return;
  for (size_t i = 0; i < p->n_entries; i++) free(p->entries[i].reason);
  free(p->entries);
  free(p->next_page_token);
  memset(p, 0, sizeof *p);
}

static int nomem(idem_error *err) {
  return idem__fail(err, IDEM_NOMEM, "out of memory");
}

void idem__filter_to_pb(const idem_steps_filter *f, Idem__V1__ListStepsRequest *req) {
  *req = (Idem__V1__ListStepsRequest)IDEM__V1__LIST_STEPS_REQUEST__INIT;
  req->state = (Idem__V1__StepState)f->state;
  req->service = str_or_empty(f->service);
  req->operation = str_or_empty(f->operation);
  req->global_id = str_or_empty(f->global_id);
  req->updated_before_unix_ms = f->updated_before_unix_ms;
  req->lease_expired_only = f->lease_expired_only;
  req->page_size = f->page_size;
  req->page_token = str_or_empty(f->page_token);
}

/* The start of a page's answer: its next-page token copied into *out_token and n items of size
 * bytes allocated (zeroed) into *items. IDEM_OK or IDEM_NOMEM. */
static int page_begin(const char *token, size_t n, size_t size, char **out_token, void **items,
                      idem_error *err) {
  if (!(*out_token = strdup(str_or_empty(token)))) return nomem(err);
  if (n > 0 && !(*items = calloc(n, size))) return nomem(err);
  return IDEM_OK;
}

/* ListSteps: one page into *out, with each step's trace ids into *ids when ids is not NULL. */
static int list_steps(idem_client *c, const idem_steps_filter *f, const char *trace_id,
                      idem_step_page *out, idem_trace_ids **ids, idem_error *err) {
  memset(out, 0, sizeof *out);
  idem_steps_filter none;
  memset(&none, 0, sizeof none);
  if (!f) f = &none;
  Idem__V1__ListStepsRequest req;
  idem__filter_to_pb(f, &req);
  req.trace_id = str_or_empty(trace_id);
  Idem__V1__ListStepsResponse *resp = NULL;
  int rc =
      idem__unary(c, IDEM__M_LIST_STEPS, &req.base, req.global_id,
                  &idem__v1__list_steps_response__descriptor, 0, (ProtobufCMessage **)&resp, err);
  if (rc != IDEM_OK) return rc;
  rc = page_begin(resp->next_page_token, resp->n_steps, sizeof *out->steps, &out->next_page_token,
                  (void **)&out->steps, err);
  if (rc == IDEM_OK && ids && resp->n_steps > 0 && !(*ids = calloc(resp->n_steps, sizeof **ids)))
    rc = nomem(err);
  for (size_t i = 0; rc == IDEM_OK && i < resp->n_steps; i++) {
    out->n_steps = i + 1;
    rc = idem__record_from_pb(resp->steps[i], &out->steps[i], err);
    if (ids) idem__trace_ids_from_pb(resp->steps[i], &(*ids)[i]);
  }
  idem__v1__list_steps_response__free_unpacked(resp, NULL);
  if (rc != IDEM_OK) idem_step_page_clear(out);
  return rc;
}

int idem_steps_list(idem_client *c, const idem_steps_filter *f, idem_step_page *out,
                    idem_error *err) {
  return list_steps(c, f, NULL, out, NULL, err);
}

void idem_traced_page_clear(idem_traced_page *p) {
  if (!p) return;
  idem_step_page_clear(&p->page);
  free(p->ids);
  p->ids = NULL;
}

int idem_steps_list_traced(idem_client *c, const idem_steps_filter *f, const char *trace_id,
                           idem_traced_page *out, idem_error *err) {
  out->ids = NULL;
  int rc = list_steps(c, f, trace_id, &out->page, &out->ids, err);
  if (rc != IDEM_OK) idem_traced_page_clear(out);
  return rc;
}

int idem_step_resolve(idem_client *c, const idem_step_key *key, const idem_resolution *res,
                      idem_record *out, idem_error *err) {
  if (out) memset(out, 0, sizeof *out);
  if (!res) return idem__fail(err, IDEM_INVALID_ARGUMENT, "resolution: missing");
  Idem__V1__StepKey pkey;
  idem__key_to_pb(key, &pkey);
  Idem__V1__ResolveStepRequest req = IDEM__V1__RESOLVE_STEP_REQUEST__INIT;
  req.key = &pkey;
  req.outcome = (Idem__V1__Outcome)res->outcome;
  req.code = res->code;
  req.body.len = res->body ? res->body_len : 0;
  req.body.data = (uint8_t *)(req.body.len ? res->body : NULL);
  req.reason = str_or_empty(res->reason);
  req.actor = str_or_empty(res->actor);
  Idem__V1__StepRecord *resp = NULL;
  int rc = idem__unary(c, IDEM__M_RESOLVE_STEP, &req.base, pkey.global_id,
                       &idem__v1__step_record__descriptor, 0, (ProtobufCMessage **)&resp, err);
  if (rc != IDEM_OK) return rc;
  rc = idem__record_out(resp, out, err);
  idem__v1__step_record__free_unpacked(resp, NULL);
  return rc;
}

static void copy_trunc(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src ? src : "");
}

int idem_audit_list(idem_client *c, const char *global_id, uint32_t page_size,
                    const char *page_token, idem_audit_page *out, idem_error *err) {
  memset(out, 0, sizeof *out);
  Idem__V1__ListAuditRequest req = IDEM__V1__LIST_AUDIT_REQUEST__INIT;
  req.global_id = str_or_empty(global_id);
  req.page_size = page_size;
  req.page_token = str_or_empty(page_token);
  Idem__V1__ListAuditResponse *resp = NULL;
  int rc =
      idem__unary(c, IDEM__M_LIST_AUDIT, &req.base, req.global_id,
                  &idem__v1__list_audit_response__descriptor, 0, (ProtobufCMessage **)&resp, err);
  if (rc != IDEM_OK) return rc;
  rc = page_begin(resp->next_page_token, resp->n_entries, sizeof *out->entries,
                  &out->next_page_token, (void **)&out->entries, err);
  for (size_t i = 0; rc == IDEM_OK && i < resp->n_entries; i++) {
    const Idem__V1__AuditEntry *e = resp->entries[i];
    idem_audit_entry *a = &out->entries[i];
    out->n_entries = i + 1;
    a->at_unix_ms = e->at_unix_ms;
    copy_trunc(a->actor, sizeof a->actor, e->actor);
    copy_trunc(a->action, sizeof a->action, e->action);
    copy_trunc(a->tenant, sizeof a->tenant, e->tenant);
    if (e->key) {
      copy_trunc(a->global_id, sizeof a->global_id, e->key->global_id);
      copy_trunc(a->service, sizeof a->service, e->key->service);
      copy_trunc(a->operation, sizeof a->operation, e->key->operation);
      a->phase = (idem_phase)e->key->phase;
    }
    a->from_state = (idem_state)e->from_state;
    a->to_state = (idem_state)e->to_state;
    copy_trunc(a->batch_id, sizeof a->batch_id, e->batch_id);
    if (!(a->reason = strdup(str_or_empty(e->reason)))) rc = nomem(err);
  }
  idem__v1__list_audit_response__free_unpacked(resp, NULL);
  if (rc != IDEM_OK) idem_audit_page_clear(out);
  return rc;
}

/* One ResolveSteps, in group (sent as idem-group; NULL = none), within timeout_ms. */
static int resolve_in(idem_client *c, const Idem__V1__ResolveStepsRequest *req, const char *group,
                      int64_t timeout_ms, Idem__V1__ResolveStepsResponse **resp, idem_error *err) {
  if (!c) return idem__fail(err, IDEM_INVALID_ARGUMENT, "client is null");
  idem__retry how = idem__retry_call(c, timeout_ms);
  return idem__call(c, IDEM__M_RESOLVE_STEPS, &req->base, NULL, group,
                    &idem__v1__resolve_steps_response__descriptor, &how, (ProtobufCMessage **)resp,
                    err);
}

int idem_steps_resolve(idem_client *c, const idem_bulk_resolution *in, int64_t timeout_ms,
                       idem_bulk_result *out, idem_error *err) {
  if (out) memset(out, 0, sizeof *out);
  if (!in) return idem__fail(err, IDEM_INVALID_ARGUMENT, "bulk resolution: missing");
  Idem__V1__ListStepsRequest filter;
  idem__filter_to_pb(&in->filter, &filter); /* the server ignores its page fields here */
  Idem__V1__ResolveStepsRequest req = IDEM__V1__RESOLVE_STEPS_REQUEST__INIT;
  req.filter = &filter;
  req.outcome = (Idem__V1__Outcome)in->res.outcome;
  req.code = in->res.code;
  req.body.len = in->res.body ? in->res.body_len : 0;
  req.body.data = (uint8_t *)(req.body.len ? in->res.body : NULL);
  req.reason = str_or_empty(in->res.reason);
  req.actor = str_or_empty(in->res.actor);
  req.dry_run = in->dry_run;
  req.max_steps = in->max_steps;
  req.request_id = str_or_empty(in->request_id);
  /* docs/api.md §17: with slot groups each group's leader resolves that group's steps (a write
   * is its leader's alone): the request goes to every group, named in idem-group, and the
   * answers add up. The same request id in each group makes a repeat converge. */
  idem_topology topo = {0};
  idem_error terr;
  size_t n = 1;
  if (idem_get_topology(c, &topo, &terr) == IDEM_OK && topo.n_groups > 1) n = topo.n_groups;
  idem_bulk_result sum = {0};
  int rc = IDEM_OK;
  if (n > 1 && !in->dry_run) { /* max_steps bounds the whole resolution: count every group's */
    uint32_t matched = 0;
    req.dry_run = true;
    for (size_t g = 0; g < n && rc == IDEM_OK; g++) {
      Idem__V1__ResolveStepsResponse *resp = NULL;
      rc = resolve_in(c, &req, topo.groups[g].name, timeout_ms, &resp, err);
      if (rc == IDEM_OK) matched += resp->matched;
      if (resp) idem__v1__resolve_steps_response__free_unpacked(resp, NULL);
    }
    req.dry_run = false;
    if (rc == IDEM_OK && matched > in->max_steps)
      rc = idem__fail(err, IDEM_FAILED_PRECONDITION,
                      "max_steps: %u steps match across %zu groups, more than %u: nothing resolved",
                      matched, n, in->max_steps);
  }
  for (size_t g = 0; g < n && rc == IDEM_OK; g++) {
    Idem__V1__ResolveStepsResponse *resp = NULL;
    rc = resolve_in(c, &req, n > 1 ? topo.groups[g].name : NULL, timeout_ms, &resp, err);
    if (rc != IDEM_OK) break;
    sum.matched += resp->matched;
    sum.resolved += resp->resolved;
    sum.dry_run = resp->dry_run;
    sum.replayed = g == 0 ? resp->replayed : sum.replayed && resp->replayed;
    if (!sum.batch_id[0]) copy_trunc(sum.batch_id, sizeof sum.batch_id, resp->batch_id);
    for (size_t i = 0;
         i < resp->n_sample && sum.n_sample < sizeof sum.sample / sizeof sum.sample[0]; i++) {
      const Idem__V1__StepKey *k = resp->sample[i];
      idem_bulk_key *o = &sum.sample[sum.n_sample++];
      copy_trunc(o->global_id, sizeof o->global_id, k->global_id);
      copy_trunc(o->service, sizeof o->service, k->service);
      copy_trunc(o->operation, sizeof o->operation, k->operation);
      o->phase = (idem_phase)k->phase;
    }
    idem__v1__resolve_steps_response__free_unpacked(resp, NULL);
  }
  if (rc == IDEM_OK && out) *out = sum;
  idem_topology_clear(&topo);
  return rc;
}
