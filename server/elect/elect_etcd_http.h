/* elect_etcd_http.h — internal to elect/: one connection to etcd's v3 JSON gateway (libcurl);
 * the gateway's encodings are elect_etcd_codec.h's. Prefix etcd__.
 *
 * An etcd_conn is used by one thread at a time. Each has its own curl handles, so a blocking
 * campaign never delays a keep-alive.
 */
#ifndef IDEM_ELECT_ETCD_HTTP_H
#define IDEM_ELECT_ETCD_HTTP_H

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "elect_etcd_codec.h"

typedef struct etcd_conn etcd_conn;

/* endpoints: "http://h:p[,http://h:p…]" (copied). NULL on allocation failure or when no
 * endpoint is given. */
etcd_conn *etcd__conn_new(const char *endpoints);
void etcd__conn_free(etcd_conn *c);

/* Wakes c's call in progress (or its next one, when none is waiting) so that it looks at its
 * abort flag now: set the flag first, then wake. Any thread may call it while c exists. */
void etcd__conn_wake(etcd_conn *c);

/* POSTs body (borrowed) to path ("/v3/lease/grant") on the current endpoint, waiting at most
 * timeout_ms (< 0: no limit) and returning early when abort (may be NULL) is true once the call
 * is woken (etcd__conn_wake); the wait itself is curl_multi_poll, no polling of the flag.
 * On ETCD_OK, *out is the parsed reply (owned: cJSON_Delete). For a streaming method
 * (keep-alive, watch) the first message's "result" object is returned. A request that was
 * never sent moves on to the next endpoint. err gets a short message on failure. */
etcd_fail etcd__post(etcd_conn *c, const char *path, const cJSON *body, int64_t timeout_ms,
                     const atomic_bool *abort, cJSON **out, err_t *err);

/* A streaming method (watch): POSTs body to path and calls on_message for each message the
 * stream carries (a JSON line, parsed; borrowed for the call) until on_message returns false,
 * abort is seen true (etcd__conn_wake), the stream ends or fails, or timeout_ms passes (< 0: no
 * limit). ETCD_OK when on_message or abort ended it; otherwise err says why (the stream ended:
 * etcd stopped or dropped it; the time ran out). */
typedef bool (*etcd_stream_fn)(void *arg, const cJSON *message);
etcd_fail etcd__stream(etcd_conn *c, const char *path, const cJSON *body, int64_t timeout_ms,
                       const atomic_bool *abort, etcd_stream_fn on_message, void *arg,
                       err_t *err);

#endif
