/* console_frame.c — the page frame (console_frame.h): head, navigation, banners, error pages and
 * POST refusals, the leader named on a standby, and what several pages show of a step (its link,
 * state badge, attempt) and of an audit entry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_frame.h"

#include "../coord/coord_groups.h"
#include "idem/v1/names.h"

size_t console__rec_size(const step_rec *r) {
  return 600 + r->body_len * 2;
}

const char *console__state_class(const step_rec *rec, int64_t now_ms) {
  bool stuck = rec->state == STATE_UNKNOWN ||
               (rec->state == STATE_IN_PROGRESS && rec->lease_expires_ms <= now_ms);
  return stuck ? " stuck" : "";
}

void console__form_csrf(creq *r) {
  console__html(&r->out, "<input type=\"hidden\" name=\"csrf\" value=\"%s\">", r->s.csrf);
}

void console__leader_link(creq *r, const char *leader, const char *path) {
  if (!leader[0]) {
    console__html(&r->out, "the leader is not known right now");
    return;
  }
  /* The election carries the leader's gRPC address only: its console's host, port and scheme
   * are not known here, so no link is guessed (a guess from this node's port can be wrong). */
  console__html(
      &r->out,
      "the leader is <b>%s</b> (its gRPC address; open the console that node serves, at %s)",
      leader, path);
}

void console__page_begin(creq *r, const char *title) {
  if (!r->status) r->status = 200;
  buf_t *b = &r->out;
  console__html(
      b,
      "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width\"><title>%s \xC2\xB7 idem</title>"
      "<link rel=\"stylesheet\" href=\"/style.css\"></head><body><header><b>idem</b>",
      title);
  if (r->has_session) {
    console__html(
        b,
        "<a href=\"/\">Overview</a><a href=\"/steps\">Steps</a>"
        "<a href=\"/steps?lease_expired=1\">Stuck leases</a>"
        "<a href=\"/steps?state=unknown\">Unknown outcomes</a><a href=\"/audit\">Audit</a>"
        "<a href=\"/policies\">Policies</a><a href=\"/slots\">Slots</a>"
        "<span class=\"who\">tenant <b>%s</b> \xC2\xB7 %s</span>",
        r->s.tenant, r->s.dev ? "development" : auth_role_name(r->s.role));
    if (!r->s.dev) {
      console__html(b, "<form method=\"post\" action=\"/logout\">");
      console__form_csrf(r);
      console__html(b, "<button class=\"plain\" type=\"submit\">Log out</button></form>");
    }
  }
  console__html(b, "</header>");
  if (r->has_session && r->s.dev)
    console__html(
        b,
        "<div class=\"banner dev\">Development mode: authentication is off (no --tokens). Every "
        "visitor is an admin; ?tenant=NAME picks the tenant.</div>");
  char leader[ELECT_ADDR_MAX];
  if (!console__is_leader(r, leader)) {
    console__html(
        b,
        "<div class=\"banner standby\">This node is a standby: it shows what the store holds, "
        "changes are made on the leader: ");
    console__leader_link(r, leader, "/");
    console__html(b, ".</div>");
  }
  console__html(b, "<main><h1>%s</h1>", title);
}

void console__page_end(creq *r) {
  console__html(&r->out, "</main></body></html>\n");
}

void console__page_error(creq *r, unsigned status, const char *msg) {
  r->status = status;
  r->out.n = 0;
  console__page_begin(r, status == 404 ? "Not found" : status == 403 ? "Refused" : "Error");
  console__html(&r->out, "<div class=\"banner err\">%s</div>", msg);
  console__page_end(r);
}

/* The page of a change refused on a standby: why, and the leader to make it on. */
static void not_leader(creq *r, unsigned status, const char *why, const char *leader) {
  r->status = status;
  r->out.n = 0;
  console__page_begin(r, "Not the leader");
  console__html(&r->out, "<div class=\"banner err\">%s: ", why);
  console__leader_link(r, leader, r->path);
  console__html(&r->out, ".</div>");
  console__page_end(r);
}

unsigned console__http_status(const err_t *err) {
  /* one HTTP status per code: 500 only for what is really the server's fault */
  static const unsigned http_of[ERR__COUNT] = {
      [ERR_OK] = 200,         [ERR_INVALID] = 400,       [ERR_PRECONDITION] = 409,
      [ERR_ABORTED] = 409,    [ERR_NOT_FOUND] = 404,     [ERR_UNAVAILABLE] = 503,
      [ERR_DEADLINE] = 504,   [ERR_INTERNAL] = 500,      [ERR_UNAUTHENTICATED] = 401,
      [ERR_PERMISSION] = 403, [ERR_UNIMPLEMENTED] = 501, [ERR_RESOURCE] = 503,
  };
  /* too many calls or replies waiting: the client should slow down (429); out of memory is
   * the server's condition (503) */
  if (err->code == ERR_RESOURCE && err->reason == ERR_R_OVERLOADED) return 429;
  return err->code > ERR_OK && err->code < ERR__COUNT ? http_of[err->code] : 500;
}

void console__page_err(creq *r, const err_t *err) {
  unsigned status = console__http_status(err);
  if (status == 404 && r->s.tenant[0]) { /* a saga or step of another tenant reads as absent */
    r->status = status;
    r->out.n = 0;
    console__page_begin(r, "Not found");
    console__html(&r->out,
                  "<div class=\"banner err\">%s (looked in tenant %s; another tenant: add "
                  "?tenant=NAME to the address)</div>",
                  err->msg[0] ? err->msg : err_str(err->code), r->s.tenant);
    console__page_end(r);
    return;
  }
  console__page_error(r, status, err->msg[0] ? err->msg : err_str(err->code));
  if (err_is_not_leader(err)) not_leader(r, status, "This node does not lead", err->leader);
}

