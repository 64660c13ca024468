/* moves.c — see moves.h. */
#include "moves.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/pbenc.h"
#include "harness.h"

#define MOVE_METHOD "/idem.v1.Admin/MoveSlots"



move_answer h_move_slots(const h_groups *cl, int at, uint32_t from, uint32_t to,
                              const char *group, const char *rid, bool dry_run) {
  return h_move_slots_rate(cl, at, from, to, group, rid, dry_run, 0);
}

move_answer h_move_slots_rate(const h_groups *cl, int at, uint32_t from, uint32_t to,
                              const char *group, const char *rid, bool dry_run,
                              uint32_t max_rows_per_s) {
  pbuf *req = pb_new();
  if (from) pb_varint(req, 1, from);
  if (to) pb_varint(req, 2, to);
  if (group) pb_str(req, 3, group);
  if (rid) pb_str(req, 4, rid);
  if (dry_run) pb_varint(req, 5, 1);
  if (max_rows_per_s) pb_varint(req, 6, max_rows_per_s);
  move_answer a = {0};
  void *resp = NULL;
  h_raw_opts o = {.deadline_ms = 90000, .resp = &resp, .value = a.reason,
                  .value_len = sizeof a.reason};
  a.status = h_raw_call_opts(cl->node[at].addr, MOVE_METHOD, cl->t, req->b, req->n, a.details,
                             sizeof a.details, &o);
  pb_free(req);
  if (a.status == 0) {
    Idem__V1__MoveSlotsResponse *r = idem__v1__move_slots_response__unpack(NULL, o.resp_len, resp);
    cr_assert(r, "the answer decodes");
    a.version = r->version;
    a.steps = r->steps_moved;
    a.sagas = r->sagas_moved;
    a.paused_ms = r->paused_ms;
    a.replayed = r->replayed;
    idem__v1__move_slots_response__free_unpacked(r, NULL);
  }
  free(resp);
  return a;
}

/* The slot map as node `at` answers GetTopology (free with idem__v1__topology__free_unpacked). */
Idem__V1__Topology *h_topology(const h_groups *cl, int at) {
  void *resp = NULL;
  h_raw_opts o = {.resp = &resp};
  char details[256];
  int st = h_raw_call_opts(cl->node[at].addr, "/idem.v1.Coordinator/GetTopology", cl->t, "", 0,
                           details, sizeof details, &o);
  Idem__V1__Topology *t =
      st == 0 ? idem__v1__topology__unpack(NULL, o.resp_len, resp) : NULL;
  free(resp);
  return t;
}

/* Whether node `at`'s map shows a move in phase (phase NULL: shows no move at all). */
static bool move_in(const h_groups *cl, int at, const char *phase) {
  Idem__V1__Topology *t = h_topology(cl, at);
  bool in = t && (phase ? t->move && strcmp(t->move->phase, phase) == 0 : !t->move);
  if (t) idem__v1__topology__free_unpacked(t, NULL);
  return in;
}

bool h_wait_move_phase(const h_groups *cl, int at, const char *phase, int64_t timeout_ms) {
  bool in;
  H_WAITED_EVERY(20, in, move_in(cl, at, phase), timeout_ms);
  return in;
}

bool h_wait_move_ended(const h_groups *cl, int at, int64_t timeout_ms) {
  bool ended;
  H_WAITED_EVERY(100, ended, move_in(cl, at, NULL), timeout_ms);
  return ended;
}

/* The group serving slot in the map node `at` follows ("" when unknown), into out. */
void h_group_of_slot(const h_groups *cl, int at, uint32_t slot, char *out, size_t cap) {
  out[0] = '\0';
  Idem__V1__Topology *t = h_topology(cl, at);
  for (size_t i = 0; t && i < t->n_ranges; i++)
    if (slot >= t->ranges[i]->from && slot <= t->ranges[i]->to)
      snprintf(out, cap, "%s", t->ranges[i]->group);
  if (t) idem__v1__topology__free_unpacked(t, NULL);
}

bool h_slot_is(const h_groups *cl, int at, uint32_t slot, const char *group) {
  char g[64];
  h_group_of_slot(cl, at, slot, g, sizeof g);
  return strcmp(g, group) == 0;
}

long long h_count_rows(const char *url, const char *table, uint32_t from, uint32_t to) {
  char sql[200], a[16], b[16];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE slot BETWEEN $1::int AND $2::int",
           table);
  snprintf(a, sizeof a, "%u", from);
  snprintf(b, sizeof b, "%u", to);
  const char *p[] = {a, b};
  PGconn *c = pgx_connect(url);
  PGresult *r = pgx_run(c, sql, 2, p);
  long long n = atoll(PQgetvalue(r, 0, 0));
  PQclear(r);
  PQfinish(c);
  return n;
}

long long h_sql_count(const char *url, const char *sql) {
  PGconn *c = pgx_connect(url);
  PGresult *r = pgx_run(c, sql, 0, NULL);
  long long n = atoll(PQgetvalue(r, 0, 0));
  PQclear(r);
  PQfinish(c);
  return n;
}

