/* elect_etcd_parse.h — internal to elect/: reading the replies of etcd's v3 JSON gateway. Pure
 * functions (text or parsed JSON in, values out; no I/O, no state), so they can be fuzzed
 * (fuzz/fuzz_etcd.c) apart from libcurl. Prefix etcd__.
 *
 * The gateway's encodings: keys and values base64, int64s as strings, zero values omitted; a
 * streaming method (keep-alive) answers {"result": {...}} per line; an error is
 * {"error": "...", "message": "...", "code": N} (with an HTTP status, usually not 200).
 */
#ifndef IDEM_ELECT_ETCD_PARSE_H
#define IDEM_ELECT_ETCD_PARSE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "elect_etcd_codec.h"

/* Classifies a reply: text is the body (NUL-terminated; len its length, 0 = no body), status
 * the HTTP status. ETCD_OK: *out is the parsed reply (owned: cJSON_Delete), for a streaming
 * method the first message's "result" object. Otherwise *out is NULL, err has a short message
 * and the result is ETCD_REFUSED (etcd's error answer, any status but 200, or a malformed body
 * with status >= 400) or ETCD_UNKNOWN (no body, or a malformed one, with status < 400). */
etcd_fail etcd__reply(const char *text, size_t len, long status, cJSON **out, err_t *err);

/* lease/grant: the granted lease ID (0: none). */
int64_t etcd__grant_id(const cJSON *r);

/* election/campaign: true when r names the key this node now leads with: *key (borrowed from
 * r) and its creation revision *rev > 0. */
bool etcd__campaign_key(const cJSON *r, const char **key, int64_t *rev);

/* lease/keepalive: the lease's remaining TTL in seconds (0 when omitted: the lease is gone). */
int64_t etcd__keepalive_ttl(const cJSON *r);

/* election/leader, as read by the observer. */
typedef struct etcd_leader {
  const char *key; /* the leader's key (borrowed from r), NULL when absent */
  char *addr;      /* its value, base64-decoded (owned: free), NULL when absent or malformed */
  int64_t at_rev;  /* the revision of the answer (header.revision), 0 when absent */
} etcd_leader;

void etcd__leader(const cJSON *r, etcd_leader *out);

#endif
