/* console_admin.c — the audit trail (/audit), policies (/policies), login and logout, and the
 * checks every POST passes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../coord/coord_admin.h"
#include "../coord/coord_policy.h"
#include "../util/clock.h"
#include "../util/log.h"
#include "console_internal.h"
#include "idem/v1/names.h"

#define AUDIT_PAGE 100

bool post_allowed(creq *r, bool needs_admin) {
  const char *csrf = cr_form(r, "csrf");
  char leader[ELECT_ADDR_MAX];
  if (!r->has_session) {
    page_error(r, 403, "log in first");
  } else if (!csrf || !console_secret_equal(csrf, r->s.csrf)) {
    page_error(r, 403, "refused: the form does not carry this session's CSRF token");
  } else if (needs_admin && r->s.role != AUTH_ROLE_ADMIN) {
    page_error(r, 403, "refused: your role (service) may read only");
  } else if (needs_admin && !cr_is_leader(r, leader)) {
    page_error(r, 503, "");
    r->out.n = 0;
    page_begin(r, "Not the leader");
    cb_put(&r->out, "<div class=\"banner err\">This node is a standby: ");
    leader_link(r, leader, r->path);
    cb_put(&r->out, ".</div>");
    page_end(r);
  } else {
    return true;
  }
  return false;
}

void page_audit(creq *r) {
  const char *gid = cr_query(r, "global_id"), *token = cr_query(r, "page_token");
  audit_list l = {0};
  char next[COORD_TOKEN_MAX];
  err_t err;
  err_clear(&err);
  store *st = cr_store(r);
  if (!st) {
    page_error(r, 503, "cannot open a store connection");
    return;
  }
  if (coord_list_audit(r->c->cfg.coord, st, r->s.tenant, gid, AUDIT_PAGE, token, r->deadline, &l,
                       next, &err) != ERR_OK) {
    page_err(r, &err);
    return;
  }
  page_begin(r, "Audit trail");
  cbuf *b = &r->out;
  cb_put(b,
         "<form class=\"filters\" method=\"get\" action=\"/audit\"><label>global id<input "
         "name=\"global_id\" value=\"");
  cb_esc(b, gid);
  cb_put(b,
         "\"></label><button type=\"submit\">Filter</button></form>"
         "<p class=\"muted\">Newest first.</p><table id=\"audit\"><tr><th>when</th>"
         "<th>actor</th><th>action</th><th>saga</th><th>step</th><th>change</th>"
         "<th>reason</th></tr>");
  for (size_t i = 0; i < l.n; i++) {
    const audit_rec *a = &l.recs[i];
    cb_put(b, "<tr><td>");
    cb_time(b, a->at_ms, r->now_ms);
    cb_put(b, "</td><td>");
    cb_esc(b, a->actor);
    cb_put(b, "</td><td>");
    cb_esc(b, a->action);
    cb_put(b, "</td><td><a href=\"/sagas/");
    cb_url(b, a->key.global_id);
    cb_put(b, "\">");
    cb_esc(b, a->key.global_id);
    cb_put(b, "</a></td><td><a href=\"");
    step_href(b, &a->key);
    cb_put(b, "\">");
    cb_esc(b, a->key.service);
    cb_put(b, " / ");
    cb_esc(b, a->key.operation);
    cb_printf(b, " / %s</a></td><td>%s \xE2\x86\x92 %s</td><td>", idem_word_phase(a->key.phase),
              idem_word_state(a->from_state), idem_word_state(a->to_state));
    cb_esc(b, a->reason);
    cb_put(b, "</td></tr>");
  }
  cb_put(b, "</table>");
  if (next[0]) {
    cb_put(b, "<p><a id=\"next\" href=\"/audit?global_id=");
    cb_url(b, gid);
    cb_put(b, "&amp;page_token=");
    cb_url(b, next);
    cb_put(b, "\">Older \xE2\x86\x92</a></p>");
  }
  audit_list_clear(&l);
  page_end(r);
}

void page_policies(creq *r) {
  policy_row *rows = NULL;
  size_t n = 0;
  err_t err;
  err_clear(&err);
  store *st = cr_store(r);
  if (!st) {
    page_error(r, 503, "cannot open a store connection");
    return;
  }
  if (coord_list_policies(r->c->cfg.coord, st, r->s.tenant, r->deadline, &rows, &n, &err) !=
      ERR_OK) {
    page_err(r, &err);
    return;
  }
  char leader[ELECT_ADDR_MAX];
  bool may_edit = r->s.role == AUTH_ROLE_ADMIN && cr_is_leader(r, leader);
  page_begin(r, "Policies");
  cbuf *b = &r->out;
  cb_put(b,
         "<p class=\"muted\">This tenant's own rows; the rest fall back to the server's "
         "rows and the built-in default (fail-closed, 24 h, 30 s).</p><table id=\"policies\">"
         "<tr><th>service</th><th>operation</th><th>failure mode</th><th>retention (s)</th>"
         "<th>keys kept (s)</th><th>lease (ms)</th><th>updated</th><th></th></tr>");
  for (size_t i = 0; i < n; i++) {
    const policy *p = &rows[i].p;
    cb_put(b, "<tr><td>");
    cb_esc(b, p->service);
    cb_put(b, "</td><td>");
    cb_esc(b, p->operation);
    cb_printf(b, "</td><td>%s</td><td class=\"num\">%u</td><td class=\"num\">%u</td>"
              "<td class=\"num\">%u</td><td>",
              idem_word_failure_mode(p->mode), p->retention_s, policy_key_retention(p),
              p->lease_ms);
    cb_time(b, p->updated_ms, r->now_ms);
    cb_put(b, "</td><td>");
    if (may_edit) {
      cb_put(b, "<form method=\"post\" action=\"/policies/delete\">");
      form_csrf(r);
      cb_put(b, "<input type=\"hidden\" name=\"service\" value=\"");
      cb_esc(b, p->service);
      cb_put(b, "\"><input type=\"hidden\" name=\"operation\" value=\"");
      cb_esc(b, p->operation);
      cb_put(b, "\"><button class=\"danger\" type=\"submit\">Delete</button></form>");
    }
    cb_put(b, "</td></tr>");
  }
  cb_put(b, "</table>");
  free(rows);
  if (!may_edit) {
    cb_put(b, r->s.role == AUTH_ROLE_ADMIN ? "<p class=\"muted\">Policies are changed on the "
                                             "leader.</p>"
                                           : "<p class=\"muted\">Your role (service) may read "
                                             "only.</p>");
    page_end(r);
    return;
  }
  cb_put(b,
         "<h2>Set a policy</h2><form class=\"filters card\" id=\"setpolicy\" method=\"post\" "
         "action=\"/policies\">");
  form_csrf(r);
  cb_put(b,
         "<label>service<input name=\"service\" required></label>"
         "<label>operation<input name=\"operation\" value=\"*\" required></label>"
         "<label>failure mode<select name=\"mode\"><option>fail-closed</option>"
         "<option>fail-open</option></select></label>"
         "<label>retention (s)<input name=\"retention_s\" value=\"86400\" size=\"8\"></label>"
         "<label>keys kept (s, 0 = as long)<input name=\"key_retention_s\" value=\"0\" "
         "size=\"8\"></label>"
         "<label>lease (ms)<input name=\"lease_ms\" value=\"30000\" size=\"8\"></label>"
         "<button type=\"submit\">Set</button></form>");
  page_end(r);
}

static bool parse_u32(const char *s, uint32_t *out) {
  char *end;
  errno = 0;
  unsigned long v = s && *s ? strtoul(s, &end, 10) : 0;
  if (!s || !*s || errno || *end || v > UINT32_MAX || s[0] == '-') return false;
  *out = (uint32_t)v;
  return true;
}

void post_policy(creq *r, bool del) {
  if (!post_allowed(r, true)) return;
  const char *svc = cr_form(r, "service"), *op = cr_form(r, "operation");
  err_t err;
  err_clear(&err);
  store *st = cr_store(r);
  if (!st) {
    page_error(r, 503, "cannot open a store connection");
    return;
  }
  if (del) {
    bool deleted = false;
    if (coord_delete_policy(r->c->cfg.coord, st, r->s.tenant, svc, op, r->deadline, &deleted,
                            &err) != ERR_OK) {
      page_err(r, &err);
      return;
    }
    cr_redirect(r, "/policies");
    return;
  }
  policy p = {0}, out;
  const char *mode = cr_form(r, "mode");
  int m = mode ? idem_word_find(idem_failure_mode_words, IDEM_WORD_COUNT(idem_failure_mode_words),
                                1, mode)
               : -1;
  if (m < 0) {
    page_error(r, 400, "failure mode: fail-closed or fail-open");
    return;
  }
  if (!parse_u32(cr_form(r, "retention_s"), &p.retention_s)) {
    page_error(r, 400, "retention_s: expected seconds");
    return;
  }
  const char *kr = cr_form(r, "key_retention_s");
  if (kr && *kr && !parse_u32(kr, &p.key_retention_s)) { /* absent: 0, as long as the retention */
    page_error(r, 400, "key_retention_s: expected seconds");
    return;
  }
  if (!parse_u32(cr_form(r, "lease_ms"), &p.lease_ms)) {
    page_error(r, 400, "lease_ms: expected milliseconds");
    return;
  }
  if (!svc || strlen(svc) >= sizeof p.service || !op || strlen(op) >= sizeof p.operation) {
    page_error(r, 400, "service and operation: 1 to 64 characters");
    return;
  }
  snprintf(p.service, sizeof p.service, "%s", svc);
  snprintf(p.operation, sizeof p.operation, "%s", op);
  p.mode = (failure_mode)m;
  if (coord_set_policy(r->c->cfg.coord, st, r->s.tenant, &p, r->deadline, &out, &err) != ERR_OK) {
    page_err(r, &err);
    return;
  }
  cr_redirect(r, "/policies");
}

