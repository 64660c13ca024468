/* err.h — the server's one error type.
 *
 * Every module reports failure as an err_t (PostgreSQL's ereport in miniature):
 *   code    what kind of failure, for programs: the gRPC status is decided from it (rpc_status.c)
 *   reason  why, for programs: a stable word ("fenced", "store-timeout", ...); callers branch on
 *           code and reason, never on the text
 *   msg     what happened, for people: short, lower-case, factual, no trailing period, naming
 *           the offending field
 *   detail  optional: more about what happened ("" when none)
 *   hint    optional: what to do about it ("" when none)
 *   leader  with ERR_R_NOT_LEADER / ERR_R_FENCED: the leader's address when known ("" if not)
 *   permanent  no retry can fix it (PostgreSQL refused the connection for good): for programs
 *           in this process only, never on the wire; set with err_permanent
 * err_t is a plain value: no heap, safe to copy, safe to leave untouched on success. Every
 * setter accepts NULL (and then only returns the code).
 */
#ifndef IDEM_ERR_H
#define IDEM_ERR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* X(name, text): codes are stable; add new ones at the end only. */
#define ERR_CODES(X)                                                      \
  X(OK, "ok")                                                             \
  X(INVALID, "invalid argument")         /* malformed or missing field */ \
  X(PRECONDITION, "failed precondition") /* fingerprint mismatch, ... */  \
  X(ABORTED, "aborted")                  /* in progress; stale attempt */ \
  X(NOT_FOUND, "not found")                                               \
  X(UNAVAILABLE, "unavailable") /* store down, not the leader */          \
  X(DEADLINE, "deadline exceeded")                                        \
  X(INTERNAL, "internal error")                                           \
  X(UNAUTHENTICATED, "unauthenticated")                                   \
  X(PERMISSION, "permission denied")                                      \
  X(UNIMPLEMENTED, "unimplemented")                                       \
  X(RESOURCE, "resource exhausted") /* out of memory, queue full */

typedef enum err_code {
#define X(name, text) ERR_##name,
  ERR_CODES(X)
#undef X
  ERR__COUNT
} err_code;

/* X(name, word): why a call failed, where a program needs to know. Stable; add at the end. */
#define ERR_REASONS(X)                                                                    \
  X(NONE, "none")                                 /* the code says it all */              \
  X(OUT_OF_MEMORY, "out-of-memory")               /* ERR_RESOURCE, always */              \
  X(NOT_LEADER, "not-leader")                     /* this node does not lead */           \
  X(FENCED, "fenced")                             /* the store refused an old epoch */    \
  X(STORE_UNAVAILABLE, "store-unavailable")       /* cannot reach the database */         \
  X(STORE_TIMEOUT, "store-timeout")               /* the deadline passed in the store */  \
  X(STORE_CONFLICT, "store-conflict")             /* retries of 40001/40P01 exhausted */  \
  X(STORE_STOPPING, "store-stopping")             /* the batcher is shutting down */      \
  X(STORE_ERROR, "store-error")                   /* an SQL error */                      \
  X(OVERLOADED, "overloaded")                     /* too many calls waiting */            \
  X(IN_PROGRESS, "in-progress")                   /* another caller holds the lease */    \
  X(LEASE_LOST, "lease-lost")                     /* a newer attempt, or abandoned */     \
  X(NEVER_ISSUED, "never-issued")                 /* an attempt beyond the current one */ \
  X(FINGERPRINT_MISMATCH, "fingerprint-mismatch") /* same key, another request */         \
  X(FINISHED_DIFFERENTLY, "finished-differently") /* a Complete that disagrees */         \
  X(NOT_RESOLVABLE, "not-resolvable")             /* ResolveStep on a settled step */     \
  X(SHUTTING_DOWN, "shutting-down")               /* the server is draining */            \
  X(NO_LEADER, "no-leader")                       /* no node leads now (an election) */   \
  X(SLOT_MOVING, "slot-moving")                   /* the slot is being moved (§18) */     \
  X(REQUEST_MISMATCH, "request-mismatch")         /* a move's request_id, other slots */   \
  X(MOVE_IN_PROGRESS, "move-in-progress")         /* another move is under way (§18) */    \
  X(MOVE_ROLLED_BACK, "move-rolled-back")         /* the request's move was rolled back */

