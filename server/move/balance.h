/* balance.h — spreads a node's store groups over the live nodes (docs/api.md §17).
 *
 * Every node campaigns in every group. A thread watches how many candidates each election has
 * (the live nodes, N) and how many groups this node leads: while it leads more than ⌈G/N⌉ for a
 * settle period, it yields one group (elect_yield: its term ends and it campaigns again behind
 * the others), at most one per settle period. So within two election TTLs no node keeps more
 * than its share, and a lone survivor leads every group.
 */
#ifndef IDEM_MOVE_BALANCE_H
#define IDEM_MOVE_BALANCE_H

#include <stddef.h>
#include <stdint.h>

#include "../elect/elect.h"

typedef struct balance balance;

/* Which group (index into els) this node must keep leading for now, -1 for none: the source
 * of a move it drives (yielding it would roll the move back). */
typedef int (*balance_keep_fn)(void *arg);

/* Starts the thread over els (n electors, borrowed: they must outlive it). settle_ms: how long
 * an excess must last before a yield (and between yields). keep (may be NULL) is asked before
 * each yield: the group it names is not yielded (another led one is, or none this time). NULL
 * on failure. */
balance *balance_start(elect *const *els, size_t n, int64_t settle_ms, balance_keep_fn keep,
                       void *keep_arg);

/* The share rule itself: the most groups one node may lead, ⌈groups/nodes⌉ (nodes 0 reads 1). */
size_t balance_share(size_t groups, size_t nodes);

void balance_stop(balance *b);

#endif