void console__step_href(buf_t *b, const step_key *k) {
  console__html(b, "/steps/");
  console__url(b, k->global_id);
  console__html(b, "/");
  console__url(b, k->service);
  console__html(b, "/");
  console__url(b, k->operation);
  console__html(b, "/%s", idem_word_phase(k->phase));
}

int console__rec_skip(const step_rec *rec) {
  return idem_skip_of(rec->key.phase, rec->state, (unsigned long long)rec->attempt);
}

void console__state_badge(creq *r, const step_rec *rec) {
  int skip = console__rec_skip(rec);
  if (skip != IDEM_SKIP_NONE) { /* stored as succeeded or abandoned; say what happened */
    console__html(
        &r->out,
        "<span class=\"state s-%s\" title=\"stored as %s\">%s</span> <span class=\"muted skip\" "
        "data-skip=\"%s\">%s</span>",
        skip == IDEM_SKIP_ABANDONED ? "abandoned" : "skipped", idem_word_state(rec->state),
        skip == IDEM_SKIP_ABANDONED ? "abandoned" : "skipped", idem_word_skip(skip),
        idem_phrase_skip(skip));
    return;
  }
  const char *w = idem_word_state(rec->state);
  console__html(&r->out, "<span class=\"state s-%s%s\">%s</span>", w,
                console__state_class(rec, r->now_ms), w);
  if (rec->state == STATE_IN_PROGRESS && rec->lease_expires_ms <= r->now_ms)
    console__html(&r->out, " <span class=\"stuckword\">stuck: lease expired</span>");
  else if (rec->state == STATE_UNKNOWN)
    console__html(&r->out, " <span class=\"stuckword\">stuck: outcome unknown</span>");
}

void console__attempt_cell(buf_t *b, const step_rec *rec) {
  if (rec->attempt == 0 && console__rec_skip(rec) != IDEM_SKIP_NONE)
    console__html(b, "\xE2\x80\x94 (none ran)");
  else
    console__html(b, "%llu", (unsigned long long)rec->attempt);
}

store *console__page_store(creq *r) {
  store *st = console__store(r);
  if (!st) console__page_error(r, 503, "cannot open a store connection");
  return st;
}

int console__page_saga_group(creq *r, const char *global_id, store **st) {
  int g = console__saga_group(r, global_id);
  if (g == CONSOLE_ROUTE_MOVING) {
    console__page_error(r, 503, "this saga's slots are being moved to another group: try again");
    return -1;
  }
  if (g < 0) {
    console__page_error(r, 503, "no slot map yet: no group serves this saga now");
    return -1;
  }
  *st = console__group_store(r, (size_t)g);
  if (!*st) {
    char msg[160];
    snprintf(msg, sizeof msg, "cannot open a store connection of group %s", r->c->groups[g].name);
    console__page_error(r, 503, msg);
    return -1;
  }
  return g;
}

bool console__page_group_leader(creq *r, size_t g) {
  char leader[ELECT_ADDR_MAX], why[160];
  if (console__leads_group(r, g, leader)) return true;
  snprintf(why, sizeof why, "This node does not lead group %s", r->c->groups[g].name);
  not_leader(r, 503, why, leader);
  return false;
}

bool console__post_allowed(creq *r, unsigned needs) {
  char leader[ELECT_ADDR_MAX];
  switch (console__post_check(r, needs, leader)) {
    case CONSOLE_ALLOWED:
      return true;
    case CONSOLE_REFUSED_NO_SESSION:
      console__page_error(r, 403, "log in first");
      break;
    case CONSOLE_REFUSED_CSRF:
      console__page_error(r, 403, "refused: the form does not carry this session's CSRF token");
      break;
    case CONSOLE_REFUSED_ROLE:
      console__page_error(r, 403, "refused: your role (service) may read only");
      break;
    case CONSOLE_REFUSED_NOT_LEADER:
      not_leader(r, 503, "This node is a standby", leader);
      break;
  }
  return false;
}

void console__audit_row(creq *r, const audit_rec *a, bool saga_column) {
  buf_t *b = &r->out;
  console__html(b, "<tr><td>");
  console__time(b, a->at_ms, r->now_ms);
  console__html(b, "</td><td>%s</td><td>%s</td><td>", a->actor, a->action);
  if (saga_column) {
    console__html(b, "<a href=\"/sagas/");
    console__url(b, a->key.global_id);
    console__html(b, "\">%s</a></td><td><a href=\"", a->key.global_id);
    console__step_href(b, &a->key);
    console__html(b, "\">");
  }
  console__html(b, "%s / %s / %s", a->key.service, a->key.operation, idem_word_phase(a->key.phase));
  if (saga_column) console__html(b, "</a>");
  console__html(b, "</td><td>%s \xE2\x86\x92 %s</td><td>%s</td></tr>",
                idem_word_state(a->from_state), idem_word_state(a->to_state), a->reason);
}

bool console__page_group_views(creq *r, coord_group_view *g, size_t *n) {
  size_t groups = r->c->cfg.n_groups; /* at least 1 once the console runs */
  for (size_t i = 0; i < groups; i++) {
    const char *name = r->c->groups[i].name;
    g[i] = (coord_group_view){name, console__group_coord(r, i), console__group_store(r, i)};
    if (!g[i].st) {
      char msg[160];
      snprintf(msg, sizeof msg, "cannot open a store connection of group %s", name);
      console__page_error(r, 503, msg);
      return false;
    }
  }
  *n = groups;
  return true;
}
