/* elect_etcd_http.h — internal to elect/: one connection to etcd's v3 JSON gateway (libcurl),
 * JSON (cJSON) and the gateway's encodings: keys and values base64, int64s as strings, zero
 * values omitted. Prefix etcd__.
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

typedef struct etcd_conn etcd_conn;

/* How a request ended when it did not succeed: whether etcd may have acted on it. */
typedef enum etcd_fail {
  ETCD_OK = 0,
  ETCD_NOT_SENT,  /* connection refused / could not resolve: etcd did nothing */
  ETCD_REFUSED,   /* etcd answered with an error (HTTP status or an "error" body): no effect */
  ETCD_UNKNOWN,   /* timed out or cut off after sending: the outcome is unknown, re-read */
  ETCD_ABORTED,   /* *abort became true while waiting: unknown as well */
} etcd_fail;

/* endpoints: "http://h:p[,http://h:p…]" (copied). NULL on allocation failure or when no
 * endpoint is given. */
etcd_conn *etcd__conn_new(const char *endpoints);
void etcd__conn_free(etcd_conn *c);

/* POSTs body (borrowed) to path ("/v3/lease/grant") on the current endpoint, waiting at most
 * timeout_ms (< 0: no limit) and returning early when abort (may be NULL) becomes true.
 * On ETCD_OK, *out is the parsed reply (owned: cJSON_Delete). For a streaming method
 * (keep-alive, watch) the first message's "result" object is returned. A request that was
 * never sent moves on to the next endpoint. err gets a short message on failure. */
etcd_fail etcd__post(etcd_conn *c, const char *path, const cJSON *body, int64_t timeout_ms,
                     const atomic_bool *abort, cJSON **out, err_t *err);

/* Base64, padded (util/b64.h, B64_STD): an owned NUL-terminated string, NULL on failure. */
char *etcd__b64(const void *data, size_t len);
/* Decodes base64 into an owned NUL-terminated buffer (*len without the NUL; may be NULL).
 * NULL when s is not valid padded base64 (b64_decode's strict rules). */
char *etcd__unb64(const char *s, size_t *len);

/* The int64 field name of obj, given as a string (or a number); 0 when absent (zero values are
 * omitted by the gateway) or malformed. */
int64_t etcd__i64(const cJSON *obj, const char *name);
/* Adds an int64 field as a string. false on allocation failure. */
bool etcd__add_i64(cJSON *obj, const char *name, int64_t v);
/* Adds a base64-encoded string field. false on allocation failure. */
bool etcd__add_b64(cJSON *obj, const char *name, const char *s);

#endif
