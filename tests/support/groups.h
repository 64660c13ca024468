/* groups.h — a two-group cluster for tests of slot groups (docs/api.md §17): two store groups
 * g1 and g2 (a database each on the test Postgres, pgx_db_create), two coordinators elected
 * through a private etcd, --slots H_GROUPS_SLOTS (g1 serves 0-31, g2 32-63: equal ranges in
 * the order named). The slot function is computed here independently of the server and of
 * libidem (FNV-1a 64 by hand), so a test of either can compare against it. */
#ifndef IDEM_TEST_GROUPS_H
#define IDEM_TEST_GROUPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

#define H_GROUPS_SLOTS 64
#define H_GROUPS_TTL_S 2

typedef struct h_groups {
  etcd_proc etcd;
  char db[2][64], url[2][256];
  char store[2][300]; /* "g1=URL", "g2=URL": the --store arguments */
  srv node[2];
  int mport[2]; /* each node's --metrics port */
  bool console; /* each node serves the console (development mode) on cport[i] */
  int cport[2];
  char t[64]; /* a fresh tenant */
  char extra[300]; /* one more --store argument ("g3=URL") nodes start with; "" = none */
  const char *env[4]; /* NULL-terminated "K=V" the nodes start with (none when env[0] NULL) */
} h_groups;

/* fnv1a64(tenant + "\0" + id) mod H_GROUPS_SLOTS, and the group (0 = g1, 1 = g2) serving it. */
uint32_t h_groups_slot_of(const char *tenant, const char *id);
int h_groups_group_of(const char *tenant, const char *id);
/* "tag-N" for the first N whose id is in group g. */
void h_groups_id_in_group(const char *tenant, int g, const char *tag, char *out, size_t cap);

/* Starts etcd, makes the two databases and starts both nodes (with console, each with --console
 * on a free port). Fails the test on error. */
void h_groups_start(h_groups *cl, bool console);
/* h_groups_start without the console, the nodes started with env ("K=V", NULL-terminated, at
 * most 3, kept for restarts). */
void h_groups_start_env(h_groups *cl, const char *const *env);
/* h_groups_start_env with urls[g] (when not NULL) as group g's database instead of one made on
 * the test Postgres (and left alone at stop). */
void h_groups_start_on(h_groups *cl, const char *const *env, const char *const *urls);
/* (Re)starts node i with the cluster's arguments. */
void h_groups_node_start(h_groups *cl, int i);
/* Stops the nodes still running (each must exit 0: drained, and clean under the sanitizers),
 * etcd, and drops the databases. */
void h_groups_stop(h_groups *cl);

/* Who leads group g (0 or 1), -1 when no node does now: by default the node whose
 * Coordinator.GetTopology says led_here for g. */
typedef int (*h_groups_leader_fn)(const h_groups *cl, int g);
int h_groups_leader_of(const h_groups *cl, int g);
/* Waits until the nodes lead one group each (the balance rule: ceil(2/2) = 1), asking
 * leader_of (NULL = h_groups_leader_of); fails the test with both logs after 4 TTLs + 5 s. */
void h_groups_wait_balanced(const h_groups *cl, h_groups_leader_fn leader_of);

/* A client for the cluster's tenant on addrs ("h:p" or "h:p,h:p"), deadline 5 s. */
idem_client *h_groups_client(const h_groups *cl, const char *addrs);

/* LookupStep of a key of group g sent to node i: NOT_FOUND (5) when i leads g, UNAVAILABLE (14)
 * with idem-group (into group) when it does not. */
int h_groups_probe(const h_groups *cl, int i, int g, char *group, size_t cap);

/* Who leads group g as the nodes' answers to calls show (an h_groups_leader_fn): the node that
 * answers a call of g, -1 when none does now. */
int h_groups_answering_leader(const h_groups *cl, int g);

#endif
