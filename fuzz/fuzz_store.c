/* fuzz_store.c — see fuzz_store.h. */
#include "fuzz_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TENANT "default"

static const store_ops *mem_ops; /* the memstore's own table */

static void die(const char *what) {
  fprintf(stderr, "fuzz_store: %s\n", what);
  abort();
}

static err_code failing(store *s, err_t *err) {
  memstore *m = (memstore *)s;
  m->calls++;
  if (m->fail_rc != ERR_OK) return err_set(err, m->fail_rc, "fuzz_store: injected failure");
  return ERR_OK;
}

static bool terminated(const char *s, size_t cap) {
  return memchr(s, '\0', cap) != NULL;
}

static bool key_terminated(const step_key *k) {
  return terminated(k->tenant, sizeof k->tenant) && terminated(k->global_id, sizeof k->global_id) &&
         terminated(k->service, sizeof k->service) && terminated(k->operation, sizeof k->operation);
}

static bool empty_or(const char *want, const char *have) {
  return !want || !*want || strcmp(want, have) == 0;
}

static err_code fs_list_steps(store *s, const step_filter *f, int64_t deadline, step_list *out,
                              err_t *err) {
  memstore *m = (memstore *)s;
  memset(out, 0, sizeof *out);
  if (!f->tenant || f->limit < 1 || f->limit > LIST_PAGE_MAX) die("list_steps: bad filter");
  if (f->has_after && !key_terminated(&f->after)) die("list_steps: cursor not terminated");
  err_code rc = failing(s, err);
  if (rc != ERR_OK) return rc;
  out->recs = calloc(f->limit, sizeof *out->recs);
  if (!out->recs) die("out of memory");
  for (size_t i = 0; i < m->n_recs; i++) {
    const step_rec *r = &m->recs[i];
    if (strcmp(r->key.tenant, f->tenant) != 0 || (f->state && r->state != f->state) ||
        !empty_or(f->service, r->key.service) || !empty_or(f->operation, r->key.operation) ||
        !empty_or(f->global_id, r->key.global_id))
      continue;
    if (out->n == f->limit) {
      out->more = true;
      break;
    }
    if (!step_rec_copy(&out->recs[out->n], r)) die("out of memory");
    out->n++;
  }
  return ERR_OK;
}

static err_code fs_step_txn_audit(store *s, const step_key *key, int64_t deadline, store_step_fn fn,
                                  void *arg, const audit_rec *audit, err_t *err) {
  if (!terminated(audit->actor, sizeof audit->actor) ||
      !terminated(audit->action, sizeof audit->action) ||
      !terminated(audit->reason, sizeof audit->reason) || !key_terminated(&audit->key))
    die("step_txn_audit: audit row not terminated");
  return mem_ops->step_txn(s, key, deadline, fn, arg, err);
}

static err_code fs_list_audit(store *s, const char *tenant, const char *global_id,
                              int64_t before_id, uint32_t limit, int64_t deadline, audit_list *out,
                              err_t *err) {
  memset(out, 0, sizeof *out);
  if (!tenant || limit < 1 || limit > LIST_PAGE_MAX) die("list_audit: bad arguments");
  err_code rc = failing(s, err);
  if (rc != ERR_OK) return rc;
  /* two rows below before_id (or 100), so that paging tokens are made */
  int64_t top = before_id > 0 ? before_id : 100;
  size_t n = top > 2 ? 2 : (size_t)(top - 1);
  if (n > limit) n = limit;
  if (n == 0) return ERR_OK;
  out->recs = calloc(n, sizeof *out->recs);
  if (!out->recs) die("out of memory");
  for (size_t i = 0; i < n; i++) {
    audit_rec *a = &out->recs[i];
    a->id = top - 1 - (int64_t)i;
    a->at_ms = ((memstore *)s)->now_ms;
    snprintf(a->actor, sizeof a->actor, "%s", tenant);
    snprintf(a->action, sizeof a->action, "resolve");
    snprintf(a->key.tenant, sizeof a->key.tenant, "%s", tenant);
    snprintf(a->key.global_id, sizeof a->key.global_id, "%s",
             global_id && *global_id ? global_id : "g-1");
    snprintf(a->key.service, sizeof a->key.service, "payment");
    snprintf(a->key.operation, sizeof a->key.operation, "charge");
    a->key.phase = PHASE_FORWARD;
    snprintf(a->reason, sizeof a->reason, "fuzz");
    a->from_state = STATE_UNKNOWN;
    a->to_state = STATE_FAILED;
  }
  out->n = n;
  out->more = top - 1 - (int64_t)n > 0;
  return ERR_OK;
}

static err_code fs_count_steps(store *s, int64_t deadline, step_counts *out, err_t *err) {
  memset(out, 0, sizeof *out);
  return failing(s, err);
}

