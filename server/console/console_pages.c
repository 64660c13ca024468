/* console_pages.c — the page frame (head, navigation, banners, error pages), the leader named
 * on a standby, and the overview (/). The steps list is in console_steps.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../coord/coord_admin.h"
#include "../util/clock.h"
#include "console_internal.h"
#include "idem/v1/names.h"

#define COUNT_PAGES 5      /* the overview reads at most this many pages of each list */
#define COUNT_ROWS_MAX 500 /* (service, operation) rows on the overview */

size_t console_rec_size(const step_rec *r) {
  return 600 + r->body_len * 2;
}

const char *state_class(const step_rec *rec, int64_t now_ms) {
  bool stuck = rec->state == STATE_UNKNOWN ||
               (rec->state == STATE_IN_PROGRESS && rec->lease_expires_ms <= now_ms);
  return stuck ? " stuck" : "";
}

void form_csrf(creq *r) {
  cb_printf(&r->out, "<input type=\"hidden\" name=\"csrf\" value=\"%s\">", r->s.csrf);
}

void leader_link(creq *r, const char *leader, const char *path) {
  if (!leader[0]) {
    cb_put(&r->out, "the leader is not known right now");
    return;
  }
  /* The election carries the leader's gRPC address only: its console's host, port and scheme
   * are not known here, so no link is guessed (a guess from this node's port can be wrong). */
  cb_put(&r->out, "the leader is <b>");
  cb_esc(&r->out, leader);
  cb_put(&r->out, "</b> (its gRPC address; open the console that node serves, at ");
  cb_esc(&r->out, path);
  cb_put(&r->out, ")");
}

void page_begin(creq *r, const char *title) {
  if (!r->status) r->status = 200;
  cbuf *b = &r->out;
  cb_put(b,
         "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width\"><title>");
  cb_esc(b, title);
  cb_put(b,
         " \xC2\xB7 idem</title><link rel=\"stylesheet\" href=\"/style.css\"></head><body>"
         "<header><b>idem</b>");
  if (r->has_session) {
    cb_put(b,
           "<a href=\"/\">Overview</a><a href=\"/steps\">Steps</a>"
           "<a href=\"/steps?lease_expired=1\">Stuck leases</a>"
           "<a href=\"/steps?state=unknown\">Unknown outcomes</a>"
           "<a href=\"/audit\">Audit</a><a href=\"/policies\">Policies</a>"
           "<span class=\"who\">tenant <b>");
    cb_esc(b, r->s.tenant);
    cb_printf(b, "</b> \xC2\xB7 %s</span>", r->s.dev ? "development" : auth_role_name(r->s.role));
    if (!r->s.dev) {
      cb_put(b, "<form method=\"post\" action=\"/logout\">");
      form_csrf(r);
      cb_put(b, "<button class=\"plain\" type=\"submit\">Log out</button></form>");
    }
  }
  cb_put(b, "</header>");
  if (r->has_session && r->s.dev)
    cb_put(b,
           "<div class=\"banner dev\">Development mode: authentication is off (no --tokens). "
           "Every visitor is an admin; ?tenant=NAME picks the tenant.</div>");
  char leader[ELECT_ADDR_MAX];
  if (!cr_is_leader(r, leader)) {
    cb_put(b,
           "<div class=\"banner standby\">This node is a standby: it shows what the store "
           "holds, changes are made on the leader: ");
    leader_link(r, leader, "/");
    cb_put(b, ".</div>");
  }
  cb_put(b, "<main><h1>");
  cb_esc(b, title);
  cb_put(b, "</h1>");
}

void page_end(creq *r) {
  cb_put(&r->out, "</main></body></html>\n");
}

void page_error(creq *r, unsigned status, const char *msg) {
  r->status = status;
  r->out.n = 0;
  page_begin(r, status == 404 ? "Not found" : status == 403 ? "Refused" : "Error");
  cb_put(&r->out, "<div class=\"banner err\">");
  cb_esc(&r->out, msg);
  cb_put(&r->out, "</div>");
  page_end(r);
}

