/* console_admin.c — the audit trail (/audit) and the policies (/policies: the list, setting and
 * deleting one; the route table checks a POST's session, CSRF token, role and leadership), over
 * every store group (docs/api.md §17): the trail of one saga is read in its group, the whole
 * trail in every group (coord_list_audit_groups); policies are read from every group and
 * written to every group, as Admin.SetPolicy does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../coord/coord_admin.h"
#include "../coord/coord_groups.h"
#include "../coord/coord_policy.h"
#include "console_pages.h"
#include "idem/v1/names.h"

#define AUDIT_PAGE 100

/* One page of the audit trail: one saga's in its group, else every group's. False with an error
 * page written. */
static bool audit_page(creq *r, const char *gid, const char *token, audit_list *l,
                       char next[COORD_TOKEN_MAX]) {
  err_t err;
  err_clear(&err);
  err_code rc;
  if (r->c->cfg.n_groups > 1 && !(gid && gid[0])) {
    coord_group_view g[CONSOLE_GROUPS_MAX];
    size_t n = 0;
    if (!console__page_group_views(r, g, &n)) return false;
    rc = coord_list_audit_groups(g, n, r->s.tenant, AUDIT_PAGE, token, r->deadline, l, next,
                                 &err);
    /* where a group's rows run out before the page is full, the page goes on with the next
     * group's (at most one call per group): a short page means the end, not a group boundary */
    for (size_t hop = 1; rc == ERR_OK && hop < n && next[0] && l->n < AUDIT_PAGE; hop++) {
      char at[COORD_TOKEN_MAX];
      snprintf(at, sizeof at, "%s", next);
      audit_list more = {0};
      rc = coord_list_audit_groups(g, n, r->s.tenant, AUDIT_PAGE - (uint32_t)l->n, at,
                                   r->deadline, &more, next, &err);
      if (rc != ERR_OK) break;
      audit_rec *grown = more.n ? realloc(l->recs, (l->n + more.n) * sizeof *grown) : l->recs;
      if (!grown) {
        audit_list_clear(&more);
        rc = err_oom(&err);
        break;
      }
      l->recs = grown;
      if (more.n) memcpy(l->recs + l->n, more.recs, more.n * sizeof *more.recs);
      l->n += more.n;
      l->more = more.more;
      audit_list_clear(&more);
    }
    if (rc != ERR_OK) audit_list_clear(l);
  } else {
    store *st = NULL;
    int g = console__page_saga_group(r, gid ? gid : "", &st);
    if (g < 0) return false;
    rc = coord_list_audit(console__group_coord(r, (size_t)g), st, r->s.tenant, gid, AUDIT_PAGE,
                          token, r->deadline, l, next, &err);
  }
  if (rc != ERR_OK) console__page_err(r, &err);
  return rc == ERR_OK;
}

