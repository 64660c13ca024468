/* console_overview.c — the overview (/): this node (role, leader, epoch, store, election,
 * version) and the unfinished steps counted by service and operation over every store group
 * (docs/api.md §17), each count a link to the steps list it counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../coord/coord_admin.h"
#include "../coord/coord_groups.h"
#include "../util/clock.h"
#include "console_pages.h"
#include "idem/v1/names.h"

#define COUNT_PAGES 5      /* the overview reads at most this many pages of each list */
#define COUNT_ROWS_MAX 500 /* (service, operation) rows on the overview */

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

/* Counts one ListSteps filter in group g, page by page (the Admin API's query, not a copy of
 * it). */
static err_code count_list(creq *r, const coord_group_view *g, int state, bool expired, int which,
                           counts *c, err_t *err) {
  char token[COORD_TOKEN_MAX] = "";
  for (int page = 0; page < COUNT_PAGES; page++) {
    coord_list_in in = {.state = state,
                        .lease_expired_only = expired,
                        .page_size = LIST_PAGE_MAX,
                        .page_token = token,
                        .rec_size = console__rec_size};
    step_list l = {0};
    char next[COORD_TOKEN_MAX];
    err_code rc = coord_list_steps(g->ctx, g->st, r->s.tenant, &in, r->deadline, &l, next, err);
    if (rc != ERR_OK) {
      if (r->c->cfg.n_groups > 1) { /* say which group could not be read */
        char msg[ERR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err->msg);
        snprintf(err->msg, sizeof err->msg, "group %.40s: %.180s", g->name, msg);
      }
      return rc;
    }
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
  store *st = console__store(r);
  bool store_ok = st && store_ping(st, r->deadline, &err) == ERR_OK;
  /* where this node says the leader is (docs/api.md §7): none while etcd does not answer it */
  const char *leader = !cfg->elector       ? cfg->advertise
                       : es.leader_addr[0] ? es.leader_addr
                       : es.election_ok    ? "none (an election)"
                                           : "unknown (etcd does not answer)";
  buf_t *b = &r->out;
  console__html(b, "<div class=\"card kv\"><span>node</span><span>%s", cfg->node_id);
  if (strcmp(cfg->node_id, cfg->advertise) != 0) {
    console__html(b, " (%s)", cfg->advertise);
  }
  console__html(
      b,
      "</span><span>role</span><span><span class=\"state %s\">%s</span></span><span>leader</span>"
      "<span>%s</span><span>epoch</span><span>%llu</span><span>store</span><span>"
      "<span class=\"state %s\">%s</span></span><span>election</span><span>"
      "<span class=\"state %s\">%s</span></span><span>version</span><span>%s</span>"
      "<span>started</span><span>",
      es.leader ? "s-succeeded" : "s-in_progress", es.leader ? "leader" : "standby", leader,
      (unsigned long long)es.epoch, store_ok ? "s-succeeded" : "s-failed",
      store_ok ? "ok" : "unreachable", es.election_ok ? "s-succeeded" : "s-failed",
      es.election_ok ? "ok" : "unsure", cfg->version);
  console__time(b, cfg->started_ms, r->now_ms);
  console__html(b, "</span></div>");
}

static void count_link(creq *r, const count_row *row, const char *filter, bool stuck, uint64_t n) {
  if (!n) {
    console__html(&r->out, "<td class=\"num muted\">0</td>");
    return;
  }
  console__html(&r->out,
                "<td class=\"num%s\"><a href=\"/steps?%s&amp;service=", stuck ? " stuckword" : "",
                filter);
  console__url(&r->out, row->service);
  console__html(&r->out, "&amp;operation=");
  console__url(&r->out, row->operation);
  console__html(&r->out, "\">%llu</a></td>", (unsigned long long)n);
}

void console__page_overview(creq *r, char **seg) {
  coord_group_view g[CONSOLE_GROUPS_MAX];
  size_t ng = 0;
  if (!console__page_group_views(r, g, &ng)) return;
  console__page_begin(r, "Overview");
  status_card(r);
  counts c = {.rows = calloc(COUNT_ROWS_MAX, sizeof *c.rows)};
  err_t err;
  err_clear(&err);
  if (!c.rows) err_oom(&err);
  for (size_t i = 0; c.rows && i < ng && err.code == ERR_OK; i++) /* every group's steps */
    if (count_list(r, &g[i], STATE_IN_PROGRESS, false, 0, &c, &err) == ERR_OK &&
        count_list(r, &g[i], STATE_IN_PROGRESS, true, 1, &c, &err) == ERR_OK)
      count_list(r, &g[i], STATE_UNKNOWN, false, 2, &c, &err);
  console__html(&r->out, "<h2>Unfinished steps by service and operation</h2>");
  if (err.code != ERR_OK) {
    console__html(&r->out, "<div class=\"banner err\">cannot count: %s</div>", err.msg);
  } else if (c.n == 0) {
    console__html(&r->out, "<p class=\"muted\">No step is in progress or of unknown outcome.</p>");
  } else {
    console__html(&r->out,
                  "<table id=\"counts\"><tr><th>service</th><th>operation</th><th>in progress</th>"
                  "<th>lease expired (stuck)</th><th>unknown outcome (stuck)</th></tr>");
    for (size_t i = 0; i < c.n; i++) {
      const count_row *row = &c.rows[i];
      console__html(&r->out, "<tr class=\"%s\"><td>%s</td><td>%s</td>",
                    row->n[1] || row->n[2] ? "stuck" : "", row->service, row->operation);
      count_link(r, row, "state=in_progress", false, row->n[0]);
      count_link(r, row, "lease_expired=1", true, row->n[1]);
      count_link(r, row, "state=unknown", true, row->n[2]);
      console__html(&r->out, "</tr>");
    }
    console__html(&r->out, "</table>");
    if (c.partial)
      console__html(&r->out,
                    "<p class=\"muted\">Counts stop after %d pages of %d steps per list and "
                    "group.</p>",
                    COUNT_PAGES, LIST_PAGE_MAX);
  }
  free(c.rows);
  console__page_end(r);
}
