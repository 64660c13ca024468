#include "fault.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void node_start(cluster *cl, int i) {
  char name[16], ttl[8], metrics[32];
  snprintf(name, sizeof name, "n%d", i + 1);
  snprintf(ttl, sizeof ttl, "%d", F_TTL);
  cl->mport[i] = h_free_port();
  snprintf(metrics, sizeof metrics, "127.0.0.1:%d", cl->mport[i]);
  const char *args[] = {"--etcd", cl->etcd.url, "--node-id", name, "--election-ttl", ttl,
                        "--reaper-interval", "0", "--election-prefix", "/idem-fault/leader",
                        "--metrics", metrics, NULL};
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
  pgx_db_create("idem_fault", cl->db, sizeof cl->db, cl->pg_url, sizeof cl->pg_url);
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
  pgx_db_drop(cl->db);
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
  int who = -1;
  bool led;
  H_WAITED(led, (who = leader_now(cl, not, epoch)) >= 0 && who != not, within_ms);
  return led ? who : -1;
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
