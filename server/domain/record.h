/* record.h — the data model shared by coord/ (the rules) and store/ (persistence).
 *
 * Plain C, no gRPC, no libpq. Enum values equal the idem.v1 proto numbers (docs/api.md §2), so the
 * rpc layer converts by value (it static-asserts the equality).
 *
 * Ownership: a step_rec's body is heap memory owned by the record when the record was filled
 * by a function documented as "fills an owned record" (free it with step_rec_clear); records
 * inside a step_pair handed to a store_step_fn are owned by the store and valid only during
 * the callback; records in step_writes borrow their body from the callback's inputs.
 */
#ifndef IDEM_RECORD_H
#define IDEM_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits of docs/api.md §1. */
#define REC_GLOBAL_ID_MAX 128  /* global_id and tenant: 1–128 of [A-Za-z0-9._:-] */
#define REC_NAME_MAX 64        /* service, operation: 1–64 of [a-z0-9._-] */
#define REC_FP_MAX 64          /* fingerprint: 0–64 bytes */
#define REC_REQUEST_ID_MAX 255 /* request id: 1–255 printable ASCII */
#define REC_BODY_MAX_DEFAULT (64 * 1024)
#define REC_SAGA_TYPE_MAX 128     /* saga_type: 0–128 printable ASCII (README) */
#define REC_LABELS_MAX 32         /* at most 32 labels per saga */
#define REC_LABEL_KEY_MAX 63      /* label key: 1–63 of [A-Za-z0-9._/-] */
#define REC_LABEL_VALUE_MAX 256   /* label value: 0–256 bytes of UTF-8 without NUL */
#define REC_LEASE_MS_MAX 3600000u /* a requested lease: 1 ms – 1 h (0 = the policy's) */
#define REC_WAIT_MS_MAX 60000u    /* BeginStep's wait on a step in progress: 0 – 60 s */
#define REC_SAGA_PAGE_MAX 1000    /* steps in one GetSaga page */
#define REC_TRACE_ID_MAX 32       /* a W3C trace id: 32 lower-case hex (util/traceparent.h) */

typedef enum step_phase {
  PHASE_UNSPECIFIED = 0,
  PHASE_FORWARD = 1,
  PHASE_COMPENSATION = 2
} step_phase;

/* The state numbers as plain macros too, so that SQL text can be built from them
 * (store/store_pg_sql.h): no state number is written twice. */
#define REC_STATE_IN_PROGRESS 1
#define REC_STATE_SUCCEEDED 2
#define REC_STATE_FAILED 3
#define REC_STATE_UNKNOWN 4
#define REC_STATE_ABANDONED 5
#define REC_STATE_RELEASED 6

typedef enum step_state {
  STATE_NONE = 0, /* proto STEP_STATE_UNSPECIFIED; used for "no record" */
  STATE_IN_PROGRESS = REC_STATE_IN_PROGRESS,
  STATE_SUCCEEDED = REC_STATE_SUCCEEDED,
  STATE_FAILED = REC_STATE_FAILED,
  STATE_UNKNOWN = REC_STATE_UNKNOWN,
  STATE_ABANDONED = REC_STATE_ABANDONED,
  STATE_RELEASED = REC_STATE_RELEASED,
} step_state;

typedef enum step_outcome {
  OUTCOME_UNSPECIFIED = 0,
  OUTCOME_SUCCEEDED = 1,
  OUTCOME_FAILED = 2,
  OUTCOME_RETRYABLE = 3,
  OUTCOME_UNKNOWN = 4,
} step_outcome;

typedef enum step_decision {
  DECISION_UNSPECIFIED = 0,
  DECISION_PROCEED = 1,
  DECISION_REPLAY = 2,
  DECISION_SKIP_NULL_COMPENSATION = 3,
  DECISION_SKIP_ALREADY_COMPENSATED = 4,
  DECISION_PROCEED_UNGUARDED = 5,
} step_decision;

typedef enum failure_mode {
  FAILURE_MODE_UNSPECIFIED = 0,
  FAILURE_MODE_FAIL_CLOSED = 1,
  FAILURE_MODE_FAIL_OPEN = 2,
} failure_mode;

/* A step's identity: (tenant, global_id, service, operation, phase). Always validated before it
 * reaches the store (coord_key_from). */
typedef struct step_key {
  char tenant[REC_GLOBAL_ID_MAX + 1];
  char global_id[REC_GLOBAL_ID_MAX + 1];
  char service[REC_NAME_MAX + 1];
  char operation[REC_NAME_MAX + 1];
  step_phase phase;
} step_key;

/* One stored step. present == false means the store holds nothing for the key. */
typedef struct step_rec {
  bool present;
  step_key key;
  step_state state;
  uint64_t attempt; /* 0 for records no caller executed (tombstone, null compensation) */
  uint8_t fp[REC_FP_MAX];
  size_t fp_len;
  /* result: set when outcome != OUTCOME_UNSPECIFIED (finished, or RELEASED with its result) */
  step_outcome outcome;
  int32_t code;
  uint8_t *body; /* see the ownership note at the top; NULL when body_len == 0 */
  size_t body_len;
  int64_t completed_ms;
  int64_t created_ms;
  int64_t updated_ms;
  int64_t lease_expires_ms; /* IN_PROGRESS only; else 0 */
  int64_t expires_ms;       /* key retention: when the record is forgotten; 0 = while unfinished */
  /* result retention (docs/api.md §12): when the body is dropped; 0 = with the record (expires_ms).
   * From then on the record keeps key, state, attempt, fingerprint, outcome and code. */
  int64_t result_expires_ms;
  /* docs/api.md §22: the trace ids (TRACE_ID_LEN lower-case hex, "" when none) of the call that
   * began the current attempt and of the call that finished the record */
  char begin_trace_id[REC_TRACE_ID_MAX + 1];
  char complete_trace_id[REC_TRACE_ID_MAX + 1];
  bool result_expired; /* the store found the result expired when it read the record (its body
                        * is then empty); see step_rec_result_expired */
} step_rec;

