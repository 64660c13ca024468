/* validate.h — input validation of docs/api.md §1, before any store access.
 *
 * Each function returns ERR_OK, or ERR_INVALID with err->msg naming the field in PostgreSQL
 * message style, e.g. "key.global_id: must be 1 to 128 characters of [A-Za-z0-9._:-]".
 * Field names in messages are the proto field paths (key.global_id, fingerprint, body, ...).
 */
#ifndef IDEM_VALIDATE_H
#define IDEM_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include "../domain/record.h"
#include "../util/err.h"

/* Fills out from the raw fields of a StepKey (strings borrowed, may be NULL = empty) and the
 * caller's tenant. phase must be PHASE_FORWARD or PHASE_COMPENSATION. */
err_code validate_key(const char *tenant, const char *global_id, const char *service,
                      const char *operation, int phase, step_key *out, err_t *err);

err_code validate_tenant(const char *tenant, err_t *err); /* global_id rule */
err_code validate_global_id(const char *field, const char *v, err_t *err);
err_code validate_name(const char *field, const char *v, err_t *err); /* service, operation */
err_code validate_fingerprint(size_t len, err_t *err);                /* 0–64 bytes */
err_code validate_body(size_t len, size_t max, err_t *err);           /* 0–max bytes */
err_code validate_request_id(const char *v,
                             err_t *err); /* "" allowed (= none); else 1–255 printable */
err_code validate_saga_type(const char *v, err_t *err); /* 0–128 printable ASCII */
err_code validate_label(const char *key, const char *value, err_t *err);
err_code validate_lease_ms(const char *field, uint32_t v, int zero_ok, err_t *err);
/* BeginStep's wait_ms: 0 to REC_WAIT_MS_MAX. */
err_code validate_wait_ms(uint32_t v, err_t *err);
err_code validate_outcome(int outcome, err_t *err);      /* SUCCEEDED, FAILED, RETRYABLE, UNKNOWN */
err_code validate_attempt(uint64_t attempt, err_t *err); /* >= 1 */
/* Free text (reasons, actors): 0–max bytes of strict UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF) without control characters (C0, DEL, C1). */
err_code validate_text(const char *field, const char *v, size_t max, err_t *err);
/* A reason (ResolveStep, ResolveSteps): as validate_text, but it may span lines: LF (\n) is
 * the one control character allowed (a CR is refused; the console turns CRLF into LF). */
err_code validate_reason(const char *field, const char *v, size_t max, err_t *err);

#endif
