/* console.h — the web console for incident response (docs/api.md §13): server-rendered HTML over
 * HTTP/1.1 (libmicrohttpd, TLS with the server's certificate when it has one), on its own
 * threads, reading and writing through the same coord/ functions as the Admin API.
 *
 * Pages: /  /steps  /sagas/{global_id}  /steps/{global_id}/{service}/{operation}/{phase}
 * /audit  /policies  /slots  /login  /logout  (and /style.css, embedded).
 *
 * Threads and the store: MHD runs `threads` polling threads; a request that needs the store
 * takes one of `threads` store handles from a small pool (opened on first use with
 * open_store, the same fenced stores the gRPC workers use, but never theirs), so a slow page
 * never holds a gRPC worker or the batcher. With slot groups (docs/api.md §17) each group has
 * such a pool of its own: the saga, step and resolve pages read the saga in the group its slot
 * belongs to (cfg.route, the rule GetSaga and ListSteps follow), the steps listing without a
 * global id reads every group's store, and a resolution is made on that group's leader. The
 * Slots page pings the groups in parallel, each through one handle of that group's own
 * (console_group, opened on the page's first visit).
 *
 * Security: with tokens (--tokens) a session comes from /login: a random id in an HttpOnly,
 * SameSite=Strict cookie (Secure under TLS), 8 h, tenant and role from the token, a CSRF token
 * per session checked on every POST; `service` may read, `admin` may also resolve and edit
 * policies. A token holds at most CONSOLE_SESSIONS_PER_OWNER sessions (its own oldest goes), so
 * no token can log another out; TLS is 1.2 or newer; a request must arrive whole within 10 s
 * and one address holds at most 64 connections (docs/security.md "The web console"). Without tokens
 * (development) every visitor gets an admin session of the tenant ?tenant= names (default
 * "default") and every page says so. A token is never stored in a cookie or written to a log.
 */
#ifndef IDEM_CONSOLE_H
#define IDEM_CONSOLE_H

#include <stdbool.h>
#include <stdint.h>

#include "../auth/auth.h"
#include "../coord/coord.h"
#include "../elect/elect.h"
#include "../slots/slot_service.h"
#include "../store/store.h"
#include "../store/store_pool.h"
#include "../util/err.h"

#define CONSOLE_THREADS_DEFAULT 4
#define CONSOLE_SESSION_TTL_MS (8 * 3600 * 1000LL)

typedef struct console console;

#define CONSOLE_GROUPS_MAX SLOTMAP_GROUPS_MAX

/* The group serving a saga (docs/api.md §17): the index into console_config.groups of the slot
 * of (tenant, global_id); -1 when no group does (no slot map yet); CONSOLE_ROUTE_MOVING while
 * the slot is handed to another group (§18). Called from the console's threads. */
typedef int (*console_route_fn)(void *arg, const char *tenant, const char *global_id);
#define CONSOLE_ROUTE_MOVING (-2)

/* One store group (docs/api.md §17) as the Slots page shows it: its leader from its election,
 * its store's health from a handle of its own (opened on the page's first visit). */
typedef struct console_group {
  const char *name;                /* borrowed for the console's life */
  const coord_ctx *coord;          /* the group's own (borrowed); NULL = console_config.coord */
  elect *elector;                  /* borrowed; NULL = this node leads it */
  store *(*open_store)(void *arg); /* borrowed */
  void *open_store_arg;
  /* unfenced stores of the group, kept open (borrowed; NULL: none), for what any node may write
   * in every group (policies, as Admin.SetPolicy) */
  store_pool *plain;
} console_group;

/* The move under way (docs/api.md §18), as the Slots page shows it: what GetTopology answers in
 * Topology.move. Strings are copied in (cut to fit). */
typedef struct console_move {
  char request_id[256];
  uint32_t from, to; /* inclusive */
  char source[SLOTMAP_NAME_MAX], target[SLOTMAP_NAME_MAX];
  char phase[32]; /* planned, copying, blocked, switched, rolling_back */
  uint64_t rows_copied;
  int64_t lag_bytes;
  int64_t started_unix_ms; /* wall clock */
  char note[256];
} console_move;

typedef struct console_config {
  const char *address;             /* HOST:PORT ([V6]:PORT); port 0 = any (see bound_port) */
  const coord_ctx *coord;          /* borrowed for the console's life (the Admin API's own) */
  store *(*open_store)(void *arg); /* opens one store handle; borrowed */
  void *open_store_arg;
  elect *elector;           /* borrowed; NULL = single node, always the leader */
  const char *node_id;      /* shown on the overview */
  const char *advertise;    /* this node's gRPC address (shown; the leader link of a standby) */
  auth_keyring *tokens;     /* borrowed; NULL = development mode (no login) */
  const char *tls_cert_pem; /* NULL = plaintext; both copied (the key wiped at stop) */
  const char *tls_key_pem;
  int threads;        /* 0 = CONSOLE_THREADS_DEFAULT */
  int64_t started_ms; /* wall clock, shown on the overview */
  const char *version;
  /* slot groups (at most CONSOLE_GROUPS_MAX): the array is copied, its members borrowed;
   * n_groups 0 = the one group above, named "default". groups[0] is the group of the pages
   * that name no saga (overview, audit, policies), as the Admin API's other calls. */
  const console_group *groups;
  size_t n_groups;
  console_route_fn route; /* with n_groups > 1; NULL = every saga is groups[0]'s */
  void *route_arg;
  slots_view *(*slots_hold)(void *arg); /* the map now, held (slots_view_release); NULL = none */
  void *slotmap_arg;
  /* the move under way into *out, true when there is one; NULL = never shown */
  bool (*move_now)(void *arg, console_move *out);
  void *move_arg;
  /* docs/api.md §22: the trace viewer's URL with {trace_id} where a trace id goes (borrowed for
   * the console's life; NULL or "" = ids shown as text), checked by console_trace_url_check */
  const char *trace_url;
} console_config;

/* --trace-url TEMPLATE: "" or NULL (none), or an http(s) URL of at most CONSOLE_TRACE_URL_MAX
 * bytes holding {trace_id}, without spaces, quotes, < > or control bytes. False with why (naming
 * --trace-url) otherwise. */
#define CONSOLE_TRACE_URL_MAX 1024
bool console_trace_url_check(const char *tpl, char *why, size_t cap);

/* Starts serving. NULL with err filled (the address cannot be parsed or bound, TLS is not
 * available, out of memory). *bound_port (may be NULL) gets the port bound. */
console *console_start(const console_config *cfg, int *bound_port, err_t *err);

/* Stops the threads (requests in flight finish), closes the stores, frees c. NULL is fine. */
void console_stop(console *c);

#endif