/* How long a finished record is kept: its body for result_s, the rest for key_s (>= result_s;
 * 0 or less = result_s). */
typedef struct step_retention {
  uint32_t result_s;
  uint32_t key_s;
} step_retention;

/* Both records of a step pair (tenant, global_id, service, operation), read under the pair's
 * lock, and the store's clock at that moment (the database clock, shared by all nodes). */
typedef struct step_pair {
  step_rec fwd;
  step_rec comp;
  int64_t now_ms;
} step_pair;

/* Records a decision asks the store to write (insert or replace, whole record), in order. */
typedef struct step_writes {
  int n;
  step_rec recs[2];
} step_writes;

typedef struct saga_label {
  char *key; /* owned by the containing saga_view, or borrowed in inputs */
  char *value;
} saga_label;

/* Everything known about one saga (GetSaga). Owned: free with saga_view_clear. */
typedef struct saga_view {
  char global_id[REC_GLOBAL_ID_MAX + 1];
  char saga_type[REC_SAGA_TYPE_MAX + 1]; /* "" when the saga was not begun with BeginSaga */
  int64_t created_ms;                    /* 0 when there is no saga record */
  step_rec *steps;                       /* owned array of owned records */
  size_t n_steps;
  saga_label *labels; /* owned array; keys and values owned */
  size_t n_labels;
  bool more; /* steps follow the last one listed (saga_page) */
} saga_view;

/* Which part of a saga's steps GetSaga reads: timeline order (created_ms, phase, service,
 * operation), strictly after the `after_*` cursor when has_after, at most `limit` steps, and
 * no more bodies than fit in max_body_bytes (0 = no bound; the step whose body crosses it is
 * still read, so that the caller can measure it exactly and decide). */
typedef struct saga_page {
  uint32_t limit; /* 1..REC_SAGA_PAGE_MAX */
  size_t max_body_bytes;
  bool has_after;
  int64_t after_created_ms;
  step_phase after_phase;
  char after_service[REC_NAME_MAX + 1];
  char after_operation[REC_NAME_MAX + 1];
} saga_page;

/* A BeginSaga request as the store receives it (all validated; strings borrowed). */
typedef struct saga_new {
  const char *tenant;
  const char *global_id;  /* a fresh UUIDv7, used only when no live row holds request_id */
  const char *request_id; /* NULL: no request id, always a new saga */
  const char *saga_type;  /* never NULL ("" allowed) */
  const saga_label *labels;
  size_t n_labels;
  uint32_t retention_s; /* how long request_id is remembered */
} saga_new;

typedef struct saga_begun {
  char global_id[REC_GLOBAL_ID_MAX + 1];
  bool created;
  int64_t created_ms;
} saga_begun;

/* --- retention: the one liveness rule ---
 * A stored record counts while its retention has not passed (expires_ms 0: no retention yet,
 * the step is unfinished) or while it is UNKNOWN: an unknown outcome is kept and replayed until
 * an operator resolves it (docs/api.md §4). A record past its retention reads as absent everywhere
 * (decisions, Lookup, ListSteps, GetSaga) and the reaper may delete it. The SQL form of the same
 * rule is PG_LIVE in store/store_pg_sql.h, built from the same constants. */
#define REC_KEPT_STATE REC_STATE_UNKNOWN /* never expires while in this state */

static inline bool step_rec_live(const step_rec *r, int64_t now_ms) {
  return r->present &&
         (r->state == (step_state)REC_KEPT_STATE || r->expires_ms == 0 || r->expires_ms > now_ms);
}

/* Whether a live record's result has expired at now: its body is gone (or about to be dropped
 * by the reaper) while key, state, attempt, fingerprint, outcome and code remain. Never for an
 * UNKNOWN record (kept, body and all, until resolved). The SQL form is PG_RESULT_EXPIRED_AT. */
static inline bool step_rec_result_expired(const step_rec *r, int64_t now_ms) {
  if (r->result_expired) return true;
  return r->present && r->state != (step_state)REC_KEPT_STATE && r->result_expires_ms != 0 &&
         r->result_expires_ms <= now_ms;
}

/* Whether the reaper may delete a record in state s once its retention has passed: never one
 * that is IN_PROGRESS (no retention yet) or kept (UNKNOWN). */
static inline bool step_state_reapable(step_state s) {
  return s != (step_state)REC_STATE_IN_PROGRESS && s != (step_state)REC_KEPT_STATE;
}

/* Frees an owned record's body and zeroes the record (present = false). NULL is fine. */
void step_rec_clear(step_rec *r);

/* Deep copy: dst becomes an owned record (dst's previous contents are not freed). Returns false
 * on allocation failure, with dst zeroed. */
bool step_rec_copy(step_rec *dst, const step_rec *src);

/* Frees everything a saga_view owns and zeroes it. NULL is fine. */
void saga_view_clear(saga_view *v);

#endif
