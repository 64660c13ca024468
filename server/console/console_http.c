/* console_http.c — the console's HTTP side (console.h): libmicrohttpd threads, a request read
 * in whole (its body bounded) and handed to the request layer (console_req.h) and the route
 * table (console_routes.c), the security headers, the bounds on slow clients (with
 * console_guard.h); start and stop. */
#include <microhttpd.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../util/clock.h"
#include "../util/hostport.h"
#include "../util/log.h"
#include "console_guard.h"
#include "console_pages.h"

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

typedef struct upload {
  buf_t body;
  bool too_big;
} upload;

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
    buf_free(&r->out);
    r->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    r->location[0] = '\0';
    resp = MHD_create_response_from_buffer(14, (void *)"out of memory\n", MHD_RESPMEM_PERSISTENT);
  } else {
    resp = MHD_create_response_from_buffer(r->out.n, r->out.p, MHD_RESPMEM_MUST_FREE);
    if (resp) r->out = (buf_t){0};
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
      buf_putn(&up->body, upload_data, *upload_data_size);
    *upload_data_size = 0;
    return MHD_YES;
  }
  console__guard_request_in(conn);
  int64_t t0 = clock_mono_us();
  creq r = {.c = c, .conn = conn, .method = method, .path = url, .now_ms = clock_wall_ms()};
  r.deadline = clock_mono_ms() + c->cfg.coord->store_timeout_ms;
  if (strcmp(url, "/style.css") == 0) {
    console__raw(&r.out, console__css);
    return respond(conn, &r, true, t0);
  }
  bool host_refused = !c->cfg.tokens && !console__host_ok(&r);
  bool parsed = !host_refused && !up->too_big && !up->body.oom &&
                (strcmp(method, "POST") != 0 ||
                 console__parse_form(&r, up->body.p ? up->body.p : (char[]){0}));
  const char *nul = parsed ? console__nul_field(&r) : NULL;
  if (!host_refused && !nul) console__find_session(&r);
  if (host_refused) {
    console__page_error(
        &r, 403,
        "development mode (no --tokens) answers only to an IP address or localhost in "
        "the Host header");
  } else if (up->too_big || up->body.oom) {
    console__page_error(&r, 413, "the form is too large");
  } else if (!parsed) {
    console__page_error(&r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
  } else if (nul) {
    char msg[160];
    snprintf(msg, sizeof msg, "%.100s: contains a NUL byte", nul);
    console__page_error(&r, 400, msg);
  } else {
    console__route(&r);
  }
  for (size_t g = 0; g < c->cfg.n_groups; g++)
    if (r.st[g]) store_pool_put(c->pages[g], r.st[g]);
  enum MHD_Result ret = respond(conn, &r, false, t0);
  if (up->body.p) OPENSSL_cleanse(up->body.p, up->body.n); /* a login token, maybe */
  free(r.form);
  buf_free(&r.out);
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
  console__guard_reply_done(conn);
  upload *up = *req_cls;
  if (!up) return;
  buf_free(&up->body);
  free(up);
  *req_cls = NULL;
}


static void wipe_free(char *s) {
  if (s) OPENSSL_cleanse(s, strlen(s));
  free(s);
}

/* The groups: cfg's copied (or the one group of cfg, "default"), each with a pool of one store
 * handle for the Slots page and one of `threads` for the pages (groups[0]'s is c->pool), all
 * opened on first use. */
