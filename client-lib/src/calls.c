/* calls.c — one public function per RPC: build the request on the stack, call, convert. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/v1/slot.h"
#include "idem_build_version.h"
#include "idem_internal.h"

/* One call of the saga id names (NULL = none), retried as how says (NULL = idem__retry_call). */
#define CALL(c, m, req, id, T, how, out, err)                                              \
  idem__call((c), (m), &(req).base, (id), NULL, &T##__descriptor, (how), \
             (ProtobufCMessage **)(out), (err))

static char *str_or_empty(const char *s) {
  return (char *)(s ? s : "");
}

/* Copies src into a fixed buffer; false (BAD_RESPONSE) when it does not fit. */
static bool copy_str(char *dst, size_t cap, const char *src) {
  if (!src) src = "";
  size_t n = strlen(src);
  if (n >= cap) return false;
  memcpy(dst, src, n + 1);
  return true;
}

static int too_long(idem_error *err, const char *field) {
  return idem__fail(err, IDEM_BAD_RESPONSE, "%s in the response is too long", field);
}

void idem__key_to_pb(const idem_step_key *key, Idem__V1__StepKey *pb) {
  Idem__V1__StepKey init = IDEM__V1__STEP_KEY__INIT;
  *pb = init;
  if (!key) return;
  pb->global_id = str_or_empty(key->global_id);
  pb->service = str_or_empty(key->service);
  pb->operation = str_or_empty(key->operation);
  pb->phase = (Idem__V1__Phase)key->phase;
}

int idem__result_from_pb(const Idem__V1__StepResult *pb, idem_result *r, idem_error *err) {
  memset(r, 0, sizeof *r);
  if (!pb) return IDEM_OK;
  r->outcome = (idem_outcome)pb->outcome;
  r->code = pb->code;
  r->completed_unix_ms = pb->completed_unix_ms;
  if (pb->body.len > 0) {
    if (!(r->body = malloc(pb->body.len))) return idem__fail(err, IDEM_NOMEM, "out of memory");
    memcpy(r->body, pb->body.data, pb->body.len);
    r->body_len = pb->body.len;
  }
  return IDEM_OK;
}

static int record_from_pb(const Idem__V1__StepRecord *pb, idem_record *r, idem_error *err) {
  memset(r, 0, sizeof *r);
  if (!copy_str(r->tenant, sizeof r->tenant, pb->tenant)) return too_long(err, "tenant");
  if (pb->key) {
    if (!copy_str(r->global_id, sizeof r->global_id, pb->key->global_id))
      return too_long(err, "global_id");
    if (!copy_str(r->service, sizeof r->service, pb->key->service)) return too_long(err, "service");
    if (!copy_str(r->operation, sizeof r->operation, pb->key->operation))
      return too_long(err, "operation");
    r->phase = (idem_phase)pb->key->phase;
  }
  r->state = (idem_state)pb->state;
  r->attempt = pb->attempt;
  if (pb->fingerprint.len > sizeof r->fingerprint) return too_long(err, "fingerprint");
  if (pb->fingerprint.len) memcpy(r->fingerprint, pb->fingerprint.data, pb->fingerprint.len);
  r->fingerprint_len = pb->fingerprint.len;
  r->created_unix_ms = pb->created_unix_ms;
  r->updated_unix_ms = pb->updated_unix_ms;
  r->lease_expires_unix_ms = pb->lease_expires_unix_ms;
  r->expires_unix_ms = pb->expires_unix_ms;
  r->result_expired = pb->result_expired;
  if (pb->result) {
    int rc = idem__result_from_pb(pb->result, &r->result, err);
    if (rc != IDEM_OK) return rc;
    r->has_result = true;
  }
  return IDEM_OK;
}

/* --- Coordinator ----------------------------------------------------------------------------- */

