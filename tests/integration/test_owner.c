/* test_owner.c — one cluster per database (docs/operations.md "One cluster per database"): a
 * node of another cluster refuses to start, within 5 s and before it disturbs anything (the
 * owning cluster, under load, fails no call); --take-over takes a database over on purpose,
 * audited, and refuses bad input naming it; nodes without etcd share a database as before but not
 * with a cluster elected through etcd. Real PostgreSQL, real etcd (two of them: two clusters),
 * real gRPC. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "util/clock.h"

#define TTL "2"

static etcd_proc E1, E2;             /* the owning cluster's etcd, the other cluster's */
static char DB[64], URL[256];        /* the database under test */
static char DB2[64], URL2[256];      /* a second one, where needed */
static char LOG[128];                /* a refused node's log */

static void setup(void) {
  char tag[64];
  h_unique("owner", tag, sizeof tag);
  snprintf(LOG, sizeof LOG, "/tmp/idem-%s.log", tag);
  pgx_db_create("idem_owner", DB, sizeof DB, URL, sizeof URL);
  DB2[0] = '\0';
}

static void teardown(void) {
  etcd_stop(&E1);
  etcd_stop(&E2);
  pgx_db_drop(DB);
  pgx_db_drop(DB2);
  unlink(LOG);
}

TestSuite(owner, .init = setup, .fini = teardown, .timeout = 120);

static void read_log(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
  buf[n] = '\0';
  if (f) fclose(f);
}

/* A node of the cluster elected through e (NULL: no etcd) on url, started and answering. */
static void node_up(srv *s, const char *url, const etcd_proc *e, const char *name,
                    const char *take_over) {
  const char *args[16];
  int n = 0;
  if (e) {
    args[n++] = "--etcd";
    args[n++] = e->url;
    args[n++] = "--election-ttl";
    args[n++] = TTL;
  }
  args[n++] = "--node-id";
  args[n++] = name;
  args[n++] = "--reaper-interval";
  args[n++] = "0";
  if (take_over) {
    args[n++] = "--take-over";
    args[n++] = take_over;
  }
  args[n] = NULL;
  h_srv_start(s, url, args);
}

/* A node started with extra args that is expected to exit by itself: its status within
 * limit_ms (-1: still running after it, killed), its log in LOG. */
static int node_exit(const char *url, const etcd_proc *e, const char *const *extra,
                     int64_t limit_ms, int64_t *took_ms) {
  const char *argv[32];
  int n = 0;
  argv[n++] = h_env("IDEM_COORDINATOR_BIN");
  argv[n++] = "--pg";
  argv[n++] = url;
  argv[n++] = "--listen";
  argv[n++] = "127.0.0.1:0";
  argv[n++] = "--reaper-interval";
  argv[n++] = "0";
  if (e) {
    argv[n++] = "--etcd";
    argv[n++] = e->url;
    argv[n++] = "--advertise";
    argv[n++] = "127.0.0.1:1";
    argv[n++] = "--election-ttl";
    argv[n++] = TTL;
  }
  for (int i = 0; extra && extra[i] && n < 31; i++) argv[n++] = extra[i];
  argv[n] = NULL;
  int64_t t0 = clock_mono_ms();
  int status = spawn_run(argv, &(spawn_opts){.log = LOG}, limit_ms);
  *took_ms = clock_mono_ms() - t0;
  return status;
}

/* Waits until s answers GetStatus as the leader (10 s). */
static void wait_leading(const srv *s) {
  idem_client *c = h_client(s, NULL, 1000);
  idem_status st = {0};
  idem_error e = {0};
  H_WAIT(idem_get_status(c, &st, &e) == IDEM_OK && st.leader, 10000, "%s leads", s->addr);
  idem_close(c);
}

