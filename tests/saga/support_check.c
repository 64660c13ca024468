/* support_check.c — shop_check: the cross-check of the four tables (see shop.h). */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shop.h"

static void miss(shop_counts *c, const char *gid, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void miss(shop_counts *c, const char *gid, const char *fmt, ...) {
  char m[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  if (c->mismatches < 50) fprintf(stderr, "MISMATCH %s: %s\n", gid ? gid : "(global)", m);
  c->mismatches++;
}

static const idem_record *find_step(const idem_saga *sg, const char *service, const char *op,
                                    idem_phase phase) {
  for (size_t i = 0; i < sg->n_steps; i++)
    if (strcmp(sg->steps[i].service, service) == 0 && strcmp(sg->steps[i].operation, op) == 0 &&
        sg->steps[i].phase == phase)
      return &sg->steps[i];
  return NULL;
}

static bool succeeded(const idem_record *r) {
  return r && r->state == IDEM_STATE_SUCCEEDED;
}

/* The global invariants, over every row of the shop. */
static void check_global(shop *s, shop_counts *c) {
  static const struct {
    const char *what, *sql;
  } checks[] = {
      {"orders created twice",
       "SELECT count(*) FROM (SELECT global_id FROM {o}.orders GROUP BY global_id"
       " HAVING count(*) > 1) x"},
      {"sagas charged twice",
       "SELECT count(*) FROM (SELECT global_id FROM {p}.ledger WHERE kind = 'charge'"
       " GROUP BY global_id HAVING count(*) > 1) x"},
      {"sagas refunded twice",
       "SELECT count(*) FROM (SELECT global_id FROM {p}.ledger WHERE kind = 'refund'"
       " GROUP BY global_id HAVING count(*) > 1) x"},
      {"refunds without a charge",
       "SELECT count(*) FROM {p}.ledger r WHERE r.kind = 'refund' AND NOT EXISTS"
       " (SELECT 1 FROM {p}.ledger c WHERE c.kind = 'charge' AND c.global_id = r.global_id)"},
      {"sagas reserved twice",
       "SELECT count(*) FROM (SELECT global_id FROM {i}.reservations GROUP BY global_id"
       " HAVING count(*) > 1) x"},
      {"skus whose stock is not conserved",
       "SELECT count(*) FROM {i}.stock s WHERE s.initial <> s.available + coalesce("
       "(SELECT sum(qty) FROM {i}.reservations r WHERE r.sku = s.sku AND r.state = 'reserved'),"
       " 0)"},
      {"accounts that disagree with the ledger",
       "SELECT count(*) FROM {p}.accounts a WHERE a.charged_cents <> coalesce((SELECT"
       " sum(CASE l.kind WHEN 'charge' THEN l.amount_cents ELSE -l.amount_cents END)"
       " FROM {p}.ledger l WHERE l.customer = a.customer), 0)"},
  };
  for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
    long long n = shop_int(s, checks[i].sql, NULL);
    if (n != 0) miss(c, NULL, "%lld %s", n, checks[i].what);
  }
}

/* One saga: the business rows, the barrier rows and the coordinator's steps agree. */
static void check_saga(shop *s, const char *gid, const char *status, shop_counts *c) {
  long long orders = shop_int(s, "SELECT count(*) FROM {o}.orders WHERE global_id = $1", gid);
  long long charges = shop_int(
      s, "SELECT count(*) FROM {p}.ledger WHERE global_id = $1 AND kind = 'charge'", gid);
  long long refunds = shop_int(
      s, "SELECT count(*) FROM {p}.ledger WHERE global_id = $1 AND kind = 'refund'", gid);
  long long reserved = shop_int(
      s, "SELECT count(*) FROM {i}.reservations WHERE global_id = $1 AND state = 'reserved'", gid);
  long long released = shop_int(
      s, "SELECT count(*) FROM {i}.reservations WHERE global_id = $1 AND state = 'released'", gid);
  char q[160];
  snprintf(q, sizeof q, "SELECT count(*) FROM {o}.orders WHERE global_id = $1 AND status = '%s'",
           strcmp(status, "confirmed") == 0 ? "confirmed" : "cancelled");
  long long in_status = shop_int(s, q, gid);
  c->orders += orders;
  c->charges += charges;
  c->refunds += refunds;
  c->reservations += reserved + released;
  c->released += released;

  if (orders != 1) miss(c, gid, "%lld order rows", orders);
  if (in_status != 1) miss(c, gid, "order row is not %s", status);
  bool confirmed = strcmp(status, "confirmed") == 0;
  if (confirmed) {
    c->confirmed++;
    if (charges != 1 || refunds != 0) miss(c, gid, "confirmed: %lld charges, %lld refunds",
                                           charges, refunds);
    if (reserved != 1 || released != 0) miss(c, gid, "confirmed: %lld reserved, %lld released",
                                             reserved, released);
  } else {
    c->cancelled++;
    if (charges > 1 || refunds != charges)
      miss(c, gid, "cancelled: %lld charges, %lld refunds", charges, refunds);
    if (reserved != 0 || released > 1) miss(c, gid, "cancelled: %lld reserved, %lld released",
                                            reserved, released);
  }

  /* the coordinator's view */
  idem_saga sg;
  idem_error e;
  int rc = idem_saga_get(s->idem, gid, &sg, &e);
  if (rc != IDEM_OK) {
    miss(c, gid, "GetSaga: %s", e.message);
    return;
  }
  c->coord_steps += (long)sg.n_steps;
  const idem_record *charge = find_step(&sg, "payment", "charge", IDEM_FORWARD);
  const idem_record *reserve = find_step(&sg, "inventory", "reserve", IDEM_FORWARD);
  const idem_record *confirm = find_step(&sg, "order", "confirm", IDEM_FORWARD);
  const idem_record *cancel = find_step(&sg, "order", "create", IDEM_COMPENSATION);
  if (succeeded(charge) != (charges == 1)) miss(c, gid, "charge step vs ledger disagree");
  if (succeeded(reserve) != (reserved + released == 1))
    miss(c, gid, "reserve step vs reservations disagree");
  if (confirmed != succeeded(confirm)) miss(c, gid, "confirm step vs order status disagree");
  if (!confirmed != succeeded(cancel)) miss(c, gid, "cancel step vs order status disagree");
  if (charge && charge->state == IDEM_STATE_FAILED) c->declined++;
  if (reserve && reserve->state == IDEM_STATE_FAILED) c->out_of_stock++;

  /* every executed step has its barrier row (same outcome, fence <= attempt) and vice versa */
  PGresult *r = NULL;
  {
    char sql[1024];
    const char *tmpl =
        "SELECT 'order', operation, phase, fence, outcome FROM %s.idem_barrier WHERE global_id = $1"
        " UNION ALL SELECT 'payment', operation, phase, fence, outcome FROM %s.idem_barrier"
        " WHERE global_id = $1 UNION ALL SELECT 'inventory', operation, phase, fence, outcome"
        " FROM %s.idem_barrier WHERE global_id = $1";
    snprintf(sql, sizeof sql, tmpl, s->schema[0], s->schema[1], s->schema[2]);
    const char *const p[1] = {gid};
    r = pgx_run(s->pg, sql, 1, p);
  }
  int rows = PQntuples(r);
  c->barrier_rows += rows;
  long executed = 0;
  for (size_t i = 0; i < sg.n_steps; i++) {
    const idem_record *st = &sg.steps[i];
    if (st->state == IDEM_STATE_IN_PROGRESS || st->state == IDEM_STATE_UNKNOWN ||
        st->state == IDEM_STATE_RELEASED) {
      miss(c, gid, "step %s.%s phase %d left %s", st->service, st->operation, st->phase,
           idem_state_name(st->state));
      continue;
    }
    if (st->attempt == 0) {
      if (st->phase == IDEM_COMPENSATION) c->null_compensations++;
      continue;
    }
    if (st->state == IDEM_STATE_ABANDONED) {
      miss(c, gid, "executed step %s.%s abandoned", st->service, st->operation);
      continue;
    }
    executed++;
    if (st->attempt > 1) c->takeovers++;
    int found = -1;
    for (int k = 0; k < rows; k++)
      if (strcmp(PQgetvalue(r, k, 0), st->service) == 0 &&
          strcmp(PQgetvalue(r, k, 1), st->operation) == 0 &&
          atoi(PQgetvalue(r, k, 2)) == (int)st->phase)
        found = k;
    if (found < 0) {
      miss(c, gid, "step %s.%s phase %d has no barrier row", st->service, st->operation,
           st->phase);
      continue;
    }
    uint64_t fence = strtoull(PQgetvalue(r, found, 3), NULL, 10);
    int outcome = atoi(PQgetvalue(r, found, 4));
    int want = st->state == IDEM_STATE_SUCCEEDED ? IDEM_OUTCOME_SUCCEEDED : IDEM_OUTCOME_FAILED;
    if (outcome != want)
      miss(c, gid, "step %s.%s: coordinator %s, barrier outcome %d", st->service, st->operation,
           idem_state_name(st->state), outcome);
    if (fence > st->attempt)
      miss(c, gid, "step %s.%s: barrier fence %llu > attempt %llu", st->service, st->operation,
           (unsigned long long)fence, (unsigned long long)st->attempt);
    if (fence < st->attempt) c->applied_earlier++;
  }
  if (executed != rows)
    miss(c, gid, "%ld executed steps but %d barrier rows", executed, rows);
  PQclear(r);
  idem_saga_clear(&sg);
}

shop_counts shop_check(shop *s, const char *const *gids, const char *const *status, size_t n) {
  shop_counts c = {0};
  c.sagas = (long)n;
  check_global(s, &c);
  for (size_t i = 0; i < n; i++) {
    if (!gids[i] || !status[i]) {
      miss(&c, NULL, "saga %zu never got an answer", i);
      continue;
    }
    check_saga(s, gids[i], status[i], &c);
  }
  long long all_orders = shop_int(s, "SELECT count(*) FROM {o}.orders", NULL);
  if (all_orders != (long long)c.orders)
    miss(&c, NULL, "%lld order rows in all, %ld for the sagas checked", all_orders, c.orders);
  printf("cross-check: sagas=%ld confirmed=%ld cancelled=%ld (declined=%ld out_of_stock=%ld)\n"
         "  orders=%ld charges=%ld refunds=%ld reservations=%ld released=%ld\n"
         "  coordinator_steps=%ld barrier_rows=%ld takeovers=%ld applied_by_earlier_attempt=%ld"
         " null_compensations=%ld\n  mismatches=%ld\n",
         c.sagas, c.confirmed, c.cancelled, c.declined, c.out_of_stock, c.orders, c.charges,
         c.refunds, c.reservations, c.released, c.coord_steps, c.barrier_rows, c.takeovers,
         c.applied_earlier, c.null_compensations, c.mismatches);
  fflush(stdout);
  return c;
}
