/* test_store_pg_slots.c — the slot column (docs/api.md §17) against a real Postgres: every row a
 * store writes carries its saga's slot by the rule, the SQL form of the rule (idem_slot, used
 * for rows written before) agrees with the C one, and the cluster's slot count is recorded once:
 * another is refused; rows without a slot are filled in batches. */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/slot.h"
#include "store/store.h"
#include "store/store_pg.h"
#include "support_pg.h"

static char tenant[64];

static void setup(void) {
  sp_setup("slot", tenant, sizeof tenant);
}

TestSuite(store_slots, .init = setup, .timeout = 60);

/* One value of a query with text parameters, as an integer (-1: no row or NULL). */
static long long one(const char *url, const char *sql, int n, const char *const *params) {
  PGconn *c = PQconnectdb(url ? url : pgx_url());
  cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
  PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
  cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
  long long v = PQntuples(r) && !PQgetisnull(r, 0, 0) ? atoll(PQgetvalue(r, 0, 0)) : -1;
  PQclear(r);
  PQfinish(c);
  return v;
}

Test(store_slots, the_sql_rule_is_the_c_rule) {
  PGconn *c = pgx_connect(NULL);
  /* ids of the shapes the server sees: UUIDv7s, request ids, odd bytes of the tenant rule */
  for (int i = 0; i < 200; i++) {
    char id[64], slots[16];
    snprintf(id, sizeof id, i % 2 ? "0190a0b0-%04x-7000-8000-%012x" : "req.%d-x_y", i, i * 7919);
    uint32_t s = (uint32_t)(i % 3 == 0 ? 256 : i % 3 == 1 ? 65536 : 7);
    snprintf(slots, sizeof slots, "%u", s);
    const char *p[] = {tenant, id, slots};
    cr_expect_eq(pgx_exec(c, "SELECT idem_slot($1, $2, $3::int)", 3, p), slot_of(tenant, id, s),
                 "%s/%s mod %u", tenant, id, s);
  }
  PQfinish(c);
}

Test(store_slots, every_row_written_carries_its_sagas_slot) {
  store *st = store_pg_open(pgx_url());
  cr_assert_not_null(st);
  saga_label lab = {(char *)"region", (char *)"eu"};
  saga_new in = {.tenant = tenant,
                 .global_id = "0190a0b0-0000-7000-8000-00000000abcd",
                 .request_id = "rq-1",
                 .saga_type = "order",
                 .labels = &lab,
                 .n_labels = 1,
                 .retention_s = 3600};
  saga_begun out;
  err_t err;
  err_clear(&err);
  cr_assert_eq(store_begin_saga(st, &in, sp_in_ms(5000), &out, &err), ERR_OK, "%s", err.msg);
  char want[16];
  snprintf(want, sizeof want, "%u", slot_of(tenant, in.global_id, SLOTS_DEFAULT));
  const char *p[] = {tenant, in.global_id};
  cr_expect_eq(one(NULL, "SELECT slot FROM idem_sagas WHERE tenant = $1 AND global_id = $2", 2, p),
               atoll(want));
  cr_expect_eq(
      one(NULL, "SELECT slot FROM idem_saga_labels WHERE tenant = $1 AND global_id = $2", 2, p),
      atoll(want));
  store_close(st);
}

Test(store_slots, another_slot_count_is_refused_and_missing_slots_are_filled) {
  char db[64], url[256];
  pgx_db_create("idem_slots", db, sizeof db, url, sizeof url);
  err_t err;
  err_clear(&err);
  cr_assert_eq(store_pg_migrate(url, sp_in_ms(20000), &err), ERR_OK, "%s", err.msg);
  /* a row as a version before slots wrote it */
  pgx_sql(url,
          "INSERT INTO idem_sagas (tenant, global_id, saga_type, created_ms, expires_ms)"
          " VALUES ('acme', 'order-42', 't', 1, 9999999999999)",
          0, NULL);
  cr_assert_eq(store_pg_slots_check(url, 64, sp_in_ms(10000), &err), ERR_OK, "%s", err.msg);
  cr_expect_eq(one(url, "SELECT slots FROM idem_cluster", 0, NULL), 64);
  long filled = 0;
  cr_assert_eq(store_pg_slots_fill(url, 64, 10, sp_in_ms(10000), &filled, &err), ERR_OK, "%s",
               err.msg);
  cr_expect_eq(filled, 1);
  cr_expect_eq(one(url, "SELECT slot FROM idem_sagas WHERE global_id = 'order-42'", 0, NULL),
               slot_of("acme", "order-42", 64), "filled by the rule");
  cr_assert_eq(store_pg_slots_fill(url, 64, 10, sp_in_ms(10000), &filled, &err), ERR_OK);
  cr_expect_eq(filled, 0, "none left");
  cr_expect_eq(store_pg_slots_check(url, 64, sp_in_ms(10000), &err), ERR_OK, "the same S again");
  err_clear(&err);
  cr_expect_eq(store_pg_slots_check(url, 128, sp_in_ms(10000), &err), ERR_INVALID);
  cr_expect_str_eq(err.msg, "the store was created with 64 slots, not 128");
  cr_expect_eq(one(url, "SELECT slots FROM idem_cluster", 0, NULL), 64, "unchanged");
  pgx_db_drop(db);
}
