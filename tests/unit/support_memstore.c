/* support_memstore.c — the in-memory test double of store_ops (see support_memstore.h). */
#include "support_memstore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool same_pair(const step_key *a, const step_key *b) {
  return strcmp(a->tenant, b->tenant) == 0 && strcmp(a->global_id, b->global_id) == 0 &&
         strcmp(a->service, b->service) == 0 && strcmp(a->operation, b->operation) == 0;
}

static step_rec *find(const memstore *m, const step_key *key, step_phase phase) {
  for (size_t i = 0; i < m->n_recs; i++)
    if (same_pair(&m->recs[i].key, key) && m->recs[i].key.phase == phase) return &m->recs[i];
  return NULL;
}

static bool live(const step_rec *r, int64_t now) {
  return r && r->present && !(r->expires_ms != 0 && r->expires_ms <= now);
}

const step_rec *memstore_get(const memstore *m, const step_key *key) {
  return find(m, key, key->phase);
}

void memstore_put(memstore *m, const step_rec *r) {
  step_rec copy;
  if (!step_rec_copy(&copy, r)) abort();
  step_rec *old = find(m, &r->key, r->key.phase);
  if (old) {
    step_rec_clear(old);
    *old = copy;
    return;
  }
  if (m->n_recs == m->cap_recs) {
    m->cap_recs = m->cap_recs ? 2 * m->cap_recs : 8;
    m->recs = realloc(m->recs, m->cap_recs * sizeof *m->recs);
    if (!m->recs) abort();
  }
  m->recs[m->n_recs++] = copy;
}

typedef struct memstore_submitted {
  struct memstore_submitted *next;
  step_key key; /* a copy: the caller's must stay valid, but the double checks nothing else */
  const step_key *caller_key;
  int64_t deadline;
  store_step_fn fn;
  void *arg;
  store_step_done_fn done;
  void *done_arg;
} memstore_submitted;

static void ms_close(store *s) {
  memstore *m = (memstore *)s;
  free(m->audit);
  while (m->submitted) { /* never answered: a test that did not run them */
    memstore_submitted *q = m->submitted;
    m->submitted = q->next;
    free(q);
  }
  for (size_t i = 0; i < m->n_recs; i++) step_rec_clear(&m->recs[i]);
  free(m->recs);
  free(m);
}

static const char *const op_names[MEMSTORE_OP__COUNT] = {
    [MEMSTORE_ANY] = "any",
    [MEMSTORE_PING] = "ping",
    [MEMSTORE_STEP_TXN] = "step_txn",
    [MEMSTORE_STEP_TXN_AUDIT] = "step_txn_audit",
    [MEMSTORE_LOOKUP_STEP] = "lookup_step",
    [MEMSTORE_BEGIN_SAGA] = "begin_saga",
    [MEMSTORE_GET_SAGA] = "get_saga",
    [MEMSTORE_STEP_TXN_SUBMIT] = "step_txn_submit",
};

const char *memstore_op_name(memstore_op op) {
  return (unsigned)op < MEMSTORE_OP__COUNT ? op_names[op] : "?";
}

static void fail_nth(memstore *m, memstore_op op, int n, bool at_commit) {
  m->fail_op = op;
  m->fail_left = n > 0 ? n : 0;
  m->fail_at_commit = at_commit;
}

void memstore_fail_nth(memstore *m, memstore_op op, int n) {
  fail_nth(m, op, n, false);
}

void memstore_fail_nth_at_commit(memstore *m, memstore_op op, int n) {
  fail_nth(m, op, n, true);
}

int memstore_calls(const memstore *m, memstore_op op) {
  return (unsigned)op < MEMSTORE_OP__COUNT ? m->op_calls[op] : 0;
}

/* Counts a call of op; true when it is the one memstore_fail_nth chose. */
static bool count_call(memstore *m, memstore_op op) {
  m->op_calls[op]++;
  m->op_calls[MEMSTORE_ANY]++;
  if (m->fail_left == 0 || (m->fail_op != MEMSTORE_ANY && m->fail_op != op)) return false;
  if (--m->fail_left > 0) return false;
  m->faults++;
  return true;
}

static err_code injected(memstore *m, memstore_op op, err_t *err) {
  return err_fail(err, ERR_UNAVAILABLE, ERR_R_STORE_UNAVAILABLE,
                  "memstore: injected failure of %s (call %d)", memstore_op_name(op),
                  m->op_calls[op]);
}

