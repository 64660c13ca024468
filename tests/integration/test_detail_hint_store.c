/* test_detail_hint_store.c — the store's hint on the wire (docs/api.md §5, "Trailers")
 * from a real coordinator over loopback gRPC: with the store's database refusing connections
 * (its sessions ended), an answer store-unavailable carries the store's hint as the trailer
 * idem-hint (and its detail, when it has one: only an answer given during the reconnect
 * backoff has), printable ASCII, and idemctl prints it as a HINT line. A file of its own: it
 * ends every session of its database (support/own-db gives each test binary one). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "harness.h"
#include "idem/v1/coordinator.pb-c.h"

TestSuite(detail_hint_store, .init = h_setup, .fini = h_teardown);

#define PG_HINT "check that PostgreSQL runs and that --pg names it"

/* The value of key in "key: value\n" lines, into out ("" when absent). */
static void trailer_of(const char *lines, const char *key, char *out, size_t cap) {
  out[0] = '\0';
  size_t kl = strlen(key);
  for (const char *p = lines; p && *p;) {
    const char *end = strchr(p, '\n');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n > kl + 2 && strncmp(p, key, kl) == 0 && p[kl] == ':' && p[kl + 1] == ' ') {
      snprintf(out, cap, "%.*s", (int)(n - kl - 2), p + kl + 2);
      return;
    }
    p = end ? end + 1 : NULL;
  }
}

static bool printable(const char *s) {
  for (; *s; s++)
    if (*s < 0x20 || *s > 0x7e) return false;
  return true;
}

/* The name of the coordinator's database (the test's own: support/own-db). */
static void own_db(char *out, size_t cap) {
  PGconn *c = pgx_connect(NULL);
  PGresult *r = pgx_run(c, "SELECT current_database()", 0, NULL);
  snprintf(out, cap, "%s", PQgetvalue(r, 0, 0));
  PQclear(r);
  PQfinish(c);
}

/* Refuses new connections to db and ends its sessions (on), or allows them again (off); c is a
 * connection of the test's own to another database, kept throughout. */
static void db_refuse(PGconn *c, const char *db, bool on) {
  char sql[200];
  snprintf(sql, sizeof sql, "ALTER DATABASE \"%s\" ALLOW_CONNECTIONS %s", db,
           on ? "false" : "true");
  PQclear(pgx_run(c, sql, 0, NULL));
  if (!on) return;
  const char *p[] = {db};
  PQclear(pgx_run(c,
                  "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                  "WHERE datname = $1 AND pid <> pg_backend_pid()",
                  1, p));
}

Test(detail_hint_store, a_store_that_refuses_connections_answers_with_its_hint,
     .timeout = 120) {
  char db[128], url[512], gid[96];
  own_db(db, sizeof db);
  pgx_url_for_db("postgres", url, sizeof url);
  PGconn *admin = pgx_connect(url);
  h_unique("dh-down", gid, sizeof gid);
  Idem__V1__GetSagaRequest req = IDEM__V1__GET_SAGA_REQUEST__INIT;
  req.global_id = gid;
  uint8_t buf[256];
  size_t len = idem__v1__get_saga_request__pack(&req, buf);

  db_refuse(admin, db, true);
  /* each worker's store finds its connection gone and cannot make a new one: it answers
   * store-unavailable with the hint to check PostgreSQL */
  char details[256], trailers[2048], reason[64] = "", detail[256] = "", hint[256] = "";
  int st = -1;
  for (int64_t until = h_now_ms() + 20000; h_now_ms() < until && !hint[0];) {
    h_raw_opts o = {.trailers = trailers, .trailers_len = sizeof trailers, .deadline_ms = 300};
    st = h_raw_call_opts(H.s.addr, "/idem.v1.Coordinator/GetSaga", H.t, buf, len, details,
                         sizeof details, &o);
    trailer_of(trailers, "idem-reason", reason, sizeof reason);
    trailer_of(trailers, "idem-detail", detail, sizeof detail);
    trailer_of(trailers, "idem-hint", hint, sizeof hint);
    if (!hint[0]) h_sleep_ms(20); /* the next try of the condition */
  }
  cr_expect_eq(st, 14 /* UNAVAILABLE */, "%d %s", st, details);
  cr_expect_str_eq(reason, "store-unavailable", "%s\n%s", details, trailers);
  cr_expect_str_eq(hint, PG_HINT, "trailers:\n%s", trailers);
  cr_expect(printable(detail) && printable(hint), "%s", trailers);

  /* idemctl shows it, PostgreSQL's way */
  h_ctl *r = calloc(1, sizeof *r);
  bool shown = false;
  for (int64_t until = h_now_ms() + 20000; !shown && h_now_ms() < until;) {
    h_idemctl(r, H.s.addr, H.t, "saga", gid, "--deadline-ms", "300", NULL);
    shown = strstr(r->err, "\nHINT:  " PG_HINT "\n") != NULL;
    if (!shown) h_sleep_ms(20); /* the next try of the condition */
  }
  cr_expect(shown, "idemctl saga: exit %d\n%s", r->status, r->err);
  cr_expect_eq(r->status, 3, "unavailable: exit 3\n%s", r->err);
  free(r);

  db_refuse(admin, db, false);
  PQfinish(admin);
  /* the store comes back: the call answers again (not found: the saga was never begun) */
  st = -1;
  for (int64_t until = h_now_ms() + 20000; h_now_ms() < until && st != 5;) {
    h_raw_opts o = {.trailers = trailers, .trailers_len = sizeof trailers};
    st = h_raw_call_opts(H.s.addr, "/idem.v1.Coordinator/GetSaga", H.t, buf, len, details,
                         sizeof details, &o);
    if (st != 5) h_sleep_ms(20); /* the next try of the condition */
  }
  cr_expect_eq(st, 5 /* NOT_FOUND */, "%d %s", st, details);
}
