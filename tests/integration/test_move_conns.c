/* test_move_conns.c — what a move of slots costs in connections (docs/api.md §18;
 * docs/scaling-out.md "How a move works"): slots 0-15 move from g1 to g2 while clients run pairs
 * on g1, and the connections are counted from outside the nodes, every 20 ms from before the
 * request until the move has ended:
 *  - etcd: every socket to the cluster's private etcd (only the two nodes talk to it), in any
 *    state, so that a connection opened and closed between two looks still shows (TIME-WAIT);
 *    the move may add at most 2 per node to those the nodes held before it (the design: none,
 *    the nodes' one etcd client and their watch are open already);
 *  - PostgreSQL: the backends with application_name idem-move (a move session's) in the
 *    cluster's two databases, per node (their client ports matched to the node's sockets): at
 *    most 2 distinct backends per node for the whole move, one per store (the driver's session;
 *    the asking node's checks).
 * The driver holds 4 s once subscribed (IDEM_TEST_MOVE_HOLD), its session open: long enough for
 * more than 10 looks on a machine so loaded that one look (three `ss` runs and a query) takes
 * 150 ms (1.5 s was not, at a load average of 19). The counts are printed (cr_log_info) with the
 * move's duration. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "groups.h"
#include "harness.h"
#include "idem/v1/coordinator.pb-c.h"
#include "moves.h"
#include "pgexec.h"

#define FROM 0
#define TO 15
#define PORTS_MAX 512

typedef struct port_set {
  int port[PORTS_MAX];
  int n;
} port_set;

static bool set_add(port_set *s, int port) {
  for (int i = 0; i < s->n; i++)
    if (s->port[i] == port) return false;
  if (s->n < PORTS_MAX) s->port[s->n++] = port;
  return true;
}

static bool set_has(const port_set *s, int port) {
  for (int i = 0; i < s->n; i++)
    if (s->port[i] == port) return true;
  return false;
}

/* The local ports of sockets to 127.0.0.1:dport in any state (-a), into out; with pid > 0 only
 * that process's (ESTAB and the like: ss names the process). */
static void sockets_to(int dport, pid_t pid, port_set *out) {
  char cmd[128], want[32], line[1024];
  snprintf(cmd, sizeof cmd, "ss -Htanp '( dport = :%d )'", dport);
  snprintf(want, sizeof want, "pid=%d,", (int)pid);
  FILE *p = popen(cmd, "r");
  cr_assert(p, "ss runs");
  while (fgets(line, sizeof line, p)) {
    if (pid > 0 && !strstr(line, want)) continue;
    char state[32], local[96];
    long rq, sq;
    if (sscanf(line, "%31s %ld %ld %95s", state, &rq, &sq, local) != 4) continue;
    const char *colon = strrchr(local, ':');
    if (colon) set_add(out, atoi(colon + 1));
  }
  pclose(p);
}

/* The PostgreSQL server's port, from the cluster's first database's URL. */
static int pg_port(const h_groups *cl) {
  const char *at = strrchr(cl->url[0], ':');
  return at ? atoi(at + 1) : 0;
}

Test(move_conns, a_move_holds_two_postgres_and_no_new_etcd_connections_per_node, .timeout = 180) {
  h_groups cl;
  /* the driver holds 4 s once subscribed: the move lasts long enough to be looked at often */
  h_groups_start_env(&cl, (const char *[]){"IDEM_TEST_MOVE_HOLD=copying:4000", NULL});
  h_groups_wait_balanced(&cl, NULL);
  traffic T = {0};
  pthread_t th;
  int driver = h_move_under_load(&cl, &T, &th), other = 1 - driver;
  int etcd_port = cl.etcd.client_port, pgp = pg_port(&cl);
  cr_assert_gt(pgp, 0, "the test Postgres's port from %s", cl.url[0]);

  /* before: the sockets the nodes hold to etcd (elections, the etcd client, the watch) */
  port_set before = {0}, during = {0};
  sockets_to(etcd_port, 0, &before);
  cr_assert_gt(before.n, 0, "the nodes talk to etcd");

  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT coalesce(string_agg(pid::text || ':' || client_port::text, ','), '') FROM "
           "pg_stat_activity WHERE application_name = 'idem-move' AND datname IN ('%s', '%s')",
           cl.db[0], cl.db[1]);
  port_set backends[2]; /* per node: the distinct idem-move backends' pids */
  memset(backends, 0, sizeof backends);
  int unattributed = 0, most_at_once = 0;
  h_bg_move m = {.cl = &cl, .at = other, .from = FROM, .to = TO, .group = "g2", .rid = "conns"};
  int64_t t0 = h_now_ms();
  h_bg_move_start(&m);
  PGconn *pg = pgx_connect(cl.url[0]);
  int samples = 0;
  while (!atomic_load(&m.done) && h_now_ms() - t0 < 120000) {
    sockets_to(etcd_port, 0, &during);
    PGresult *r = PQexec(pg, sql);
    cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(pg));
    char *list = strdup(PQgetvalue(r, 0, 0));
    PQclear(r);
    port_set node_ports[2];
    memset(node_ports, 0, sizeof node_ports);
    sockets_to(pgp, cl.node[0].pid, &node_ports[0]);
    sockets_to(pgp, cl.node[1].pid, &node_ports[1]);
    int now = 0;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
      int pid = atoi(tok), cport = atoi(strchr(tok, ':') ? strchr(tok, ':') + 1 : "0");
      now++;
      if (set_has(&node_ports[0], cport))
        set_add(&backends[0], pid);
      else if (set_has(&node_ports[1], cport))
        set_add(&backends[1], pid);
      else
        unattributed++; /* gone between the two looks */
    }
    free(list);
    if (now > most_at_once) most_at_once = now;
    samples++;
    h_sleep_ms(20); /* not a wait: a sample every 20 ms while the move runs */
  }
  PQfinish(pg);
  h_bg_move_join(&m);
  int64_t took = h_now_ms() - t0;
  atomic_store(&T.stop, true);
  pthread_join(th, NULL);
  cr_assert_eq(m.a.status, 0, "the move finished: %d %s", m.a.status, m.a.details);
  int added = 0;
  for (int i = 0; i < during.n; i++)
    if (!set_has(&before, during.port[i])) added++;
  cr_log_info("move of slots %d-%d: %lld ms, %d samples; etcd sockets before %d, new during the "
              "move %d (any state); idem-move backends: driver %d, other node %d, at most %d at "
              "once, %d unattributed",
              FROM, TO, (long long)took, samples, before.n, added, backends[driver].n,
              backends[other].n, most_at_once, unattributed);
  cr_expect_gt(samples, 10, "the move was looked at while it ran: %d looks in %lld ms", samples,
               (long long)took);
  cr_expect_leq(added, 2 * 2, "at most 2 new etcd connections per node for the move");
  cr_expect_gt(backends[driver].n, 0, "the driver's session shows in pg_stat_activity");
  cr_expect_leq(backends[driver].n, 2, "the driver: one backend per store for the whole move");
  cr_expect_leq(backends[other].n, 2, "the asking node: one backend per store");
  cr_expect_leq(most_at_once, 4, "never more than 2 per node at once");
  cr_expect_eq(atomic_load(&T.dup_proceed), 0);
  cr_expect_eq(h_lost_results(&cl, &T), 0, "every acknowledged completion replays its body");
  free(T.acked);
  h_groups_stop(&cl);
}
