/* test_store_pg_failover.c — what the store does around a primary failover (docs/api.md §14),
 * against the real Postgres of $IDEM_TEST_PG_URL, without Patroni (tests/ha/ has the real
 * failovers):
 *  - a multi-host --pg with target_session_attrs=read-write skips a host that is down;
 *  - a server that reports itself read-only (a standby; here default_transaction_read_only
 *    given in the connection's options) is never written: UNAVAILABLE, the callback never runs;
 *  - a write refused with SQLSTATE 25006 (here raised by a trigger, for this test's tenant only)
 *    drops the connection, re-runs once on a fresh one, and answers UNAVAILABLE, directly and
 *    through the batcher, with nothing written;
 *  - reconnects back off: a store whose server is gone answers within the deadline, and
 *    recovers as soon as a connect succeeds. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"
#include "store/store_pg.h"
#include "store/store_pg_internal.h"
#include "support_pg.h"
#include "testutil.h"
#include "util/clock.h"

static char tenant[64];

static void setup(void) {
  sp_setup("ro", tenant, sizeof tenant);
}

TestSuite(store_failover, .init = setup, .timeout = 60);

static int64_t in_ms(int64_t ms) {
  return sp_in_ms(ms);
}

/* $IDEM_TEST_PG_URL with "key=value" appended to its query string. */
static void url_with(const char *kv, char *out, size_t n) {
  const char *u = pgx_url();
  snprintf(out, n, "%s%s%s", u, strchr(u, '?') ? "&" : "?", kv);
}

/* A loopback port nobody listens on: one the kernel just handed out, closed again. */
static int closed_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

static step_key mkkey(const char *gid) {
  return sp_key(tenant, gid, "svc", "op");
}

/* The step callback: counts its runs and writes an IN_PROGRESS forward record. */
typedef struct write_arg {
  int calls;
} write_arg;

static err_code fn_write(void *arg, const step_pair *cur, step_writes *w, err_t *err) {
  (void)err;
  write_arg *a = arg;
  a->calls++;
  memset(w, 0, sizeof *w);
  step_rec *r = &w->recs[0];
  r->present = true;
  r->key = cur->fwd.key;
  r->state = STATE_IN_PROGRESS;
  r->attempt = 1;
  r->created_ms = r->updated_ms = cur->now_ms;
  r->lease_expires_ms = cur->now_ms + 5000;
  w->n = 1;
  return ERR_OK;
}

static bool stored(store *s, const step_key *k) {
  step_rec got;
  err_t e;
  cr_assert_eq(store_lookup_step(s, k, in_ms(2000), &got, &e), ERR_OK, "%s", e.msg);
  bool present = got.present;
  step_rec_clear(&got);
  return present;
}

Test(store_failover, a_multi_host_url_skips_a_host_that_is_down) {
  /* "postgresql://user@host:port/db?..." with a dead host in front of the real one */
  const char *u = pgx_url();
  const char *at = strchr(u + strlen("postgresql://"), '@');
  cr_assert(at, "IDEM_TEST_PG_URL has no user@: %s", u);
  char multi[512];
  snprintf(multi, sizeof multi, "%.*s127.0.0.1:%d,%s%starget_session_attrs=read-write",
           (int)(at + 1 - u), u, closed_port(), at + 1, strchr(u, '?') ? "&" : "?");
  store *s = store_pg_open(multi);
  err_t e;
  step_key k = mkkey("g-multi");
  write_arg a = {0};
  cr_assert_eq(store_step_txn(s, &k, in_ms(5000), fn_write, &a, &e), ERR_OK, "%s: %s", multi,
               e.msg);
  cr_assert(stored(s, &k));
  store_close(s);
}

/* A loopback port that accepts TCP connections (the kernel completes them) and never answers:
 * a host that is there but silent, like a dead machine behind a live address. Close the fd. */
static int silent_port(int *fd_out) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  cr_assert_eq(listen(fd, 16), 0);
  cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  *fd_out = fd;
  return ntohs(a.sin_port);
}