/* The start of every call but close and step_txn_submit: counts it, then fails it when every
 * call fails (fail_rc) or when it is the chosen one (and the failure is not at commit). */
static err_code enter_op(memstore *m, memstore_op op, int64_t deadline, bool *fail_at_commit,
                         err_t *err) {
  bool chosen = count_call(m, op);
  m->calls++;
  m->last_deadline = deadline;
  if (m->fail_rc != ERR_OK) return err_set(err, m->fail_rc, "memstore: injected failure");
  if (chosen && !(fail_at_commit && m->fail_at_commit)) return injected(m, op, err);
  if (fail_at_commit) *fail_at_commit = chosen;
  return ERR_OK;
}

static err_code enter(memstore *m, memstore_op op, int64_t deadline, err_t *err) {
  return enter_op(m, op, deadline, NULL, err);
}

static err_code ms_ping(store *s, int64_t deadline, err_t *err) {
  return enter((memstore *)s, MEMSTORE_PING, deadline, err);
}

void memstore_add_audit(memstore *m, const audit_rec *a) {
  if (m->n_audit == m->cap_audit) {
    m->cap_audit = m->cap_audit ? 2 * m->cap_audit : 8;
    m->audit = realloc(m->audit, m->cap_audit * sizeof *m->audit);
    if (!m->audit) abort();
  }
  audit_rec *row = &m->audit[m->n_audit++];
  *row = *a;
  row->id = (int64_t)m->n_audit;
  row->at_ms = m->now_ms;
}

/* step_txn and step_txn_audit (audit != NULL): lock (nothing to lock here), read the pair,
 * run fn, write, append the audit row when fn answered ERR_OK, commit. */
static err_code txn(memstore *m, memstore_op op, const step_key *key, int64_t deadline,
                    store_step_fn fn, void *arg, const audit_rec *audit, err_t *err) {
  bool fail_at_commit = false;
  err_code rc = enter_op(m, op, deadline, &fail_at_commit, err);
  if (rc != ERR_OK) return rc;

  if (m->before_txn) m->before_txn(m, key, m->before_txn_arg);
  step_pair pair;
  memset(&pair, 0, sizeof pair);
  pair.now_ms = m->now_ms;
  const step_rec *f = find(m, key, PHASE_FORWARD), *c = find(m, key, PHASE_COMPENSATION);
  if (f) pair.fwd = *f; /* bodies borrowed from the store, valid during the callback */
  if (c) pair.comp = *c;

  step_writes w;
  int runs = m->txn_runs > 0 ? m->txn_runs : 1;
  for (int i = 0; i < runs; i++) {
    memset(&w, 0x5A, sizeof w); /* garbage: fn must start from scratch */
    w.n = 0;
    err_clear(err);
    m->fn_calls++;
    rc = fn(arg, &pair, &w, err);
  }
  if (w.n < 0 || w.n > 2) return err_set(err, ERR_INTERNAL, "memstore: bad write count %d", w.n);

  /* copy first: a write may borrow its body from a record it replaces */
  step_rec copies[2];
  for (int i = 0; i < w.n; i++) {
    if (!w.recs[i].present || !same_pair(&w.recs[i].key, key)) {
      for (int j = 0; j < i; j++) step_rec_clear(&copies[j]);
      return err_set(err, ERR_INTERNAL, "memstore: write %d outside the step pair", i);
    }
    if (!step_rec_copy(&copies[i], &w.recs[i])) abort();
  }
  if (fail_at_commit) { /* rolled back: nothing written, nothing audited */
    for (int i = 0; i < w.n; i++) step_rec_clear(&copies[i]);
    return injected(m, op, err);
  }
  for (int i = 0; i < w.n; i++) {
    memstore_put(m, &copies[i]);
    step_rec_clear(&copies[i]);
  }
  if (audit && rc == ERR_OK) memstore_add_audit(m, audit);
  if (w.n > 0 && m->on_change) m->on_change(m->on_change_arg, key);
  return rc;
}

static err_code ms_step_txn(store *s, const step_key *key, int64_t deadline, store_step_fn fn,
                            void *arg, err_t *err) {
  memstore *m = (memstore *)s;
  m->step_txn_calls++;
  return txn(m, MEMSTORE_STEP_TXN, key, deadline, fn, arg, NULL, err);
}

