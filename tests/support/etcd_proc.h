/* etcd_proc.h — a private etcd (/usr/bin/etcd, or $IDEM_TEST_ETCD) for tests: free loopback
 * ports, a temporary data directory, stopped by PID. Waits are polls against a deadline. */
#ifndef IDEM_TEST_ETCD_PROC_H
#define IDEM_TEST_ETCD_PROC_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct etcd_proc {
  pid_t pid; /* 0 when not running */
  int client_port, peer_port;
  char url[64];  /* "http://127.0.0.1:PORT" */
  char dir[128]; /* temporary: data directory and log */
} etcd_proc;

/* Starts etcd and waits (15 s) until it answers. Fails the test on error. */
void etcd_start(etcd_proc *e);
/* Starts it again on the same ports and data directory (after etcd_kill). */
void etcd_restart(etcd_proc *e);
/* SIGKILL, reaped. */
void etcd_kill(etcd_proc *e);
/* SIGTERM (SIGKILL after 5 s), reaped, data directory removed. Safe when not running. */
void etcd_stop(etcd_proc *e);
/* Whether etcd answers on its client URL. */
bool etcd_healthy(const etcd_proc *e);
/* How many keys start with prefix (its last byte printable); -1 when etcd did not answer. */
int etcd_count_prefix(const etcd_proc *e, const char *prefix);

/* Writes key = value (short texts) through the JSON gateway; false when etcd did not take it. */
bool etcd_put(const etcd_proc *e, const char *key, const char *value);

/* The sum of etcd's own /metrics samples named name whose labels contain label (may be ""),
 * e.g. ("grpc_server_handled_total", "grpc_method=\"Leader\""): the calls etcd answered; -1 when
 * etcd did not answer. */
double etcd_metric(const etcd_proc *e, const char *name, const char *label);

/* A free loopback TCP port (bound and released). */
int etcd_free_port(void);

#endif
