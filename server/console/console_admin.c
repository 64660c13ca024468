/* console_admin.c — the audit trail (/audit) and the policies (/policies: the list, setting and
 * deleting one; the route table checks a POST's session, CSRF token, role and leadership). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../coord/coord_admin.h"
#include "../coord/coord_policy.h"
#include "console_pages.h"
#include "idem/v1/names.h"

#define AUDIT_PAGE 100

void console__page_audit(creq *r, char **seg) {
  store *st = console__page_store(r);
  if (!st) return;
  const char *gid = console__query(r, "global_id"), *token = console__query(r, "page_token");
  audit_list l = {0};
  char next[COORD_TOKEN_MAX];
  err_t err;
  err_clear(&err);
  if (coord_list_audit(r->c->cfg.coord, st, r->s.tenant, gid, AUDIT_PAGE, token, r->deadline, &l,
                       next, &err) != ERR_OK) {
    console__page_err(r, &err);
    return;
  }
  console__page_begin(r, "Audit trail");
  buf_t *b = &r->out;
  console__html(b,
                "<form class=\"filters\" method=\"get\" action=\"/audit\">"
                "<label>global id<input name=\"global_id\" value=\"%s\"></label>"
                "<button type=\"submit\">Filter</button></form><p class=\"muted\">Newest first.</p>"
                "<table id=\"audit\"><tr><th>when</th><th>actor</th><th>action</th><th>saga</th>"
                "<th>step</th><th>change</th><th>reason</th></tr>",
                gid);
  for (size_t i = 0; i < l.n; i++) console__audit_row(r, &l.recs[i], true);
  console__html(b, "</table>");
  if (next[0]) {
    console__html(b, "<p><a id=\"next\" href=\"/audit?global_id=");
    console__url(b, gid);
    console__html(b, "&amp;page_token=");
    console__url(b, next);
    console__html(b, "\">Older \xE2\x86\x92</a></p>");
  }
  audit_list_clear(&l);
  console__page_end(r);
}

void console__page_policies(creq *r, char **seg) {
  policy_row *rows = NULL;
  size_t n = 0;
  err_t err;
  err_clear(&err);
  store *st = console__page_store(r);
  if (!st) return;
  if (coord_list_policies(r->c->cfg.coord, st, r->s.tenant, r->deadline, &rows, &n, &err) !=
      ERR_OK) {
    console__page_err(r, &err);
    return;
  }
  char leader[ELECT_ADDR_MAX];
  bool may_edit = auth_role_at_least(r->s.role, AUTH_ROLE_ADMIN) && console__is_leader(r, leader);
  console__page_begin(r, "Policies");
  buf_t *b = &r->out;
  console__html(
      b,
      "<p class=\"muted\">This tenant's own rows; the rest fall back to the server's rows and "
      "the built-in default (fail-closed, 24 h, 30 s).</p>"
      "<table id=\"policies\"><tr><th>service</th><th>operation</th><th>failure mode</th>"
      "<th>retention (s)</th><th>keys kept (s)</th><th>lease (ms)</th><th>updated</th><th></th>"
      "</tr>");
  for (size_t i = 0; i < n; i++) {
    const policy *p = &rows[i].p;
    console__html(
        b,
        "<tr><td>%s</td><td>%s</td><td>%s</td><td class=\"num\">%u</td><td class=\"num\">%u</td>"
        "<td class=\"num\">%u</td><td>",
        p->service, p->operation, idem_word_failure_mode(p->mode), p->retention_s,
        policy_key_retention(p), p->lease_ms);
    console__time(b, p->updated_ms, r->now_ms);
    console__html(b, "</td><td>");
    if (may_edit) {
      console__html(b, "<form method=\"post\" action=\"/policies/delete\">");
      console__form_csrf(r);
      console__html(b,
                    "<input type=\"hidden\" name=\"service\" value=\"%s\">"
                    "<input type=\"hidden\" name=\"operation\" value=\"%s\">"
                    "<button class=\"danger\" type=\"submit\">Delete</button></form>",
                    p->service, p->operation);
    }
    console__html(b, "</td></tr>");
  }
  console__html(b, "</table>");
  free(rows);
  if (!may_edit) {
    console__html(b, auth_role_at_least(r->s.role, AUTH_ROLE_ADMIN)
                         ? "<p class=\"muted\">Policies are changed on the "
                           "leader.</p>"
                         : "<p class=\"muted\">Your role (service) may read "
                           "only.</p>");
    console__page_end(r);
    return;
  }
  console__html(
      b,
      "<h2>Set a policy</h2>"
      "<form class=\"filters card\" id=\"setpolicy\" method=\"post\" action=\"/policies\">");
  console__form_csrf(r);
  console__html(
      b,
      "<label>service<input name=\"service\" required></label>"
      "<label>operation<input name=\"operation\" value=\"*\" required></label>"
      "<label>failure mode<select name=\"mode\"><option>fail-closed</option>"
      "<option>fail-open</option></select></label>"
      "<label>retention (s)<input name=\"retention_s\" value=\"86400\" size=\"8\"></label>"
      "<label>keys kept (s, 0 = as long)<input name=\"key_retention_s\" value=\"0\" size=\"8\">"
      "</label><label>lease (ms)<input name=\"lease_ms\" value=\"30000\" size=\"8\"></label>"
      "<button type=\"submit\">Set</button></form>");
  console__page_end(r);
}

static bool parse_u32(const char *s, uint32_t *out) {
  char *end;
  errno = 0;
  unsigned long v = s && *s ? strtoul(s, &end, 10) : 0;
  if (!s || !*s || errno || *end || v > UINT32_MAX || s[0] == '-') return false;
  *out = (uint32_t)v;
  return true;
}

void console__post_policy_delete(creq *r, char **seg) {
  const char *svc = console__form(r, "service"), *op = console__form(r, "operation");
  err_t err;
  err_clear(&err);
  bool deleted = false;
  store *st = console__page_store(r);
  if (!st) return;
  if (coord_delete_policy(r->c->cfg.coord, st, r->s.tenant, svc, op, r->deadline, &deleted, &err) !=
      ERR_OK) {
    console__page_err(r, &err);
    return;
  }
  console__redirect(r, "/policies");
}

void console__post_policy_set(creq *r, char **seg) {
  const char *svc = console__form(r, "service"), *op = console__form(r, "operation");
  policy p = {0}, out;
  const char *mode = console__form(r, "mode");
  int m = mode ? idem_word_find(idem_failure_mode_words, IDEM_WORD_COUNT(idem_failure_mode_words),
                                1, mode)
               : -1;
  if (m < 0) {
    console__page_error(r, 400, "failure mode: fail-closed or fail-open");
    return;
  }
  if (!parse_u32(console__form(r, "retention_s"), &p.retention_s)) {
    console__page_error(r, 400, "retention_s: expected seconds");
    return;
  }
  const char *kr = console__form(r, "key_retention_s");
  if (kr && *kr && !parse_u32(kr, &p.key_retention_s)) { /* absent: 0, as long as the retention */
    console__page_error(r, 400, "key_retention_s: expected seconds");
    return;
  }
  if (!parse_u32(console__form(r, "lease_ms"), &p.lease_ms)) {
    console__page_error(r, 400, "lease_ms: expected milliseconds");
    return;
  }
  if (!svc || strlen(svc) >= sizeof p.service || !op || strlen(op) >= sizeof p.operation) {
    console__page_error(r, 400, "service and operation: 1 to 64 characters");
    return;
  }
  snprintf(p.service, sizeof p.service, "%s", svc);
  snprintf(p.operation, sizeof p.operation, "%s", op);
  p.mode = (failure_mode)m;
  err_t err;
  err_clear(&err);
  store *st = console__page_store(r);
  if (!st) return;
  if (coord_set_policy(r->c->cfg.coord, st, r->s.tenant, &p, r->deadline, &out, &err) != ERR_OK) {
    console__page_err(r, &err);
    return;
  }
  console__redirect(r, "/policies");
}