/* The text of one value the database records (the first column of the first row). */
static void sql_text(const char *url, const char *sql, char *out, size_t cap) {
  PGconn *c = pgx_connect(url);
  PGresult *r = pgx_run(c, sql, 0, NULL);
  snprintf(out, cap, "%s", PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
  PQclear(r);
  PQfinish(c);
}

/* BeginStep + CompleteStep on fresh keys until stop, counting answers and failures. */
typedef struct load {
  const srv *s;
  atomic_bool stop;
  atomic_long ok, failed;
  char first_failure[512];
  pthread_t th;
} load;

static void *load_run(void *arg) {
  load *l = arg;
  char tenant[64];
  h_tenant(tenant);
  idem_client *c = h_client(l->s, tenant, 3000);
  for (long i = 0; !atomic_load(&l->stop); i++) {
    char gid[64];
    snprintf(gid, sizeof gid, "owner-load-%ld", i);
    idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
    idem_begin b = {0};
    idem_error e = {0};
    int rc = idem_step_begin(c, &k, NULL, 0, 0, &b, &e);
    uint64_t attempt = b.attempt;
    bool proceed = rc == IDEM_OK && b.decision == IDEM_DECISION_PROCEED;
    idem_begin_clear(&b);
    if (rc == IDEM_OK && proceed)
      rc = idem_step_complete(c, &k, attempt, IDEM_OUTCOME_SUCCEEDED, 200, "ok", 2, NULL, &e);
    else if (rc == IDEM_OK)
      rc = IDEM_FAILED_PRECONDITION;
    if (rc == IDEM_OK) {
      atomic_fetch_add(&l->ok, 1);
    } else if (atomic_fetch_add(&l->failed, 1) == 0) {
      snprintf(l->first_failure, sizeof l->first_failure, "%s: code %d %s", gid, rc, e.message);
    }
  }
  idem_close(c);
  return NULL;
}

static void load_start(load *l, const srv *s) {
  memset(l, 0, sizeof *l);
  l->s = s;
  cr_assert_eq(pthread_create(&l->th, NULL, load_run, l), 0);
}

static void load_wait_ok(load *l, long at_least) {
  H_WAIT(atomic_load(&l->ok) >= at_least, 10000, "the load made %ld pairs of %ld",
         atomic_load(&l->ok), at_least);
}

static void load_stop(load *l) {
  atomic_store(&l->stop, true);
  pthread_join(l->th, NULL);
}

/* The cluster id the database at url records as its owner ("" when none). */
static void recorded_id(const char *url, char *out, size_t cap) {
  sql_text(url, "SELECT cluster_id FROM idem_owner", out, cap);
}

/* One BeginStep through s (a new step: PROCEED), so that its store connections are open. */
static void one_step(const srv *s, const char *gid) {
  idem_client *c = h_client(s, NULL, 3000);
  idem_step_key k = {gid, "payment", "charge", IDEM_FORWARD};
  idem_begin bg = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 0, &bg, &e), IDEM_OK, "%s: %s", s->addr,
               e.message);
  cr_assert_eq(bg.decision, IDEM_DECISION_PROCEED, "%s", s->addr);
  idem_begin_clear(&bg);
  idem_close(c);
}

/* A node of another cluster (its own etcd) on the owner's database, while the owner serves
 * under load: it exits 2 within 5 s naming both clusters and the takeover step; the owner's
 * calls all succeed, and the database still records the owner and its fence. */
Test(owner, foreign_cluster_refused_owner_undisturbed) {
  etcd_start(&E1);
  etcd_start(&E2);
  srv a = {0};
  node_up(&a, URL, &E1, "prod-1", NULL);
  wait_leading(&a);
  char owner_id[64], fence_before[32], fence_after[32], text[16384];
  sql_text(URL, "SELECT epoch FROM idem_fence", fence_before, sizeof fence_before);

  load l;
  load_start(&l, &a);
  load_wait_ok(&l, 200);
  long ok_before = atomic_load(&l.ok);
  const char *extra[] = {"--node-id", "staging-1", NULL};
  int64_t took = 0;
  int status = node_exit(URL, &E2, extra, 5000, &took);
  read_log(LOG, text, sizeof text);
  /* the owner keeps serving after the refusal too */
  load_wait_ok(&l, atomic_load(&l.ok) + 200);
  load_stop(&l);
  printf("foreign node: exit %d after %lld ms; owner's load: %ld pairs ok (%ld during the "
         "refused start and after), %ld failed\n",
         status, (long long)took, atomic_load(&l.ok), atomic_load(&l.ok) - ok_before,
         atomic_load(&l.failed));
  cr_assert_eq(status, 2, "the foreign node: exit %d after %lld ms:\n%s", status,
               (long long)took, text);
  cr_assert_lt(took, 5000);
  cr_assert_eq(atomic_load(&l.failed), 0, "%ld of the owner's calls failed; the first: %s",
               atomic_load(&l.failed), l.first_failure);
  sql_text(URL, "SELECT epoch FROM idem_fence", fence_after, sizeof fence_after);
  cr_assert_str_eq(fence_after, fence_before, "the foreign node moved the fence");
  recorded_id(URL, owner_id, sizeof owner_id);
  cr_assert_eq(strlen(owner_id), 36, "the database records no cluster id: \"%s\"", owner_id);
  cr_assert(strstr(text, "belongs to another cluster"), "%s", text);
  cr_assert(strstr(text, owner_id), "the owner's id %s is not named:\n%s", owner_id, text);
  cr_assert(strstr(text, "prod-1"), "the owner's node is not named:\n%s", text);
  cr_assert(strstr(text, E2.url), "this node's cluster (its etcd) is not named:\n%s", text);
  char takeover[128];
  snprintf(takeover, sizeof takeover, "--take-over %s", owner_id);
  cr_assert(strstr(text, takeover), "the takeover step is not named:\n%s", text);
  char still[64];
  recorded_id(URL, still, sizeof still);
  cr_assert_str_eq(still, owner_id);
  cr_assert_eq(pgx_sql(URL, "SELECT count(*) FROM idem_owner_audit", 0, NULL), 1,
               "only the owner's claim is audited");
  cr_assert_eq(h_srv_stop(&a), 0);
}