Test(store_failover, a_silent_host_is_skipped_after_its_budget) {
  const char *u = pgx_url();
  const char *at = strchr(u + strlen("postgresql://"), '@');
  cr_assert(at, "IDEM_TEST_PG_URL has no user@: %s", u);
  int fd;
  char multi[512];
  snprintf(multi, sizeof multi, "%.*s127.0.0.1:%d,%s%starget_session_attrs=read-write",
           (int)(at + 1 - u), u, silent_port(&fd), at + 1, strchr(u, '?') ? "&" : "?");
  store *s = store_pg_open(multi);
  err_t e;
  int64_t t0 = clock_mono_ms();
  cr_assert_eq(store_ping(s, t0 + 5000, &e), ERR_OK, "%s", e.msg);
  int64_t first = clock_mono_ms() - t0;
  cr_assert(first >= PG_HOST_BUDGET_MS - 50 && first < PG_HOST_BUDGET_MS + 1000,
            "first connect took %lld ms (budget per host %d ms)", (long long)first,
            PG_HOST_BUDGET_MS);
  /* the next connect starts with the host that worked */
  char pid[16];
  snprintf(pid, sizeof pid, "%d", store_pg__backend_pid(s));
  char stmt[96];
  snprintf(stmt, sizeof stmt, "SELECT pg_terminate_backend(%s, 5000)", pid);
  pgx_sql(NULL, stmt, 0, NULL);
  t0 = clock_mono_ms();
  cr_assert_eq(store_ping(s, t0 + 5000, &e), ERR_OK, "%s", e.msg);
  int64_t again = clock_mono_ms() - t0;
  cr_log_info("silent first host: connected after %lld ms, again after %lld ms", (long long)first,
              (long long)again);
  cr_assert_lt(again, PG_HOST_BUDGET_MS / 2, "the reconnect tried the silent host first");
  store_close(s);
  close(fd);
}

Test(store_failover, a_read_only_server_is_never_written) {
  char url[512];
  url_with("options=-c%20default_transaction_read_only%3Don", url, sizeof url);
  store *s = store_pg_open(url);
  err_t e;
  step_key k = mkkey("g-ro");
  write_arg a = {0};
  cr_assert_eq(store_step_txn(s, &k, in_ms(2000), fn_write, &a, &e), ERR_UNAVAILABLE);
  cr_assert(strstr(e.msg, "read-only"), "msg: %s", e.msg);
  cr_assert_eq(a.calls, 0, "the transaction ran on a read-only server");
  cr_assert_eq(store_pg__backend_pid(s), 0, "the read-only connection was kept");
  store_close(s);
  store *rw = store_pg_open(pgx_url());
  cr_assert_not(stored(rw, &k));
  store_close(rw);
}

/* A trigger that refuses this test's tenant's writes with 25006, as a standby refuses all. */
static void refuse_writes(bool on) {
  char stmt[512];
  if (on) {
    snprintf(stmt, sizeof stmt,
             "CREATE OR REPLACE FUNCTION idem_test_ro_%d() RETURNS trigger LANGUAGE plpgsql AS"
             " $$BEGIN IF NEW.tenant = '%s' THEN RAISE EXCEPTION 'cannot execute INSERT in a"
             " read-only transaction' USING ERRCODE = '25006'; END IF; RETURN NEW; END$$",
             (int)getpid(), tenant);
    pgx_sql(NULL, stmt, 0, NULL);
    snprintf(stmt, sizeof stmt,
             "CREATE TRIGGER idem_test_ro_%d BEFORE INSERT OR UPDATE ON idem_steps FOR EACH ROW"
             " EXECUTE FUNCTION idem_test_ro_%d()",
             (int)getpid(), (int)getpid());
  } else {
    snprintf(
        stmt, sizeof stmt,
        "SET client_min_messages = warning; DROP TRIGGER IF EXISTS idem_test_ro_%d ON idem_steps;"
        " DROP FUNCTION IF EXISTS idem_test_ro_%d()",
        (int)getpid(), (int)getpid());
  }
  pgx_sql(NULL, stmt, 0, NULL);
}

static void no_trigger(void) {
  refuse_writes(false);
}