#define LOGIN_COOKIE "idem_login"

/* The login form. Its CSRF token is a double-submit cookie: a random value set here in an
 * HttpOnly, SameSite=Strict cookie scoped to /login and repeated in the form; a login is taken
 * only when the two agree, so another site cannot post a login (and plant its own session). */
void page_login(creq *r, unsigned status, const char *note) {
  if (!r->c->cfg.tokens) {
    cr_redirect(r, "/");
    return;
  }
  /* the browser's cookie is kept while it lives (a second load, or a request the browser makes
   * on its own such as a favicon, must not replace the value of a form already shown) */
  char csrf[CONSOLE_ID_HEX + 1];
  const char *had = cr_cookie(r, LOGIN_COOKIE);
  if (had && strlen(had) == CONSOLE_ID_HEX && strspn(had, "0123456789abcdef") == CONSOLE_ID_HEX) {
    memcpy(csrf, had, sizeof csrf);
  } else {
    if (!console_random_hex(csrf, CONSOLE_ID_HEX / 2)) {
      page_error(r, 500, "no randomness for the login form");
      return;
    }
    snprintf(r->set_cookie, sizeof r->set_cookie,
             LOGIN_COOKIE "=%s; HttpOnly; SameSite=Strict; Path=/login; Max-Age=3600%s", csrf,
             r->c->tls ? "; Secure" : "");
  }
  r->status = status;
  page_begin(r, "Log in");
  if (note) {
    cb_put(&r->out, "<div class=\"banner err\" id=\"refused\">");
    cb_esc(&r->out, note);
    cb_put(&r->out, "</div>");
  }
  cb_printf(&r->out,
            "<form class=\"card\" id=\"login\" method=\"post\" action=\"/login\">"
            "<input type=\"hidden\" name=\"csrf\" value=\"%s\">"
            "<label>token (a line of the --tokens file)<input type=\"password\" "
            "name=\"token\" autocomplete=\"off\" required></label>"
            "<p><button type=\"submit\">Log in</button></p></form>",
            csrf);
  page_end(r);
}

