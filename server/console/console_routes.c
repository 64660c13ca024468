/* console_routes.c — the route table (console_pages.h): one row per page, its method, its path
 * ('*' stands for one non-empty segment, handed to the page), and what it needs: a session (all
 * but the login form and the icon), and for a POST the session's CSRF token, the admin role and
 * this node's leadership, checked here before the page runs (console__post_allowed). */
#include <stdio.h>
#include <string.h>

#include "console_pages.h"

#define PUBLIC 4u /* no session needed */
#define SEGS_MAX 6

static console_page favicon;

typedef struct route {
  const char *method; /* "GET" (HEAD too) or "POST" */
  const char *path;
  console_page *page;
  unsigned needs; /* CONSOLE_NEEDS_ADMIN, CONSOLE_NEEDS_LEADER, PUBLIC */
} route;

static const route routes[] = {
    {"GET", "/login", console__page_login, PUBLIC},
    {"POST", "/login", console__post_login, PUBLIC},
    /* a browser asks for it by itself: no redirect to the login form (whose cookie it would set) */
    {"GET", "/favicon.ico", favicon, PUBLIC},
    {"POST", "/logout", console__post_logout, 0},
    {"GET", "/", console__page_overview, 0},
    {"GET", "/steps", console__page_steps, 0},
    {"GET", "/steps/*/*/*/*", console__page_step, 0},
    /* the leader of the saga's group: checked by the page, which knows the group */
    {"POST", "/steps/*/*/*/*/resolve", console__post_resolve, CONSOLE_NEEDS_ADMIN},
    {"GET", "/sagas/*", console__page_saga, 0},
    {"GET", "/audit", console__page_audit, 0},
    {"GET", "/policies", console__page_policies, 0},
    {"GET", "/slots", console__page_slots, 0},
    {"POST", "/policies", console__post_policy_set, CONSOLE_NEEDS_ADMIN | CONSOLE_NEEDS_LEADER},
    {"POST", "/policies/delete", console__post_policy_delete,
     CONSOLE_NEEDS_ADMIN | CONSOLE_NEEDS_LEADER},
};

static void favicon(creq *r, char **seg) {
  console__page_error(r, 404, "no icon");
}

/* Whether path matches pattern, segment by segment (empty segments skipped, as libmicrohttpd
 * has percent-decoded the path already); the '*' segments go to seg, their text to text. */
static bool match(const char *pattern, const char *path, char *text, size_t tn, char **seg) {
  char pat[64];
  if (strlen(path) >= tn) return false;
  snprintf(pat, sizeof pat, "%s", pattern);
  snprintf(text, tn, "%s", path);
  char *ps = NULL, *ts = NULL, *p = strtok_r(pat, "/", &ps), *t = strtok_r(text, "/", &ts);
  int n = 0;
  for (; p && t; p = strtok_r(NULL, "/", &ps), t = strtok_r(NULL, "/", &ts)) {
    if (strcmp(p, "*") == 0 && n < SEGS_MAX)
      seg[n++] = t;
    else if (strcmp(p, t) != 0)
      return false;
  }
  return !p && !t;
}

void console__route(creq *r) {
  bool get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
  if (!get && strcmp(r->method, "POST") != 0) {
    console__page_error(r, 405, "method not allowed");
    return;
  }
  char text[1024], *seg[SEGS_MAX] = {0};
  const route *to = NULL;
  for (size_t i = 0; i < sizeof routes / sizeof *routes && !to; i++)
    if (strcmp(routes[i].method, get ? "GET" : "POST") == 0 &&
        match(routes[i].path, r->path, text, sizeof text, seg))
      to = &routes[i];
  if ((!to || !(to->needs & PUBLIC)) && !r->has_session) {
    if (get)
      console__redirect(r, "/login");
    else
      console__page_error(r, 403, "log in first");
    return;
  }
  if (!to) {
    console__page_error(r, 404, "no such page");
    return;
  }
  if (!get && !(to->needs & PUBLIC) && !console__post_allowed(r, to->needs & ~PUBLIC)) return;
  to->page(r, seg);
}
