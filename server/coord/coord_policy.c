/* coord_policy.c — the policy Admin calls and their validation (see coord_policy.h). */
#include "coord_policy.h"

#include <string.h>

#include "../util/clock.h"
#include "../validate/validate.h"

static bool is_any(const char *s) {
  return s && strcmp(s, POLICY_ANY) == 0;
}

/* "*" or a valid name. */
static err_code check_pattern(const char *field, const char *v, err_t *err) {
  if (is_any(v)) return ERR_OK;
  return validate_name(field, v ? v : "", err);
}

static err_code check_pair(const char *service, const char *operation, err_t *err) {
  err_code rc;
  if ((rc = check_pattern("service", service, err)) != ERR_OK) return rc;
  if ((rc = check_pattern("operation", operation, err)) != ERR_OK) return rc;
  if (is_any(service) && !is_any(operation))
    return err_set(err, ERR_INVALID,
                   "service: \"*\" is only allowed together with operation \"*\"");
  return ERR_OK;
}

err_code coord_policy_validate(const policy *p, err_t *err) {
  err_code rc;
  if (!p) return err_set(err, ERR_INVALID, "policy: missing");
  if ((rc = check_pair(p->service, p->operation, err)) != ERR_OK) return rc;
  if (p->mode != FAILURE_MODE_FAIL_CLOSED && p->mode != FAILURE_MODE_FAIL_OPEN)
    return err_set(err, ERR_INVALID,
                   "failure_mode: must be FAILURE_MODE_FAIL_CLOSED or "
                   "FAILURE_MODE_FAIL_OPEN");
  if (p->retention_s < POLICY_RETENTION_MIN_S || p->retention_s > POLICY_RETENTION_MAX_S)
    return err_set(err, ERR_INVALID, "retention_s: must be from %u to %u seconds (90 days)",
                   POLICY_RETENTION_MIN_S, POLICY_RETENTION_MAX_S);
  if (p->key_retention_s != 0 &&
      (p->key_retention_s < p->retention_s || p->key_retention_s > POLICY_KEY_RETENTION_MAX_S))
    return err_set(err, ERR_INVALID,
                   "key_retention_s: must be 0 (as long as retention_s) or from retention_s (%u) "
                   "to %u seconds (400 days)",
                   p->retention_s, POLICY_KEY_RETENTION_MAX_S);
  if (p->lease_ms < 1 || p->lease_ms > POLICY_LEASE_MAX_MS)
    return err_set(err, ERR_INVALID, "lease_ms: must be from 1 to %u milliseconds (1 h)",
                   POLICY_LEASE_MAX_MS);
  /* attempt numbers start again at 1 once a key is forgotten: every lease must end long
   * before (docs/limits.md "Attempt numbers") */
  if ((uint64_t)policy_key_retention(p) * 1000 <= p->lease_ms)
    return err_set(err, ERR_INVALID,
                   "key_retention_s: the key retention in effect (%u s) must be longer than "
                   "lease_ms (%u ms): a holder could outlive its key and complete the next "
                   "attempt 1",
                   policy_key_retention(p), p->lease_ms);
  return ERR_OK;
}

/* min(deadline, now + store_timeout_ms) on the monotonic clock. */
static int64_t store_deadline(const coord_ctx *ctx, int64_t deadline) {
  int64_t cap = clock_mono_ms() + ctx->store_timeout_ms;
  return deadline < cap ? deadline : cap;
}

static void changed(const coord_ctx *ctx, store *st, int64_t deadline) {
  if (ctx->policies_changed) ctx->policies_changed(ctx->resolve_arg, st, deadline);
}

err_code coord_set_policy(const coord_ctx *ctx, store *st, const char *tenant, const policy *p,
                          int64_t deadline, policy *out, err_t *err) {
  memset(out, 0, sizeof *out);
  err_clear(err);
  err_code rc;
  if ((rc = validate_tenant(tenant, err)) != ERR_OK) return rc;
  if ((rc = coord_policy_validate(p, err)) != ERR_OK) return rc;
  bool written = false;
  rc = store_policy_put(st, tenant, p, false, store_deadline(ctx, deadline), &written, out, err);
  if (rc != ERR_OK) {
    memset(out, 0, sizeof *out);
    return rc;
  }
  changed(ctx, st, store_deadline(ctx, deadline));
  return ERR_OK;
}

err_code coord_delete_policy(const coord_ctx *ctx, store *st, const char *tenant,
                             const char *service, const char *operation, int64_t deadline,
                             bool *deleted, err_t *err) {
  *deleted = false;
  err_clear(err);
  err_code rc;
  if ((rc = validate_tenant(tenant, err)) != ERR_OK) return rc;
  if ((rc = check_pair(service, operation, err)) != ERR_OK) return rc;
  rc = store_policy_delete(st, tenant, service, operation, store_deadline(ctx, deadline), deleted,
                           err);
  if (rc != ERR_OK) return rc;
  if (*deleted) changed(ctx, st, store_deadline(ctx, deadline));
  return ERR_OK;
}

/* One group's change: set p, or delete (service, operation). */
static err_code change_one(const coord_group_view *v, const char *tenant, const policy *p,
                           const char *service, const char *operation, int64_t deadline,
                           policy *out, bool *deleted, err_t *err) {
  if (!v->st) return err_oom(err);
  if (p) return coord_set_policy(v->ctx, v->st, tenant, p, deadline, out, err);
  return coord_delete_policy(v->ctx, v->st, tenant, service, operation, deadline, deleted, err);
}

static err_code change_groups(const coord_group_view *g, size_t n, const char *tenant,
                              const policy *p, const char *service, const char *operation,
                              int64_t deadline, policy *out, bool *deleted, err_t *err) {
  err_code rc = change_one(&g[0], tenant, p, service, operation, deadline, out, deleted, err);
  if (n < 2 || (rc != ERR_OK && rc != ERR_UNAVAILABLE)) return rc;
  const char *failed = rc == ERR_OK ? NULL : g[0].name;
  err_t first = *err;
  for (size_t i = 1; i < n; i++) {
    err_t e;
    err_clear(&e);
    policy o;
    bool d = false;
    if (change_one(&g[i], tenant, p, service, operation, deadline, &o, &d, &e) != ERR_OK &&
        !failed) {
      failed = g[i].name;
      first = e;
    }
  }
  if (!failed) return ERR_OK;
  if (p && rc != ERR_OK) memset(out, 0, sizeof *out);
  return err_fail(err, ERR_UNAVAILABLE, first.reason,
                  "group %s: %s (the other groups took the change: repeat it to converge)", failed,
                  first.msg);
}

err_code coord_set_policy_groups(const coord_group_view *g, size_t n, const char *tenant,
                                 const policy *p, int64_t deadline, policy *out, err_t *err) {
  bool deleted = false;
  return change_groups(g, n, tenant, p, NULL, NULL, deadline, out, &deleted, err);
}

err_code coord_delete_policy_groups(const coord_group_view *g, size_t n, const char *tenant,
                                    const char *service, const char *operation, int64_t deadline,
                                    bool *deleted, err_t *err) {
  policy out;
  return change_groups(g, n, tenant, NULL, service, operation, deadline, &out, deleted, err);
}

err_code coord_list_policies(const coord_ctx *ctx, store *st, const char *tenant,
                             int64_t deadline, policy_row **rows, size_t *n, err_t *err) {
  *rows = NULL;
  *n = 0;
  err_clear(err);
  err_code rc;
  if ((rc = validate_tenant(tenant, err)) != ERR_OK) return rc;
  return store_policy_list(st, tenant, store_deadline(ctx, deadline), rows, n, err);
}
