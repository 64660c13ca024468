/* console_saga.c — a saga as a timeline (/sagas/{global_id}[?page=TOKEN]): one GetSaga page a
 * console page (up to REC_SAGA_PAGE_MAX steps, byte-bounded), one row per (service, operation)
 * with the forward and its compensation side by side, a link to the next page, then the saga's
 * audit entries in time order (first page only). The saga is read in the group its slot belongs
 * to (console__page_saga_group), as GetSaga is. The work is linear in the page's steps: pairs
 * are found through a hash of (service, operation), never by scanning the rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../coord/coord_admin.h"
#include "console_pages.h"
#include "idem/v1/names.h"

#define AUDIT_PAGES_MAX 10 /* ListAudit pages of the saga */
#define BODY_SHOWN 512     /* bytes of a body on the timeline (all of it on the step page) */

typedef struct pair_row {
  const step_rec *fwd, *comp;
} pair_row;

static uint64_t pair_hash(const step_key *k) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a over service, a separator, operation */
  for (const char *p = k->service; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
  h = (h ^ 0x1f) * 1099511628211ull;
  for (const char *p = k->operation; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
  return h;
}

static const step_rec *row_any(const pair_row *row) {
  return row->fwd ? row->fwd : row->comp;
}

/* The rows of a page, in timeline order of each pair's first step; *n set. NULL: no memory. */
static pair_row *pair_rows(const saga_view *v, size_t *n) {
  size_t cap = 16;
  while (cap < 2 * v->n_steps) cap *= 2;
  pair_row *rows = calloc(v->n_steps ? v->n_steps : 1, sizeof *rows);
  size_t *slot = malloc(cap * sizeof *slot); /* open addressing: row index + 1, 0 = empty */
  if (!rows || !slot) {
    free(rows);
    free(slot);
    return NULL;
  }
  memset(slot, 0, cap * sizeof *slot);
  *n = 0;
  for (size_t i = 0; i < v->n_steps; i++) {
    const step_rec *s = &v->steps[i];
    size_t j = (size_t)pair_hash(&s->key) & (cap - 1);
    for (; slot[j]; j = (j + 1) & (cap - 1)) {
      const step_rec *any = row_any(&rows[slot[j] - 1]);
      if (!strcmp(any->key.service, s->key.service) &&
          !strcmp(any->key.operation, s->key.operation))
        break;
    }
    if (!slot[j]) slot[j] = ++*n;
    pair_row *row = &rows[slot[j] - 1];
    if (s->key.phase == PHASE_COMPENSATION)
      row->comp = s;
    else
      row->fwd = s;
  }
  free(slot);
  return rows;
}

static void step_cell(creq *r, const step_rec *rec, bool paged) {
  buf_t *b = &r->out;
  if (!rec) { /* a saga of several pages may have the twin on another one */
    console__html(b, paged ? "<td class=\"muted\">\xE2\x80\x94 (not on this page)</td>"
                           : "<td class=\"muted\">\xE2\x80\x94</td>");
    return;
  }
  console__html(b, "<td class=\"%s\">", *console__state_class(rec, r->now_ms) ? "stuck" : "");
  console__state_badge(r, rec);
  console__html(b, " attempt ");
  console__attempt_cell(b, rec);
  console__html(b, " \xC2\xB7 <a href=\"");
  console__step_href(b, &rec->key);
  console__html(b, "\">open</a><br><span class=\"muted\">updated</span> ");
  console__time(b, rec->updated_ms, r->now_ms);
  if (rec->state == STATE_IN_PROGRESS) {
    console__html(b, "<br><span class=\"muted\">lease</span> ");
    console__time(b, rec->lease_expires_ms, r->now_ms);
  }
  if (rec->begin_trace_id[0] || rec->complete_trace_id[0]) { /* docs/api.md §22 */
    console__html(b, "<br><span class=\"muted\">trace</span> ");
    console__trace_id(r, rec->begin_trace_id);
    if (rec->complete_trace_id[0] && strcmp(rec->complete_trace_id, rec->begin_trace_id) != 0) {
      console__html(b, " \xE2\x86\x92 ");
      console__trace_id(r, rec->complete_trace_id);
    }
  }
  if (rec->outcome &&
      console__rec_skip(rec) != IDEM_SKIP_NULL_COMPENSATION) { /* no result of a run */
    console__html(b, "<br>%s, code %d", idem_word_outcome(rec->outcome), rec->code);
    console__rec_body(b, rec, BODY_SHOWN);
  }
  console__html(b, "</td>");
}

static void timeline(creq *r, const saga_view *v, bool paged) {
  size_t n = 0;
  pair_row *rows = pair_rows(v, &n);
  if (!rows) {
    r->out.oom = true;
    return;
  }
  buf_t *b = &r->out;
  console__html(
      b,
      "<table id=\"timeline\"><tr><th>#</th><th>service</th><th>operation</th><th>forward</th>"
      "<th>compensation</th></tr>");
  for (size_t k = 0; k < n; k++) {
    const step_rec *any = row_any(&rows[k]);
    console__html(b, "<tr><td class=\"num\">%zu</td><td>%s</td><td>%s</td>", k + 1,
                  any->key.service, any->key.operation);
    step_cell(r, rows[k].fwd, paged);
    step_cell(r, rows[k].comp, paged);
    console__html(b, "</tr>");
  }
  console__html(b, "</table>");
  free(rows);
}

static void audit_trail(creq *r, const char *gid, size_t g, store *st) {
  audit_list all = {0};
  char token[COORD_TOKEN_MAX] = "", next[COORD_TOKEN_MAX];
  err_t err;
  err_clear(&err);
  for (int page = 0; page < AUDIT_PAGES_MAX; page++) {
    audit_list l = {0};
    if (coord_list_audit(console__group_coord(r, g), st, r->s.tenant, gid, LIST_PAGE_MAX, token,
                         r->deadline, &l, next, &err) != ERR_OK)
      break;
    audit_rec *grown = realloc(all.recs, (all.n + l.n + 1) * sizeof *grown);
    if (!grown) {
      audit_list_clear(&l);
      err_oom(&err);
      break;
    }
    all.recs = grown;
    if (l.n) memcpy(all.recs + all.n, l.recs, l.n * sizeof *l.recs);
    all.n += l.n;
    audit_list_clear(&l);
    if (!next[0]) break;
    snprintf(token, sizeof token, "%s", next);
  }
  buf_t *b = &r->out;
  console__html(b, "<h2>Audit trail</h2>");
  if (err.code != ERR_OK) {
    console__html(b, "<div class=\"banner err\">cannot read the audit trail: %s</div>", err.msg);
  }
  console__html(b,
                "<table id=\"audit\"><tr><th>when</th><th>actor</th><th>action</th><th>step</th>"
                "<th>change</th><th>reason</th></tr>");
  for (size_t i = all.n; i-- > 0;) /* ListAudit is newest first: oldest first here */
    console__audit_row(r, &all.recs[i], false);
  console__html(b, "</table>");
  if (!all.n) console__html(b, "<p class=\"muted\">No operator action on this saga.</p>");
  audit_list_clear(&all);
}

void console__page_saga(creq *r, char **seg) {
  const char *gid = seg[0];
  saga_view v = {0};
  err_t err;
  err_clear(&err);
  const char *token = console__query(r, "page");
  char next[COORD_TOKEN_MAX];
  store *st = NULL;
  int g = console__page_saga_group(r, gid, &st);
  if (g < 0) return;
  coord_saga_in in = {.global_id = gid, .page_token = token, .rec_size = console__rec_size};
  if (coord_get_saga(console__group_coord(r, (size_t)g), st, r->s.tenant, &in, r->deadline, &v,
                     next, &err) != ERR_OK) {
    saga_view_clear(&v);
    console__page_err(r, &err);
    return;
  }
  bool first = !token || !*token, paged = !first || next[0];
  console__page_begin(r, "Saga");
  buf_t *b = &r->out;
  if (console__query(r, "resolved"))
    console__html(b,
                  "<div class=\"banner ok\" id=\"resolved\">Resolved: the change and its audit row "
                  "are below.</div>");
  console__html(
      b,
      "<div class=\"card kv\"><span>global id</span><span id=\"gid\">%s</span><span>type</span>"
      "<span>%s</span><span>created</span><span>",
      v.global_id, v.saga_type[0] ? v.saga_type : "(not begun with BeginSaga)");
  console__time(b, v.created_ms, r->now_ms);
  console__html(b, "</span><span>labels</span><span id=\"labels\">");
  for (size_t i = 0; i < v.n_labels; i++) {
    console__html(b, "<code>%s=%s</code> ", v.labels[i].key, v.labels[i].value);
  }
  console__html(b, "</span><span>steps</span><span id=\"shown\">%zu%s</span></div>", v.n_steps,
                paged ? " on this page (the timeline is paged)" : "");
  timeline(r, &v, paged);
  if (next[0] || !first) {
    console__html(b, "<p>");
    if (!first) {
      console__html(b, "<a id=\"first\" href=\"/sagas/");
      console__url(b, gid);
      console__html(b, "\">\xE2\x86\x90 First page</a> ");
    }
    if (next[0]) {
      console__html(b, "<a id=\"next\" href=\"/sagas/");
      console__url(b, gid);
      console__html(b, "?page=");
      console__url(b, next);
      console__html(b, "\">Next page \xE2\x86\x92</a>");
    }
    console__html(b, "</p>");
  }
  if (first)
    audit_trail(r, gid, (size_t)g, st);
  else
    console__html(b, "<p class=\"muted\">The saga's audit trail is on its first page.</p>");
  saga_view_clear(&v);
  console__page_end(r);
}
