/* test_store_pg_retention.c — keys remembered longer than results (docs/api.md §12) in the
 * PostgreSQL store: a row past its result retention reads without its body and with
 * result_expired (Lookup and the step transaction's pair alike), before and after the reaper's
 * first stage drops the body; that stage touches only such rows (not a body kept as long as its
 * row, not an UNKNOWN one), and the second stage leaves the row until its key retention ends. */
#include <criterion/criterion.h>
#include <string.h>
#include <time.h>

#include "store/store_pg.h"
#include "support_pg.h"
#include "util/clock.h"

static char tenant[64];

static void setup(void) {
  sp_setup("ret", tenant, sizeof tenant);
}

TestSuite(store_retention, .init = setup, .timeout = 60);

static step_key key_of(const char *gid) {
  return sp_key(tenant, gid, "pay", "charge");
}

typedef struct put_arg {
  step_rec rec;
  step_pair seen; /* what the transaction read (owned copies) */
} put_arg;

static err_code fn_put(void *arg, const step_pair *cur, step_writes *w, err_t *err) {
  (void)err;
  put_arg *a = arg;
  step_rec_clear(&a->seen.fwd);
  cr_assert(step_rec_copy(&a->seen.fwd, &cur->fwd));
  a->seen.now_ms = cur->now_ms;
  w->n = a->rec.present ? 1 : 0;
  w->recs[0] = a->rec;
  return ERR_OK;
}

/* Writes a finished forward with body and the two expiries. */
static void put(store *s, const char *gid, step_state st, const char *body, int64_t result_end,
                int64_t key_end) {
  step_key k = key_of(gid);
  put_arg a;
  memset(&a, 0, sizeof a);
  a.rec.present = true;
  a.rec.key = k;
  a.rec.state = st;
  a.rec.attempt = 1;
  a.rec.outcome = st == STATE_UNKNOWN ? OUTCOME_UNKNOWN : OUTCOME_SUCCEEDED;
  a.rec.code = 201;
  a.rec.body = (uint8_t *)body;
  a.rec.body_len = strlen(body);
  a.rec.completed_ms = a.rec.created_ms = a.rec.updated_ms = clock_wall_ms();
  a.rec.result_expires_ms = result_end;
  a.rec.expires_ms = key_end;
  err_t e;
  cr_assert_eq(store_step_txn(s, &k, sp_in_ms(5000), fn_put, &a, &e), ERR_OK, "%s", e.msg);
  step_rec_clear(&a.seen.fwd);
}

/* The pair as a step transaction reads it (writes nothing). */
static step_rec read_in_txn(store *s, const char *gid) {
  step_key k = key_of(gid);
  put_arg a;
  memset(&a, 0, sizeof a);
  err_t e;
  cr_assert_eq(store_step_txn(s, &k, sp_in_ms(5000), fn_put, &a, &e), ERR_OK, "%s", e.msg);
  return a.seen.fwd;
}

static long long body_bytes(const char *gid) {
  const char *p[] = {tenant, gid};
  /* a dropped (NULL) body: 0; no row: -1 */
  return pgx_sql(NULL,
                 "SELECT coalesce(octet_length(body), 0) FROM idem_steps WHERE tenant = $1 AND"
                 " global_id = $2",
                 2, p);
}

static void assert_expired(const step_rec *r) {
  cr_assert(r->present);
  cr_assert(r->result_expired);
  cr_assert_eq(r->body_len, 0);
  cr_assert_null(r->body);
  cr_assert_eq(r->state, STATE_SUCCEEDED);
  cr_assert_eq(r->outcome, OUTCOME_SUCCEEDED);
  cr_assert_eq(r->code, 201);
  cr_assert_eq(r->attempt, 1);
}

