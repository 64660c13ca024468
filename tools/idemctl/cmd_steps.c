/* cmd_steps.c — idemctl status, step, saga, steps, resolve, audit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/v1/names.h"
#include "idemctl.h"

/* --- shared --- */

/* "in progress (lease expired 3m ago)" / "in progress (lease in 25s)" / "succeeded". */
static int skip_of(const idem_record *r) {
  return idem_skip_of(r->phase, r->state, (unsigned long long)r->attempt);
}

static const char *state_words(const idem_record *r, char *buf, size_t n) {
  int skip = skip_of(r);
  if (skip != IDEM_SKIP_NONE) return idem_phrase_skip(skip); /* never "succeeded" for these */
  if (r->state != IDEM_STATE_IN_PROGRESS || r->lease_expires_unix_ms <= 0)
    return fmt_state(r->state);
  char age[32];
  if (r->lease_expires_unix_ms <= fmt_now_ms())
    snprintf(buf, n, "in progress (lease expired %s)",
             fmt_age(r->lease_expires_unix_ms, age, sizeof age));
  else
    snprintf(buf, n, "in progress (lease ends %s)",
             fmt_age(r->lease_expires_unix_ms, age, sizeof age));
  return buf;
}

static const char *result_words(const idem_record *r, char *buf, size_t n) {
  if (!r->has_result || skip_of(r) == IDEM_SKIP_NULL_COMPENSATION) return "-"; /* none ran */
  char body[96];
  const char *b = r->result_expired ? "(body expired)"
                                    : fmt_body(r->result.body, r->result.body_len, 40, body,
                                               sizeof body);
  snprintf(buf, n, "%s %d%s%s", fmt_outcome(r->result.outcome), (int)r->result.code, *b ? " " : "",
           b);
  return buf;
}

static bool parse_u64(const char *s, uint64_t max, uint64_t *out) {
  char *end;
  errno = 0;
  if (!s || *s == '-') return false;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || v > max) return false;
  *out = v;
  return true;
}



/* --- step --- */

/* The trace ids as JSON fields ("" when none). */
static cJSON *json_traced(const idem_record *r, const idem_trace_ids *ids) {
  cJSON *o = json_record(r);
  cJSON_AddStringToObject(o, "begin_trace_id", ids->begin);
  cJSON_AddStringToObject(o, "complete_trace_id", ids->complete);
  return o;
}

static void print_record(const idem_record *r) {
  char a[32], b[32], c2[32], d[32], sw[96], body[600];
  printf("tenant      %s\n", r->tenant);
  printf("step        %s %s/%s (%s)\n", r->global_id, r->service, r->operation,
         fmt_phase(r->phase));
  printf("state       %s\n", state_words(r, sw, sizeof sw));
  int skip = skip_of(r);
  if (skip != IDEM_SKIP_NONE)
    printf("stored as   %s (%s)\n", fmt_state(r->state), idem_word_skip(skip));
  if (skip != IDEM_SKIP_NONE && r->attempt == 0)
    printf("attempt     - (none ran)\n");
  else
    printf("attempt     %llu\n", (unsigned long long)r->attempt);
  printf("created     %s\n", fmt_age(r->created_unix_ms, a, sizeof a));
  printf("updated     %s\n", fmt_age(r->updated_unix_ms, b, sizeof b));
  if (r->state == IDEM_STATE_IN_PROGRESS)
    printf("lease       %s\n", fmt_age(r->lease_expires_unix_ms, c2, sizeof c2));
  printf("forgotten   %s\n", r->state == IDEM_STATE_UNKNOWN ? "never (until resolved)"
                             : r->expires_unix_ms ? fmt_age(r->expires_unix_ms, d, sizeof d)
                                                  : "not while unfinished");
  if (skip == IDEM_SKIP_NULL_COMPENSATION) {
    printf("outcome     none: no compensation ran (stored as succeeded, code 0, empty body: what "
           "a retry is told)\n");
  } else if (r->has_result) {
    printf("outcome     %s\n", fmt_outcome(r->result.outcome));
    printf("code        %d\n", (int)r->result.code);
    printf("body        %s\n",
           r->result_expired
               ? "(expired: dropped after the policy's retention; the key is kept until forgotten)"
               : fmt_body(r->result.body, r->result.body_len, 500, body, sizeof body));
  }
}