int idem_saga_begin(idem_client *c, const char *request_id, const char *saga_type,
                    const idem_label *labels, size_t n_labels,
                    char global_id[IDEM_GLOBAL_ID_MAX + 1], bool *created, int64_t *created_unix_ms,
                    idem_error *err) {
  if (global_id) global_id[0] = '\0';
  if (created) *created = false;
  if (created_unix_ms) *created_unix_ms = 0;
  if (!labels) n_labels = 0;

  Idem__V1__BeginSagaRequest req = IDEM__V1__BEGIN_SAGA_REQUEST__INIT;
  req.request_id = str_or_empty(request_id);
  req.saga_type = str_or_empty(saga_type);
  Idem__V1__BeginSagaRequest__LabelsEntry *entries = NULL;
  Idem__V1__BeginSagaRequest__LabelsEntry **ptrs = NULL;
  if (n_labels > 0) {
    entries = calloc(n_labels, sizeof *entries);
    ptrs = calloc(n_labels, sizeof *ptrs);
    if (!entries || !ptrs) {
      free(entries);
      free(ptrs);
      return idem__fail(err, IDEM_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n_labels; i++) {
      Idem__V1__BeginSagaRequest__LabelsEntry e = IDEM__V1__BEGIN_SAGA_REQUEST__LABELS_ENTRY__INIT;
      e.key = str_or_empty(labels[i].key);
      e.value = str_or_empty(labels[i].value);
      entries[i] = e;
      ptrs[i] = &entries[i];
    }
    req.n_labels = n_labels;
    req.labels = ptrs;
  }

  Idem__V1__BeginSagaResponse *resp;
  int rc = CALL(c, IDEM__M_BEGIN_SAGA, req, req.request_id, idem__v1__begin_saga_response, NULL,
                &resp, err);
  free(entries);
  free(ptrs);
  if (rc != IDEM_OK) return rc;
  char id[IDEM_GLOBAL_ID_MAX + 1];
  if (!copy_str(id, sizeof id, resp->global_id) || !id[0]) {
    rc = resp->global_id[0]
             ? too_long(err, "global_id")
             : idem__fail(err, IDEM_BAD_RESPONSE, "global_id in the response is empty");
  } else {
    if (global_id) memcpy(global_id, id, strlen(id) + 1);
    if (created) *created = resp->created;
    if (created_unix_ms) *created_unix_ms = resp->created_unix_ms;
  }
  idem__v1__begin_saga_response__free_unpacked(resp, NULL);
  return rc;
}

/* Appends one GetSaga page's steps to out (the saga's fields and labels from the first page);
 * *next receives the page's next_page_token (owned, "" on the last page). */
static int saga_page(idem_client *c, const char *global_id, const char *token, idem_saga *out,
                     char **next, idem_error *err) {
  Idem__V1__GetSagaRequest req = IDEM__V1__GET_SAGA_REQUEST__INIT;
  req.global_id = str_or_empty(global_id);
  req.page_token = (char *)token;
  Idem__V1__GetSagaResponse *resp;
  int rc = CALL(c, IDEM__M_GET_SAGA, req, req.global_id, idem__v1__get_saga_response, NULL, &resp,
                err);
  if (rc != IDEM_OK) return rc;
  bool first = !*token;
  if (first && !copy_str(out->global_id, sizeof out->global_id, resp->global_id)) {
    rc = too_long(err, "global_id");
    goto done;
  }
  if (!(*next = strdup(str_or_empty(resp->next_page_token)))) goto nomem;
  if (first) {
    out->created_unix_ms = resp->created_unix_ms;
    out->saga_type = strdup(resp->saga_type ? resp->saga_type : "");
    if (!out->saga_type) goto nomem;
  }
  if (resp->n_steps > 0) {
    idem_record *steps = realloc(out->steps, (out->n_steps + resp->n_steps) * sizeof *steps);
    if (!steps) goto nomem;
    out->steps = steps;
    for (size_t i = 0; i < resp->n_steps; i++) {
      idem_record *r = &out->steps[out->n_steps];
      memset(r, 0, sizeof *r);
      out->n_steps++; /* so that a failure frees what the record holds */
      rc = record_from_pb(resp->steps[i], r, err);
      if (rc != IDEM_OK) goto done;
    }
  }
  if (first && resp->n_labels > 0) {
    if (!(out->labels = calloc(resp->n_labels, sizeof *out->labels))) goto nomem;
    for (size_t i = 0; i < resp->n_labels; i++) {
      char *k = strdup(resp->labels[i]->key ? resp->labels[i]->key : "");
      char *v = strdup(resp->labels[i]->value ? resp->labels[i]->value : "");
      out->labels[i].key = k;
      out->labels[i].value = v;
      out->n_labels = i + 1;
      if (!k || !v) goto nomem;
    }
  }
  goto done;
nomem:
  rc = idem__fail(err, IDEM_NOMEM, "out of memory");
done:
  idem__v1__get_saga_response__free_unpacked(resp, NULL);
  return rc;
}

/* A bound on the pages of one saga: a server that never ends its pages is refused. */
#define SAGA_PAGES_MAX 100000

int idem_saga_get(idem_client *c, const char *global_id, idem_saga *out, idem_error *err) {
  idem_saga scratch;
  idem_saga *s = out ? out : &scratch;
  memset(s, 0, sizeof *s);
  char *token = NULL;
  int rc = IDEM_OK;
  for (int pages = 0; rc == IDEM_OK; pages++) {
    if (pages == SAGA_PAGES_MAX) {
      rc = idem__fail(err, IDEM_BAD_RESPONSE, "GetSaga: more than %d pages", SAGA_PAGES_MAX);
      break;
    }
    char *next = NULL;
    rc = saga_page(c, global_id, token ? token : "", s, &next, err);
    free(token);
    token = next;
    if (rc == IDEM_OK && (!token || !*token)) break;
  }
  free(token);
  if (rc != IDEM_OK || !out) idem_saga_clear(s);
  return rc;
}

int idem_step_begin(idem_client *c, const idem_step_key *key, const uint8_t *fp, size_t fp_len,
                    uint32_t lease_ms, idem_begin *out, idem_error *err) {
  return idem__step_begin(c, key, fp, fp_len, lease_ms, 0, NULL, out, err);
}

int idem_step_begin_wait(idem_client *c, const idem_step_key *key, const uint8_t *fp, size_t fp_len,
                         uint32_t lease_ms, uint32_t wait_ms, idem_begin *out, idem_error *err) {
  if (!c) return idem__step_begin(c, key, fp, fp_len, lease_ms, wait_ms, NULL, out, err);
  /* the call's deadline covers the wait: the client's per-call deadline after it */
  idem__retry how = idem__retry_call(c, c->deadline_ms + (int64_t)wait_ms);
  return idem__step_begin(c, key, fp, fp_len, lease_ms, wait_ms, &how, out, err);
}

int idem__step_begin(idem_client *c, const idem_step_key *key, const uint8_t *fp, size_t fp_len,
                     uint32_t lease_ms, uint32_t wait_ms, idem__retry *how, idem_begin *out,
                     idem_error *err) {
  if (out) memset(out, 0, sizeof *out);
  Idem__V1__StepKey pkey;
  idem__key_to_pb(key, &pkey);
  Idem__V1__BeginStepRequest req = IDEM__V1__BEGIN_STEP_REQUEST__INIT;
  req.key = &pkey;
  if (fp && fp_len) {
    req.fingerprint.data = (uint8_t *)fp;
    req.fingerprint.len = fp_len;
  }
  req.lease_ms = lease_ms;
  req.wait_ms = wait_ms;
  if (how && how->poll) how->poll_ms = &req.wait_ms;
  Idem__V1__BeginStepResponse *resp;
  int rc = CALL(c, IDEM__M_BEGIN_STEP, req, pkey.global_id, idem__v1__begin_step_response, how,
                &resp, err);
  if (how) how->poll_ms = NULL; /* req is gone */
  if (rc != IDEM_OK) return rc;
  if (out) {
    out->decision = (idem_decision)resp->decision;
    out->attempt = resp->attempt;
    out->lease_expires_unix_ms = resp->lease_expires_unix_ms;
    out->takeover = resp->takeover;
    out->expires_unix_ms = resp->expires_unix_ms;
    out->result_expired = resp->result_expired;
    out->result_expires_unix_ms = resp->result_expires_unix_ms;
    if (resp->result) {
      rc = idem__result_from_pb(resp->result, &out->result, err);
      out->has_result = rc == IDEM_OK;
    }
    if (rc != IDEM_OK) idem_begin_clear(out);
  }
  /* every answer names the operation's failure mode (docs/api.md §20; an older coordinator
   * leaves it unset): the step helper's fail-open check needs no GetPolicy of its own */
  if (key) idem__policy_heard(c, key->service, key->operation, (int)resp->failure_mode);
  idem__v1__begin_step_response__free_unpacked(resp, NULL);
  return rc;
}

int idem_step_complete(idem_client *c, const idem_step_key *key, uint64_t attempt,
                       idem_outcome outcome, int32_t code, const void *body, size_t body_len,
                       idem_record *out, idem_error *err) {
  return idem__step_complete(c, key, attempt, outcome, code, body, body_len, NULL, out, err);
}

int idem__step_complete(idem_client *c, const idem_step_key *key, uint64_t attempt,
                        idem_outcome outcome, int32_t code, const void *body, size_t body_len,
                        idem__retry *how, idem_record *out, idem_error *err) {
  if (out) memset(out, 0, sizeof *out);
  Idem__V1__StepKey pkey;
  idem__key_to_pb(key, &pkey);
  Idem__V1__CompleteStepRequest req = IDEM__V1__COMPLETE_STEP_REQUEST__INIT;
  req.key = &pkey;
  req.attempt = attempt;
  req.outcome = (Idem__V1__Outcome)outcome;
  req.code = code;
  if (body && body_len) {
    req.body.data = (uint8_t *)body;
    req.body.len = body_len;
  }
  Idem__V1__CompleteStepResponse *resp;
  int rc = CALL(c, IDEM__M_COMPLETE_STEP, req, pkey.global_id, idem__v1__complete_step_response,
                how, &resp, err);
  if (rc != IDEM_OK) return rc;
  rc = idem__record_out(resp->record, out, err);
  idem__v1__complete_step_response__free_unpacked(resp, NULL);
  return rc;
}

int idem_step_extend(idem_client *c, const idem_step_key *key, uint64_t attempt, uint32_t lease_ms,
                     int64_t *lease_expires_unix_ms, idem_error *err) {
  if (lease_expires_unix_ms) *lease_expires_unix_ms = 0;
  Idem__V1__StepKey pkey;
  idem__key_to_pb(key, &pkey);
  Idem__V1__ExtendLeaseRequest req = IDEM__V1__EXTEND_LEASE_REQUEST__INIT;
  req.key = &pkey;
  req.attempt = attempt;
  req.lease_ms = lease_ms;
  Idem__V1__ExtendLeaseResponse *resp;
  int rc = CALL(c, IDEM__M_EXTEND_LEASE, req, pkey.global_id, idem__v1__extend_lease_response,
                NULL, &resp, err);
  if (rc != IDEM_OK) return rc;
  if (lease_expires_unix_ms) *lease_expires_unix_ms = resp->lease_expires_unix_ms;
  idem__v1__extend_lease_response__free_unpacked(resp, NULL);
  return IDEM_OK;
}

int idem_step_lookup_traced(idem_client *c, const idem_step_key *key, idem_record *out,
                            idem_trace_ids *ids, idem_error *err) {
  if (out) memset(out, 0, sizeof *out);
  if (ids) memset(ids, 0, sizeof *ids);
  Idem__V1__StepKey pkey;
  idem__key_to_pb(key, &pkey);
  Idem__V1__LookupStepRequest req = IDEM__V1__LOOKUP_STEP_REQUEST__INIT;
  req.key = &pkey;
  Idem__V1__StepRecord *resp;
  int rc =
      CALL(c, IDEM__M_LOOKUP_STEP, req, pkey.global_id, idem__v1__step_record, NULL, &resp, err);
  if (rc != IDEM_OK) return rc;
  rc = idem__record_out(resp, out, err);
  if (rc == IDEM_OK && ids) idem__trace_ids_from_pb(resp, ids);
  idem__v1__step_record__free_unpacked(resp, NULL);
  return rc;
}

int idem_step_lookup(idem_client *c, const idem_step_key *key, idem_record *out, idem_error *err) {
  return idem_step_lookup_traced(c, key, out, NULL, err);
}

int idem_policy_get(idem_client *c, const char *service, const char *operation, idem_policy *out,
                    idem_error *err) {
  if (out) memset(out, 0, sizeof *out);
  Idem__V1__GetPolicyRequest req = IDEM__V1__GET_POLICY_REQUEST__INIT;
  req.service = str_or_empty(service);
  req.operation = str_or_empty(operation);
  Idem__V1__Policy *resp;
  int rc = CALL(c, IDEM__M_GET_POLICY, req, NULL, idem__v1__policy, NULL, &resp, err);
  if (rc != IDEM_OK) return rc;
  if (out) {
    if (!copy_str(out->service, sizeof out->service, resp->service))
      rc = too_long(err, "service");
    else if (!copy_str(out->operation, sizeof out->operation, resp->operation))
      rc = too_long(err, "operation");
    out->failure_mode = (int)resp->failure_mode;
    out->retention_s = resp->retention_s;
    out->key_retention_s = resp->key_retention_s;
    out->lease_ms = resp->lease_ms;
    out->updated_unix_ms = resp->updated_unix_ms;
    if (rc != IDEM_OK) memset(out, 0, sizeof *out);
  }
  idem__v1__policy__free_unpacked(resp, NULL);
  return rc;
}

/* --- Admin ------------------------------------------------------------------------------------ */

const char *idem_version(void) { return IDEM_VERSION; }

int idem_get_status(idem_client *c, idem_status *out, idem_error *err) {
  return idem_get_status_schema(c, out, NULL, err);
}

int idem_get_status_schema(idem_client *c, idem_status *out, idem_status_schema *schema,
                           idem_error *err) {
  if (out) memset(out, 0, sizeof *out);
  if (schema) memset(schema, 0, sizeof *schema);
  Idem__V1__GetStatusRequest req = IDEM__V1__GET_STATUS_REQUEST__INIT;
  Idem__V1__GetStatusResponse *resp;
  int rc = CALL(c, IDEM__M_GET_STATUS, req, NULL, idem__v1__get_status_response, NULL, &resp, err);
  if (rc != IDEM_OK) return rc;
  if (out) {
    /* Informational strings: truncated rather than refused. */
    snprintf(out->node_id, sizeof out->node_id, "%s", resp->node_id ? resp->node_id : "");
    out->leader = resp->leader;
    snprintf(out->leader_address, sizeof out->leader_address, "%s",
             resp->leader_address ? resp->leader_address : "");
    out->epoch = resp->epoch;
    out->store_ok = resp->store_ok;
    out->election_ok = resp->election_ok;
    snprintf(out->version, sizeof out->version, "%s", resp->version ? resp->version : "");
    out->started_unix_ms = resp->started_unix_ms;
  }
  if (schema) {
    schema->version = resp->schema_version;
    schema->newest = resp->schema_newest;
  }
  idem__v1__get_status_response__free_unpacked(resp, NULL);
  return IDEM_OK;
}

/* --- slot groups (docs/api.md §17) --- */

uint32_t idem_slot_of(const char *tenant, const char *id, uint32_t slots) {
  return idem_v1_slot_of(tenant, id, slots);
}

void idem_topology_clear(idem_topology *t) {
  if (!t) return;
  free(t->ranges);
  free(t->groups);
  memset(t, 0, sizeof *t);
}

int idem_get_topology(idem_client *c, idem_topology *out, idem_error *err) {
  return idem_get_topology_move(c, out, NULL, err);
}

int idem_get_topology_move(idem_client *c, idem_topology *out, idem_slot_move *move,
                           idem_error *err) {
  if (move) memset(move, 0, sizeof *move);
  if (!out) return idem__fail(err, IDEM_INVALID_ARGUMENT, "out: missing");
  memset(out, 0, sizeof *out);
  Idem__V1__GetTopologyRequest req = IDEM__V1__GET_TOPOLOGY_REQUEST__INIT;
  Idem__V1__Topology *resp;
  int rc = CALL(c, IDEM__M_GET_TOPOLOGY, req, NULL, idem__v1__topology, NULL, &resp, err);
  if (rc != IDEM_OK) return rc;
  idem__route_topology(c->route, resp);
  if (move && (rc = idem__slot_move_from_pb(resp->move, move, err)) != IDEM_OK) {
    idem__v1__topology__free_unpacked(resp, NULL);
    return rc;
  }
  out->slots = resp->slots;
  out->version = resp->version;
  out->ranges = calloc(resp->n_ranges ? resp->n_ranges : 1, sizeof *out->ranges);
  out->groups = calloc(resp->n_groups ? resp->n_groups : 1, sizeof *out->groups);
  if (!out->ranges || !out->groups) {
    idem__v1__topology__free_unpacked(resp, NULL);
    idem_topology_clear(out);
    return idem__fail(err, IDEM_NOMEM, "out of memory");
  }
  out->n_ranges = resp->n_ranges;
  for (size_t i = 0; i < resp->n_ranges; i++) {
    const Idem__V1__SlotRange *r = resp->ranges[i];
    idem_slot_range *o = &out->ranges[i];
    o->from = r->from;
    o->to = r->to;
    o->moving = r->moving;
    snprintf(o->group, sizeof o->group, "%s", r->group ? r->group : "");
    snprintf(o->to_group, sizeof o->to_group, "%s", r->to_group ? r->to_group : "");
  }
  out->n_groups = resp->n_groups;
  for (size_t i = 0; i < resp->n_groups; i++) {
    const Idem__V1__GroupStatus *g = resp->groups[i];
    idem_group_status *o = &out->groups[i];
    snprintf(o->name, sizeof o->name, "%s", g->name ? g->name : "");
    snprintf(o->leader_address, sizeof o->leader_address, "%s",
             g->leader_address ? g->leader_address : "");
    o->epoch = g->epoch;
    o->store_ok = g->store_ok;
    o->slot_count = g->slot_count;
    o->led_here = g->led_here;
  }
  idem__v1__topology__free_unpacked(resp, NULL);
  return IDEM_OK;
}

/* For admin.c (incident response). */
int idem__record_from_pb(const Idem__V1__StepRecord *pb, idem_record *r, idem_error *err) {
  return record_from_pb(pb, r, err);
}

int idem__record_out(const Idem__V1__StepRecord *pb, idem_record *out, idem_error *err) {
  if (!out || !pb) return IDEM_OK;
  int rc = record_from_pb(pb, out, err);
  if (rc != IDEM_OK) idem_record_clear(out);
  return rc;
}
