/* console_steps.c — the steps list (/steps): filters (state, service, operation, global id, age,
 * expired lease), one row per step with its state badge (console_frame.h), and paging. Like
 * ListSteps (docs/api.md §17) a listing of one saga reads its slot's group, any other every
 * group's (coord_list_steps_groups). One step's page and its resolution are in
 * console_resolve.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../coord/coord_admin.h"
#include "../coord/coord_groups.h"
#include "../util/duration.h"
#include "console_pages.h"
#include "idem/v1/names.h"

#define STEPS_PAGE_DEFAULT 50

/* "90s", "5m", "2h", "1d" in ms; -1 when malformed. */
static int64_t parse_span(const char *s) {
  int64_t ms;
  return duration_parse(s, 0, &ms) ? ms : -1;
}

static void text_input(creq *r, const char *label, const char *name, const char *v) {
  console__html(&r->out, "<label>%s<input name=\"%s\" value=\"%s\"></label>", label, name, v);
}

/* Every group's steps (coord_list_steps_groups) for one console page: where a group's matches
 * run out before the page is full, the page goes on with the next group's (at most one call
 * per group), so a short page means the end, not a group boundary. */
static err_code list_groups(const coord_group_view *g, size_t n, const char *tenant,
                            const coord_list_in *in, int64_t deadline, step_list *out,
                            char next[COORD_TOKEN_MAX], err_t *err) {
  err_code rc = coord_list_steps_groups(g, n, tenant, in, deadline, out, next, err);
  for (size_t hop = 1; rc == ERR_OK && hop < n && next[0] && out->n < in->page_size; hop++) {
    char token[COORD_TOKEN_MAX];
    snprintf(token, sizeof token, "%s", next);
    coord_list_in rest = *in;
    rest.page_token = token;
    rest.page_size = in->page_size - (uint32_t)out->n;
    step_list more = {0};
    rc = coord_list_steps_groups(g, n, tenant, &rest, deadline, &more, next, err);
    if (rc != ERR_OK) break;
    step_rec *grown = more.n ? realloc(out->recs, (out->n + more.n) * sizeof *grown) : out->recs;
    if (!grown) {
      step_list_clear(&more);
      rc = err_oom(err);
      break;
    }
    out->recs = grown;
    if (more.n) memcpy(out->recs + out->n, more.recs, more.n * sizeof *more.recs);
    out->n += more.n; /* the records' bodies moved with them */
    out->more = more.more;
    free(more.recs);
  }
  if (rc != ERR_OK) step_list_clear(out);
  return rc;
}

/* The page of steps in asks for into *l and next; false with an error page written. */
static bool list_steps(creq *r, const coord_list_in *in, step_list *l, char next[COORD_TOKEN_MAX]) {
  const console *c = r->c;
  err_t err;
  err_clear(&err);
  err_code rc;
  if (c->cfg.n_groups > 1 && !(in->global_id && in->global_id[0])) {
    coord_group_view g[CONSOLE_GROUPS_MAX];
    size_t n = 0;
    if (!console__page_group_views(r, g, &n)) return false;
    rc = list_groups(g, n, r->s.tenant, in, r->deadline, l, next, &err);
  } else {
    store *st = NULL;
    int g = console__page_saga_group(r, in->global_id ? in->global_id : "", &st);
    if (g < 0) return false;
    rc = coord_list_steps(console__group_coord(r, (size_t)g), st, r->s.tenant, in, r->deadline, l,
                          next, &err);
  }
  if (rc != ERR_OK) {
    console__page_err(r, &err);
    return false;
  }
  return true;
}