Test(store_retention, an_expired_body_reads_as_gone_and_the_reaper_drops_only_those) {
  store *s = store_pg_open(pgx_url());
  cr_assert_not_null(s);
  int64_t now = clock_wall_ms(), hour = 3600000;
  put(s, "expired", STATE_SUCCEEDED, "paid", now - 1000, now + hour);
  put(s, "fresh", STATE_SUCCEEDED, "fresh", now + hour, now + 2 * hour);
  put(s, "same", STATE_SUCCEEDED, "same", now + hour, now + hour); /* the default: one expiry */
  put(s, "old-unknown", STATE_UNKNOWN, "maybe", now - 2000, now - 1000); /* kept until resolved */

  err_t e;
  step_key k = key_of("expired");
  step_rec got;
  cr_assert_eq(store_lookup_step(s, &k, sp_in_ms(2000), &got, &e), ERR_OK, "%s", e.msg);
  assert_expired(&got);
  cr_assert_eq(got.result_expires_ms, now - 1000);
  cr_assert_eq(got.expires_ms, now + hour);
  step_rec_clear(&got);
  step_rec in_txn = read_in_txn(s, "expired");
  assert_expired(&in_txn);
  step_rec_clear(&in_txn);
  cr_assert_eq(body_bytes("expired"), 4, "reads hide the body before the reaper drops it");

  k = key_of("fresh");
  cr_assert_eq(store_lookup_step(s, &k, sp_in_ms(2000), &got, &e), ERR_OK, "%s", e.msg);
  cr_assert_not(got.result_expired);
  cr_assert_eq(got.body_len, 5);
  cr_assert(memcmp(got.body, "fresh", 5) == 0);
  step_rec_clear(&got);
  k = key_of("old-unknown");
  cr_assert_eq(store_lookup_step(s, &k, sp_in_ms(2000), &got, &e), ERR_OK, "%s", e.msg);
  cr_assert_not(got.result_expired, "UNKNOWN never loses its result");
  cr_assert_eq(got.body_len, 5);
  step_rec_clear(&got);

  /* the first stage, until a short batch (other suites may share the database) */
  uint64_t dropped = 0, n = 0;
  do {
    cr_assert_eq(store_reap_bodies(s, 100, sp_in_ms(5000), &n, &e), ERR_OK, "%s", e.msg);
    dropped += n;
  } while (n == 100);
  cr_assert_geq(dropped, 1);
  cr_assert_eq(body_bytes("expired"), 0, "the body is dropped");
  cr_assert_eq(body_bytes("fresh"), 5);
  cr_assert_eq(body_bytes("same"), 4, "a body kept as long as its row is the delete's to reclaim");
  cr_assert_eq(body_bytes("old-unknown"), 5);
  /* the second stage leaves the row: its key is kept another hour */
  do {
    cr_assert_eq(store_reap_steps(s, 100, sp_in_ms(5000), &n, &e), ERR_OK, "%s", e.msg);
  } while (n == 100);
  cr_assert_eq(body_bytes("expired"), 0, "the row is still there");

  k = key_of("expired");
  cr_assert_eq(store_lookup_step(s, &k, sp_in_ms(2000), &got, &e), ERR_OK, "%s", e.msg);
  assert_expired(&got);
  step_rec_clear(&got);
  store_close(s);
}

Test(store_retention, past_key_retention_the_row_reads_as_absent_and_is_deleted) {
  store *s = store_pg_open(pgx_url());
  int64_t now = clock_wall_ms();
  put(s, "gone", STATE_SUCCEEDED, "paid", now - 2000, now - 1000);
  err_t e;
  step_key k = key_of("gone");
  step_rec got;
  cr_assert_eq(store_lookup_step(s, &k, sp_in_ms(2000), &got, &e), ERR_OK, "%s", e.msg);
  cr_assert_not(got.present);
  /* Reaped until the row is gone, within a deadline: the reaper skips locked rows, and the
   * other case of this suite (run beside this one by Criterion) may hold this row locked in its
   * own reap, deleting it a moment later. */
  int64_t until = clock_wall_ms() + 10000;
  uint64_t n = 0;
  long long left;
  while ((left = body_bytes("gone")) != -1 && clock_wall_ms() < until)
    cr_assert_eq(store_reap_steps(s, 100, sp_in_ms(5000), &n, &e), ERR_OK, "%s", e.msg);
  cr_assert_eq(left, -1, "the row is deleted");
  store_close(s);
}
