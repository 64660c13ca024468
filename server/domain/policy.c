/* policy.c — a policy's defaults and the words of its failure mode (policy.h). */
#include "policy.h"

#include <stdio.h>
#include <string.h>

#include "idem/v1/names.h"

void policy_default(const char *service, const char *operation, policy *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->service, sizeof out->service, "%s", service ? service : "*");
  snprintf(out->operation, sizeof out->operation, "%s", operation ? operation : "*");
  out->mode = FAILURE_MODE_FAIL_CLOSED;
  out->retention_s = POLICY_DEFAULT_RETENTION_S;
  out->lease_ms = POLICY_DEFAULT_LEASE_MS;
  out->updated_ms = 0;
}

const char *policy_mode_name(failure_mode m) {
  const char *w = idem_word_failure_mode((int)m);
  return strcmp(w, "invalid") == 0 ? "unspecified" : w;
}
