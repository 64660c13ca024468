/* etcd_kv.h — plain etcd keys over the JSON gateway, for what is not an election: the slot map
 * and the moves (docs/api.md §17, §18). One etcd_kv is a process's client: its calls share one
 * connection (one curl handle, kept open and reused; the calls take turns), and its watch
 * (etcd_kv_watch) has one more, the stream's. Each call is bounded by timeout_ms.
 *
 * A write that timed out has an unknown outcome: etcd_kv_create answers ERR_UNAVAILABLE and the
 * caller re-reads (a create is a transaction on create_revision == 0, so repeating it after a
 * re-read is safe).
 */
#ifndef IDEM_ELECT_ETCD_KV_H
#define IDEM_ELECT_ETCD_KV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

typedef struct etcd_kv etcd_kv;

/* endpoints: "http://h:p[,…]" (copied). NULL on allocation failure or when none is given. No
 * connection is made before the first call. */
etcd_kv *etcd_kv_open(const char *endpoints);
/* Closes the connections (a watch running must have ended). NULL is fine. */
void etcd_kv_close(etcd_kv *kv);

/* Wakes a watch waiting on its stream so that it sees its stop flag now (set the flag first).
 * Any thread; NULL is fine. */
void etcd_kv_wake(etcd_kv *kv);

/* Reads key. ERR_OK with *value owned (free; NULL when the key does not exist), *len its
 * length and *mod_rev its revision (0 when absent); ERR_UNAVAILABLE when etcd did not answer. */
err_code etcd_kv_get(etcd_kv *kv, const char *key, int64_t timeout_ms, char **value,
                     size_t *len, int64_t *mod_rev, err_t *err);

/* Creates key = value unless the key exists: ERR_OK with *created telling which. */
err_code etcd_kv_create(etcd_kv *kv, const char *key, const char *value,
                        int64_t timeout_ms, bool *created, err_t *err);

/* Writes key = value only while its revision is mod_rev (compare-and-swap): ERR_OK with
 * *swapped telling whether it did. */
err_code etcd_kv_swap(etcd_kv *kv, const char *key, const char *value, int64_t mod_rev,
                      int64_t timeout_ms, bool *swapped, err_t *err);

/* Writes key = value whatever it held (progress reports; unknown outcome on ERR_UNAVAILABLE). */
err_code etcd_kv_put(etcd_kv *kv, const char *key, const char *value, int64_t timeout_ms,
                     err_t *err);

/* How many keys start with prefix. */
err_code etcd_kv_count(etcd_kv *kv, const char *prefix, int64_t timeout_ms,
                       int64_t *count, err_t *err);

/* A change seen by a watch: key's new value (NULL: the key was deleted), at revision mod_rev.
 * Return false to end the watch. */
typedef bool (*etcd_kv_event_fn)(void *arg, const char *key, const char *value, size_t len,
                                 int64_t mod_rev);

/* Watches every key starting with prefix from revision start_rev (etcd 3.4's POST /v3/watch,
 * a stream of JSON lines) on the watch's own connection, calling fn for each change in order,
 * until stop is true once woken (etcd_kv_wake) or fn returns false (ERR_OK), or etcd ends the watch:
 *  - compacted past start_rev: ERR_OK with *compacted = the compaction's revision (re-read the
 *    keys, then watch again from there);
 *  - the stream fails (etcd stopped, the connection lost): ERR_UNAVAILABLE.
 * *next_rev is the revision to watch from next (one past the last change seen, or start_rev).
 * One watch at a time per etcd_kv. */
err_code etcd_kv_watch(etcd_kv *kv, const char *prefix, int64_t start_rev, etcd_kv_event_fn fn,
                       void *arg, const atomic_bool *stop, int64_t *next_rev, int64_t *compacted,
                       err_t *err);

#endif