void page_err(creq *r, const err_t *err) {
  /* one HTTP status per code: 500 only for what is really the server's fault */
  static const unsigned http_of[ERR__COUNT] = {
      [ERR_OK] = 200,           [ERR_INVALID] = 400,         [ERR_PRECONDITION] = 409,
      [ERR_ABORTED] = 409,      [ERR_NOT_FOUND] = 404,       [ERR_UNAVAILABLE] = 503,
      [ERR_DEADLINE] = 504,     [ERR_INTERNAL] = 500,        [ERR_UNAUTHENTICATED] = 401,
      [ERR_PERMISSION] = 403,   [ERR_UNIMPLEMENTED] = 501,   [ERR_RESOURCE] = 503,
  };
  unsigned status = err->code > ERR_OK && err->code < ERR__COUNT ? http_of[err->code] : 500;
  /* too many calls or replies waiting: the client should slow down (429); out of memory is
   * the server's condition (503) */
  if (err->code == ERR_RESOURCE && err->reason == ERR_R_OVERLOADED) status = 429;
  page_error(r, status, err->msg[0] ? err->msg : err_str(err->code));
  if (err_is_not_leader(err)) {
    r->out.n = 0;
    page_begin(r, "Not the leader");
    cb_put(&r->out, "<div class=\"banner err\">This node does not lead: ");
    leader_link(r, err->leader, r->path);
    cb_put(&r->out, ".</div>");
    page_end(r);
  }
}

/* --- the overview --- */

typedef struct count_row {
  char service[REC_NAME_MAX + 1], operation[REC_NAME_MAX + 1];
  uint64_t n[3]; /* in progress, lease expired, unknown */
} count_row;

typedef struct counts {
  count_row *rows;
  size_t n;
  bool partial; /* a list had more pages than were read */
} counts;

static void count_one(counts *c, const step_rec *rec, int which) {
  for (size_t i = 0; i < c->n; i++)
    if (!strcmp(c->rows[i].service, rec->key.service) &&
        !strcmp(c->rows[i].operation, rec->key.operation)) {
      c->rows[i].n[which]++;
      return;
    }
  if (c->n == COUNT_ROWS_MAX) {
    c->partial = true;
    return;
  }
  count_row *row = &c->rows[c->n++];
  memset(row, 0, sizeof *row);
  snprintf(row->service, sizeof row->service, "%s", rec->key.service);
  snprintf(row->operation, sizeof row->operation, "%s", rec->key.operation);
  row->n[which] = 1;
}

/* Counts one ListSteps filter, page by page (the Admin API's query, not a copy of it). */
static err_code count_list(creq *r, int state, bool expired, int which, counts *c, err_t *err) {
  char token[COORD_TOKEN_MAX] = "";
  for (int page = 0; page < COUNT_PAGES; page++) {
    coord_list_in in = {.state = state,
                        .lease_expired_only = expired,
                        .page_size = LIST_PAGE_MAX,
                        .page_token = token,
                        .rec_size = console_rec_size};
    step_list l = {0};
    char next[COORD_TOKEN_MAX];
    err_code rc = coord_list_steps(r->c->cfg.coord, cr_store(r), r->s.tenant, &in, r->deadline, &l,
                                   next, err);
    if (rc != ERR_OK) return rc;
    for (size_t i = 0; i < l.n; i++) count_one(c, &l.recs[i], which);
    step_list_clear(&l);
    if (!next[0]) return ERR_OK;
    snprintf(token, sizeof token, "%s", next);
  }
  c->partial = true;
  return ERR_OK;
}