int cmd_step(ctl *c) {
  idem_step_key key = {c->pos[0], c->pos[1], c->pos[2],
                       ctl_has(c, "compensation") ? IDEM_COMPENSATION : IDEM_FORWARD};
  idem_record r;
  idem_trace_ids ids;
  idem_error e = {0};
  if (idem_step_lookup_traced(ctl_client(c), &key, &r, &ids, &e) != IDEM_OK)
    return ctl_fail("step", &e);
  if (c->json) {
    json_print(json_traced(&r, &ids));
  } else {
    print_record(&r);
    /* docs/api.md §22: the W3C trace of the call that began this attempt, and of the one that
     * finished it */
    printf("begin trace %s\n", ids.begin[0] ? ids.begin : "-");
    printf("end trace   %s\n", ids.complete[0] ? ids.complete : "-");
  }
  idem_record_clear(&r);
  return EXIT_OK;
}

/* --- saga / steps tables --- */

static void step_table_row(table *t, const idem_record *r, bool with_gid) {
  char attempt[24], upd[32], sw[96], res[160];
  if (r->attempt == 0 && skip_of(r) != IDEM_SKIP_NONE)
    snprintf(attempt, sizeof attempt, "-");
  else
    snprintf(attempt, sizeof attempt, "%llu", (unsigned long long)r->attempt);
  const char *cells[] = {r->global_id,
                         r->service,
                         r->operation,
                         fmt_phase(r->phase),
                         state_words(r, sw, sizeof sw),
                         attempt,
                         fmt_age(r->updated_unix_ms, upd, sizeof upd),
                         result_words(r, res, sizeof res)};
  table_row(t, with_gid ? cells : cells + 1);
}

static table *step_table(bool with_gid) {
  static const char *const hdr[] = {"GLOBAL_ID", "SERVICE", "OPERATION", "PHASE",
                                    "STATE",     "ATTEMPT", "UPDATED",   "RESULT"};
  return with_gid ? table_new(8, hdr) : table_new(7, hdr + 1);
}

int cmd_saga(ctl *c) {
  idem_saga s;
  idem_error e = {0};
  if (idem_saga_get(ctl_client(c), c->pos[0], &s, &e) != IDEM_OK) return ctl_fail("saga", &e);
  if (c->json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "global_id", s.global_id);
    cJSON_AddStringToObject(o, "saga_type", s.saga_type ? s.saga_type : "");
    cJSON_AddNumberToObject(o, "created_unix_ms", (double)s.created_unix_ms);
    cJSON *labels = cJSON_AddObjectToObject(o, "labels");
    for (size_t i = 0; i < s.n_labels; i++)
      cJSON_AddStringToObject(labels, s.labels[i].key, s.labels[i].value);
    cJSON *steps = cJSON_AddArrayToObject(o, "steps");
    for (size_t i = 0; i < s.n_steps; i++) cJSON_AddItemToArray(steps, json_record(&s.steps[i]));
    json_print(o);
  } else {
    char age[32];
    printf("saga %s", s.global_id);
    if (s.saga_type && *s.saga_type) printf("  type %s", s.saga_type);
    if (s.created_unix_ms) printf("  begun %s", fmt_age(s.created_unix_ms, age, sizeof age));
    for (size_t i = 0; i < s.n_labels; i++)
      printf("%s%s=%s", i ? "," : "  labels ", s.labels[i].key, s.labels[i].value);
    printf("\n\n");
    if (s.n_steps == 0) {
      ctl_print_none(c, "steps");
    } else {
      table *t = step_table(false);
      for (size_t i = 0; i < s.n_steps; i++) step_table_row(t, &s.steps[i], false);
      table_print(t);
      table_free(t);
    }
  }
  idem_saga_clear(&s);
  return EXIT_OK;
}

