/* coord_policy.h — Admin.SetPolicy / DeletePolicy / ListPolicies as plain C (docs/api.md §6), and
 * the validation every policy goes through (the Admin calls and the config file's seeds).
 *
 * Policies are per tenant: the calls act on the caller's tenant only (tenant from
 * credentials/metadata, never a message field). Rows of the tenant "*" (server-wide, seeded
 * from the config file) are not visible or changeable through these calls; they show in the
 * effective policy (coord_get_policy). Strings are borrowed; outputs are the caller's.
 */
#ifndef IDEM_COORD_POLICY_H
#define IDEM_COORD_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "coord.h"
#include "coord_groups.h"

/* Checks a policy as it would be stored:
 *  - service: "*" or a name ([a-z0-9._-], 1–64); operation: "*" or a name;
 *    service "*" needs operation "*" (there is no ("*", operation) level);
 *  - mode FAIL_CLOSED or FAIL_OPEN; retention_s 1 s – 90 days; lease_ms 1 ms – 1 h.
 * ERR_INVALID names the field (service, operation, failure_mode, retention_s, lease_ms). */
err_code coord_policy_validate(const policy *p, err_t *err);

/* SetPolicy: validates, stores (replacing the tenant's row for (service, operation)), tells
 * the resolver (ctx->policies_changed), and answers the stored row in *out. */
err_code coord_set_policy(const coord_ctx *ctx, store *st, const char *tenant, const policy *p,
                          int64_t deadline, policy *out, err_t *err);

/* DeletePolicy: *deleted says whether the tenant had that row. service/operation as above. */
err_code coord_delete_policy(const coord_ctx *ctx, store *st, const char *tenant,
                             const char *service, const char *operation, int64_t deadline,
                             bool *deleted, err_t *err);

/* The same changes in every store group (docs/api.md §17): g[0] is the group of the call (the
 * change is checked there), g[1..n) the others, each through a store any node may write (a
 * policy is configuration, last write wins); g[i].st NULL: that group's store could not be had
 * (out of memory). g[0]'s refusal of the change itself (any error but ERR_UNAVAILABLE) ends the
 * call there; otherwise every other group takes the change, even when g[0] is unavailable. A
 * group that cannot take it fails the call ERR_UNAVAILABLE naming the first such group ("group
 * NAME: why (the other groups took the change: repeat it to converge)"); the others keep it, and
 * a repeat converges. *out / *deleted: g[0]'s answer. One call per group, in order, on the
 * stores given: nothing is opened here. */
err_code coord_set_policy_groups(const coord_group_view *g, size_t n, const char *tenant,
                                 const policy *p, int64_t deadline, policy *out, err_t *err);
err_code coord_delete_policy_groups(const coord_group_view *g, size_t n, const char *tenant,
                                    const char *service, const char *operation, int64_t deadline,
                                    bool *deleted, err_t *err);

/* ListPolicies: the tenant's own rows, ordered by (service, operation). *rows is owned
 * (free()), NULL when *n == 0. */
err_code coord_list_policies(const coord_ctx *ctx, store *st, const char *tenant,
                             int64_t deadline, policy_row **rows, size_t *n, err_t *err);

#endif
