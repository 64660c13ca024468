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
  h_raw_opts o = {.trailers = trailers, .trailers_len = sizeof trailers, .deadline_ms = 300};
  H_WAIT((st = h_raw_call_opts(H.s.addr, "/idem.v1.Coordinator/GetSaga", H.t, buf, len, details,
                               sizeof details, &o),
          h_trailer_of(trailers, "idem-hint", hint, sizeof hint), hint[0] != '\0'),
         20000, "GetSaga answers with an idem-hint: %d %s\n%s", st, details, trailers);
  h_trailer_of(trailers, "idem-reason", reason, sizeof reason);
  h_trailer_of(trailers, "idem-detail", detail, sizeof detail);
  cr_expect_eq(st, 14 /* UNAVAILABLE */, "%d %s", st, details);
  cr_expect_str_eq(reason, "store-unavailable", "%s\n%s", details, trailers);
  cr_expect_str_eq(hint, PG_HINT, "trailers:\n%s", trailers);
  cr_expect(printable(detail) && printable(hint), "%s", trailers);

  /* idemctl shows it, PostgreSQL's way */
  h_ctl *r = calloc(1, sizeof *r);
  H_WAIT((h_idemctl(r, H.s.addr, H.t, "saga", gid, "--deadline-ms", "300", NULL),
          strstr(r->err, "\nHINT:  " PG_HINT "\n") != NULL),
         20000, "idemctl saga prints the HINT line: exit %d\n%s", r->status, r->err);
  cr_expect_eq(r->status, 3, "unavailable: exit 3\n%s", r->err);
  free(r);

  db_refuse(admin, db, false);
  PQfinish(admin);
  /* the store comes back: the call answers again (not found: the saga was never begun) */
  st = -1;
  o = (h_raw_opts){.trailers = trailers, .trailers_len = sizeof trailers};
  H_WAIT((st = h_raw_call_opts(H.s.addr, "/idem.v1.Coordinator/GetSaga", H.t, buf, len, details,
                               sizeof details, &o)) == 5 /* NOT_FOUND */,
         20000, "GetSaga answers NOT_FOUND again once the store is back: %d %s", st, details);
}
