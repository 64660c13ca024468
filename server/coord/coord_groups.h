/* coord_groups.h — reads that span every store group (docs/api.md §17): ListSteps and ListAudit
 * without a global id. The serving node reads each group's store itself (reads are not fenced);
 * pages walk the groups in order, one group's matches after another's, so every match appears
 * exactly once across pages. A page token is the group's index and that group's own token:
 * "<index>~<token>" ("<index>~" to start a group). A group that cannot be read fails the call
 * UNAVAILABLE naming it. A page may come back short (even empty) with a next token when a
 * group's matches ran out: follow next tokens, not page sizes.
 */
#ifndef IDEM_COORD_GROUPS_H
#define IDEM_COORD_GROUPS_H

#include <stddef.h>

#include "coord.h"
#include "coord_admin.h"

/* One group as a read sees it. */
typedef struct coord_group_view {
  const char *name;
  const coord_ctx *ctx;
  store *st;
} coord_group_view;

/* ListSteps over groups g[0..n). in->global_id must be empty (one saga is one group's). */
err_code coord_list_steps_groups(const coord_group_view *g, size_t n, const char *tenant,
                                 const coord_list_in *in, int64_t deadline, step_list *out,
                                 char next_token[COORD_TOKEN_MAX], err_t *err);

/* ListAudit over groups (without a global id). */
err_code coord_list_audit_groups(const coord_group_view *g, size_t n, const char *tenant,
                                 uint32_t page_size, const char *page_token, int64_t deadline,
                                 audit_list *out, char next_token[COORD_TOKEN_MAX], err_t *err);

#endif