static err_code fs_policy_put(store *s, const char *tenant, const policy *p, bool only_if_absent,
                              int64_t deadline, bool *written, policy *out, err_t *err) {
  if (!tenant || !terminated(p->service, sizeof p->service) ||
      !terminated(p->operation, sizeof p->operation))
    die("policy_put: bad arguments");
  *written = false;
  err_code rc = failing(s, err);
  if (rc != ERR_OK) return rc;
  *written = true;
  if (out) {
    *out = *p;
    out->updated_ms = ((memstore *)s)->now_ms;
  }
  return ERR_OK;
}

static err_code fs_policy_delete(store *s, const char *tenant, const char *service,
                                 const char *operation, int64_t deadline, bool *deleted,
                                 err_t *err) {
  if (!tenant || !service || !operation) die("policy_delete: bad arguments");
  *deleted = false;
  err_code rc = failing(s, err);
  if (rc != ERR_OK) return rc;
  *deleted = strcmp(service, "payment") == 0;
  return ERR_OK;
}

static err_code fs_policy_list(store *s, const char *tenant, int64_t deadline, policy_row **rows,
                               size_t *n, err_t *err) {
  *rows = NULL;
  *n = 0;
  err_code rc = failing(s, err);
  if (rc != ERR_OK) return rc;
  policy_row *r = calloc(1, sizeof *r);
  if (!r) die("out of memory");
  snprintf(r->tenant, sizeof r->tenant, "%s", tenant ? tenant : TENANT);
  policy_default("payment", "charge", &r->p);
  r->p.mode = FAILURE_MODE_FAIL_OPEN;
  r->p.updated_ms = ((memstore *)s)->now_ms;
  *rows = r;
  *n = 1;
  return ERR_OK;
}

static err_code fs_reap(store *s, uint32_t limit, int64_t deadline, uint64_t *deleted, err_t *err) {
  *deleted = 0;
  return failing(s, err);
}

static store_ops fuzz_ops;

static step_rec rec(const char *gid, const char *op, step_phase ph, step_state st, int64_t now) {
  step_rec r;
  memset(&r, 0, sizeof r);
  r.present = true;
  snprintf(r.key.tenant, sizeof r.key.tenant, TENANT);
  snprintf(r.key.global_id, sizeof r.key.global_id, "%s", gid);
  snprintf(r.key.service, sizeof r.key.service, "payment");
  snprintf(r.key.operation, sizeof r.key.operation, "%s", op);
  r.key.phase = ph;
  r.state = st;
  r.attempt = 1;
  r.fp_len = 4;
  memcpy(r.fp, "fp-1", 4);
  r.created_ms = now - 10000;
  r.updated_ms = now - 5000;
  if (st == STATE_IN_PROGRESS) r.lease_expires_ms = now + 30000;
  if (st == STATE_SUCCEEDED || st == STATE_FAILED) {
    r.outcome = st == STATE_SUCCEEDED ? OUTCOME_SUCCEEDED : OUTCOME_FAILED;
    r.code = 200;
    r.body = (uint8_t *)"{\"ok\":true}";
    r.body_len = 11;
    r.completed_ms = now - 5000;
    r.expires_ms = now + 86400000;
  }
  return r;
}

memstore *fuzz_store_new(int64_t now_ms) {
  memstore *m = memstore_new(now_ms);
  if (!mem_ops) {
    mem_ops = m->base.ops;
    fuzz_ops = *mem_ops;
    fuzz_ops.list_steps = fs_list_steps;
    fuzz_ops.step_txn_audit = fs_step_txn_audit;
    fuzz_ops.list_audit = fs_list_audit;
    fuzz_ops.count_steps = fs_count_steps;
    fuzz_ops.policy_put = fs_policy_put;
    fuzz_ops.policy_delete = fs_policy_delete;
    fuzz_ops.policy_list = fs_policy_list;
    fuzz_ops.reap_steps = fs_reap;
    fuzz_ops.reap_sagas = fs_reap;
  }
  m->base.ops = &fuzz_ops;

  /* g-1: charge in progress; g-2: charge succeeded, refund (compensation) unknown;
   * g-3: charge failed */
  step_rec rs[] = {
      rec("g-1", "charge", PHASE_FORWARD, STATE_IN_PROGRESS, now_ms),
      rec("g-2", "charge", PHASE_FORWARD, STATE_SUCCEEDED, now_ms),
      rec("g-2", "charge", PHASE_COMPENSATION, STATE_UNKNOWN, now_ms),
      rec("g-3", "charge", PHASE_FORWARD, STATE_FAILED, now_ms),
  };
  for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) memstore_put(m, &rs[i]);

  saga_label labels[] = {{(char *)"order", (char *)"o-1"}, {(char *)"shop", (char *)"s-1"}};
  saga_new sn = {.tenant = TENANT,
                 .global_id = "g-1",
                 .request_id = "req-1",
                 .saga_type = "order",
                 .labels = labels,
                 .n_labels = 2,
                 .retention_s = 3600};
  saga_begun b;
  err_t err;
  err_clear(&err);
  if (store_begin_saga(&m->base, &sn, 0, &b, &err) != ERR_OK) die("cannot seed the saga");
  return m;
}