/* What a move leaves behind in either database: publications, subscriptions, its slots. Only
 * this cluster's databases count: pg_subscription and pg_replication_slots are server-wide, and
 * other tests' databases may share the server. */
long long h_move_leftovers(const h_groups *cl) {
  long long n = 0;
  for (int g = 0; g < 2; g++) {
    n += h_sql_count(cl->url[g], "SELECT count(*) FROM pg_publication WHERE pubname LIKE 'idem_move_%'");
    n += h_sql_count(cl->url[g],
                   "SELECT count(*) FROM pg_subscription WHERE subname LIKE 'idem_move_%' AND"
                   " subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())");
  }
  n += h_sql_count(cl->url[0],
                 "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'idem_move_%'"
                 " AND database = current_database()");
  return n;
}

/* --- traffic: pairs on g1's slots, every acknowledged completion remembered -------------- */



void *h_traffic_run(void *arg) {
  traffic *T = arg;
  char both[160];
  snprintf(both, sizeof both, "%s,%s", T->cl->node[0].addr, T->cl->node[1].addr);
  idem_client *c = h_groups_client(T->cl, both);
  int me = atomic_fetch_add(&T->threads, 1);
  for (int i = 0; !atomic_load(&T->stop); i++) {
    char tag[32], gid[48];
    snprintf(tag, sizeof tag, "tr%d-%d", me, i);
    h_groups_id_in_group(T->cl->t, 0, tag, gid, sizeof gid);
    idem_step_key k = {gid, "payments", "charge", IDEM_FORWARD};
    idem_begin b = {0};
    idem_error e = {0};
    int rc = idem_step_begin(c, &k, NULL, 0, 30000, &b, &e);
    if (rc != IDEM_OK) {
      if (atomic_fetch_add(&T->errors, 1) < 3) cr_log_info("begin %s: %d %s", gid, rc, e.message);
      continue;
    }
    if (b.decision != IDEM_DECISION_PROCEED) { /* a fresh key: only PROCEED is right */
      atomic_fetch_add(&T->dup_proceed, 1);
      idem_begin_clear(&b);
      continue;
    }
    uint64_t attempt = b.attempt;
    idem_begin_clear(&b);
    for (int tries = 0; tries < 50; tries++) {
      rc = idem_step_complete(c, &k, attempt, IDEM_OUTCOME_SUCCEEDED, 0, gid, strlen(gid), NULL,
                              &e);
      if (rc == IDEM_OK || rc != IDEM_UNAVAILABLE) break;
      h_sleep_ms(100); /* not a wait: a client's pause before it retries a refused Complete */
    }
    if (rc == IDEM_OK) {
      int n = atomic_fetch_add(&T->n_acked, 1);
      if (n < ACKED_MAX) snprintf(T->acked[n], sizeof T->acked[n], "%s", gid);
      atomic_fetch_add(&T->pairs, 1);
    } else {
      atomic_fetch_add(&T->errors, 1);
    }
  }
  idem_close(c);
  return NULL;
}

int h_move_under_load(const h_groups *cl, traffic *T, pthread_t *th) {
  T->cl = cl;
  T->acked = calloc(ACKED_MAX, sizeof *T->acked);
  cr_assert_not_null(T->acked);
  pthread_create(th, NULL, h_traffic_run, T);
  H_WAIT(atomic_load(&T->pairs) >= 50, 20000, "the traffic acknowledged 50 pairs before the move");
  int driver = h_groups_leader_of(cl, 0);
  cr_assert_geq(driver, 0, "g1 has a leader");
  return driver;
}

static void *bg_move_run(void *arg) {
  h_bg_move *m = arg;
  m->a = h_move_slots(m->cl, m->at, m->from, m->to, m->group, m->rid, false);
  atomic_store(&m->done, true);
  return NULL;
}

void h_bg_move_start(h_bg_move *m) {
  atomic_store(&m->done, false);
  pthread_create(&m->th, NULL, bg_move_run, m);
}

void h_bg_move_join(h_bg_move *m) {
  pthread_join(m->th, NULL);
}

/* Every acknowledged completion answers REPLAY with its body: lost counts the others. */
int h_lost_results(const h_groups *cl, traffic *T) {
  char both[160];
  snprintf(both, sizeof both, "%s,%s", cl->node[0].addr, cl->node[1].addr);
  idem_client *c = h_groups_client(cl, both);
  int lost = 0, n = atomic_load(&T->n_acked);
  for (int i = 0; i < n && i < ACKED_MAX; i++) {
    idem_step_key k = {T->acked[i], "payments", "charge", IDEM_FORWARD};
    idem_begin b = {0};
    idem_error e = {0};
    int rc = idem_step_begin(c, &k, NULL, 0, 30000, &b, &e);
    if (rc != IDEM_OK || b.decision != IDEM_DECISION_REPLAY ||
        b.result.body_len != strlen(T->acked[i]) ||
        memcmp(b.result.body, T->acked[i], b.result.body_len) != 0) {
      if (lost < 5) cr_log_error("lost %s: rc %d decision %d %s", T->acked[i], rc, b.decision, e.message);
      lost++;
    }
    idem_begin_clear(&b);
  }
  idem_close(c);
  return lost;
}

