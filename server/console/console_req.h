/* console_req.h — the request layer (console_req.c): one HTTP request as the pages see it (its
 * query, form, cookies, session and store), how console_http.c reads it in (the Host check, the
 * form, the session), and the checks a POST passes. It writes no HTML: the refusals are drawn by
 * the page frame (console_frame.h). */
#ifndef IDEM_CONSOLE_REQ_H
#define IDEM_CONSOLE_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/buf.h"
#include "console_state.h"

/* The session cookie: a session's random id (HttpOnly, SameSite=Strict; Secure under TLS). */
#define CONSOLE_SESSION_COOKIE "idem_session"

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
  store *st[CONSOLE_GROUPS_MAX]; /* the request's store of each group, taken on first use */
  int64_t now_ms, deadline; /* wall clock; the monotonic deadline of store calls */
  buf_t out;
  unsigned status;
  char location[1024];  /* set: a 303 redirect there */
  char set_cookie[256]; /* set: a Set-Cookie header */
} creq;

const char *console__query(const creq *r, const char *name);  /* NULL when absent */
const char *console__cookie(const creq *r, const char *name); /* NULL when absent */
/* Who sent the request, as the console counts clients: the address family and the IPv4
 * address, or an IPv6 address's /64. Returns the bytes used of out. */
size_t console__client(const creq *r, unsigned char out[17]);
const char *console__form(const creq *r, const char *name); /* NULL when absent */
const cfield *console__field(const creq *r, const char *name);
store *console__store(creq *r); /* the request's store of groups[0] (console__group_store) */
/* The request's store of group g (taken from that group's pool on first use, put back when the
 * request ends); NULL when one cannot be opened. */
store *console__group_store(creq *r, size_t g);
/* Group g's coord (console.h console_group.coord). */
const coord_ctx *console__group_coord(const creq *r, size_t g);
/* The group serving the saga global_id of the session's tenant: console_route_fn's answer (0
 * without groups). */
int console__saga_group(const creq *r, const char *global_id);
/* Whether this node leads group g; leader gets the leader's address ("" = unknown). */
bool console__leads_group(const creq *r, size_t g, char leader[ELECT_ADDR_MAX]);
bool console__is_leader(const creq *r, char leader[ELECT_ADDR_MAX]); /* of groups[0] */
void console__redirect(creq *r, const char *location);

/* Who a console change is made by, for the audit trail: "TENANT/ROLE", or "console" in
 * development mode. */
void console__actor(const creq *r, char *out, size_t n);

/* --- reading a request in (console_http.c, once its body has arrived) --- */
/* Development mode has no login, so a page must not be readable by a web site that rebinds its
 * DNS name to this address: whether the Host header names an IP address (an IPv6 one in
 * brackets) or localhost, with an optional :PORT and nothing else. */
bool console__host_ok(const creq *r);
/* Decodes an application/x-www-form-urlencoded body in place into r->form (text stays owned
 * by the caller, r->form is freed by it); false: no memory. */
bool console__parse_form(creq *r, char *text);
/* The first query or form field whose value holds a NUL byte (it would cut a C string short),
 * NULL when none; the resolve form's body and body_hex are bytes and may hold any. */
const char *console__nul_field(const creq *r);
/* Sets r->s and r->has_session from the session cookie; in development mode makes a session
 * when there is none (its Set-Cookie in r->set_cookie), and ?tenant= switches its tenant. */
void console__find_session(creq *r);

/* --- the checks a POST passes --- */
enum {
  CONSOLE_NEEDS_ADMIN = 1,  /* the session's role is admin or operator */
  CONSOLE_NEEDS_LEADER = 2, /* this node leads (changes are made on the leader) */
};
typedef enum console_refusal {
  CONSOLE_ALLOWED,
  CONSOLE_REFUSED_NO_SESSION,
  CONSOLE_REFUSED_CSRF,       /* the form does not carry the session's CSRF token */
  CONSOLE_REFUSED_ROLE,       /* needs admin (or operator), the role is service */
  CONSOLE_REFUSED_NOT_LEADER, /* needs the leader; leader names it ("" = unknown) */
} console_refusal;
/* In order: a session, its CSRF token, the role, leadership (needs: CONSOLE_NEEDS_* bits). */
console_refusal console__post_check(const creq *r, unsigned needs, char leader[ELECT_ADDR_MAX]);

#endif