static err_code ms_step_txn_audit(store *s, const step_key *key, int64_t deadline, store_step_fn fn,
                                  void *arg, const audit_rec *audit, err_t *err) {
  return txn((memstore *)s, MEMSTORE_STEP_TXN_AUDIT, key, deadline, fn, arg, audit, err);
}

static err_code ms_lookup_step(store *s, const step_key *key, int64_t deadline, step_rec *out,
                               err_t *err) {
  memstore *m = (memstore *)s;
  m->lookup_calls++;
  memset(out, 0, sizeof *out);
  err_code rc = enter(m, MEMSTORE_LOOKUP_STEP, deadline, err);
  if (rc != ERR_OK) return rc;
  const step_rec *r = find(m, key, key->phase);
  if (live(r, m->now_ms) && !step_rec_copy(out, r)) abort();
  return ERR_OK;
}

static void copy_str(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src ? src : "");
}

static void fill_saga(memstore_saga *g, const saga_new *in, const char *global_id, int64_t now) {
  memset(g, 0, sizeof *g);
  copy_str(g->tenant, sizeof g->tenant, in->tenant);
  copy_str(g->global_id, sizeof g->global_id, global_id);
  copy_str(g->request_id, sizeof g->request_id, in->request_id);
  copy_str(g->saga_type, sizeof g->saga_type, in->saga_type);
  g->created_ms = now;
  g->n_labels = in->n_labels <= REC_LABELS_MAX ? in->n_labels : REC_LABELS_MAX;
  for (size_t i = 0; i < g->n_labels; i++) {
    copy_str(g->label_keys[i], sizeof g->label_keys[i], in->labels[i].key);
    copy_str(g->label_values[i], sizeof g->label_values[i], in->labels[i].value);
  }
}

static err_code ms_begin_saga(store *s, const saga_new *in, int64_t deadline, saga_begun *out,
                              err_t *err) {
  memstore *m = (memstore *)s;
  m->begin_saga_calls++;
  memset(out, 0, sizeof *out);
  err_code rc = enter(m, MEMSTORE_BEGIN_SAGA, deadline, err);
  if (rc != ERR_OK) return rc;

  fill_saga(&m->last_saga, in, in->global_id, m->now_ms);
  m->last_saga_had_request_id = in->request_id != NULL;
  m->last_saga_new = *in;
  m->last_saga_new.tenant = m->last_saga.tenant;
  m->last_saga_new.global_id = m->last_saga.global_id;
  m->last_saga_new.request_id = in->request_id ? m->last_saga.request_id : NULL;
  m->last_saga_new.saga_type = m->last_saga.saga_type;
  m->last_saga_new.labels = NULL; /* see last_saga.label_* */

  if (in->request_id) {
    for (size_t i = 0; i < m->n_sagas; i++) {
      memstore_saga *g = &m->sagas[i];
      if (strcmp(g->tenant, in->tenant) == 0 && strcmp(g->request_id, in->request_id) == 0) {
        copy_str(out->global_id, sizeof out->global_id, g->global_id);
        out->created = false;
        out->created_ms = g->created_ms;
        return ERR_OK;
      }
    }
  }
  if (m->n_sagas == MEMSTORE_MAX_SAGAS) return err_set(err, ERR_RESOURCE, "memstore: full");
  fill_saga(&m->sagas[m->n_sagas++], in, in->global_id, m->now_ms);
  copy_str(out->global_id, sizeof out->global_id, in->global_id);
  out->created = true;
  out->created_ms = m->now_ms;
  return ERR_OK;
}

