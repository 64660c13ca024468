/* console_login.c — logging in and out (/login, /logout). With --tokens the login form carries a
 * CSRF token (a double-submit cookie) and failed logins are counted per client address
 * (console_limits.c): past CONSOLE_LOGIN_FAILURES_MAX in a window the form answers 429, even to
 * the right token. A session lives in an HttpOnly, SameSite=Strict cookie; its token is never
 * kept. Without tokens (development) /login leads to the overview. */
#include <stdio.h>
#include <string.h>

#include "../util/clock.h"
#include "../util/log.h"
#include "console_pages.h"

#define LOGIN_COOKIE "idem_login"

/* The login form. Its CSRF token is a double-submit cookie: a random value set here in an
 * HttpOnly, SameSite=Strict cookie scoped to /login and repeated in the form; a login is taken
 * only when the two agree, so another site cannot post a login (and plant its own session). */
static void login_form(creq *r, unsigned status, const char *note) {
  if (!r->c->cfg.tokens) {
    console__redirect(r, "/");
    return;
  }
  /* the browser's cookie is kept while it lives (a second load, or a request the browser makes
   * on its own such as a favicon, must not replace the value of a form already shown) */
  char csrf[CONSOLE_ID_HEX + 1];
  const char *had = console__cookie(r, LOGIN_COOKIE);
  if (had && strlen(had) == CONSOLE_ID_HEX && strspn(had, "0123456789abcdef") == CONSOLE_ID_HEX) {
    memcpy(csrf, had, sizeof csrf);
  } else {
    if (!console__random_hex(csrf, CONSOLE_ID_HEX / 2)) {
      console__page_error(r, 500, "no randomness for the login form");
      return;
    }
    snprintf(r->set_cookie, sizeof r->set_cookie,
             LOGIN_COOKIE "=%s; HttpOnly; SameSite=Strict; Path=/login; Max-Age=3600%s", csrf,
             r->c->tls ? "; Secure" : "");
  }
  r->status = status;
  console__page_begin(r, "Log in");
  if (note) {
    console__html(&r->out, "<div class=\"banner err\" id=\"refused\">%s</div>", note);
  }
  console__html(&r->out,
                "<form class=\"card\" id=\"login\" method=\"post\" action=\"/login\">"
                "<input type=\"hidden\" name=\"csrf\" value=\"%s\">"
                "<label>token (a line of the --tokens file)<input type=\"password\" name=\"token\" "
                "autocomplete=\"off\" required>"
                "</label><p><button type=\"submit\">Log in</button></p></form>",
                csrf);
  console__page_end(r);
}

void console__page_login(creq *r, char **seg) {
  login_form(r, 200, NULL);
}

void console__post_login(creq *r, char **seg) {
  if (!r->c->cfg.tokens) {
    console__redirect(r, "/");
    return;
  }
  unsigned char who[17];
  size_t who_n = console__client(r, who);
  int64_t wait_ms = console__logins_check(r->c->logins, who, who_n, clock_mono_ms());
  if (wait_ms > 0) {
    char msg[120];
    snprintf(msg, sizeof msg, "Too many failed logins from your address: try again in %lld s.",
             (long long)((wait_ms + 999) / 1000));
    log_kv(LOG_WARN, "console login refused: too many failures", (const char *)NULL);
    login_form(r, 429, msg);
    return;
  }
  const char *cookie = console__cookie(r, LOGIN_COOKIE), *form_token = console__form(r, "csrf");
  if (!cookie || !form_token || !console__secret_equal(cookie, form_token)) {
    log_kv(LOG_WARN, "console login refused: no CSRF token", (const char *)NULL);
    login_form(r, 403, "The login form had expired (or came from elsewhere): log in again.");
    return;
  }
  const cfield *tok = console__field(r, "token");
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
    console__logins_failed(r->c->logins, who, who_n, clock_mono_ms());
    log_kv(LOG_WARN, "console login refused", (const char *)NULL);
    login_form(r, 401, "Login refused.");
    return;
  }
  if (!console__sessions_create(r->c->sess, tok->value, tok->value_len, tenant, role, false, &s)) {
    console__page_error(r, 500, "cannot create a session");
    return;
  }
  log_kv(LOG_INFO, "console login", "tenant", tenant, "role", auth_role_name(role),
         (const char *)NULL);
  snprintf(r->set_cookie, sizeof r->set_cookie,
           CONSOLE_SESSION_COOKIE "=%s; HttpOnly; SameSite=Strict; Path=/; Max-Age=%lld%s", s.id,
           (long long)(CONSOLE_SESSION_TTL_MS / 1000), r->c->tls ? "; Secure" : "");
  console__redirect(r, "/");
}

void console__post_logout(creq *r, char **seg) {
  console__sessions_drop(r->c->sess, r->s.id);
  snprintf(r->set_cookie, sizeof r->set_cookie,
           CONSOLE_SESSION_COOKIE "=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0%s",
           r->c->tls ? "; Secure" : "");
  console__redirect(r, r->c->cfg.tokens ? "/login" : "/");
}
