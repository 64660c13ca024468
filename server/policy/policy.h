/* policy.h — per-(service, operation) policy: failure mode, retention, lease (api.md §6).
 *
 * Until the policy store lands, every operation has the built-in default. The resolver is a
 * function so the stored, cached policies can replace it without touching coord/.
 */
#ifndef IDEM_POLICY_H
#define IDEM_POLICY_H

#include <stdint.h>

#include "../store/record.h"

#define POLICY_DEFAULT_RETENTION_S 86400u /* 24 h */
#define POLICY_DEFAULT_LEASE_MS 30000u    /* 30 s */
#define POLICY_RETENTION_MIN_S 1u
#define POLICY_RETENTION_MAX_S (90u * 86400u) /* 90 days */

typedef struct policy {
  char service[REC_NAME_MAX + 1];   /* "*" matches any */
  char operation[REC_NAME_MAX + 1]; /* "*" matches any */
  failure_mode mode;
  uint32_t retention_s;
  uint32_t lease_ms;
  int64_t updated_ms; /* 0 for the built-in default */
} policy;

/* Fills out with the built-in default for (service, operation): fail-closed, 24 h, 30 s. */
void policy_default(const char *service, const char *operation, policy *out);

/* Resolves the effective policy of (service, operation). arg is the resolver's own state. */
typedef void (*policy_resolve_fn)(void *arg, const char *service, const char *operation,
                                  policy *out);

#endif