/* --take-over: bad values named (exit 2, nothing written), refused while the owner's nodes are
 * connected, then one explicit step that records who/when/from what and lets the new cluster
 * lead; the former owner is then the foreign one. */
Test(owner, take_over_is_explicit_and_audited) {
  etcd_start(&E1);
  etcd_start(&E2);
  srv a = {0}, b = {0};
  node_up(&a, URL, &E1, "old-1", NULL);
  wait_leading(&a);
  one_step(&a, "owner-before-takeover");
  char old_id[64], text[16384];
  int64_t took = 0;

  struct {
    const char *value, *expect;
  } bad[] = {
      {"not-a-cluster", "--take-over not-a-cluster: expected the id of the cluster"},
      {"0193b5c2-7e1d-7000-8000-00000000000", "--take-over 0193b5c2-7e1d-7000-8000-00000000000:"},
      {"", "--take-over: expected the id of the cluster a database is recorded for"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *extra[] = {"--node-id", "new-1", "--take-over", bad[i].value, NULL};
    int status = node_exit(URL, &E2, extra, 5000, &took);
    read_log(LOG, text, sizeof text);
    cr_assert_eq(status, 2, "--take-over '%s': exit %d:\n%s", bad[i].value, status, text);
    cr_assert(strstr(text, bad[i].expect), "--take-over '%s':\n%s", bad[i].value, text);
  }
  { /* no value at all */
    const char *extra[] = {"--node-id", "new-1", "--take-over", NULL};
    int status = node_exit(URL, &E2, extra, 5000, &took);
    read_log(LOG, text, sizeof text);
    cr_assert_eq(status, 2, "--take-over without a value: exit %d:\n%s", status, text);
    cr_assert(strstr(text, "--take-over: unknown option or missing value"), "%s", text);
  }
  recorded_id(URL, old_id, sizeof old_id);
  { /* a well-formed id that does not own the database */
    const char *other = "0193b5c2-7e1d-7000-8000-000000000001";
    const char *extra[] = {"--node-id", "new-1", "--take-over", other, NULL};
    int status = node_exit(URL, &E2, extra, 5000, &took);
    read_log(LOG, text, sizeof text);
    cr_assert_eq(status, 2, "exit %d:\n%s", status, text);
    cr_assert(strstr(text, "does not belong to cluster 0193b5c2-7e1d-7000-8000-000000000001"),
              "%s", text);
    cr_assert(strstr(text, old_id), "the owner is not named:\n%s", text);
  }
  { /* the right id while the owner still runs: refused, it would end the owner's calls */
    const char *extra[] = {"--node-id", "new-1", "--take-over", old_id, NULL};
    int status = node_exit(URL, &E2, extra, 5000, &took);
    read_log(LOG, text, sizeof text);
    cr_assert_eq(status, 2, "exit %d:\n%s", status, text);
    cr_assert(strstr(text, "stop every node of the owner before taking it over"), "%s", text);
  }
  cr_assert_eq(pgx_sql(URL, "SELECT count(*) FROM idem_owner_audit", 0, NULL), 1,
               "a refused takeover wrote an audit row");
  char still[64];
  recorded_id(URL, still, sizeof still);
  cr_assert_str_eq(still, old_id, "a refused takeover changed the owner");
  cr_assert_eq(h_srv_stop(&a), 0);

  /* the step itself */
  node_up(&b, URL, &E2, "new-1", old_id);
  wait_leading(&b);
  cr_assert(h_log_count(b.log_path, "took the database over") == 1, "no takeover logged");
  char new_id[64], row[1024];
  recorded_id(URL, new_id, sizeof new_id);
  cr_assert_neq(strcmp(new_id, old_id), 0);
  sql_text(URL,
           "SELECT concat_ws('|', action, cluster_id, group_name, from_cluster_id, from_group,"
           " from_node, actor, (at_ms > 0)::text) FROM idem_owner_audit WHERE action = 'take-over'",
           row, sizeof row);
  printf("the takeover's audit row: %s\n", row);
  char expect[512];
  snprintf(expect, sizeof expect, "take-over|%s|default|%s|default|old-1|node new-1 (user ",
           new_id, old_id);
  cr_assert(strncmp(row, expect, strlen(expect)) == 0, "audit row %s, expected %s...", row,
            expect);
  cr_assert(strstr(row, "|true"), "%s", row);
  one_step(&b, "owner-after-takeover"); /* it serves */
  cr_assert_eq(h_srv_stop(&b), 0);

  /* the former owner is now the foreign one */
  const char *extra[] = {"--node-id", "old-1", NULL};
  int status = node_exit(URL, &E1, extra, 5000, &took);
  read_log(LOG, text, sizeof text);
  cr_assert_eq(status, 2, "the former owner: exit %d:\n%s", status, text);
  cr_assert(strstr(text, new_id), "%s", text);
  /* the flag left in place has no effect on the next start */
  node_up(&b, URL, &E2, "new-1", old_id);
  cr_assert(h_log_count(b.log_path, "--take-over has no effect") == 1, "no note of the flag");
  cr_assert_eq(pgx_sql(URL, "SELECT count(*) FROM idem_owner_audit", 0, NULL), 2);
  cr_assert_eq(h_srv_stop(&b), 0);
}

/* Nodes without etcd: two on one database serve side by side (as before), the database records
 * "standalone"; a node elected through etcd refuses it (its fence would end their transactions),
 * and a node without etcd refuses a database an etcd cluster owns. */
Test(owner, standalone_nodes_share_but_not_with_a_cluster) {
  etcd_start(&E1);
  srv s1 = {0}, s2 = {0};
  node_up(&s1, URL, NULL, "solo-1", NULL);
  node_up(&s2, URL, NULL, "solo-2", NULL);
  char id[64], text[16384];
  one_step(&s1, "owner-solo-1");
  one_step(&s2, "owner-solo-2");
  int64_t took = 0;
  const char *extra[] = {"--node-id", "ha-1", NULL};
  int status = node_exit(URL, &E1, extra, 5000, &took);
  read_log(LOG, text, sizeof text);
  cr_assert_eq(status, 2, "an etcd node on the standalone nodes' database: exit %d:\n%s", status,
               text);
  one_step(&s1, "owner-solo-3"); /* they still serve */
  sql_text(URL, "SELECT cluster_id FROM idem_owner", id, sizeof id);
  cr_assert_str_eq(id, "standalone");
  cr_assert(strstr(text, "standalone nodes (no etcd, group default"), "%s", text);
  cr_assert(strstr(text, "--take-over standalone"), "%s", text);
  cr_assert_eq(h_srv_stop(&s1), 0);
  cr_assert_eq(h_srv_stop(&s2), 0);

  /* a database an etcd cluster owns refuses a node without etcd */
  pgx_db_create("idem_owner2", DB2, sizeof DB2, URL2, sizeof URL2);
  srv a = {0};
  node_up(&a, URL2, &E1, "ha-2", NULL);
  wait_leading(&a);
  char owner_id[64];
  sql_text(URL2, "SELECT cluster_id FROM idem_owner", owner_id, sizeof owner_id);
  const char *solo[] = {"--node-id", "solo-3", NULL};
  status = node_exit(URL2, NULL, solo, 5000, &took);
  read_log(LOG, text, sizeof text);
  cr_assert_eq(status, 2, "a node without etcd on a cluster's database: exit %d:\n%s", status,
               text);
  cr_assert(strstr(text, owner_id), "%s", text);
  cr_assert(strstr(text, "this node is of standalone nodes"), "%s", text);
  cr_assert_eq(h_srv_stop(&a), 0);
}
