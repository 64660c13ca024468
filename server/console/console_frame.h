/* console_frame.h — the page frame every page is drawn in (console_frame.c): the head, the
 * navigation and banners, error pages, the refusal of a POST, and the pieces several pages show
 * (a step's link, its state as a badge, its attempt, an audit row). Beneath the pages, above the
 * request layer (console_req.h) and the HTML writer (console_html.h). */
#ifndef IDEM_CONSOLE_FRAME_H
#define IDEM_CONSOLE_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../domain/record_admin.h"
#include "console_html.h"
#include "console_req.h"

/* <head>, the navigation, the banners (development mode, standby, user) and the <h1>. */
void console__page_begin(creq *r, const char *title);
void console__page_end(creq *r);
/* A whole error page (what r->out held is dropped): status and a short message. */
void console__page_error(creq *r, unsigned status, const char *msg);
/* An error page for a coord/ error (mapped to an HTTP status; a standby names the leader). */
void console__page_err(creq *r, const err_t *err);
/* The HTTP status of an error page: 400 invalid, 404, 409, 401, 403, 429 overloaded, 501, 503
 * unavailable or out of memory, 504 deadline, 500 only for an internal error. */
unsigned console__http_status(const err_t *err);
/* The request's store, or NULL with a 503 page written (no store connection can be opened). */
store *console__page_store(creq *r);
/* The group serving the saga global_id (console__saga_group), its store in *st; -1 with a 503
 * page written when no group serves it now (no slot map, its slots being moved) or no store
 * connection of that group can be opened. */
int console__page_saga_group(creq *r, const char *global_id, store **st);
/* Every group as a read sees it (its name, coord context and store) into g[0..*n); false with a 503 page written naming a group whose store connection cannot be
 * opened. g holds CONSOLE_GROUPS_MAX. */
struct coord_group_view;
bool console__page_group_views(creq *r, struct coord_group_view *g, size_t *n);
/* Whether this node leads group g (a change of one of its sagas is made there); false with a
 * 503 page naming that group's leader written. */
bool console__page_group_leader(creq *r, size_t g);
/* Whether a POST passes console__post_check (needs: CONSOLE_NEEDS_* bits); false with the
 * refusal page written (403, or 503 naming the leader). */
bool console__post_allowed(creq *r, unsigned needs);
/* The hidden CSRF input every form carries. */
void console__form_csrf(creq *r);
/* Names the leader by its gRPC address (what the election carries) and the path to open on its
 * console, as text: its console's address is not known, so no link; "" leader = unknown. */
void console__leader_link(creq *r, const char *leader, const char *path);

/* The bytes a listed record may take on a page (coord's rec_size: the body shown twice). */
size_t console__rec_size(const step_rec *r);
/* " stuck" when the lease ran out or the outcome is unknown, else "" (a CSS class). */
const char *console__state_class(const step_rec *rec, int64_t now_ms);
/* The path of a step's page. */
void console__step_href(buf_t *b, const step_key *k);
/* A record's state as a coloured word, with "stuck: ..." when it is; a record no caller's
 * attempt finished (names.h idem_skip_of: a null compensation, an abandoned forward) as
 * "skipped" or "abandoned" with what happened, its stored state in the title. */
void console__state_badge(creq *r, const step_rec *rec);
/* idem_skip_of of a record (IDEM_SKIP_NONE: it is what its state says). */
int console__rec_skip(const step_rec *rec);
/* A record's attempt: "— (none ran)" for a skipped record of attempt 0. */
void console__attempt_cell(buf_t *b, const step_rec *rec);
/* A W3C trace id (docs/api.md §22): a link to console_config.trace_url with {trace_id} replaced
 * (console_trace.c), the id as text without a template, a dash when "". */
void console__trace_id(creq *r, const char *trace_id);
/* One audit entry as a table row: when, actor, action, [saga link,] step, change, reason. */
void console__audit_row(creq *r, const audit_rec *a, bool saga_column);

#endif
