/* console_http.c — the console's HTTP side (console.h): libmicrohttpd threads, the request's
 * session, its form, the routes, the security headers, the bounds on slow clients (with
 * console_guard.h); start and stop. */
#include <microhttpd.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../util/clock.h"
#include "../util/log.h"
#include "../validate/validate.h"
#include "console_guard.h"
#include "console_internal.h"

#define BODY_MAX (256u * 1024) /* a resolve form: a 64 KiB body, percent-encoded */
/* Slow clients (docs/limits.md "Console"): a request must arrive whole within REQUEST_MS of the
 * connection waiting for it (console_guard.h), one address holds at most CONN_PER_IP
 * connections, and epoll leaves room for CONN_MAX of them. */
#define CONN_MAX 4096u
#define CONN_PER_IP 64u
#define REQUEST_MS 10000
#define IDLE_S 30u
/* TLS 1.2 or newer, like the gRPC port (GnuTLS priority string) */
static char tls_priorities[] = "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";
#define SESSIONS_MAX 4096
#define COOKIE "idem_session"

typedef struct upload {
  cbuf body;
  bool too_big;
} upload;

const char *cr_cookie(const creq *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, name);
}

const char *cr_query(const creq *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

const cfield *cr_field(const creq *r, const char *name) {
  for (size_t i = 0; i < r->n_form; i++)
    if (strcmp(r->form[i].name, name) == 0) return &r->form[i];
  return NULL;
}

const char *cr_form(const creq *r, const char *name) {
  const cfield *f = cr_field(r, name);
  return f ? f->value : NULL;
}

store *cr_store(creq *r) {
  if (!r->st) r->st = cpool_get(r->c->pool);
  return r->st;
}

bool cr_is_leader(const creq *r, char leader[ELECT_ADDR_MAX]) {
  elect_status es = {.leader = true, .election_ok = true};
  if (r->c->cfg.elector) elect_status_get(r->c->cfg.elector, &es);
  snprintf(leader, ELECT_ADDR_MAX, "%s", es.leader_addr);
  return es.leader;
}

void cr_redirect(creq *r, const char *location) {
  snprintf(r->location, sizeof r->location, "%s", location);
  r->status = MHD_HTTP_SEE_OTHER;
}

/* Decodes application/x-www-form-urlencoded text in place into fields. */
int console_hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static size_t url_decode(char *s) {
  char *o = s;
  for (char *p = s; *p; p++) {
    if (*p == '+') {
      *o++ = ' ';
    } else if (*p == '%' && console_hexval(p[1]) >= 0 && console_hexval(p[2]) >= 0) {
      *o++ = (char)(console_hexval(p[1]) * 16 + console_hexval(p[2]));
      p += 2;
    } else {
      *o++ = *p;
    }
  }
  *o = '\0';
  return (size_t)(o - s);
}

static bool parse_form(creq *r, char *text) {
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

/* A NUL byte would cut a value short where C strings carry it (a reason, a tenant): such a
 * field is refused by name instead. The resolve form's body is bytes and may hold any. */
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

static const char *nul_field(const creq *r) {
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

size_t cr_client(const creq *r, unsigned char out[17]) {
  return client_owner(r->conn, out);
}

/* The session of the cookie; in development mode a new one when there is none, and ?tenant=
 * switches the session's tenant. */
static void find_session(creq *r) {
  const char *id = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, COOKIE);
  r->has_session = id && sessions_find(r->c->sess, id, &r->s);
  if (r->c->cfg.tokens) return;
  if (!r->has_session) {
    unsigned char owner[17];
    size_t on = client_owner(r->conn, owner);
    r->has_session =
        sessions_create(r->c->sess, owner, on, "default", AUTH_ROLE_ADMIN, true, &r->s);
    if (r->has_session)
      snprintf(r->set_cookie, sizeof r->set_cookie,
               COOKIE "=%s; HttpOnly; SameSite=Strict; Path=/%s", r->s.id,
               r->c->tls ? "; Secure" : "");
  }
  const char *t = cr_query(r, "tenant");
  err_t err;
  if (r->has_session && t && *t && validate_tenant(t, &err) == ERR_OK) {
    sessions_set_tenant(r->c->sess, r->s.id, t);
    snprintf(r->s.tenant, sizeof r->s.tenant, "%s", t);
  }
}

/* Development mode has no login, so a page must not be readable by a web site that rebinds its
 * DNS name to this address: the Host header must name an IP address (an IPv6 one in brackets)
 * or localhost, with an optional :PORT and nothing else. */
static bool host_ok(const creq *r) {
  const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
  if (!h || !*h) return false;
  char host[256];
  const char *rest;
  if (h[0] == '[') {
    const char *close = strchr(h, ']');
    if (!close || (size_t)(close - h - 1) >= sizeof host) return false;
    snprintf(host, sizeof host, "%.*s", (int)(close - h - 1), h + 1);
    rest = close + 1;
  } else {
    size_t n = strcspn(h, ":");
    if (n >= sizeof host) return false;
    snprintf(host, sizeof host, "%.*s", (int)n, h);
    rest = h + n;
  }
  if (*rest && (rest[0] != ':' || strspn(rest + 1, "0123456789") != strlen(rest + 1)))
    return false;
  struct in_addr a4;
  struct in6_addr a6;
  if (h[0] == '[') return inet_pton(AF_INET6, host, &a6) == 1;
  return strcmp(host, "localhost") == 0 || inet_pton(AF_INET, host, &a4) == 1;
}

/* Splits the path after prefix into n non-empty segments; false when the count differs. buf
 * holds their text. */
static bool segments(const char *path, const char *prefix, char *buf, size_t bn, char **seg,
                     int n) {
  size_t pl = strlen(prefix);
  if (strncmp(path, prefix, pl) != 0 || strlen(path + pl) >= bn) return false;
  snprintf(buf, bn, "%s", path + pl);
  int k = 0;
  for (char *save = NULL, *s = strtok_r(buf, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
    if (k == n) return false;
    seg[k++] = s; /* libmicrohttpd has percent-decoded the path already */
  }
  return k == n;
}

static void route(creq *r) {
  const char *p = r->path;
  bool get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
  bool post = strcmp(r->method, "POST") == 0;
  if (!get && !post) {
    page_error(r, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed");
    return;
  }
  if (strcmp(p, "/login") == 0) {
    if (get)
      page_login(r, MHD_HTTP_OK, NULL);
    else
      post_login(r);
    return;
  }
  /* a browser asks for it by itself: no redirect to the login form (whose cookie it would set) */
  if (strcmp(p, "/favicon.ico") == 0) {
    page_error(r, MHD_HTTP_NOT_FOUND, "no icon");
    return;
  }
  if (!r->has_session) {
    if (get) {
      cr_redirect(r, "/login");
      return;
    }
    page_error(r, MHD_HTTP_FORBIDDEN, "log in first");
    return;
  }
  if (strcmp(p, "/logout") == 0 && post) {
    post_logout(r);
    return;
  }
  char buf[1024], *seg[5];
  coord_key_in key = {0};
  if (segments(p, "/steps/", buf, sizeof buf, seg, 4) ||
      (post && segments(p, "/steps/", buf, sizeof buf, seg, 5) && strcmp(seg[4], "resolve") == 0)) {
    key = (coord_key_in){seg[0], seg[1], seg[2],
                         strcmp(seg[3], "forward") == 0        ? PHASE_FORWARD
                         : strcmp(seg[3], "compensation") == 0 ? PHASE_COMPENSATION
                                                               : -1};
    if (key.phase < 0) {
      page_error(r, MHD_HTTP_NOT_FOUND, "phase: forward or compensation");
      return;
    }
    if (get)
      page_step(r, &key);
    else
      post_resolve(r, &key);
    return;
  }
  if (get && segments(p, "/sagas/", buf, sizeof buf, seg, 1)) {
    page_saga(r, seg[0]);
    return;
  }
  if (get && strcmp(p, "/") == 0) {
    page_overview(r);
    return;
  }
  if (get && strcmp(p, "/steps") == 0) {
    page_steps(r);
    return;
  }
  if (get && strcmp(p, "/audit") == 0) {
    page_audit(r);
    return;
  }
  if (strcmp(p, "/policies") == 0) {
    if (get)
      page_policies(r);
    else
      post_policy(r, false);
    return;
  }
  if (post && strcmp(p, "/policies/delete") == 0) {
    post_policy(r, true);
    return;
  }
  page_error(r, MHD_HTTP_NOT_FOUND, "no such page");
}

static void add_security_headers(struct MHD_Response *resp) {
  MHD_add_response_header(resp, "Content-Security-Policy",
                          "default-src 'self'; form-action 'self'; frame-ancestors 'none'");
  MHD_add_response_header(resp, "X-Frame-Options", "DENY");
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
  MHD_add_response_header(resp, "Cache-Control", "no-store");
}

static enum MHD_Result respond(struct MHD_Connection *conn, creq *r, bool css, int64_t t0_us) {
  struct MHD_Response *resp;
  if (r->out.oom) {
    cb_free(&r->out);
    r->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    r->location[0] = '\0';
    resp = MHD_create_response_from_buffer(14, (void *)"out of memory\n", MHD_RESPMEM_PERSISTENT);
  } else {
    resp = MHD_create_response_from_buffer(r->out.n, r->out.p, MHD_RESPMEM_MUST_FREE);
    if (resp) r->out = (cbuf){0};
  }
  if (!resp) return MHD_NO;
  add_security_headers(resp);
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                          css ? "text/css; charset=utf-8" : "text/html; charset=utf-8");
  if (r->location[0]) MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, r->location);
  if (r->set_cookie[0]) MHD_add_response_header(resp, MHD_HTTP_HEADER_SET_COOKIE, r->set_cookie);
  char timing[48]; /* the server's time for this page, store calls included (docs/console.md) */
  snprintf(timing, sizeof timing, "app;dur=%.2f", (double)(clock_mono_us() - t0_us) / 1000.0);
  MHD_add_response_header(resp, "Server-Timing", timing);
  enum MHD_Result ret = MHD_queue_response(conn, r->status ? r->status : MHD_HTTP_OK, resp);
  MHD_destroy_response(resp);
  return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls) {
  (void)version;
  console *c = cls;
  upload *up = *req_cls;
  if (!up) { /* the headers: answer once the body (if any) is in */
    up = calloc(1, sizeof *up);
    if (!up) return MHD_NO;
    *req_cls = up;
    return MHD_YES;
  }
  if (*upload_data_size) {
    if (up->body.n + *upload_data_size > BODY_MAX)
      up->too_big = true;
    else
      cb_putn(&up->body, upload_data, *upload_data_size);
    *upload_data_size = 0;
    return MHD_YES;
  }
  cguard_request_in(conn);
  int64_t t0 = clock_mono_us();
  creq r = {.c = c, .conn = conn, .method = method, .path = url, .now_ms = clock_wall_ms()};
  r.deadline = clock_mono_ms() + c->cfg.coord->store_timeout_ms;
  if (strcmp(url, "/style.css") == 0) {
    cb_put(&r.out, console_css);
    return respond(conn, &r, true, t0);
  }
  bool host_refused = !c->cfg.tokens && !host_ok(&r);
  bool parsed = !host_refused && !up->too_big && !up->body.oom &&
                (strcmp(method, "POST") != 0 ||
                 parse_form(&r, up->body.p ? up->body.p : (char[]){0}));
  const char *nul = parsed ? nul_field(&r) : NULL;
  if (!host_refused && !nul) find_session(&r);
  if (host_refused) {
    page_error(&r, 403,
               "development mode (no --tokens) answers only to an IP address or localhost in "
               "the Host header");
  } else if (up->too_big || up->body.oom) {
    page_error(&r, 413, "the form is too large");
  } else if (!parsed) {
    page_error(&r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
  } else if (nul) {
    char msg[160];
    snprintf(msg, sizeof msg, "%.100s: contains a NUL byte", nul);
    page_error(&r, 400, msg);
  } else {
    route(&r);
  }
  if (r.st) cpool_put(c->pool, r.st);
  enum MHD_Result ret = respond(conn, &r, false, t0);
  if (up->body.p) OPENSSL_cleanse(up->body.p, up->body.n); /* a login token, maybe */
  free(r.form);
  cb_free(&r.out);
  char ms[32], st[16];
  snprintf(ms, sizeof ms, "%.2f", (double)(clock_mono_us() - t0) / 1000.0);
  snprintf(st, sizeof st, "%u", r.status ? r.status : 200);
  log_kv(LOG_DEBUG, "console request", "method", method, "path", url, "status", st, "server_ms", ms,
         (const char *)NULL);
  return ret;
}

static void completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                      enum MHD_RequestTerminationCode why) {
  (void)cls, (void)why;
  cguard_reply_done(conn);
  upload *up = *req_cls;
  if (!up) return;
  cb_free(&up->body);
  free(up);
  *req_cls = NULL;
}

/* HOST:PORT or [V6]:PORT into host and port. */
static bool split(const char *addr, char *host, size_t hn, char *port, size_t pn) {
  const char *colon;
  if (addr[0] == '[') {
    const char *close = strchr(addr, ']');
    if (!close || close[1] != ':' || (size_t)(close - addr - 1) >= hn) return false;
    snprintf(host, hn, "%.*s", (int)(close - addr - 1), addr + 1);
    colon = close + 1;
  } else {
    colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= hn) return false;
    snprintf(host, hn, "%.*s", (int)(colon - addr), addr);
  }
  if (!colon[1] || strlen(colon + 1) >= pn || strspn(colon + 1, "0123456789") != strlen(colon + 1))
    return false;
  snprintf(port, pn, "%s", colon + 1);
  return true;
}

static void wipe_free(char *s) {
  if (s) OPENSSL_cleanse(s, strlen(s));
  free(s);
}

console *console_start(const console_config *cfg, int *bound_port, err_t *err) {
  char host[256], port[8];
  if (!cfg->address || !split(cfg->address, host, sizeof host, port, sizeof port)) {
    err_set(err, ERR_INVALID, "--console: expected HOST:PORT, got %s",
            cfg->address ? cfg->address : "nothing");
    return NULL;
  }
  bool tls = cfg->tls_cert_pem && cfg->tls_key_pem;
  if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    err_set(err, ERR_UNAVAILABLE, "--console: this libmicrohttpd has no TLS");
    return NULL;
  }
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *ai = NULL;
  int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
  if (gai != 0 || !ai) {
    err_set(err, ERR_INVALID, "--console: cannot resolve %s: %s", host, gai_strerror(gai));
    return NULL;
  }
  console *c = calloc(1, sizeof *c);
  int threads = cfg->threads > 0 ? cfg->threads : CONSOLE_THREADS_DEFAULT;
  if (c) {
    c->cfg = *cfg;
    c->tls = tls;
    c->sess = sessions_new(SESSIONS_MAX);
    c->pool = cpool_new(threads, cfg->open_store, cfg->open_store_arg);
    c->cert = tls ? strdup(cfg->tls_cert_pem) : NULL;
    c->key = tls ? strdup(cfg->tls_key_pem) : NULL;
    c->guard = cguard_start(REQUEST_MS);
    c->logins = login_limits_new();
  }
  if (!c || !c->sess || !c->pool || !c->guard || !c->logins ||
      (tls && (!c->cert || !c->key))) {
    freeaddrinfo(ai);
    console_stop(c);
    err_oom(err);
    return NULL;
  }
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
  if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
  if (tls) flags |= MHD_USE_TLS;
  struct MHD_OptionItem tls_opts[] = {
      {tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, c->cert},
      {MHD_OPTION_HTTPS_MEM_KEY, 0, c->key},
      {MHD_OPTION_HTTPS_PRIORITIES, 0, tls_priorities},
      {MHD_OPTION_END, 0, NULL},
  };
  c->d =
      MHD_start_daemon(flags, 0, NULL, NULL, handle, c, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                       MHD_OPTION_THREAD_POOL_SIZE, (unsigned)threads, MHD_OPTION_CONNECTION_LIMIT,
                       CONN_MAX, MHD_OPTION_PER_IP_CONNECTION_LIMIT, CONN_PER_IP,
                       MHD_OPTION_CONNECTION_TIMEOUT, IDLE_S, MHD_OPTION_NOTIFY_COMPLETED,
                       completed, c, MHD_OPTION_NOTIFY_CONNECTION, cguard_notify, c->guard,
                       MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
  freeaddrinfo(ai);
  if (!c->d) {
    console_stop(c);
    err_set(err, ERR_UNAVAILABLE, "--console: cannot listen on %s", cfg->address);
    return NULL;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(c->d, MHD_DAEMON_INFO_BIND_PORT);
  c->port = info ? (int)info->port : 0;
  if (bound_port) *bound_port = c->port;
  return c;
}

void console_stop(console *c) {
  if (!c) return;
  if (c->d) MHD_stop_daemon(c->d);
  cguard_stop(c->guard);
  cpool_free(c->pool);
  sessions_free(c->sess);
  login_limits_free(c->logins);
  free(c->cert);
  wipe_free(c->key);
  free(c);
}
