/* policy_cache.h — the server's in-memory copy of every policy row (all tenants), so that
 * resolving a policy never waits on the store, and the fail-open decision still works while
 * the store is unreachable (the last known rows stay).
 *
 * Freshness: a reload replaces the whole copy. Reloads happen (1) after a SetPolicy or
 * DeletePolicy on this node, with the caller's store, before the call answers
 * (policy_cache_changed, wired as coord_ctx.policies_changed), (2) every refresh period on the
 * cache's own thread, so several nodes converge on changes made elsewhere, and (3) at once
 * after policy_cache_invalidate (for an epoch change). Reloads are serialized, so a reload
 * that started after a change commits is never overwritten by one that started before it.
 * A failed reload keeps the previous copy. Before the first successful load every operation
 * has the built-in default (fail-closed).
 *
 * Thread-safety: every function may be called from any thread, except new/free.
 */
#ifndef IDEM_POLICY_CACHE_H
#define IDEM_POLICY_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../store/store.h"
#include "../util/err.h"
#include "../domain/policy.h"

#define POLICY_CACHE_REFRESH_MS_DEFAULT 2000

typedef struct policy_cache policy_cache;

/* An empty cache (built-in defaults). NULL on allocation failure. */
policy_cache *policy_cache_new(void);

/* Stops the refresh thread if it runs, and frees the cache. NULL is fine. */
void policy_cache_free(policy_cache *c);

/* Loads every row from st and replaces the copy. On error the copy is unchanged. */
err_code policy_cache_reload(policy_cache *c, store *st, int64_t deadline, err_t *err);

/* Replaces the copy with rows[0..n) (copied; for tests and seeding without a store). */
bool policy_cache_set_rows(policy_cache *c, const policy_row *rows, size_t n);

/* policy_resolve_fn over the copy (arg is the cache): the first match in the precedence order
 * of policy.h. *out's service and operation are the matched row's (they may be "*"); the
 * built-in default answers with the names asked and updated_ms 0. */
void policy_cache_resolve(void *arg, const char *tenant, const char *service,
                          const char *operation, policy *out);

/* coord_ctx.policies_changed (arg is the cache): reloads with st; a failure is logged and the
 * periodic refresh catches up. */
void policy_cache_changed(void *arg, store *st, int64_t deadline);

/* Starts the refresh thread: it opens its own store with open_store(open_arg), reloads at once
 * and then every refresh_ms (each load bounded by store_timeout_ms). false if the thread or the
 * store cannot be created. */
bool policy_cache_start(policy_cache *c, store *(*open_store)(void *), void *open_arg,
                        int64_t refresh_ms, int64_t store_timeout_ms);

/* Asks the refresh thread to reload now (epoch change). No-op when it is not running. */
void policy_cache_invalidate(policy_cache *c);

/* Stops and joins the refresh thread (closing its store). Idempotent. */
void policy_cache_stop(policy_cache *c);

/* Number of rows in the copy and how many successful loads so far (for tests and status). */
size_t policy_cache_size(policy_cache *c);
uint64_t policy_cache_loads(policy_cache *c);

#endif
