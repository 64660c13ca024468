/* console_req.c — the request layer (console_req.h): the request's query, form, cookies, client,
 * store and leadership; reading it in (the Host check, the form, NUL bytes, the session); the
 * checks a POST passes. */
#include <microhttpd.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../util/hostport.h"
#include "../validate/validate.h"
#include "console_html.h"
#include "console_req.h"

const char *console__cookie(const creq *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, name);
}

const char *console__query(const creq *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

const cfield *console__field(const creq *r, const char *name) {
  for (size_t i = 0; i < r->n_form; i++)
    if (strcmp(r->form[i].name, name) == 0) return &r->form[i];
  return NULL;
}

const char *console__form(const creq *r, const char *name) {
  const cfield *f = console__field(r, name);
  return f ? f->value : NULL;
}

store *console__group_store(creq *r, size_t g) {
  if (g >= r->c->cfg.n_groups) return NULL;
  if (!r->st[g]) r->st[g] = store_pool_get(r->c->pages[g]);
  return r->st[g];
}

store *console__store(creq *r) {
  return console__group_store(r, 0);
}

const coord_ctx *console__group_coord(const creq *r, size_t g) {
  const console *c = r->c;
  return g < c->cfg.n_groups && c->groups[g].coord ? c->groups[g].coord : c->cfg.coord;
}

int console__saga_group(const creq *r, const char *global_id) {
  const console_config *cfg = &r->c->cfg;
  if (cfg->n_groups < 2 || !cfg->route) return 0;
  int g = cfg->route(cfg->route_arg, r->s.tenant, global_id);
  return g >= (int)cfg->n_groups ? -1 : g;
}

bool console__leads_group(const creq *r, size_t g, char leader[ELECT_ADDR_MAX]) {
  elect_status es = {.leader = true, .election_ok = true};
  elect *el = g < r->c->cfg.n_groups ? r->c->groups[g].elector : r->c->cfg.elector;
  if (el) elect_status_get(el, &es);
  snprintf(leader, ELECT_ADDR_MAX, "%s", es.leader_addr);
  return es.leader;
}

bool console__is_leader(const creq *r, char leader[ELECT_ADDR_MAX]) {
  return console__leads_group(r, 0, leader);
}

void console__redirect(creq *r, const char *location) {
  snprintf(r->location, sizeof r->location, "%s", location);
  r->status = MHD_HTTP_SEE_OTHER;
}

static size_t url_decode(char *s) {
  char *o = s;
  for (char *p = s; *p; p++) {
    if (*p == '+') {
      *o++ = ' ';
    } else if (*p == '%' && console__hexval(p[1]) >= 0 && console__hexval(p[2]) >= 0) {
      *o++ = (char)(console__hexval(p[1]) * 16 + console__hexval(p[2]));
      p += 2;
    } else {
      *o++ = *p;
    }
  }
  *o = '\0';
  return (size_t)(o - s);
}

bool console__parse_form(creq *r, char *text) {
  size_t cap = 1;
  for (const char *p = text; *p; p++) cap += *p == '&';
  r->form = calloc(cap, sizeof *r->form);
  if (!r->form) return false;
  for (char *save = NULL, *pair = strtok_r(text, "&", &save); pair;
       pair = strtok_r(NULL, "&", &save)) {
    char *eq = strchr(pair, '=');
    if (eq) *eq = '\0';
    cfield *f = &r->form[r->n_form++];
    f->name = pair;
    url_decode(f->name);
    f->value = eq ? eq + 1 : pair + strlen(pair);
    f->value_len = url_decode(f->value);
  }
  return true;
}

typedef struct nul_scan {
  const char *field; /* the first field found with a NUL, or NULL */
} nul_scan;

static enum MHD_Result query_nul(void *cls, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size) {
  (void)kind;
  nul_scan *ns = cls;
  if (strlen(key) != key_size || (value && strlen(value) != value_size)) {
    ns->field = key;
    return MHD_NO;
  }
  return MHD_YES;
}

const char *console__nul_field(const creq *r) {
  nul_scan ns = {NULL};
  MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, query_nul, &ns);
  if (ns.field) return ns.field;
  for (size_t i = 0; i < r->n_form; i++) {
    const cfield *f = &r->form[i];
    if (strcmp(f->name, "body") != 0 && strcmp(f->name, "body_hex") != 0 &&
        strlen(f->value) != f->value_len)
      return f->name;
  }
  return NULL;
}

