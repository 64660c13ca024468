/* console_pages.h — the pages, each a handler of the route table (console_routes.c): it gets the
 * request and the path's '*' segments, and fills r->out or r->location. Pages call down only:
 * the frame (console_frame.h), the request layer (console_req.h), the HTML writer and coord/. */
#ifndef IDEM_CONSOLE_PAGES_H
#define IDEM_CONSOLE_PAGES_H

#include "console_frame.h"

typedef void console_page(creq *r, char **seg);

console_page console__page_overview;   /* GET /                       console_overview.c */
console_page console__page_steps;      /* GET /steps                  console_steps.c */
console_page console__page_saga;       /* GET /sagas/{gid}            console_saga.c */
console_page console__page_step;       /* GET /steps/{gid}/{svc}/{op}/{phase}  console_resolve.c */
console_page console__post_resolve;    /* POST .../resolve            console_resolve.c */
console_page console__page_audit;      /* GET /audit                  console_admin.c */
console_page console__page_policies;   /* GET /policies               console_admin.c */
console_page console__post_policy_set; /* POST /policies              console_admin.c */
console_page console__post_policy_delete; /* POST /policies/delete       console_admin.c */
console_page console__page_slots;         /* GET /slots                  console_slots.c */
console_page console__page_login;         /* GET /login                  console_login.c */
console_page console__post_login;         /* POST /login                 console_login.c */
console_page console__post_logout;        /* POST /logout                console_login.c */

/* The Slots page's box for the move under way (console_slots.c): its slots, source → target,
 * phase (a word and a colour), rows copied, lag, start (absolute and relative to now_ms), request
 * id and note, every string escaped. */
void console__move_html(buf_t *b, const console_move *m, int64_t now_ms);

/* Answers r from the route table (console_routes.c): a page, or an error page. */
void console__route(creq *r);

#endif
