/* node_owner.h — one cluster per database, at start-up (domain/owner.h has the rule;
 * docs/operations.md "One cluster per database").
 *
 * Before a node migrates, fences or writes anything in a group's database it reads the owner
 * the database records and refuses to start (exit 2) when the rule says so; after the migration
 * it settles the owner in one transaction (a claim of a fresh database, a --take-over). This
 * node's own cluster: with --etcd, the id kept in etcd at ELECTION_PREFIX.cluster (made by the
 * cluster's first node: a UUIDv7 created there only if absent), the prefix, the endpoints;
 * without etcd, "standalone".
 */
#ifndef IDEM_NODE_OWNER_H
#define IDEM_NODE_OWNER_H

#include <stdbool.h>
#include <stdint.h>

#include "../domain/owner.h"
#include "../store/store.h"
#include "../util/err.h"
#include "node.h"
#include "options.h"

#define NODE_OWNER_KEY_SUFFIX ".cluster" /* the cluster id's etcd key: ELECTION_PREFIX.cluster */

typedef struct node_owner {
  owner_rec mine;        /* this node's cluster (group filled per database) */
  char actor[512];       /* who, for the audit: the node, the OS user, the host, the pid */
  const char *take_over; /* --take-over (NULL: not given); borrowed from the options */
  const store_backend *db; /* where the owner is read and settled */
} node_owner;

/* Waits up to ms for a stop signal: true when one came (node.c's wait_signal). */
typedef bool (*node_owner_wait_fn)(void *arg, int64_t ms);

/* Fills *no (the checks go through db): without etcd at once; with etcd reads (or creates) the
 * cluster id, retrying while etcd does not answer for up to patience_ms (wait between tries;
 * NODE_STOPPED on a stop signal). NODE_REFUSED (logged) when etcd holds a value that is not a
 * cluster id, NODE_FAILED (logged) when etcd never answered. */
node_result node_owner_init(node_owner *no, const idem_options *o, const store_backend *db,
                            int64_t patience_ms, node_owner_wait_fn wait, void *wait_arg);

/* The check before anything is written: reads group's owner. NODE_REFUSED (logged: both owners
 * and what to do) when the rule refuses; NODE_FAILED with err when the database did not answer;
 * else NODE_RUNNING. */
node_result node_owner_check(const node_owner *no, const char *group, const char *conninfo,
                             int64_t deadline, err_t *err);

/* After the migration: settles the owner (claim, takeover, or nothing), logging what it did.
 * NODE_REFUSED (logged) as above, or when a takeover is refused because the former owner's
 * nodes are still connected; NODE_FAILED with err when the database did not answer. */
node_result node_owner_settle(const node_owner *no, const char *group, const char *conninfo,
                              int64_t deadline, err_t *err);

#endif