/* Every step in one page (pg is ignored: paging is the PostgreSQL store's, tested there). */
static err_code ms_get_saga(store *s, const char *tenant, const char *global_id,
                            const saga_page *pg, int64_t deadline, saga_view *out, err_t *err) {
  (void)pg;
  memstore *m = (memstore *)s;
  m->get_saga_calls++;
  memset(out, 0, sizeof *out);
  err_code rc = enter(m, MEMSTORE_GET_SAGA, deadline, err);
  if (rc != ERR_OK) return rc;

  const memstore_saga *g = NULL;
  for (size_t i = 0; i < m->n_sagas; i++)
    if (strcmp(m->sagas[i].tenant, tenant) == 0 && strcmp(m->sagas[i].global_id, global_id) == 0)
      g = &m->sagas[i];
  size_t n = 0;
  for (size_t i = 0; i < m->n_recs; i++)
    if (strcmp(m->recs[i].key.tenant, tenant) == 0 &&
        strcmp(m->recs[i].key.global_id, global_id) == 0 && live(&m->recs[i], m->now_ms))
      n++;
  if (!g && n == 0) return err_set(err, ERR_NOT_FOUND, "no such saga");

  copy_str(out->global_id, sizeof out->global_id, global_id);
  if (g) {
    copy_str(out->saga_type, sizeof out->saga_type, g->saga_type);
    out->created_ms = g->created_ms;
    out->labels = calloc(g->n_labels ? g->n_labels : 1, sizeof *out->labels);
    if (!out->labels) abort();
    for (size_t i = 0; i < g->n_labels; i++) {
      out->labels[i].key = strdup(g->label_keys[i]);
      out->labels[i].value = strdup(g->label_values[i]);
      if (!out->labels[i].key || !out->labels[i].value) abort();
    }
    out->n_labels = g->n_labels;
  }
  out->steps = calloc(n ? n : 1, sizeof *out->steps);
  if (!out->steps) abort();
  for (size_t i = 0; i < m->n_recs; i++)
    if (strcmp(m->recs[i].key.tenant, tenant) == 0 &&
        strcmp(m->recs[i].key.global_id, global_id) == 0 && live(&m->recs[i], m->now_ms)) {
      if (!step_rec_copy(&out->steps[out->n_steps], &m->recs[i])) abort();
      out->n_steps++;
    }
  return ERR_OK;
}

static err_code ms_step_txn_submit(store *s, const step_key *key, int64_t deadline,
                                   store_step_fn fn, void *arg, store_step_done_fn done,
                                   void *done_arg, err_t *err) {
  memstore *m = (memstore *)s;
  m->submit_calls++;
  bool chosen = count_call(m, MEMSTORE_STEP_TXN_SUBMIT);
  if (m->submit_rc != ERR_OK) return err_set(err, m->submit_rc, "memstore: submission refused");
  if (chosen) return injected(m, MEMSTORE_STEP_TXN_SUBMIT, err);
  memstore_submitted *q = calloc(1, sizeof *q);
  if (!q) abort();
  *q = (memstore_submitted){.key = *key,
                            .caller_key = key,
                            .deadline = deadline,
                            .fn = fn,
                            .arg = arg,
                            .done = done,
                            .done_arg = done_arg};
  memstore_submitted **tail = &m->submitted;
  while (*tail) tail = &(*tail)->next;
  *tail = q;
  return ERR_OK;
}

int memstore_run_submitted(memstore *m) {
  int n = 0;
  while (m->submitted) {
    memstore_submitted *q = m->submitted;
    m->submitted = q->next;
    if (memcmp(&q->key, q->caller_key, sizeof q->key) != 0) abort(); /* the key moved */
    err_t err;
    err_clear(&err);
    err_code rc = ms_step_txn(&m->base, q->caller_key, q->deadline, q->fn, q->arg, &err);
    q->done(q->done_arg, rc, rc == ERR_OK ? NULL : &err);
    free(q);
    n++;
  }
  return n;
}

/* --- incident response: ListSteps and ResolveSteps' answers --- */

static int key_cmp(const step_key *a, const step_key *b) {
  int c = strcmp(a->global_id, b->global_id);
  if (!c) c = strcmp(a->service, b->service);
  if (!c) c = strcmp(a->operation, b->operation);
  if (!c) c = (int)a->phase - (int)b->phase;
  return c;
}

static int rec_cmp(const void *a, const void *b) {
  return key_cmp(&(*(const step_rec *const *)a)->key, &(*(const step_rec *const *)b)->key);
}

static bool set(const char *s) {
  return s && *s;
}

