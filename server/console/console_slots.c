/* console_slots.c — the Slots page (/slots, docs/api.md §17): what `idemctl slots` prints. The
 * move under way (§18: slots, source → target, phase, rows copied, lag), the slot map (ranges →
 * group, a range being moved and its target) and each group's leader, epoch, store health
 * (pinged through the group's own store handle, kept open, one group after another) and slot
 * count, as this node sees them. */
#include <stdio.h>
#include <string.h>

#include "../util/clock.h"
#include "console_pages.h"

#define PING_BUDGET_MS 500 /* a group's store that takes longer is shown unreachable */

/* Pings every group's store in turn, each on the group's handle kept open for this page
 * (gpools), no thread per group; ok[i]: group i answered within PING_BUDGET_MS (and before the
 * request's deadline). A reachable store answers in a round trip, one that refuses at once: the
 * page waits long only for a group whose host is silent. */
static void stores_ok(creq *r, bool ok[CONSOLE_GROUPS_MAX]) {
  for (size_t i = 0; i < r->c->cfg.n_groups; i++) {
    int64_t deadline = clock_mono_ms() + PING_BUDGET_MS;
    if (r->deadline < deadline) deadline = r->deadline;
    store *st = store_pool_get(r->c->gpools[i]);
    err_t err;
    err_clear(&err);
    ok[i] = st && store_ping(st, deadline, &err) == ERR_OK;
    store_pool_put(r->c->gpools[i], st);
  }
}

/* A move's phase as a colour of the state classes: waiting grey, copying blue, blocked (those
 * slots refused) orange, switched green, rolling back red. */
static const char *phase_class(const char *phase) {
  static const struct {
    const char *phase, *cls;
  } map[] = {{"copying", "s-in_progress"},
             {"blocked", "s-unknown"},
             {"switched", "s-succeeded"},
             {"rolling_back", "s-failed"}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp(phase, map[i].phase) == 0) return map[i].cls;
  return "s-none"; /* planned, or a word this console does not know */
}

/* "512 B", "3.2 KiB", "4.0 MiB", ... into buf; a lag not known yet (-1: no progress read, the
 * subscription may not exist) is "not started" */
static const char *bytes_words(int64_t n, char *buf, size_t cap) {
  static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB"};
  if (n < 0) {
    snprintf(buf, cap, "not started");
    return buf;
  }
  if (n < 1024) {
    snprintf(buf, cap, "%lld B", (long long)n);
    return buf;
  }
  double v = (double)n / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) v /= 1024, u++;
  snprintf(buf, cap, "%.1f %s", v, unit[u]);
  return buf;
}

void console__move_html(buf_t *b, const console_move *m, int64_t now_ms) {
  char lag[32];
  console__html(b, "<h2>Move under way</h2><table id=\"move\"><tr><th>slots</th><th>from</th>"
                   "<th>to</th><th>phase</th><th>rows copied</th><th>lag</th><th>started</th>"
                   "<th>request</th></tr>");
  console__html(b,
                "<tr><td class=\"num\">%u\xE2\x80\x93%u</td><td>%s</td><td>%s</td>"
                "<td><span class=\"state %s\">%s</span></td><td class=\"num\">%llu</td>"
                "<td class=\"num\">%s</td><td>",
                m->from, m->to, m->source, m->target, phase_class(m->phase), m->phase,
                (unsigned long long)m->rows_copied, bytes_words(m->lag_bytes, lag, sizeof lag));
  console__time(b, m->started_unix_ms, now_ms);
  console__html(b, "</td><td>%s</td></tr></table>", m->request_id);
  if (m->note[0]) console__html(b, "<p class=\"muted\" id=\"move-note\">%s</p>", m->note);
}

static void ranges_table(creq *r, const slotmap *m) {
  buf_t *b = &r->out;
  console__html(b, "<p>%u slots, map version %llu.</p>", m->slots, (unsigned long long)m->version);
  console__html(b, "<table id=\"ranges\"><tr><th>slots</th><th>group</th><th>moving to</th></tr>");
  for (size_t i = 0; i < m->n_ranges; i++) {
    const slot_range *x = &m->ranges[i];
    console__html(b, "<tr><td class=\"num\">%u\xE2\x80\x93%u</td><td>%s</td><td>%s</td></tr>",
                  x->from, x->to, x->group, x->moving ? x->to_group : "\xE2\x80\x94");
  }
  console__html(b, "</table>");
}

static void groups_table(creq *r, const slotmap *m) {
  const console *c = r->c;
  buf_t *b = &r->out;
  console__html(b, "<h2>Groups</h2><table id=\"groups\"><tr><th>group</th><th>leader</th>"
                   "<th>epoch</th><th>store</th><th>slots</th><th>led here</th></tr>");
  bool store_ok[CONSOLE_GROUPS_MAX];
  stores_ok(r, store_ok);
  for (size_t i = 0; i < c->cfg.n_groups; i++) {
    const console_group *g = &c->groups[i];
    elect_status es = {.leader = true};
    if (g->elector) elect_status_get(g->elector, &es);
    const char *leader = g->elector ? es.leader_addr : c->cfg.advertise;
    bool ok = store_ok[i];
    console__html(b, "<tr><td>%s</td><td>%s</td>", g->name, leader[0] ? leader : "(none)");
    if (es.epoch || es.leader) /* known where the group is led (elect.h) */
      console__html(b, "<td class=\"num\">%llu</td>", (unsigned long long)es.epoch);
    else
      console__html(b, "<td class=\"num muted\">\xE2\x80\x94</td>");
    console__html(b,
                  "<td><span class=\"state %s\">%s</span></td><td class=\"num\">%u</td>"
                  "<td>%s</td></tr>",
                  ok ? "s-succeeded" : "s-failed", ok ? "ok" : "unreachable",
                  m ? slotmap_count(m, g->name) : 0, es.leader ? "yes" : "no");
  }
  console__html(b, "</table>");
}

void console__page_slots(creq *r, char **seg) {
  (void)seg;
  const console_config *cfg = &r->c->cfg;
  slots_view *held = cfg->slots_hold ? cfg->slots_hold(cfg->slotmap_arg) : NULL;
  const slotmap *m = held ? slots_view_map(held) : NULL;
  console__page_begin(r, "Slots");
  console_move mv;
  memset(&mv, 0, sizeof mv);
  if (cfg->move_now && cfg->move_now(cfg->move_arg, &mv))
    console__move_html(&r->out, &mv, r->now_ms);
  if (m)
    ranges_table(r, m);
  else
    console__html(&r->out, "<div class=\"banner err\">No slot map yet.</div>");
  groups_table(r, m);
  slots_view_release(held);
  console__page_end(r);
}
