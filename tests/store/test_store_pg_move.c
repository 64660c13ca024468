/* test_store_pg_move.c — a move session (store/store_pg_move.h) against a real Postgres: the move
 * id is checked before any SQL sees it, a rollback's unblock removes only its own move's blocks
 * (the target keeps a block an earlier move left), the handoff's opens the slots whatever
 * blocked them, and the session's connections show as idem-move, one per side. */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_pg_move.h"
#include "support_pg.h"
#include "util/clock.h"

static char tenant[64];

static void setup(void) {
  sp_setup("move", tenant, sizeof tenant);
}

TestSuite(store_move, .init = setup, .timeout = 60);

static long long blocks(const char *move_id) {
  const char *p[] = {move_id};
  return pgx_sql(NULL, "SELECT count(*) FROM idem_slot_blocks WHERE move_id = $1", 1, p);
}

Test(store_move, a_bad_move_id_is_refused_before_any_sql) {
  store_pg_move_session *s = NULL;
  err_t err;
  const char *bad[] = {"m1; DROP TABLE idem_steps", "m0123456789ABCDEF", "m0123", ""};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err_clear(&err);
    cr_expect_eq(store_pg_move_session_open(pgx_url(), pgx_url(), bad[i], 0, 15, &s, &err),
                 ERR_INVALID, "%s", bad[i]);
    cr_expect_null(s);
    cr_expect(strstr(err.msg, "id:"), "names the field: %s", err.msg);
  }
}

Test(store_move, a_rollback_unblocks_only_its_own_move_and_the_handoff_opens_all) {
  PGconn *c = pgx_connect(NULL);
  /* an earlier move left 0-15 blocked here ("moving out", kept for good), and this move's
   * subscription blocked them again ("moving in") */
  PQclear(pgx_run(c, "DELETE FROM idem_slot_blocks", 0, NULL));
  PQclear(pgx_run(c,
                  "INSERT INTO idem_slot_blocks VALUES (0, 15, 'm0000000000000001', 'moving out'),"
                  " (0, 15, 'm00000000000000aa', 'moving in')",
                  0, NULL));
  PQclear(pgx_run(c, "SELECT idem_slot_blocks_sync()", 0, NULL));
  store_pg_move_session *s = NULL;
  err_t err;
  err_clear(&err);
  cr_assert_eq(store_pg_move_session_open(pgx_url(), pgx_url(), "m00000000000000aa", 0, 15, &s,
                                          &err),
               ERR_OK, "%s", err.msg);
  int64_t deadline = clock_mono_ms() + 10000;
  cr_assert_eq(store_pg_move_unblock(s, MOVE_SIDE_TARGET, false, deadline, &err), ERR_OK, "%s",
               err.msg);
  cr_expect_eq(blocks("m00000000000000aa"), 0, "its own block is gone");
  cr_expect_eq(blocks("m0000000000000001"), 1, "the earlier move's block is kept");
  /* both sides of the session are one connection each, named idem-move */
  char id[64];
  cr_assert_eq(store_pg_move_identity(s, MOVE_SIDE_SOURCE, id, sizeof id, deadline, &err), ERR_OK);
  cr_expect_eq(pgx_sql(NULL,
                       "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'idem-move'"
                       " AND datname = current_database()",
                       0, NULL),
               2, "one connection per side");
  /* the handoff: the slots come to this store, whatever blocked them */
  cr_assert_eq(store_pg_move_unblock(s, MOVE_SIDE_TARGET, true, deadline, &err), ERR_OK, "%s",
               err.msg);
  cr_expect_eq(blocks("m0000000000000001"), 0, "opened to the slots");
  store_pg_move_session_close(s);
  PQfinish(c);
}