typedef enum err_reason {
#define X(name, word) ERR_R_##name,
  ERR_REASONS(X)
#undef X
      ERR_R__COUNT
} err_reason;

#define ERR_MSG_MAX 240
#define ERR_DETAIL_MAX 200
#define ERR_HINT_MAX 160
#define ERR_LEADER_MAX 128

typedef struct err_t {
  err_code code;
  err_reason reason;
  int64_t retry_after_ms; /* ERR_ABORTED in progress, ERR_UNAVAILABLE slot-moving: when to try
                             again; else 0 */
  char msg[ERR_MSG_MAX];  /* "" when code == ERR_OK */
  char detail[ERR_DETAIL_MAX];
  char hint[ERR_HINT_MAX];
  char leader[ERR_LEADER_MAX];
  bool permanent; /* see the top of this file; false unless err_permanent was called */
} err_t;

/* Sets code, reason and a printf-style message (no detail or hint, not permanent); returns code
 * so callers can `return err_fail(...)`. */
err_code err_fail(err_t *e, err_code code, err_reason reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* err_fail where the code says it all (reason ERR_R_NONE). */
#define err_set(e, code, ...) err_fail((e), (code), ERR_R_NONE, __VA_ARGS__)

/* The one way to report an allocation failure: ERR_RESOURCE, ERR_R_OUT_OF_MEMORY. */
err_code err_oom(err_t *e);

/* Adds a detail (hint = 0) or a hint (hint = 1) to an error already set (printf-style; replaces
 * an earlier one). Use the two macros below. */
void err_note(err_t *e, int hint, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define err_detail(e, ...) err_note((e), 0, __VA_ARGS__)
#define err_hint(e, ...) err_note((e), 1, __VA_ARGS__)

/* Marks an error already set as one no retry can fix (e->permanent). */
void err_permanent(err_t *e);

/* Records the leader's address (NULL or "" = unknown) on an error already set. */
void err_leader(err_t *e, const char *address);

/* Whether e says "this node may not write: another node leads" (not the leader, or fenced):
 * the caller is sent to the leader. */
int err_is_not_leader(const err_t *e);

/* Whether e is the store's own failure (a STORE_* reason, or out of memory) rather than an
 * answer the rules gave. */
int err_from_store(const err_t *e);

/* Resets e to ERR_OK, ERR_R_NONE, with empty texts. */
void err_clear(err_t *e);

/* The fixed text of a code ("invalid argument"); never NULL. */
const char *err_str(err_code code);

/* The code's name ("INVALID"); never NULL. */
const char *err_name(err_code code);

/* The reason's word ("store-timeout"); never NULL. */
const char *err_reason_word(err_reason reason);

/* The word a non-OK answer carries on the wire (docs/api.md §5, trailing metadata idem-reason): the
 * reason's word, or when the code says it all, the code's ("invalid-argument", "not-found",
 * "unauthenticated", "permission-denied", ...). A refusal that names no leader (ERR_R_NOT_LEADER
 * with leader "" ) is "no-leader": an election is in progress. Never NULL. */
const char *err_wire_reason(const err_t *e);

/* text as a metadata value on the wire (docs/api.md §5, idem-detail and idem-hint): printable
 * ASCII only. A tab, newline or carriage return becomes a space, another control character is
 * dropped, a byte above 0x7e (UTF-8) becomes '?', and leading and trailing spaces go. Writes at
 * most cap - 1 bytes and a NUL into out (cap > 0); returns the length written (0: nothing to
 * send). NULL text is "". */
size_t err_wire_text(const char *text, char *out, size_t cap);

#endif