/* Whose development-mode session this is: the client's address (an IPv6 one by its /64, what
 * one host is usually given), so one client's cookie-less requests replace only its own. */
static size_t client_owner(struct MHD_Connection *conn, unsigned char out[17]) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  const struct sockaddr *sa = ci ? ci->client_addr : NULL;
  out[0] = sa ? (unsigned char)sa->sa_family : 0;
  if (sa && sa->sa_family == AF_INET) {
    memcpy(out + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    return 5;
  }
  if (sa && sa->sa_family == AF_INET6) {
    memcpy(out + 1, &((const struct sockaddr_in6 *)sa)->sin6_addr, 8);
    return 9;
  }
  return 1;
}

size_t console__client(const creq *r, unsigned char out[17]) {
  return client_owner(r->conn, out);
}

void console__find_session(creq *r) {
  const char *id = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, CONSOLE_SESSION_COOKIE);
  r->has_session = id && console__sessions_find(r->c->sess, id, &r->s);
  if (r->c->cfg.tokens) return;
  if (!r->has_session) {
    unsigned char owner[17];
    size_t on = client_owner(r->conn, owner);
    r->has_session =
        console__sessions_create(r->c->sess, owner, on, "default", AUTH_ROLE_ADMIN, true, &r->s);
    if (r->has_session)
      snprintf(r->set_cookie, sizeof r->set_cookie,
               CONSOLE_SESSION_COOKIE "=%s; HttpOnly; SameSite=Strict; Path=/%s", r->s.id,
               r->c->tls ? "; Secure" : "");
  }
  const char *t = console__query(r, "tenant");
  err_t err;
  if (r->has_session && t && *t && validate_tenant(t, &err) == ERR_OK) {
    console__sessions_set_tenant(r->c->sess, r->s.id, t);
    snprintf(r->s.tenant, sizeof r->s.tenant, "%s", t);
  }
}

bool console__host_ok(const creq *r) {
  const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
  hostport hp;
  if (!h || !*h || !hostport_parse(h, HOSTPORT_PORT_OPTIONAL | HOSTPORT_TCP_ONLY, &hp))
    return false;
  struct in_addr a4;
  struct in6_addr a6;
  if (hp.v6) return inet_pton(AF_INET6, hp.host, &a6) == 1;
  return strcmp(hp.host, "localhost") == 0 || inet_pton(AF_INET, hp.host, &a4) == 1;
}

void console__actor(const creq *r, char *out, size_t n) {
  const char *role = auth_role_name(r->s.role);
  size_t rl = strlen(role), tl = strlen(r->s.tenant);
  if (r->s.dev || n < rl + 3) {
    snprintf(out, n, "console");
    return;
  }
  if (tl > n - rl - 2) tl = n - rl - 2; /* a 128-character tenant: the actor limit wins */
  memcpy(out, r->s.tenant, tl);
  out[tl] = '/';
  memcpy(out + tl + 1, role, rl + 1);
}

console_refusal console__post_check(const creq *r, unsigned needs, char leader[ELECT_ADDR_MAX]) {
  const char *csrf = console__form(r, "csrf");
  leader[0] = '\0';
  if (!r->has_session) return CONSOLE_REFUSED_NO_SESSION;
  if (!csrf || !console__secret_equal(csrf, r->s.csrf)) return CONSOLE_REFUSED_CSRF;
  if ((needs & CONSOLE_NEEDS_ADMIN) && !auth_role_at_least(r->s.role, AUTH_ROLE_ADMIN)) return CONSOLE_REFUSED_ROLE;
  if ((needs & CONSOLE_NEEDS_LEADER) && !console__is_leader(r, leader))
    return CONSOLE_REFUSED_NOT_LEADER;
  return CONSOLE_ALLOWED;
}
