/* policy.h — per-(service, operation) policy: failure mode, retention, lease (docs/api.md §6).
 *
 * Policies are per tenant: every record and query is scoped by tenant, and so are the rows of
 * idem_policies. The tenant "*" (never a valid tenant name) holds the server-wide rows seeded
 * from the config file; a tenant's own rows win over them. Precedence, first match wins:
 *   (tenant, service, operation) > (tenant, service, "*") > (tenant, "*", "*")
 *   > ("*", service, operation) > ("*", service, "*") > ("*", "*", "*") > built-in default.
 * ("*", operation) with a concrete operation is not a valid row: a rule for "every service's
 * operation X" would make the precedence ambiguous, so it is refused (INVALID_ARGUMENT).
 *
 * The resolver is a function so coord/ does not know where policies live (policy_cache.h).
 */
#ifndef IDEM_POLICY_H
#define IDEM_POLICY_H

#include <stdint.h>

#include "record.h"

#define POLICY_DEFAULT_RETENTION_S 86400u /* 24 h */
#define POLICY_DEFAULT_LEASE_MS 30000u    /* 30 s */
#define POLICY_RETENTION_MIN_S 1u
#define POLICY_RETENTION_MAX_S (90u * 86400u) /* 90 days */
#define POLICY_LEASE_MAX_MS REC_LEASE_MS_MAX  /* 1 h */
#define POLICY_KEY_RETENTION_MAX_S (400u * 86400u) /* 400 days (docs/api.md §12) */
#define POLICY_ANY "*"                        /* wildcard service/operation, all-tenants row */

typedef struct policy {
  char service[REC_NAME_MAX + 1];   /* "*" matches any */
  char operation[REC_NAME_MAX + 1]; /* "*" matches any */
  failure_mode mode;
  uint32_t retention_s;     /* how long a finished step's result (its body) is kept */
  uint32_t key_retention_s; /* how long its key is kept (docs/api.md §12): 0 = retention_s, else
                             * retention_s .. POLICY_KEY_RETENTION_MAX_S */
  uint32_t lease_ms;
  int64_t updated_ms; /* 0 for the built-in default */
} policy;

/* One stored row: a policy and the tenant it belongs to ("*" = every tenant). */
typedef struct policy_row {
  char tenant[REC_GLOBAL_ID_MAX + 1];
  policy p;
} policy_row;

/* The key retention in effect: key_retention_s, or retention_s when that is 0 or smaller. */
static inline uint32_t policy_key_retention(const policy *p) {
  return p->key_retention_s > p->retention_s ? p->key_retention_s : p->retention_s;
}

/* How long a finished step under p is kept: its body, and its key (record.h). */
static inline step_retention policy_retention(const policy *p) {
  return (step_retention){.result_s = p->retention_s, .key_s = policy_key_retention(p)};
}

/* Fills out with the built-in default for (service, operation): fail-closed, 24 h, 30 s. */
void policy_default(const char *service, const char *operation, policy *out);

/* Resolves the effective policy of (tenant, service, operation) into *out (always filled).
 * arg is the resolver's own state. Must be thread-safe and must not wait on the store. */
typedef void (*policy_resolve_fn)(void *arg, const char *tenant, const char *service,
                                  const char *operation, policy *out);

/* "fail-open" / "fail-closed" / "unspecified". Never NULL. */
const char *policy_mode_name(failure_mode m);

#endif
