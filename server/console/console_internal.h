/* console_internal.h — what the console's files share: the output buffer and HTML escaping
 * (console_html.c), sessions and the store pool (console_session.c), one request
 * (console_http.c; its deadline console_guard.h), the page frame (console_pages.c) and the pages
 * (console_pages.c, console_steps.c, console_resolve.c, console_saga.c, console_admin.c). */
#ifndef IDEM_CONSOLE_INTERNAL_H
#define IDEM_CONSOLE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "console.h"

/* --- the output buffer: grows; on allocation failure it stops growing and sets oom --- */
typedef struct cbuf {
  char *p;
  size_t n, cap;
  bool oom;
} cbuf;

void cb_putn(cbuf *b, const char *s, size_t n);
void cb_put(cbuf *b, const char *s);
void cb_printf(cbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s (NULL = "") HTML-escaped: & < > " ' become entities; control bytes other than \t \n \r
 * become U+FFFD, so nothing of s can open a tag or leave an attribute. */
void cb_esc(cbuf *b, const char *s);
void cb_escn(cbuf *b, const char *s, size_t n);
/* s percent-encoded for a path segment or a query value (unreserved characters kept). */
void cb_url(cbuf *b, const char *s);
/* ms (wall, Unix ms) as "2026-12-04 03:01:02 UTC" and its distance from now ("4 min ago",
 * "in 12 s"); 0 prints "—". */
void cb_time(cbuf *b, int64_t ms, int64_t now_ms);
/* A step result's body: escaped text in <pre> when it is UTF-8 without control bytes (tab and
 * newlines allowed), else a hex dump; at most max bytes shown (0 = all), the rest counted. */
void cb_body(cbuf *b, const uint8_t *body, size_t len, size_t max);
/* A stored step's body: cb_body, or a note when its result expired (docs/api.md §12: the body was
 * dropped after the policy's retention_s while the key is kept). */
void cb_rec_body(cbuf *b, const step_rec *rec, size_t max);
void cb_free(cbuf *b);
/* The value of one hex digit, -1 when c is not one. */
int console_hexval(char c);
/* Whether s[0..n) is valid UTF-8 (no overlongs, no surrogates). */
bool console_utf8_ok(const uint8_t *s, size_t n);

/* --- sessions --- */
#define CONSOLE_ID_HEX 64 /* 32 random bytes */
#define CONSOLE_OWNER_LEN 32 /* HMAC-SHA-256 of the token (or client address), keyed per table */
#define CONSOLE_SESSIONS_PER_OWNER 32
typedef struct csession {
  char id[CONSOLE_ID_HEX + 1];
  unsigned char owner[CONSOLE_OWNER_LEN]; /* whose session: one token, or one address */
  char csrf[CONSOLE_ID_HEX + 1];
  char tenant[REC_GLOBAL_ID_MAX + 1];
  auth_role role;
  bool dev;             /* development mode: no login */
  int64_t expires_mono; /* monotonic ms */
} csession;
typedef struct sessions sessions;
sessions *sessions_new(size_t max);
void sessions_free(sessions *s);
/* A new session of owner (the token's bytes, or the client's address in development mode;
 * only a keyed digest is kept). An owner holds at most CONSOLE_SESSIONS_PER_OWNER: its own
 * oldest goes first; when the whole table is full, the oldest of the owner holding the most.
 * So one token (or address) cannot end another's sessions. False: no randomness. */
bool sessions_create(sessions *s, const void *owner, size_t owner_len, const char *tenant,
                     auth_role role, bool dev, csession *out);
/* The live session whose id is id (compared in constant time); false when none. */
bool sessions_find(sessions *s, const char *id, csession *out);
void sessions_set_tenant(sessions *s, const char *id, const char *tenant);
void sessions_drop(sessions *s, const char *id);
/* nbytes random bytes (getrandom) as 2*nbytes hex characters + NUL. */
bool console_random_hex(char *out, size_t nbytes);
/* Constant-time equality of two NUL-terminated strings of the same length (else false). */
bool console_secret_equal(const char *a, const char *b);

/* --- the store pool --- */
typedef struct cpool cpool;
cpool *cpool_new(int n, store *(*open)(void *), void *arg);
void cpool_free(cpool *p);
store *cpool_get(cpool *p); /* blocks while all are taken; NULL when one cannot be opened */
void cpool_put(cpool *p, store *st);

/* --- one request --- */
/* --- login limits (console_login.c): failed logins per client address --- */
#define CONSOLE_LOGIN_FAILURES_MAX 10  /* failed logins one address may make in a window */
#define CONSOLE_LOGIN_WINDOW_MS 60000 /* the window, from the address's first failure */
typedef struct login_limits login_limits;
login_limits *login_limits_new(void); /* NULL: no memory */
void login_limits_free(login_limits *l);
/* 0 when who (a client address, cr_client) may try to log in at now_ms (monotonic); else the
 * milliseconds until it may again. */
int64_t login_limits_check(login_limits *l, const unsigned char *who, size_t n, int64_t now_ms);
/* Counts a failed login of who. */
void login_limits_failed(login_limits *l, const unsigned char *who, size_t n, int64_t now_ms);

struct console {
  console_config cfg;
  char *cert, *key; /* owned copies of the PEM text */
  int port;
  bool tls;
  sessions *sess;
  cpool *pool;
  struct MHD_Daemon *d;
  struct cguard *guard; /* the whole-request deadline (console_guard.h) */
  login_limits *logins;
};

typedef struct cfield {
  char *name, *value; /* decoded, owned by the request */
  size_t value_len;
} cfield;

typedef struct creq {
  console *c;
  void *conn; /* struct MHD_Connection */
  const char *method;
  const char *path;
  csession s;
  bool has_session;
  cfield *form;
  size_t n_form;
  store *st;
  int64_t now_ms, deadline; /* wall clock; the monotonic deadline of store calls */
  cbuf out;
  unsigned status;
  char location[1024];  /* set: a 303 redirect there */
  char set_cookie[256]; /* set: a Set-Cookie header */
} creq;

const char *cr_query(const creq *r, const char *name); /* NULL when absent */
const char *cr_cookie(const creq *r, const char *name); /* NULL when absent */
/* Who sent the request, as the console counts clients: the address family and the IPv4
 * address, or an IPv6 address's /64. Returns the bytes used of out. */
size_t cr_client(const creq *r, unsigned char out[17]);
const char *cr_form(const creq *r, const char *name);  /* NULL when absent */
const cfield *cr_field(const creq *r, const char *name);
store *cr_store(creq *r); /* the request's store (taken from the pool on first use) */
bool cr_is_leader(const creq *r, char leader[ELECT_ADDR_MAX]);
void cr_redirect(creq *r, const char *location);

/* The page frame: <head>, the navigation, the banners (development mode, standby, user). */
void page_begin(creq *r, const char *title);
void page_end(creq *r);
/* A whole error page: status and a short message. */
void page_error(creq *r, unsigned status, const char *msg);
/* An error page for a coord/ error (mapped to an HTTP status; a standby names the leader). */
void page_err(creq *r, const err_t *err);
/* The hidden CSRF input every form carries. */
void form_csrf(creq *r);
/* Names the leader by its gRPC address (what the election carries) and the path to open on its
 * console, as text: its console's address is not known, so no link; "" leader = unknown. */
void leader_link(creq *r, const char *leader, const char *path);
/* The CSS class and word of a record's state, "stuck" when the lease ran out or the outcome is
 * unknown. */
const char *state_class(const step_rec *rec, int64_t now_ms);
size_t console_rec_size(const step_rec *r);
/* The path of a step's page. */
void step_href(cbuf *b, const step_key *k);
/* A record's state as a coloured word, with "stuck: ..." when it is; a record no caller's
 * attempt finished (names.h idem_skip_of: a null compensation, an abandoned forward) as
 * "skipped" or "abandoned" with what happened, its stored state in the title. */
void state_badge(creq *r, const step_rec *rec);
/* idem_skip_of of a record (IDEM_SKIP_NONE: it is what its state says). */
int rec_skip(const step_rec *rec);
/* A record's attempt: "— (none ran)" for a skipped record of attempt 0. */
void attempt_cell(cbuf *b, const step_rec *rec);
/* Who a console change is made by, for the audit trail: "TENANT/ROLE", or "console" in
 * development mode. */
void console_actor(const creq *r, char *out, size_t n);

/* The pages (each fills r->out or r->location). */
void page_overview(creq *r);
void page_steps(creq *r);
void page_saga(creq *r, const char *global_id);
void page_step(creq *r, const coord_key_in *key);
void post_resolve(creq *r, const coord_key_in *key);
void page_audit(creq *r);
void page_policies(creq *r);
void post_policy(creq *r, bool del);
void page_login(creq *r, unsigned status, const char *note);
void post_login(creq *r);
void post_logout(creq *r);
/* POST checks, in order: a session, its CSRF token, the admin role, leadership. False with the
 * refusal page already written. */
bool post_allowed(creq *r, bool needs_admin);

extern const char console_css[];

#endif
