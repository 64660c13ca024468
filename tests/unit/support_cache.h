/* support_cache.h — what the replay cache holds after a commit, for unit tests of coord/. */
#ifndef IDEM_TEST_SUPPORT_CACHE_H
#define IDEM_TEST_SUPPORT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "cache/replay_cache.h"

/* Commits into c, as the store's commit hook would, the pair (tenant "acme", gid, service
 * "pay", operation "charge") whose forward step SUCCEEDED at attempt 1 with fingerprint fp,
 * code 200 and body "paid", expiring in expires_in_ms; no compensation. */
void cache_finished_forward(replay_cache *c, const char *gid, const uint8_t *fp, size_t fp_len,
                            int64_t expires_in_ms);

/* The same, with the body kept only until result_in_ms from now (docs/api.md §12: negative = its
 * result retention has passed). */
void cache_finished_forward_result(replay_cache *c, const char *gid, const uint8_t *fp,
                                   size_t fp_len, int64_t expires_in_ms, int64_t result_in_ms);

#endif
