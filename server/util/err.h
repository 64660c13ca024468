/* err.h — the server's one error type.
 *
 * Every module reports failure as an err_t: a stable code from ERR_CODES plus a short,
 * lower-case, factual message (PostgreSQL style) that names the offending field. The
 * mapping from err_code to a gRPC status lives in one table in rpc/ (rpc_status.c).
 * err_t is a plain value: no heap, safe to copy, safe to leave untouched on success.
 */
#ifndef IDEM_ERR_H
#define IDEM_ERR_H

#include <stdint.h>

/* X(name, text): codes are stable; add new ones at the end only. */
#define ERR_CODES(X)                                                         \
  X(OK, "ok")                                                                \
  X(INVALID, "invalid argument")          /* malformed or missing field */   \
  X(PRECONDITION, "failed precondition")  /* fingerprint mismatch, ... */    \
  X(ABORTED, "aborted")                   /* in progress; stale attempt */   \
  X(NOT_FOUND, "not found")                                                  \
  X(UNAVAILABLE, "unavailable")           /* store down, not the leader */   \
  X(DEADLINE, "deadline exceeded")                                           \
  X(INTERNAL, "internal error")                                              \
  X(UNAUTHENTICATED, "unauthenticated")                                      \
  X(PERMISSION, "permission denied")                                         \
  X(UNIMPLEMENTED, "unimplemented")                                          \
  X(RESOURCE, "resource exhausted")

typedef enum err_code {
#define X(name, text) ERR_##name,
  ERR_CODES(X)
#undef X
  ERR__COUNT
} err_code;

#define ERR_MSG_MAX 240

typedef struct err_t {
  err_code code;
  int64_t retry_after_ms; /* ERR_ABORTED for a step in progress: when to try again; else 0 */
  char msg[ERR_MSG_MAX];  /* short, lower-case, no trailing period; "" when code == ERR_OK */
} err_t;

/* Sets code and a printf-style message; returns code so callers can `return err_set(...)`. */
err_code err_set(err_t *e, err_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Resets e to ERR_OK with an empty message. */
void err_clear(err_t *e);

/* The fixed text of a code ("invalid argument"); never NULL. */
const char *err_str(err_code code);

/* The code's name ("INVALID"); never NULL. */
const char *err_name(err_code code);

#endif
