/* console_steps.c — the steps list (/steps) and what the step pages share: a step's path, its
 * state as a badge (a null compensation or an abandoned forward said as such, never as a step
 * that ran) and its attempt. One step's page and its resolution are in console_resolve.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../coord/coord_admin.h"
#include "console_internal.h"
#include "idem/v1/names.h"

#define STEPS_PAGE_DEFAULT 50

void step_href(cbuf *b, const step_key *k) {
  cb_put(b, "/steps/");
  cb_url(b, k->global_id);
  cb_put(b, "/");
  cb_url(b, k->service);
  cb_put(b, "/");
  cb_url(b, k->operation);
  cb_printf(b, "/%s", idem_word_phase(k->phase));
}

int rec_skip(const step_rec *rec) {
  return idem_skip_of(rec->key.phase, rec->state, (unsigned long long)rec->attempt);
}

void state_badge(creq *r, const step_rec *rec) {
  int skip = rec_skip(rec);
  if (skip != IDEM_SKIP_NONE) { /* stored as succeeded or abandoned; say what happened */
    cb_printf(&r->out, "<span class=\"state s-%s\" title=\"stored as %s\">%s</span> ",
              skip == IDEM_SKIP_ABANDONED ? "abandoned" : "skipped", idem_word_state(rec->state),
              skip == IDEM_SKIP_ABANDONED ? "abandoned" : "skipped");
    cb_printf(&r->out, "<span class=\"muted skip\" data-skip=\"%s\">%s</span>",
              idem_word_skip(skip), idem_phrase_skip(skip));
    return;
  }
  const char *w = idem_word_state(rec->state);
  cb_printf(&r->out, "<span class=\"state s-%s%s\">%s</span>", w, state_class(rec, r->now_ms), w);
  if (rec->state == STATE_IN_PROGRESS && rec->lease_expires_ms <= r->now_ms)
    cb_put(&r->out, " <span class=\"stuckword\">stuck: lease expired</span>");
  else if (rec->state == STATE_UNKNOWN)
    cb_put(&r->out, " <span class=\"stuckword\">stuck: outcome unknown</span>");
}

void attempt_cell(cbuf *b, const step_rec *rec) {
  if (rec->attempt == 0 && rec_skip(rec) != IDEM_SKIP_NONE)
    cb_put(b, "\xE2\x80\x94 (none ran)");
  else
    cb_printf(b, "%llu", (unsigned long long)rec->attempt);
}

/* "90s", "5m", "2h", "1d" in ms; -1 when malformed. */
static int64_t parse_span(const char *s) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || v < 0 || v > 1000000000LL) return -1;
  int64_t unit = !*end || !strcmp(end, "s") ? 1000
                 : !strcmp(end, "m")        ? 60000
                 : !strcmp(end, "h")        ? 3600000
                 : !strcmp(end, "d")        ? 86400000
                                            : -1;
  return unit < 0 ? -1 : v * unit;
}

static void text_input(creq *r, const char *label, const char *name, const char *v) {
  cb_printf(&r->out, "<label>%s<input name=\"%s\" value=\"", label, name);
  cb_esc(&r->out, v);
  cb_put(&r->out, "\"></label>");
}