void console__page_steps(creq *r, char **seg) {
  const char *state_w = console__query(r, "state"), *svc = console__query(r, "service"),
             *op = console__query(r, "operation"), *gid = console__query(r, "global_id"),
             *older = console__query(r, "older_than"),
             *before = console__query(r, "updated_before"),
             *expired = console__query(r, "lease_expired"), *size = console__query(r, "page_size"),
             *token = console__query(r, "page_token");
  int state = 0;
  if (state_w && *state_w) {
    state = idem_word_find(idem_state_words, IDEM_WORD_COUNT(idem_state_words), 1, state_w);
    if (state < 0) {
      console__page_error(r, 400, "state: unknown word");
      return;
    }
  }
  int64_t updated_before = before && *before ? strtoll(before, NULL, 10) : 0;
  if (older && *older) {
    int64_t span = parse_span(older);
    if (span < 0) {
      console__page_error(r, 400, "older_than: expected 90s, 5m, 2h or 1d");
      return;
    }
    updated_before = r->now_ms - span;
  }
  long n = size && *size ? strtol(size, NULL, 10) : STEPS_PAGE_DEFAULT;
  bool lease_expired = expired && !strcmp(expired, "1");
  coord_list_in in = {.state = state,
                      .service = svc,
                      .operation = op,
                      .global_id = gid,
                      .updated_before_ms = updated_before,
                      .lease_expired_only = lease_expired,
                      .page_size = n > 0 && n <= LIST_PAGE_MAX ? (uint32_t)n : STEPS_PAGE_DEFAULT,
                      .page_token = token,
                      .rec_size = console__rec_size};
  step_list l = {0};
  char next[COORD_TOKEN_MAX];
  if (!list_steps(r, &in, &l, next)) return;
  console__page_begin(r, lease_expired ? "Steps with an expired lease" : "Steps");
  buf_t *b = &r->out;
  console__html(b,
                "<form class=\"filters\" method=\"get\" action=\"/steps\">"
                "<label>state<select name=\"state\"><option value=\"\">any</option>");
  for (size_t i = 1; i < IDEM_WORD_COUNT(idem_state_words); i++)
    console__html(b, "<option%s>%s</option>", (int)i == state ? " selected" : "",
                  idem_state_words[i]);
  console__html(b, "</select></label>");
  text_input(r, "service", "service", svc);
  text_input(r, "operation", "operation", op);
  text_input(r, "global id", "global_id", gid);
  text_input(r, "older than (90s, 5m, 2h)", "older_than", older);
  console__html(
      b,
      "<label class=\"inline\">"
      "<input type=\"checkbox\" name=\"lease_expired\" value=\"1\"%s>lease expired</label>"
      "<label>per page<input name=\"page_size\" size=\"4\" value=\"%u\"></label>"
      "<button type=\"submit\">Filter</button></form>",
      lease_expired ? " checked" : "", in.page_size);
  if (updated_before) {
    console__html(b, "<p class=\"muted\">Updated before ");
    console__time(b, updated_before, r->now_ms);
    console__html(b, "</p>");
  }
  console__html(
      b,
      "<table id=\"steps\"><tr><th>global id</th><th>service</th><th>operation</th><th>phase</th>"
      "<th>state</th><th>attempt</th><th>lease expires</th><th>updated</th><th>code</th></tr>");
  for (size_t i = 0; i < l.n; i++) {
    const step_rec *rec = &l.recs[i];
    console__html(b, "<tr class=\"%s\"><td><a href=\"/sagas/",
                  *console__state_class(rec, r->now_ms) ? "stuck" : "");
    console__url(b, rec->key.global_id);
    console__html(b, "\">%s</a></td><td>%s</td><td>%s</td><td><a href=\"", rec->key.global_id,
                  rec->key.service, rec->key.operation);
    console__step_href(b, &rec->key);
    console__html(b, "\">%s</a></td><td>", idem_word_phase(rec->key.phase));
    console__state_badge(r, rec);
    console__html(b, "</td><td class=\"num\">");
    console__attempt_cell(b, rec);
    console__html(b, "</td><td>");
    if (rec->state == STATE_IN_PROGRESS) console__time(b, rec->lease_expires_ms, r->now_ms);
    console__html(b, "</td><td>");
    console__time(b, rec->updated_ms, r->now_ms);
    if (rec->outcome && console__rec_skip(rec) != IDEM_SKIP_NULL_COMPENSATION)
      console__html(b, "</td><td class=\"num\">%d</td></tr>", rec->code);
    else
      console__html(b, "</td><td></td></tr>");
  }
  console__html(b, "</table>");
  if (!l.n) console__html(b, "<p class=\"muted\">No step matches.</p>");
  if (next[0]) {
    console__html(b, "<p><a id=\"next\" href=\"/steps?state=%s&amp;service=",
                  state ? idem_word_state(state) : "");
    console__url(b, svc);
    console__html(b, "&amp;operation=");
    console__url(b, op);
    console__html(b, "&amp;global_id=");
    console__url(b, gid);
    console__html(b,
                  "&amp;updated_before=%lld&amp;lease_expired=%s&amp;page_size=%u&amp;page_token=",
                  (long long)updated_before, lease_expired ? "1" : "", in.page_size);
    console__url(b, next);
    console__html(b, "\">Next page \xE2\x86\x92</a></p>");
  }
  step_list_clear(&l);
  console__page_end(r);
}