void console__page_audit(creq *r, char **seg) {
  const char *gid = console__query(r, "global_id"), *token = console__query(r, "page_token");
  audit_list l = {0};
  char next[COORD_TOKEN_MAX];
  if (!audit_page(r, gid, token, &l, next)) return;
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

static bool same_policy(const policy *a, const policy *b) {
  return a->mode == b->mode && a->retention_s == b->retention_s &&
         a->key_retention_s == b->key_retention_s && a->lease_ms == b->lease_ms;
}

/* The tenant's policies of every group, merged by (service, operation) into *rows[0..*n): the
 * newest version of each, with (*partial)[i] set when some group lacks it or holds another
 * version (a change that did not reach a group that was down). Owned (free() both). */
static err_code merged_policies(creq *r, const coord_group_view *g, size_t ng, policy_row **rows,
                                size_t *n, bool **partial, err_t *err) {
  *rows = NULL;
  *n = 0;
  *partial = NULL;
  size_t *held = NULL;
  err_code rc = ERR_OK;
  for (size_t gi = 0; gi < ng && rc == ERR_OK; gi++) {
    policy_row *mine = NULL;
    size_t m = 0;
    if ((rc = coord_list_policies(g[gi].ctx, g[gi].st, r->s.tenant, r->deadline, &mine, &m,
                                  err)) != ERR_OK) {
      if (ng > 1) {
        char msg[ERR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err->msg);
        snprintf(err->msg, sizeof err->msg, "group %.40s: %.180s", g[gi].name, msg);
      }
      break;
    }
    policy_row *grown = m ? realloc(*rows, (*n + m) * sizeof **rows) : *rows;
    bool *pg = m ? realloc(*partial, (*n + m) * sizeof **partial) : *partial;
    size_t *hg = m ? realloc(held, (*n + m) * sizeof *held) : held;
    if (grown) *rows = grown;
    if (pg) *partial = pg;
    if (hg) held = hg;
    if (m && (!grown || !pg || !hg)) {
      free(mine);
      rc = err_oom(err);
      break;
    }
    for (size_t i = 0; i < m; i++) {
      size_t at = *n;
      for (size_t k = 0; k < *n && at == *n; k++)
        if (!strcmp((*rows)[k].p.service, mine[i].p.service) &&
            !strcmp((*rows)[k].p.operation, mine[i].p.operation))
          at = k;
      if (at == *n) {
        (*rows)[(*n)++] = mine[i];
        (*partial)[at] = false;
        held[at] = 1;
        continue;
      }
      held[at]++;
      if (same_policy(&(*rows)[at].p, &mine[i].p)) continue;
      (*partial)[at] = true;
      if (mine[i].p.updated_ms > (*rows)[at].p.updated_ms) (*rows)[at] = mine[i];
    }
    free(mine);
  }
  for (size_t k = 0; rc == ERR_OK && k < *n; k++)
    if (held[k] < ng) (*partial)[k] = true;
  free(held);
  if (rc != ERR_OK) {
    free(*rows);
    free(*partial);
    *rows = NULL;
    *partial = NULL;
    *n = 0;
  }
  return rc;
}

void console__page_policies(creq *r, char **seg) {
  policy_row *rows = NULL;
  bool *partial = NULL;
  size_t n = 0;
  err_t err;
  err_clear(&err);
  coord_group_view g[CONSOLE_GROUPS_MAX];
  size_t ng = 0;
  if (!console__page_group_views(r, g, &ng)) return;
  if (merged_policies(r, g, ng, &rows, &n, &partial, &err) != ERR_OK) {
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
    if (partial[i]) /* a change that missed a group (down then): repeating it converges */
      console__html(b, "<br><span class=\"muted differs\">not the same in every group: set it "
                       "again</span>");
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
  free(partial);
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

/* Sets p (or, p NULL, deletes svc/op) in every group, as Admin.SetPolicy does
 * (coord_set_policy_groups): the first group on this page's (its leader's) fenced store, the
 * others through their pooled unfenced store (console_group.plain; else the page's). False with
 * an error page. */
static bool policy_everywhere(creq *r, const policy *p, const char *svc, const char *op) {
  coord_group_view g[CONSOLE_GROUPS_MAX];
  size_t ng = 0;
  if (!console__page_group_views(r, g, &ng)) return false;
  for (size_t i = 1; i < ng; i++) /* the page's own handle stays in r->st, given back later */
    if (r->c->groups[i].plain) g[i].st = store_pool_get(r->c->groups[i].plain);
  err_t err;
  err_clear(&err);
  policy out;
  bool deleted = false;
  err_code rc = p ? coord_set_policy_groups(g, ng, r->s.tenant, p, r->deadline, &out, &err)
                  : coord_delete_policy_groups(g, ng, r->s.tenant, svc, op, r->deadline,
                                               &deleted, &err);
  for (size_t i = 1; i < ng; i++)
    if (r->c->groups[i].plain) store_pool_put(r->c->groups[i].plain, g[i].st);
  if (rc == ERR_OK) return true;
  console__page_err(r, &err);
  return false;
}

void console__post_policy_delete(creq *r, char **seg) {
  const char *svc = console__form(r, "service"), *op = console__form(r, "operation");
  if (policy_everywhere(r, NULL, svc, op)) console__redirect(r, "/policies");
}

void console__post_policy_set(creq *r, char **seg) {
  const char *svc = console__form(r, "service"), *op = console__form(r, "operation");
  policy p = {0};
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
  if (policy_everywhere(r, &p, NULL, NULL)) console__redirect(r, "/policies");
}