void page_steps(creq *r) {
  const char *state_w = cr_query(r, "state"), *svc = cr_query(r, "service"),
             *op = cr_query(r, "operation"), *gid = cr_query(r, "global_id"),
             *older = cr_query(r, "older_than"), *before = cr_query(r, "updated_before"),
             *expired = cr_query(r, "lease_expired"), *size = cr_query(r, "page_size"),
             *token = cr_query(r, "page_token");
  int state = 0;
  if (state_w && *state_w) {
    state = idem_word_find(idem_state_words, IDEM_WORD_COUNT(idem_state_words), 1, state_w);
    if (state < 0) {
      page_error(r, 400, "state: unknown word");
      return;
    }
  }
  int64_t updated_before = before && *before ? strtoll(before, NULL, 10) : 0;
  if (older && *older) {
    int64_t span = parse_span(older);
    if (span < 0) {
      page_error(r, 400, "older_than: expected 90s, 5m, 2h or 1d");
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
                      .rec_size = console_rec_size};
  step_list l = {0};
  char next[COORD_TOKEN_MAX];
  err_t err;
  err_clear(&err);
  store *st = cr_store(r);
  if (!st) {
    page_error(r, 503, "cannot open a store connection");
    return;
  }
  if (coord_list_steps(r->c->cfg.coord, st, r->s.tenant, &in, r->deadline, &l, next, &err) !=
      ERR_OK) {
    page_err(r, &err);
    return;
  }
  page_begin(r, lease_expired ? "Steps with an expired lease" : "Steps");
  cbuf *b = &r->out;
  cb_put(b,
         "<form class=\"filters\" method=\"get\" action=\"/steps\"><label>state<select "
         "name=\"state\"><option value=\"\">any</option>");
  for (size_t i = 1; i < IDEM_WORD_COUNT(idem_state_words); i++)
    cb_printf(b, "<option%s>%s</option>", (int)i == state ? " selected" : "", idem_state_words[i]);
  cb_put(b, "</select></label>");
  text_input(r, "service", "service", svc);
  text_input(r, "operation", "operation", op);
  text_input(r, "global id", "global_id", gid);
  text_input(r, "older than (90s, 5m, 2h)", "older_than", older);
  cb_printf(b,
            "<label class=\"inline\"><input type=\"checkbox\" name=\"lease_expired\" "
            "value=\"1\"%s>lease expired</label>",
            lease_expired ? " checked" : "");
  cb_printf(b, "<label>per page<input name=\"page_size\" size=\"4\" value=\"%u\"></label>",
            in.page_size);
  cb_put(b, "<button type=\"submit\">Filter</button></form>");
  if (updated_before) {
    cb_put(b, "<p class=\"muted\">Updated before ");
    cb_time(b, updated_before, r->now_ms);
    cb_put(b, "</p>");
  }
  cb_put(b,
         "<table id=\"steps\"><tr><th>global id</th><th>service</th><th>operation</th>"
         "<th>phase</th><th>state</th><th>attempt</th><th>lease expires</th>"
         "<th>updated</th><th>code</th></tr>");
  for (size_t i = 0; i < l.n; i++) {
    const step_rec *rec = &l.recs[i];
    cb_printf(b, "<tr class=\"%s\"><td><a href=\"/sagas/",
              *state_class(rec, r->now_ms) ? "stuck" : "");
    cb_url(b, rec->key.global_id);
    cb_put(b, "\">");
    cb_esc(b, rec->key.global_id);
    cb_put(b, "</a></td><td>");
    cb_esc(b, rec->key.service);
    cb_put(b, "</td><td>");
    cb_esc(b, rec->key.operation);
    cb_put(b, "</td><td><a href=\"");
    step_href(b, &rec->key);
    cb_printf(b, "\">%s</a></td><td>", idem_word_phase(rec->key.phase));
    state_badge(r, rec);
    cb_put(b, "</td><td class=\"num\">");
    attempt_cell(b, rec);
    cb_put(b, "</td><td>");
    if (rec->state == STATE_IN_PROGRESS) cb_time(b, rec->lease_expires_ms, r->now_ms);
    cb_put(b, "</td><td>");
    cb_time(b, rec->updated_ms, r->now_ms);
    if (rec->outcome && rec_skip(rec) != IDEM_SKIP_NULL_COMPENSATION)
      cb_printf(b, "</td><td class=\"num\">%d</td></tr>", rec->code);
    else
      cb_put(b, "</td><td></td></tr>");
  }
  cb_put(b, "</table>");
  if (!l.n) cb_put(b, "<p class=\"muted\">No step matches.</p>");
  if (next[0]) {
    cb_printf(b, "<p><a id=\"next\" href=\"/steps?state=%s&amp;service=",
              state ? idem_word_state(state) : "");
    cb_url(b, svc);
    cb_put(b, "&amp;operation=");
    cb_url(b, op);
    cb_put(b, "&amp;global_id=");
    cb_url(b, gid);
    cb_printf(b, "&amp;updated_before=%lld&amp;lease_expired=%s&amp;page_size=%u&amp;page_token=",
              (long long)updated_before, lease_expired ? "1" : "", in.page_size);
    cb_url(b, next);
    cb_put(b, "\">Next page \xE2\x86\x92</a></p>");
  }
  step_list_clear(&l);
  page_end(r);
}