static bool copy_groups(console *c, int threads) {
  console_config *cfg = &c->cfg;
  console_group one = {"default", cfg->coord, cfg->elector, cfg->open_store, cfg->open_store_arg,
                       NULL};
  const console_group *from = cfg->n_groups ? cfg->groups : &one;
  size_t n = cfg->n_groups ? cfg->n_groups : 1;
  cfg->groups = NULL;
  cfg->n_groups = 0;
  if (n > CONSOLE_GROUPS_MAX) return false;
  c->groups = calloc(n, sizeof *c->groups);
  c->gpools = calloc(n, sizeof *c->gpools);
  c->pages = calloc(n, sizeof *c->pages);
  if (!c->groups || !c->gpools || !c->pages) return false;
  for (size_t i = 0; i < n; i++) {
    c->groups[i] = from[i];
    c->gpools[i] = store_pool_new(1, from[i].open_store, from[i].open_store_arg);
    c->pages[i] =
        i ? store_pool_new(threads, from[i].open_store, from[i].open_store_arg) : c->pool;
    cfg->n_groups = i + 1; /* console_stop frees the pools made */
    if (!c->gpools[i] || !c->pages[i]) return false;
  }
  cfg->groups = c->groups;
  return true;
}

console *console_start(const console_config *cfg, int *bound_port, err_t *err) {
  struct sockaddr_storage ss;
  socklen_t ss_len;
  char why[320];
  if (!hostport_listen_addr(cfg->address, &ss, &ss_len, why, sizeof why)) {
    err_set(err, ERR_INVALID, "--console: %s", why);
    return NULL;
  }
  if (!console_trace_url_check(cfg->trace_url, why, sizeof why)) {
    err_set(err, ERR_INVALID, "%s", why);
    return NULL;
  }
  bool tls = cfg->tls_cert_pem && cfg->tls_key_pem;
  if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    err_set(err, ERR_UNAVAILABLE, "--console: this libmicrohttpd has no TLS");
    return NULL;
  }
  console *c = calloc(1, sizeof *c);
  int threads = cfg->threads > 0 ? cfg->threads : CONSOLE_THREADS_DEFAULT;
  if (c) {
    c->cfg = *cfg;
    c->tls = tls;
    c->sess = console__sessions_new(SESSIONS_MAX);
    c->pool = store_pool_new(threads, cfg->open_store, cfg->open_store_arg);
    c->cert = tls ? strdup(cfg->tls_cert_pem) : NULL;
    c->key = tls ? strdup(cfg->tls_key_pem) : NULL;
    c->guard = console__guard_start(REQUEST_MS);
    c->logins = console__logins_new();
  }
  if (c && !copy_groups(c, threads)) {
    console_stop(c);
    err_oom(err);
    return NULL;
  }
  if (!c || !c->sess || !c->pool || !c->guard || !c->logins || (tls && (!c->cert || !c->key))) {
    console_stop(c);
    err_oom(err);
    return NULL;
  }
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
  if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  if (tls) flags |= MHD_USE_TLS;
  struct MHD_OptionItem tls_opts[] = {
      {tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, c->cert},
      {MHD_OPTION_HTTPS_MEM_KEY, 0, c->key},
      {MHD_OPTION_HTTPS_PRIORITIES, 0, tls_priorities},
      {MHD_OPTION_END, 0, NULL},
  };
  c->d = MHD_start_daemon(
      flags, 0, NULL, NULL, handle, c, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
      MHD_OPTION_THREAD_POOL_SIZE, (unsigned)threads, MHD_OPTION_CONNECTION_LIMIT, CONN_MAX,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, CONN_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT, IDLE_S,
      MHD_OPTION_NOTIFY_COMPLETED, completed, c, MHD_OPTION_NOTIFY_CONNECTION,
      console__guard_notify, c->guard, MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
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
  console__guard_stop(c->guard);
  for (size_t i = 0; c->gpools && i < c->cfg.n_groups; i++) store_pool_free(c->gpools[i]);
  for (size_t i = 1; c->pages && i < c->cfg.n_groups; i++) store_pool_free(c->pages[i]);
  free(c->gpools);
  free(c->pages);
  free(c->groups);
  store_pool_free(c->pool);
  console__sessions_free(c->sess);
  console__logins_free(c->logins);
  free(c->cert);
  wipe_free(c->key);
  free(c);
}