Test(store_failover, a_write_refused_as_read_only_drops_the_connection, .fini = no_trigger) {
  store *s = store_pg_open(pgx_url());
  err_t e;
  cr_assert_eq(store_ping(s, in_ms(2000), &e), ERR_OK, "%s", e.msg);
  int pid0 = store_pg__backend_pid(s);
  refuse_writes(true);
  step_key k = mkkey("g-25006");
  write_arg a = {0};
  cr_assert_eq(store_step_txn(s, &k, in_ms(2000), fn_write, &a, &e), ERR_UNAVAILABLE);
  cr_assert(strstr(e.msg, "read-only"), "msg: %s", e.msg);
  cr_assert_eq(a.calls, 2, "refused: run again once on a fresh connection (ran %d times)", a.calls);
  int pid1 = store_pg__backend_pid(s);
  cr_assert_neq(pid1, pid0, "the refusing connection was not dropped");
  cr_assert_eq(store_ping(s, in_ms(2000), &e), ERR_OK, "%s", e.msg);
  cr_assert_neq(store_pg__backend_pid(s), pid1, "the refusing connection was used again");
  refuse_writes(false);
  cr_assert_not(stored(s, &k));
  /* the same store writes once the server takes writes */
  cr_assert_eq(store_step_txn(s, &k, in_ms(2000), fn_write, &a, &e), ERR_OK, "%s", e.msg);
  cr_assert(stored(s, &k));
  store_close(s);
}

Test(store_failover, a_batch_refused_as_read_only_commits_nothing, .fini = no_trigger) {
  store_batcher_cfg bc = {.conninfo = pgx_url(), .conns = 1};
  err_t e;
  store_batcher *b = store_batcher_start(&bc, &e);
  cr_assert(b, "%s", e.msg);
  store *s = store_pg_open(pgx_url());
  store_pg_set_batcher(s, b);
  step_key k = mkkey("g-25006-batch");
  write_arg a = {0};
  cr_assert_eq(store_step_txn(s, &k, in_ms(2000), fn_write, &a, &e), ERR_OK, "%s", e.msg);
  refuse_writes(true);
  step_key k2 = mkkey("g-25006-batch-2");
  a.calls = 0;
  cr_assert_eq(store_step_txn(s, &k2, in_ms(2000), fn_write, &a, &e), ERR_UNAVAILABLE);
  cr_assert(strstr(e.msg, "read-only"), "msg: %s", e.msg);
  cr_assert_eq(a.calls, 2, "refused: run again once on a fresh connection (ran %d times)", a.calls);
  refuse_writes(false);
  cr_assert_not(stored(s, &k2));
  cr_assert_eq(store_step_txn(s, &k2, in_ms(2000), fn_write, &a, &e), ERR_OK, "%s", e.msg);
  cr_assert(stored(s, &k2));
  store_close(s);
  store_batcher_stop(b);
}

Test(store_failover, reconnects_back_off_within_the_deadline) {
  char url[128];
  snprintf(url, sizeof url, "postgresql://postgres@127.0.0.1:%d/idem_store", closed_port());
  store *s = store_pg_open(url);
  err_t e;
  int64_t t0 = clock_mono_ms();
  int calls = 0;
  /* every call answers UNAVAILABLE within its deadline; connects back off (not one per call) */
  while (clock_mono_ms() - t0 < 1000) {
    int64_t t = clock_mono_ms();
    cr_assert_eq(store_ping(s, t + 100, &e), ERR_UNAVAILABLE);
    int64_t took = clock_mono_ms() - t;
    H_EXPECT_TIMING(took < 150, "a call outlived its deadline of 100 ms: %lld ms", (long long)took);
    cr_assert(strncmp(e.msg, "store unavailable: ", 19) == 0 || strcmp(e.msg, "store timeout") == 0,
              "msg: %s", e.msg);
    calls++;
  }
  pg_store *ps = (pg_store *)s;
  cr_log_info("%d calls in 1 s, %d connects", calls, ps->connect_failures);
  cr_assert_leq(ps->connect_failures, 12, "%d connects in 1 s: no backoff", ps->connect_failures);
  store_close(s);
}