void post_login(creq *r) {
  if (!r->c->cfg.tokens) {
    cr_redirect(r, "/");
    return;
  }
  unsigned char who[17];
  size_t who_n = cr_client(r, who);
  int64_t wait_ms = login_limits_check(r->c->logins, who, who_n, clock_mono_ms());
  if (wait_ms > 0) {
    char msg[120];
    snprintf(msg, sizeof msg,
             "Too many failed logins from your address: try again in %lld s.",
             (long long)((wait_ms + 999) / 1000));
    log_kv(LOG_WARN, "console login refused: too many failures", (const char *)NULL);
    page_login(r, 429, msg);
    return;
  }
  const char *cookie = cr_cookie(r, LOGIN_COOKIE), *form_csrf = cr_form(r, "csrf");
  if (!cookie || !form_csrf || !console_secret_equal(cookie, form_csrf)) {
    log_kv(LOG_WARN, "console login refused: no CSRF token", (const char *)NULL);
    page_login(r, 403, "The login form had expired (or came from elsewhere): log in again.");
    return;
  }
  const cfield *tok = cr_field(r, "token");
  char tenant[REC_GLOBAL_ID_MAX + 1];
  auth_role role = AUTH_ROLE_NONE;
  bool ok = false;
  if (tok && tok->value_len >= AUTH_TOKEN_MIN && tok->value_len <= AUTH_TOKEN_MAX) {
    auth_tokens *t = auth_keyring_acquire(r->c->cfg.tokens);
    ok = t && auth_tokens_lookup(t, tok->value, tok->value_len, tenant, &role);
    auth_tokens_release(t);
  }
  csession s;
  if (!ok) {
    login_limits_failed(r->c->logins, who, who_n, clock_mono_ms());
    log_kv(LOG_WARN, "console login refused", (const char *)NULL);
    page_login(r, 401, "Login refused.");
    return;
  }
  if (!sessions_create(r->c->sess, tok->value, tok->value_len, tenant, role, false, &s)) {
    page_error(r, 500, "cannot create a session");
    return;
  }
  log_kv(LOG_INFO, "console login", "tenant", tenant, "role", auth_role_name(role),
         (const char *)NULL);
  snprintf(r->set_cookie, sizeof r->set_cookie,
           "idem_session=%s; HttpOnly; SameSite=Strict; Path=/; Max-Age=%lld%s", s.id,
           (long long)(CONSOLE_SESSION_TTL_MS / 1000), r->c->tls ? "; Secure" : "");
  cr_redirect(r, "/");
}

void post_logout(creq *r) {
  if (!post_allowed(r, false)) return;
  sessions_drop(r->c->sess, r->s.id);
  snprintf(r->set_cookie, sizeof r->set_cookie,
           "idem_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0%s",
           r->c->tls ? "; Secure" : "");
  cr_redirect(r, r->c->cfg.tokens ? "/login" : "/");
}
