/* owner.h — which cluster a database belongs to (docs/operations.md "One cluster per
 * database"; docs/api.md §7).
 *
 * A store group's database records the cluster that owns it: the cluster's id, its etcd election
 * prefix, the group it serves, and the node that claimed it. A cluster elected through etcd has
 * an id made by its first node (a UUIDv7, kept in etcd beside the election); every node without
 * etcd has the one id "standalone": such nodes share a database with each other as before (they
 * never fence), but not with a cluster elected through etcd, whose leader's fence would end their
 * transactions (and whose replay cache assumes nobody else writes).
 *
 * The rule (owner_decide), applied at start-up before the node touches the database:
 *   - nothing recorded: this node claims it (its cluster, its group);
 *   - the same cluster and group: start;
 *   - another cluster, or this cluster but another group: refuse, naming both, unless the node was
 *     started with --take-over naming the recorded cluster's id: then it takes the database over
 *     (recorded, with an audit row naming the former owner);
 *   - --take-over naming an id that is not the recorded owner's: refuse, naming both ids.
 * Plain data and pure functions: no I/O, no libpq.
 */
#ifndef IDEM_DOMAIN_OWNER_H
#define IDEM_DOMAIN_OWNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OWNER_STANDALONE "standalone" /* the id every node without etcd has */
#define OWNER_ID_MAX 64
#define OWNER_TEXT_MAX 256

/* One owner: this node's cluster, or the row a database records. */
typedef struct owner_rec {
  char cluster_id[OWNER_ID_MAX]; /* a UUID, or OWNER_STANDALONE */
  char prefix[OWNER_TEXT_MAX];   /* the etcd election prefix ("" for standalone) */
  char etcd[OWNER_TEXT_MAX];     /* the etcd endpoints, for people ("" for standalone) */
  char group[OWNER_ID_MAX];      /* the store group the database serves */
  char node[OWNER_TEXT_MAX];     /* the node that claimed it (or took it over) */
  int64_t claimed_ms;            /* when (Unix ms; 0 for this node's own) */
} owner_rec;

typedef enum owner_verdict {
  OWNER_SAME = 0,       /* recorded for this cluster and group: start */
  OWNER_CLAIM,          /* nothing recorded: record this node's cluster, then start */
  OWNER_TAKE_OVER,      /* --take-over names the recorded owner: record this cluster instead */
  OWNER_FOREIGN,        /* another cluster owns it: refuse */
  OWNER_OTHER_GROUP,    /* this cluster owns it for another group: refuse */
  OWNER_WRONG_TAKEOVER, /* --take-over names an id that does not own it: refuse */
} owner_verdict;

/* Whether v is a cluster id --take-over accepts: a UUID (8-4-4-4-12 hexadecimal digits) or
 * "standalone". */
bool owner_id_valid(const char *v);

/* The verdict for a database that records *recorded (NULL: nothing) when this node's owner is
 * *mine and take_over is its --take-over (NULL: not given). */
owner_verdict owner_decide(const owner_rec *mine, const owner_rec *recorded,
                           const char *take_over);

/* Whether a verdict stops the start. */
bool owner_refused(owner_verdict v);

/* One line naming an owner for people: `cluster ID (etcd prefix P at E, group G)` or `standalone
 * nodes (no etcd, group G)`, with `, claimed by NODE` when with_node and a node is recorded. */
void owner_describe(const owner_rec *o, bool with_node, char *buf, size_t cap);

/* The refusal for a verdict that stops the start: what is wrong, naming both owners, and what
 * to do (the takeover step). "" for the others. */
void owner_refusal(owner_verdict v, const owner_rec *mine, const owner_rec *recorded,
                   const char *take_over, char *buf, size_t cap);

#endif
