/* elect_etcd_codec.h — internal to elect/: the vocabulary the gateway's client and its reply
 * reader share: how a request ended (etcd_fail), and the gateway's encodings (keys and values
 * base64, int64s as strings, zero values omitted). Pure functions. Prefix etcd__. */
#ifndef IDEM_ELECT_ETCD_CODEC_H
#define IDEM_ELECT_ETCD_CODEC_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How a request ended when it did not succeed: whether etcd may have acted on it. */
typedef enum etcd_fail {
  ETCD_OK = 0,
  ETCD_NOT_SENT, /* connection refused / could not resolve: etcd did nothing */
  ETCD_REFUSED,  /* etcd answered with an error (HTTP status or an "error" body): no effect */
  ETCD_UNKNOWN,  /* timed out or cut off after sending: the outcome is unknown, re-read */
  ETCD_ABORTED,  /* *abort became true while waiting: unknown as well */
} etcd_fail;

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
/* The key just past every key starting with prefix (etcd's range_end for a prefix), owned;
 * NULL on allocation failure. */
char *etcd__prefix_end(const char *prefix);

/* Adds a base64-encoded string field. false on allocation failure. */
bool etcd__add_b64(cJSON *obj, const char *name, const char *s);

#endif
