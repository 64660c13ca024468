/* coord_admin.h — incident response (docs/api.md §2 Admin): ListSteps, ResolveStep, ListAudit, as
 * plain C (no gRPC, no libpq). Same conventions as coord.h: inputs borrowed, outputs owned and
 * freed with the named clear function, left empty on error; validation before any store
 * access; the tenant comes from the caller's metadata.
 *
 * Page tokens are opaque to callers: base64url text naming the last row of the previous page
 * and a hash of the filters; a token used with other filters (or another tenant) is refused as
 * INVALID_ARGUMENT. Because the cursor is a step key (which never changes), paging stays
 * correct while rows are updated or inserted: no row is listed twice, and every row that
 * existed (and still matched) for the whole listing is listed once.
 */
#ifndef IDEM_COORD_ADMIN_H
#define IDEM_COORD_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../domain/record_admin.h"
#include "coord.h"
#include "decide.h" /* coord_decide_resolve: the rule ResolveStep runs */

#define COORD_TOKEN_MAX 600 /* a page token, NUL included */

/* Replies fit any client's 4 MiB receive limit (docs/api.md §16): a page of ListSteps or GetSaga
 * ends before the record that would take it past COORD_PAGE_BYTES, as the caller's size
 * function measures a record in its reply (the encoded size). Always at least one record. */
#define COORD_PAGE_BYTES (3u << 20)
/* kept out of the records' share for the reply's other fields: the page token (< 600 bytes),
 * and on a GetSaga page the saga's fields and up to 32 labels (< 11 KiB) */
#define COORD_PAGE_RESERVE (16u << 10)
typedef size_t (*coord_rec_size_fn)(const step_rec *r); /* NULL: no byte bound */

/* ListStepsRequest as decoded (borrowed strings; NULL = ""). */
typedef struct coord_list_in {
  int state; /* 0 = any, else a step_state */
  const char *service;
  const char *operation;
  const char *global_id;
  const char *trace_id;      /* "" = any; else 32 lower-case hex: begin or complete trace id */
  int64_t updated_before_ms; /* 0 = any */
  bool lease_expired_only;   /* implies state IN_PROGRESS; another state is refused */
  uint32_t page_size;        /* 0 = LIST_PAGE_DEFAULT; larger than LIST_PAGE_MAX = the max */
  const char *page_token;
  coord_rec_size_fn rec_size; /* the byte bound's measure */
} coord_list_in;

/* ListSteps. *out is owned (step_list_clear); next_token is "" on the last page. */
err_code coord_list_steps(const coord_ctx *ctx, store *st, const char *tenant,
                          const coord_list_in *in, int64_t deadline, step_list *out,
                          char next_token[COORD_TOKEN_MAX], err_t *err);

/* GetSagaRequest as decoded. */
typedef struct coord_saga_in {
  const char *global_id;
  const char *page_token; /* NULL or "" = the first page */
  coord_rec_size_fn rec_size;
} coord_saga_in;

/* GetSaga: the saga, its labels and one page of its steps in timeline order (created time);
 * next_token is "" on the last page. *out is owned (saga_view_clear). ERR_NOT_FOUND when the
 * saga is unknown in this tenant. */
err_code coord_get_saga(const coord_ctx *ctx, store *st, const char *tenant,
                        const coord_saga_in *in, int64_t deadline, saga_view *out,
                        char next_token[COORD_TOKEN_MAX], err_t *err);

/* ResolveStepRequest as decoded. */
typedef struct coord_resolve_in {
  coord_key_in key;
  int outcome; /* SUCCEEDED, FAILED or RETRYABLE */
  int32_t code;
  const uint8_t *body;
  size_t body_len;
  const char *reason; /* required: 1–AUDIT_REASON_MAX bytes, no control characters */
  const char *actor;  /* "" or NULL = the tenant's name; else 1–AUDIT_ACTOR_MAX printable */
} coord_resolve_in;