static void status_card(creq *r) {
  const console_config *cfg = &r->c->cfg;
  elect_status es = {.leader = true, .election_ok = true};
  if (cfg->elector) elect_status_get(cfg->elector, &es);
  err_t err;
  err_clear(&err);
  store *st = cr_store(r);
  bool store_ok = st && store_ping(st, r->deadline, &err) == ERR_OK;
  cbuf *b = &r->out;
  cb_put(b, "<div class=\"card kv\"><span>node</span><span>");
  cb_esc(b, cfg->node_id);
  if (strcmp(cfg->node_id, cfg->advertise) != 0) {
    cb_put(b, " (");
    cb_esc(b, cfg->advertise);
    cb_put(b, ")");
  }
  cb_printf(b, "</span><span>role</span><span><span class=\"state %s\">%s</span></span>",
            es.leader ? "s-succeeded" : "s-in_progress", es.leader ? "leader" : "standby");
  cb_put(b, "<span>leader</span><span>");
  cb_esc(b, cfg->elector ? es.leader_addr : cfg->advertise);
  cb_printf(b, "</span><span>epoch</span><span>%llu</span>", (unsigned long long)es.epoch);
  cb_printf(b, "<span>store</span><span><span class=\"state %s\">%s</span></span>",
            store_ok ? "s-succeeded" : "s-failed", store_ok ? "ok" : "unreachable");
  cb_printf(b, "<span>election</span><span><span class=\"state %s\">%s</span></span>",
            es.election_ok ? "s-succeeded" : "s-failed", es.election_ok ? "ok" : "unsure");
  cb_put(b, "<span>version</span><span>");
  cb_esc(b, cfg->version);
  cb_put(b, "</span><span>started</span><span>");
  cb_time(b, cfg->started_ms, r->now_ms);
  cb_put(b, "</span></div>");
}

static void count_link(creq *r, const count_row *row, const char *filter, bool stuck, uint64_t n) {
  if (!n) {
    cb_put(&r->out, "<td class=\"num muted\">0</td>");
    return;
  }
  cb_printf(&r->out,
            "<td class=\"num%s\"><a href=\"/steps?%s&amp;service=", stuck ? " stuckword" : "",
            filter);
  cb_url(&r->out, row->service);
  cb_put(&r->out, "&amp;operation=");
  cb_url(&r->out, row->operation);
  cb_printf(&r->out, "\">%llu</a></td>", (unsigned long long)n);
}

void page_overview(creq *r) {
  page_begin(r, "Overview");
  status_card(r);
  counts c = {.rows = calloc(COUNT_ROWS_MAX, sizeof *c.rows)};
  err_t err;
  err_clear(&err);
  if (!c.rows) {
    err_oom(&err);
  } else if (count_list(r, STATE_IN_PROGRESS, false, 0, &c, &err) == ERR_OK &&
             count_list(r, STATE_IN_PROGRESS, true, 1, &c, &err) == ERR_OK) {
    count_list(r, STATE_UNKNOWN, false, 2, &c, &err);
  }
  cb_put(&r->out, "<h2>Unfinished steps by service and operation</h2>");
  if (err.code != ERR_OK) {
    cb_put(&r->out, "<div class=\"banner err\">cannot count: ");
    cb_esc(&r->out, err.msg);
    cb_put(&r->out, "</div>");
  } else if (c.n == 0) {
    cb_put(&r->out, "<p class=\"muted\">No step is in progress or of unknown outcome.</p>");
  } else {
    cb_put(&r->out,
           "<table id=\"counts\"><tr><th>service</th><th>operation</th>"
           "<th>in progress</th><th>lease expired (stuck)</th>"
           "<th>unknown outcome (stuck)</th></tr>");
    for (size_t i = 0; i < c.n; i++) {
      const count_row *row = &c.rows[i];
      cb_printf(&r->out, "<tr%s><td>", row->n[1] || row->n[2] ? " class=\"stuck\"" : "");
      cb_esc(&r->out, row->service);
      cb_put(&r->out, "</td><td>");
      cb_esc(&r->out, row->operation);
      cb_put(&r->out, "</td>");
      count_link(r, row, "state=in_progress", false, row->n[0]);
      count_link(r, row, "lease_expired=1", true, row->n[1]);
      count_link(r, row, "state=unknown", true, row->n[2]);
      cb_put(&r->out, "</tr>");
    }
    cb_put(&r->out, "</table>");
    if (c.partial)
      cb_printf(&r->out, "<p class=\"muted\">Counts stop after %d pages of %d steps per list.</p>",
                COUNT_PAGES, LIST_PAGE_MAX);
  }
  free(c.rows);
  page_end(r);
}
