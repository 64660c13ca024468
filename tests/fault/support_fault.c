#include "fault.h"

#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The server part of $IDEM_TEST_PG_URL with another database name. */
static void url_for_db(const char *db, char *out, size_t n) {
  const char *base = h_env("IDEM_TEST_PG_URL");
  const char *q = strchr(base, '?');
  size_t blen = q ? (size_t)(q - base) : strlen(base);
  const char *slash = NULL;
  for (const char *p = base + strlen("postgresql://"); p < base + blen; p++)
    if (*p == '/') slash = p;
  cr_assert(slash, "cannot find the database name in IDEM_TEST_PG_URL");
  snprintf(out, n, "%.*s/%s%s", (int)(slash - base), base, db, q ? q : "");
}

static void admin_sql(const char *sql) {
  PGconn *c = PQconnectdb(h_env("IDEM_TEST_PG_URL"));
  cr_assert(PQstatus(c) == CONNECTION_OK, "postgres: %s", PQerrorMessage(c));
  PGresult *r = PQexec(c, sql);
  cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql, PQerrorMessage(c));
  PQclear(r);
  PQfinish(c);
}

long long f_sql_int(cluster *cl, const char *sql) {
  PGconn *c = PQconnectdb(cl->pg_url);
  cr_assert(PQstatus(c) == CONNECTION_OK, "postgres: %s", PQerrorMessage(c));
  PGresult *r = PQexec(c, sql);
  cr_assert(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
  long long v = PQntuples(r) > 0 ? atoll(PQgetvalue(r, 0, 0)) : -1;
  PQclear(r);
  PQfinish(c);
  return v;
}

static void node_start(cluster *cl, int i) {
  char name[16], ttl[8];
  snprintf(name, sizeof name, "n%d", i + 1);
  snprintf(ttl, sizeof ttl, "%d", F_TTL);
  const char *args[] = {"--etcd", cl->etcd.url, "--node-id", name, "--election-ttl", ttl,
                        "--reaper-interval", "0", "--election-prefix", "/idem-fault/leader",
                        NULL};
  h_srv_start(&cl->nodes[i], cl->pg_url, args);
  cl->up[i] = true;
  cl->status_c[i] = f_client(cl, i, NULL, 1000);
}

static cluster *live; /* stopped by f_fini when a test ends early (a failed assertion) */

void f_fini(void) {
  if (live) f_cluster_stop(live);
}

void f_cluster_start(cluster *cl, int n) {
  memset(cl, 0, sizeof *cl);
  live = cl;
  cr_assert(n >= 1 && n <= F_MAX_NODES);
  etcd_start(&cl->etcd);
  char tag[64];
  h_unique("f", tag, sizeof tag);
  snprintf(cl->db, sizeof cl->db, "idem_fault_%.40s", tag + 2);
  for (char *p = cl->db; *p; p++)
    if (*p == '-') *p = '_';
  char sql[160];
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", cl->db);
  admin_sql(sql);
  url_for_db(cl->db, cl->pg_url, sizeof cl->pg_url);
  cl->n = n;
  node_start(cl, 0);
  cr_assert_eq(f_wait_leader(cl, -1, 10000, NULL), 0, "the first node did not lead");
  for (int i = 1; i < n; i++) node_start(cl, i);
  cl->all_addrs[0] = '\0';
  for (int i = 0; i < n; i++) {
    if (i) strcat(cl->all_addrs, ",");
    strcat(cl->all_addrs, cl->nodes[i].addr);
  }
}

void f_cluster_stop(cluster *cl) {
  live = NULL;
  for (int i = 0; i < cl->n; i++)
    if (cl->up[i]) {
      if (cl->nodes[i].pid) kill(cl->nodes[i].pid, SIGCONT);
      h_srv_stop(&cl->nodes[i]);
      cl->up[i] = false;
    }
  for (int i = 0; i < cl->n; i++) {
    idem_close(cl->status_c[i]);
    cl->status_c[i] = NULL;
  }
  etcd_stop(&cl->etcd);
  if (cl->db[0]) {
    char sql[160];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", cl->db);
    admin_sql(sql);
  }
}

idem_client *f_client(cluster *cl, int i, const char *tenant, int64_t deadline_ms) {
  idem_options o = {.address = i >= 0 ? cl->nodes[i].addr : cl->all_addrs,
                    .tenant = tenant,
                    .deadline_ms = deadline_ms};
  idem_client *c = NULL;
  idem_error e = {0};
  cr_assert_eq(idem_connect(&o, &c, &e), IDEM_OK, "idem_connect: %s", e.message);
  return c;
}

bool f_status(cluster *cl, int i, idem_status *st) {
  memset(st, 0, sizeof *st);
  if (!cl->up[i]) return false;
  idem_error e = {0};
  return idem_get_status(cl->status_c[i], st, &e) == IDEM_OK;
}

/* One round of GetStatus over every node but skip (-1: none; a node being stopped would hold
 * each round up for its whole deadline). */
static int leader_now(cluster *cl, int skip, uint64_t *epoch) {
  int who = -1;
  for (int i = 0; i < cl->n; i++) {
    idem_status st;
    if (i == skip) continue;
    if (f_status(cl, i, &st) && st.leader) {
      cr_assert_eq(who, -1, "two nodes say they lead");
      who = i;
      if (epoch) *epoch = st.epoch;
    }
  }
  return who;
}

int f_leader(cluster *cl, uint64_t *epoch) {
  return f_wait_leader(cl, -1, 3000, epoch);
}

int f_wait_leader(cluster *cl, int not, int64_t within_ms, uint64_t *epoch) {
  int64_t until = h_now_ms() + within_ms;
  for (;;) {
    int who = leader_now(cl, not, epoch);
    if (who >= 0 && who != not) return who;
    if (h_now_ms() > until) return -1;
    h_sleep_ms(10);
  }
}

void f_kill(cluster *cl, int i) {
  spawn_kill(cl->nodes[i].pid);
  cl->nodes[i].pid = 0;
  cl->up[i] = false;
}

void f_signal(cluster *cl, int i, int sig) {
  kill(cl->nodes[i].pid, sig);
}

int f_pair(idem_client *c, const char *gid, idem_error *e) {
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  idem_begin b = {0};
  int rc = idem_step_begin(c, &k, NULL, 0, 0, &b, e);
  if (rc != IDEM_OK) return rc;
  uint64_t attempt = b.attempt;
  idem_decision d = b.decision;
  idem_begin_clear(&b);
  if (d != IDEM_DECISION_PROCEED) return IDEM_FAILED_PRECONDITION;
  return idem_step_complete(c, &k, attempt, IDEM_OUTCOME_SUCCEEDED, 200, "ok", 2, NULL, e);
}