/* What `steps` collects: records and, at the same index, their trace ids. */
typedef struct collected {
  idem_record *recs;
  idem_trace_ids *ids;
  size_t n, cap;
} collected;

/* Appends up to limit records (0 = all) of one filtered listing (trace_id: NULL = any) to *all. */
static int collect(ctl *c, idem_steps_filter f, const char *trace_id, uint64_t limit,
                   collected *all) {
  char *token = NULL;
  int rc = EXIT_OK;
  for (;;) {
    uint64_t want = limit ? limit - all->n : 1000;
    f.page_size = (uint32_t)(want > 1000 ? 1000 : want);
    f.page_token = token;
    idem_traced_page tp;
    idem_error e = {0};
    int code = idem_steps_list_traced(ctl_client(c), &f, trace_id, &tp, &e);
    free(token);
    token = NULL;
    if (code != IDEM_OK) {
      rc = ctl_fail("steps", &e);
      break;
    }
    idem_step_page *p = &tp.page;
    for (size_t i = 0; i < p->n_steps && (!limit || all->n < limit); i++) {
      if (all->n == all->cap) {
        all->cap = all->cap ? all->cap * 2 : 64;
        all->recs = realloc(all->recs, all->cap * sizeof *all->recs);
        all->ids = realloc(all->ids, all->cap * sizeof *all->ids);
        if (!all->recs || !all->ids) exit(EXIT_UNAVAILABLE);
      }
      all->ids[all->n] = tp.ids[i];
      all->recs[all->n++] = p->steps[i];
      memset(&p->steps[i], 0, sizeof p->steps[i]); /* moved */
    }
    bool more = p->next_page_token && *p->next_page_token && (!limit || all->n < limit);
    if (more) token = strdup(p->next_page_token);
    idem_traced_page_clear(&tp);
    if (!more) break;
  }
  free(token);
  return rc;
}

int cmd_steps(ctl *c) {
  idem_steps_filter f;
  int prc = ctl_parse_filter(c, &f);
  if (prc != EXIT_OK) return prc;
  const char *v;
  uint64_t limit = 100;
  if ((v = ctl_flag_value(c, "limit")) && !parse_u64(v, 1000000, &limit))
    return ctl_usage_error(c, "--limit: expected a number (0 = all)");
  bool stuck = ctl_has(c, "stuck");
  if (stuck && f.state) return ctl_usage_error(c, "--stuck and --state exclude each other");

  const char *trace_id = ctl_flag_value(c, "trace-id");
  collected all = {0};
  int rc;
  if (stuck) { /* in progress with an expired lease, then unknown */
    f.state = IDEM_STATE_IN_PROGRESS;
    f.lease_expired_only = true;
    rc = collect(c, f, trace_id, limit, &all);
    f.state = IDEM_STATE_UNKNOWN;
    f.lease_expired_only = false;
    if (rc == EXIT_OK && (!limit || all.n < limit)) rc = collect(c, f, trace_id, limit, &all);
  } else {
    rc = collect(c, f, trace_id, limit, &all);
  }
  size_t n = all.n;
  if (rc == EXIT_OK) {
    if (c->json) {
      cJSON *arr = cJSON_CreateArray();
      for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, json_traced(&all.recs[i], &all.ids[i]));
      json_print(arr);
    } else if (n == 0) {
      ctl_print_none(c, "steps");
    } else {
      table *t = step_table(true);
      for (size_t i = 0; i < n; i++) step_table_row(t, &all.recs[i], true);
      table_print(t);
      table_free(t);
      if (limit && n == limit) printf("(first %zu; --limit 0 lists all)\n", n);
    }
  }
  for (size_t i = 0; i < n; i++) idem_record_clear(&all.recs[i]);
  free(all.recs);
  free(all.ids);
  return rc;
}