/* ResolveStep: only an IN_PROGRESS or UNKNOWN step (else ERR_PRECONDITION; no record:
 * ERR_NOT_FOUND). SUCCEEDED and FAILED store the result (replayed from then on); RETRYABLE
 * releases the key (state RELEASED: the next BeginStep proceeds with attempt + 1). The attempt
 * is kept, so the holder of an IN_PROGRESS step is fenced out (its ExtendLease is ABORTED, its
 * Complete refused unless identical). The audit row is written in the same transaction, under
 * the same pair lock as BeginStep/CompleteStep. On ERR_OK *out is the record after the call
 * (owned: step_rec_clear). */
err_code coord_resolve_step(const coord_ctx *ctx, store *st, const char *tenant,
                            const coord_resolve_in *in, int64_t deadline, step_rec *out,
                            err_t *err);

/* ResolveStepsRequest as decoded (docs/api.md §12). */
typedef struct coord_bulk_in {
  coord_list_in filter; /* page_size, page_token and rec_size are not read; must select
                           IN_PROGRESS or UNKNOWN steps (state, or lease_expired_only) */
  int outcome;          /* as ResolveStep: SUCCEEDED, FAILED or RETRYABLE */
  int32_t code;
  const uint8_t *body;
  size_t body_len;
  const char *reason; /* required */
  const char *actor;  /* "" or NULL = the tenant's name */
  bool dry_run;
  uint32_t max_steps;     /* 1–BULK_STEPS_MAX, required */
  const char *request_id; /* required: the same id again answers the first answer */
  const char *trace_id;   /* the call's (coord_key_in.trace_id): each resolved record's
                             complete_trace_id */
} coord_bulk_in;

typedef struct coord_bulk_out {
  bulk_rec rec; /* matched, resolved, sample, batch_id ("" on a dry run) */
  bool dry_run;
  bool replayed; /* the answer of an earlier request with this id: nothing was done now */
} coord_bulk_out;

/* ResolveSteps: every step the filter selects, each resolved under its pair lock by the
 * ResolveStep rule with an audit row carrying the batch id; a step that changed since it matched
 * (state, attempt or update time) is skipped (matched - resolved). More than max_steps matches:
 * ERR_PRECONDITION and nothing is resolved. Answers are remembered a day by request id. A run cut
 * short by the store or the deadline remembers nothing: repeating it resolves what is left. */
err_code coord_resolve_steps(const coord_ctx *ctx, store *st, const char *tenant,
                             const coord_bulk_in *in, int64_t deadline, coord_bulk_out *out,
                             err_t *err);

/* ListAudit: newest first; global_id "" = the whole tenant. *out is owned (audit_list_clear). */
err_code coord_list_audit(const coord_ctx *ctx, store *st, const char *tenant,
                          const char *global_id, uint32_t page_size, const char *page_token,
                          int64_t deadline, audit_list *out, char next_token[COORD_TOKEN_MAX],
                          err_t *err);

/* --- pure parts, exposed for unit tests --- */

/* ResolveSteps' rule for a step that matched as `matched`: resolve it only while it is the same
 * record (state, attempt, update time); anything else changed it since. */
bool coord_bulk_unchanged(const step_rec *matched, const step_rec *cur);

/* ListSteps tokens: encode the cursor `after` for the filters f (f->tenant included); decode
 * checks the filters' hash and fills after. decode: ERR_INVALID naming page_token. */
bool coord_steps_token_encode(const step_filter *f, const step_key *after,
                              char out[COORD_TOKEN_MAX]);
err_code coord_steps_token_decode(const step_filter *f, const char *token, step_key *after,
                                  err_t *err);

/* GetSaga tokens: the saga and the timeline cursor of the last step; decode fills pg's
 * has_after and after_* fields. */
bool coord_saga_token_encode(const char *tenant, const char *global_id, const step_rec *last,
                             char out[COORD_TOKEN_MAX]);
err_code coord_saga_token_decode(const char *tenant, const char *global_id, const char *token,
                                 saga_page *pg, err_t *err);

/* ListAudit tokens: the id of the last row and the scope (tenant, global_id). */
bool coord_audit_token_encode(const char *tenant, const char *global_id, int64_t last_id,
                              char out[COORD_TOKEN_MAX]);
err_code coord_audit_token_decode(const char *tenant, const char *global_id, const char *token,
                                  int64_t *last_id, err_t *err);

#endif
