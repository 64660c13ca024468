/* node.h — the composition root: one struct owns every module of a running coordinator, one
 * function starts them in dependency order, one tears them down in the reverse order.
 *
 *   start:  security files -> the cluster owning each database, schema -> policies
 *           -> replay cache -> waiters -> batcher -> elector
 *           -> gRPC server -> campaign -> reaper -> /metrics -> console
 *   stop:   the same list walked backwards (a failed start unwinds only what it started)
 *
 * The caller (main.c) parses the options, blocks the signals node_signals() names before
 * node_start (which starts threads), waits for them, and calls node_stop.
 */
#ifndef IDEM_NODE_H
#define IDEM_NODE_H

#include <signal.h>

#include "options.h"

typedef struct node node;

typedef enum node_result {
  NODE_RUNNING = 0, /* serving: wait for a signal, then node_stop */
  NODE_FAILED = 1,  /* logged; exit 1 */
  NODE_USAGE = 2,   /* a file named by an option is unusable: msg says which; exit 2 */
  NODE_STOPPED = 3, /* a stop signal came during start-up: nothing runs; exit 0 */
  NODE_REFUSED = 4, /* Postgres refused for good (logged: where and why); exit 2 */
} node_result;

/* SIGTERM, SIGINT (drain), SIGHUP (reload the tokens file) and SIGPIPE (ignored). */
void node_signals(sigset_t *set);

/* Starts every module. o and sigs are borrowed for the node's life; sigs are the blocked
 * signals start-up watches while it waits for Postgres. On NODE_RUNNING *out is the node;
 * otherwise *out is NULL, nothing runs, and for NODE_USAGE msg holds the usage error. */
node_result node_start(const idem_options *o, const sigset_t *sigs, node **out, char *msg,
                       size_t n);

/* Blocks until SIGTERM or SIGINT (reloading on SIGHUP meanwhile); logs the drain. */
void node_wait(node *nd);

/* Stops what runs, in reverse order of start (resign, drain, ...), and frees the node. */
void node_stop(node *nd);

#endif
