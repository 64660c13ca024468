/* support_cache.c — see support_cache.h. */
#include "support_cache.h"

#include <stdio.h>
#include <string.h>

#include "util/clock.h"

void cache_finished_forward(replay_cache *c, const char *gid, const uint8_t *fp, size_t fp_len,
                            int64_t expires_in_ms) {
  cache_finished_forward_result(c, gid, fp, fp_len, expires_in_ms, expires_in_ms);
}

void cache_finished_forward_result(replay_cache *c, const char *gid, const uint8_t *fp,
                                   size_t fp_len, int64_t expires_in_ms, int64_t result_in_ms) {
  step_pair p;
  memset(&p, 0, sizeof p);
  snprintf(p.fwd.key.tenant, sizeof p.fwd.key.tenant, "acme");
  snprintf(p.fwd.key.global_id, sizeof p.fwd.key.global_id, "%s", gid);
  snprintf(p.fwd.key.service, sizeof p.fwd.key.service, "pay");
  snprintf(p.fwd.key.operation, sizeof p.fwd.key.operation, "charge");
  p.comp.key = p.fwd.key;
  p.fwd.key.phase = PHASE_FORWARD;
  p.comp.key.phase = PHASE_COMPENSATION;
  p.fwd.present = true;
  p.fwd.state = STATE_SUCCEEDED;
  p.fwd.attempt = 1;
  memcpy(p.fwd.fp, fp, fp_len);
  p.fwd.fp_len = fp_len;
  p.fwd.outcome = OUTCOME_SUCCEEDED;
  p.fwd.code = 200;
  p.fwd.body = (uint8_t *)"paid";
  p.fwd.body_len = 4;
  p.fwd.expires_ms = clock_wall_ms() + expires_in_ms;
  p.fwd.result_expires_ms = clock_wall_ms() + result_in_ms;
  p.now_ms = clock_wall_ms(); /* the database's clock at the commit (the same clock here) */
  replay_cache_committed(c, 0, &p);
}