static bool matches(const memstore *m, const step_filter *f, const step_rec *r) {
  step_state want = f->lease_expired_only ? STATE_IN_PROGRESS : f->state;
  return strcmp(r->key.tenant, f->tenant) == 0 && live(r, m->now_ms) &&
         (want == STATE_NONE || r->state == want) &&
         (!f->lease_expired_only || r->lease_expires_ms <= m->now_ms) &&
         (!set(f->service) || strcmp(r->key.service, f->service) == 0) &&
         (!set(f->operation) || strcmp(r->key.operation, f->operation) == 0) &&
         (!set(f->global_id) || strcmp(r->key.global_id, f->global_id) == 0) &&
         (!set(f->trace_id) || strcmp(r->begin_trace_id, f->trace_id) == 0 ||
          strcmp(r->complete_trace_id, f->trace_id) == 0) &&
         (f->updated_before_ms <= 0 || r->updated_ms < f->updated_before_ms) &&
         (!f->has_after || key_cmp(&r->key, &f->after) > 0);
}

/* Key order, after the cursor, at most f->limit (max_body_bytes is the PostgreSQL store's). */
static err_code ms_list_steps(store *s, const step_filter *f, int64_t deadline, step_list *out,
                              err_t *err) {
  memstore *m = (memstore *)s;
  memset(out, 0, sizeof *out);
  m->calls++;
  (void)deadline;
  if (m->fail_rc != ERR_OK) return err_set(err, m->fail_rc, "memstore: failing");
  const step_rec **hit = calloc(m->n_recs ? m->n_recs : 1, sizeof *hit);
  if (!hit) abort();
  size_t n = 0;
  for (size_t i = 0; i < m->n_recs; i++)
    if (matches(m, f, &m->recs[i])) hit[n++] = &m->recs[i];
  qsort(hit, n, sizeof *hit, rec_cmp);
  if (n > f->limit) {
    out->more = true;
    n = f->limit;
  }
  out->recs = calloc(n ? n : 1, sizeof *out->recs);
  if (!out->recs) abort();
  for (size_t i = 0; i < n; i++)
    if (!step_rec_copy(&out->recs[i], hit[i])) abort();
  out->n = n;
  free(hit);
  err_clear(err);
  return ERR_OK;
}

static err_code ms_bulk_get(store *s, const char *tenant, const char *request_id, int64_t deadline,
                            bulk_rec *out, bool *found, err_t *err) {
  memstore *m = (memstore *)s;
  m->calls++;
  (void)deadline;
  *found = false;
  if (m->fail_rc != ERR_OK) return err_set(err, m->fail_rc, "memstore: failing");
  size_t n_bulk = m->n_bulk < sizeof m->bulk / sizeof m->bulk[0]
                      ? m->n_bulk
                      : sizeof m->bulk / sizeof m->bulk[0];
  for (size_t i = 0; i < n_bulk; i++)
    if (strcmp(m->bulk[i].tenant, tenant) == 0 && strcmp(m->bulk[i].request_id, request_id) == 0) {
      *out = m->bulk[i];
      *found = true;
    }
  err_clear(err);
  return ERR_OK;
}

static err_code ms_bulk_put(store *s, const bulk_rec *in, uint32_t keep_s, int64_t deadline,
                            bulk_rec *out, bool *stored, err_t *err) {
  memstore *m = (memstore *)s;
  (void)keep_s;
  bool found = false;
  err_code rc = ms_bulk_get(s, in->tenant, in->request_id, deadline, out, &found, err);
  if (rc != ERR_OK) return rc;
  *stored = !found;
  if (!found) { /* the oldest of a full memory is overwritten (a fuzzer stores many) */
    size_t cap = sizeof m->bulk / sizeof m->bulk[0];
    m->bulk[m->n_bulk++ % cap] = *in;
    if (m->n_bulk == 2 * cap) m->n_bulk = cap;
    *out = *in;
  }
  return ERR_OK;
}

static const store_ops memstore_ops = {
    .version = STORE_OPS_VERSION,
    .close = ms_close,
    .ping = ms_ping,
    .step_txn = ms_step_txn,
    .lookup_step = ms_lookup_step,
    .begin_saga = ms_begin_saga,
    .get_saga = ms_get_saga,
    .step_txn_submit = ms_step_txn_submit,
    .step_txn_audit = ms_step_txn_audit,
    .list_steps = ms_list_steps,
    .bulk_get = ms_bulk_get,
    .bulk_put = ms_bulk_put,
};

memstore *memstore_new(int64_t now_ms) {
  memstore *m = calloc(1, sizeof *m);
  if (!m) abort();
  m->base.ops = &memstore_ops;
  m->now_ms = now_ms;
  m->txn_runs = 1;
  m->fail_rc = ERR_OK;
  return m;
}
