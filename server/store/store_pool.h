/* store_pool.h — store handles kept open and lent out, so that a caller that needs a store for
 * one call (a policy written to another group, a page's reads, a ping) takes one that is already
 * connected instead of opening a connection of its own. Backend-neutral: the pool opens handles
 * through the open function it is given, at most n of them, each on its first use, and keeps
 * them until store_pool_free. A handle whose connection was lost reconnects on its next call
 * (store.h), so the pool keeps every handle it opened.
 *
 * Thread-safe. store_pool_get blocks while all n handles are lent; every handle taken must be
 * given back (store_pool_put) before store_pool_free.
 */
#ifndef IDEM_STORE_POOL_H
#define IDEM_STORE_POOL_H

#include "store.h"

typedef struct store_pool store_pool;

/* A pool of at most n (>= 1) handles opened by open(arg) (borrowed for the pool's life). NULL on
 * allocation failure. Opens nothing yet. */
store_pool *store_pool_new(int n, store *(*open)(void *arg), void *arg);

/* Closes the idle handles and frees p. NULL is fine. */
void store_pool_free(store_pool *p);

/* A handle of p, lent until store_pool_put: an idle one, or a new one while fewer than n are
 * open; waits while all are lent. NULL when a new one could not be made (out of memory). */
store *store_pool_get(store_pool *p);

/* Gives back st (NULL is fine: only the place is freed). */
void store_pool_put(store_pool *p, store *st);

#endif