int cmd_resolve(ctl *c) {
  if (ctl_has(c, "where")) return cmd_resolve_where(c);
  if (c->npos != 3)
    return ctl_usage_error(c, "expected GLOBAL_ID SERVICE OPERATION (or --where with filters)");
  idem_resolution res;
  uint8_t *body = NULL;
  int prc = ctl_parse_resolution(c, &res, &body);
  if (prc != EXIT_OK) return prc;
  idem_step_key key = {c->pos[0], c->pos[1], c->pos[2],
                       ctl_has(c, "compensation") ? IDEM_COMPENSATION : IDEM_FORWARD};
  idem_record r;
  idem_error e = {0};
  int code = idem_step_resolve(ctl_client(c), &key, &res, &r, &e);
  free(body);
  if (code != IDEM_OK) return ctl_fail("resolve", &e);
  if (c->json) {
    json_print(json_record(&r));
  } else {
    printf("resolved %s %s/%s (%s): now %s", r.global_id, r.service, r.operation,
           fmt_phase(r.phase), fmt_state(r.state));
    if (r.state == IDEM_STATE_RELEASED)
      printf(" (the next BeginStep runs it as attempt %llu)", (unsigned long long)r.attempt + 1);
    printf("\n");
  }
  idem_record_clear(&r);
  return EXIT_OK;
}

/* --- audit --- */

int cmd_audit(ctl *c) {
  uint64_t limit = 100;
  const char *v;
  if ((v = ctl_flag_value(c, "limit")) && !parse_u64(v, 1000000, &limit))
    return ctl_usage_error(c, "--limit: expected a number (0 = all)");
  const char *gid = c->npos > 0 ? c->pos[0] : NULL;
  static const char *const hdr[] = {"WHEN", "ACTOR", "ACTION", "STEP", "CHANGE", "REASON"};
  table *t = c->json ? NULL : table_new(6, hdr);
  cJSON *arr = c->json ? cJSON_CreateArray() : NULL;
  char *token = NULL;
  uint64_t n = 0;
  int rc = EXIT_OK;
  for (;;) {
    uint64_t want = limit ? limit - n : 1000;
    idem_audit_page p;
    idem_error e = {0};
    int code =
        idem_audit_list(ctl_client(c), gid, (uint32_t)(want > 1000 ? 1000 : want), token, &p, &e);
    free(token);
    token = NULL;
    if (code != IDEM_OK) {
      rc = ctl_fail("audit", &e);
      break;
    }
    for (size_t i = 0; i < p.n_entries && (!limit || n < limit); i++, n++) {
      const idem_audit_entry *a = &p.entries[i];
      if (arr) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "at_unix_ms", (double)a->at_unix_ms);
        cJSON_AddStringToObject(o, "tenant", a->tenant);
        cJSON_AddStringToObject(o, "actor", a->actor);
        cJSON_AddStringToObject(o, "action", a->action);
        json_add_key(o, a->global_id, a->service, a->operation, a->phase);
        cJSON_AddStringToObject(o, "from_state", fmt_state_key(a->from_state));
        cJSON_AddStringToObject(o, "to_state", fmt_state_key(a->to_state));
        cJSON_AddStringToObject(o, "reason", a->reason);
        cJSON_AddItemToArray(arr, o);
      } else {
        char when[32], step[300], change[64];
        snprintf(step, sizeof step, "%s %s/%s%s", a->global_id, a->service, a->operation,
                 a->phase == IDEM_COMPENSATION ? " (compensation)" : "");
        snprintf(change, sizeof change, "%s → %s", fmt_state(a->from_state),
                 fmt_state(a->to_state));
        const char *row[] = {fmt_age(a->at_unix_ms, when, sizeof when),
                             a->actor,
                             a->action,
                             step,
                             change,
                             a->reason};
        table_row(t, row);
      }
    }
    bool more = p.next_page_token && *p.next_page_token && (!limit || n < limit);
    if (more) token = strdup(p.next_page_token);
    idem_audit_page_clear(&p);
    if (!more) break;
  }
  free(token);
  if (rc == EXIT_OK) {
    if (arr) {
      json_print(arr);
      arr = NULL;
    } else if (n == 0) {
      printf("(no audit entries)\n");
    } else {
      table_print(t);
    }
  }
  cJSON_Delete(arr);
  table_free(t);
  return rc;
}
