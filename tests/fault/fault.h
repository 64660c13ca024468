/* fault.h — fault-test support: a private etcd, a fresh database of its own (so the
 * one-row fence and the "end a former leader's transactions" step touch nobody else), 2-3
 * idem-coordinator nodes on loopback with --etcd, and the probes the scenarios measure with.
 * Every wait polls a condition against a deadline. Nodes are stopped by PID. */
#ifndef IDEM_TEST_FAULT_H
#define IDEM_TEST_FAULT_H

#include <idem/idem.h>
#include <stdbool.h>
#include <stdint.h>

#include "etcd_proc.h"
#include "harness.h"

#define F_TTL 2          /* --election-ttl for every scenario (seconds) */
#define F_MAX_NODES 3

typedef struct cluster {
  etcd_proc etcd;
  char db[64];
  char pg_url[512];
  int n;
  srv nodes[F_MAX_NODES];
  int mport[F_MAX_NODES]; /* each node's --metrics port on 127.0.0.1 (h_metric) */
  bool up[F_MAX_NODES];
  char all_addrs[F_MAX_NODES * 64];
  idem_client *status_c[F_MAX_NODES]; /* one per node, for GetStatus polls */
} cluster;

/* etcd + a fresh database + n nodes (the first started alone, so it leads). */
void f_cluster_start(cluster *cl, int n);
/* Stops every node still up (SIGTERM, by PID), etcd, and drops the database. */
void f_cluster_stop(cluster *cl);
/* Criterion .fini of every scenario: stops the cluster a failed assertion left running. */
void f_fini(void);

/* The node that says it leads (GetStatus; polled up to 3 s), or -1; *epoch gets its epoch. */
int f_leader(cluster *cl, uint64_t *epoch);
/* Polls f_leader every 10 ms until one leads other than `not` (-1: any), or within_ms passes
 * (-1). */
int f_wait_leader(cluster *cl, int not, int64_t within_ms, uint64_t *epoch);

/* GetStatus of node i (2 s deadline); false when it does not answer. */
bool f_status(cluster *cl, int i, idem_status *st);

/* A client for one node's address (i >= 0) or the whole list (i = -1). */
idem_client *f_client(cluster *cl, int i, const char *tenant, int64_t deadline_ms);

/* SIGKILL / SIGSTOP / SIGCONT / SIGTERM node i (by PID). f_kill reaps it. */
void f_kill(cluster *cl, int i);
void f_signal(cluster *cl, int i, int sig);

/* One BeginStep + CompleteStep(SUCCEEDED) on a fresh key. IDEM_OK when both succeeded. */
int f_pair(idem_client *c, const char *gid, idem_error *e);

#endif
