/* etcd_kv.h — plain etcd keys over the JSON gateway, for what is not an election: the slot map
 * (docs/api.md §17). Each call opens its own connection and is bounded by timeout_ms.
 *
 * A write that timed out has an unknown outcome: etcd_kv_create answers ERR_UNAVAILABLE and the
 * caller re-reads (a create is a transaction on create_revision == 0, so repeating it after a
 * re-read is safe).
 */
#ifndef IDEM_ELECT_ETCD_KV_H
#define IDEM_ELECT_ETCD_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

/* Reads key. ERR_OK with *value owned (free; NULL when the key does not exist), *len its
 * length and *mod_rev its revision (0 when absent); ERR_UNAVAILABLE when etcd did not answer. */
err_code etcd_kv_get(const char *endpoints, const char *key, int64_t timeout_ms, char **value,
                     size_t *len, int64_t *mod_rev, err_t *err);

/* Creates key = value unless the key exists: ERR_OK with *created telling which. */
err_code etcd_kv_create(const char *endpoints, const char *key, const char *value,
                        int64_t timeout_ms, bool *created, err_t *err);

/* Writes key = value only while its revision is mod_rev (compare-and-swap): ERR_OK with
 * *swapped telling whether it did. */
err_code etcd_kv_swap(const char *endpoints, const char *key, const char *value, int64_t mod_rev,
                      int64_t timeout_ms, bool *swapped, err_t *err);

/* Writes key = value whatever it held (progress reports; unknown outcome on ERR_UNAVAILABLE). */
err_code etcd_kv_put(const char *endpoints, const char *key, const char *value, int64_t timeout_ms,
                     err_t *err);

/* How many keys start with prefix. */
err_code etcd_kv_count(const char *endpoints, const char *prefix, int64_t timeout_ms,
                       int64_t *count, err_t *err);

#endif
