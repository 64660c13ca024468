/* fuzz_etcd.c — libFuzzer target: the elector's reading of etcd v3 gateway replies
 * (server/elect/elect_etcd_parse.h), as etcd__post hands them over after libcurl.
 *
 * Input: byte 0 picks the HTTP status (byte 0 % 8 into the table below); the rest is the reply
 * body. The reply is classified (etcd__reply: JSON, streaming {"result": ...} unwrapping, error
 * bodies) and, when etcd__reply accepts it, read the way each of the elector's calls reads its
 * answer (lease grant, campaign, keep-alive, leader: int64s as strings or numbers, base64
 * values). Aborts when the classification breaks its contract (a reply with a non-OK result,
 * an OK without one, a failure without a message).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elect/elect_etcd_parse.h"

static const long statuses[8] = {200, 200, 200, 400, 404, 500, 503, 0};

static void fail(const char *what) {
  fprintf(stderr, "fuzz_etcd: %s\n", what);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  long status = statuses[data[0] % 8];
  size_t len = size - 1;
  char *body = malloc(len + 1); /* as etcd_conn keeps it: NUL-terminated */
  if (!body) return 0;
  memcpy(body, data + 1, len);
  body[len] = '\0';

  err_t err;
  err_clear(&err);
  cJSON *r = (cJSON *)1;
  etcd_fail f = etcd__reply(body, len, status, &r, &err);
  if (f == ETCD_OK) {
    if (!r) fail("ETCD_OK without a reply");
    if (status != 200) fail("ETCD_OK for a status other than 200");
    (void)etcd__grant_id(r);
    (void)etcd__keepalive_ttl(r);
    const char *key = NULL;
    int64_t rev = 0;
    if (etcd__campaign_key(r, &key, &rev) && (!key || rev <= 0)) fail("campaign key without rev");
    etcd_leader ld;
    etcd__leader(r, &ld);
    if (ld.addr) (void)strlen(ld.addr);
    free(ld.addr);
    cJSON_Delete(r);
  } else {
    if (r) fail("a reply with a failure");
    if (f != ETCD_REFUSED && f != ETCD_UNKNOWN) fail("unexpected failure kind");
    if (err.code != ERR_UNAVAILABLE || !err.msg[0]) fail("a failure without a message");
  }
  free(body);
  return 0;
}
