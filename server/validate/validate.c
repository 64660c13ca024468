/* validate.c — input validation of docs/api.md §1 (see validate.h for the contracts).
 *
 * Every function is pure (no allocation, no I/O) and returns ERR_OK, or ERR_INVALID with a
 * message that starts with the proto field path, PostgreSQL style: lower-case, no trailing
 * period, e.g. "key.global_id: must be 1 to 128 characters of [A-Za-z0-9._:-]".
 * NULL strings read as "".
 */
#include "validate.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "../util/utf8.h"

/* Length of s, but stops counting past limit + 1 (a hostile string is never fully scanned). */
static size_t bounded_len(const char *s, size_t limit) {
  if (!s) return 0;
  size_t n = 0;
  while (n <= limit && s[n] != '\0') n++;
  return n;
}

static bool is_alnum(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* [A-Za-z0-9._:-] */
static bool is_id_char(unsigned char c) {
  return is_alnum(c) || c == '.' || c == '_' || c == ':' || c == '-';
}

/* [a-z0-9._-] */
static bool is_name_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

/* [A-Za-z0-9._/-] */
static bool is_label_key_char(unsigned char c) {
  return is_alnum(c) || c == '.' || c == '_' || c == '/' || c == '-';
}

static bool is_printable_ascii(unsigned char c) {
  return c >= 0x20 && c <= 0x7E;
}

/* True when v is min..max characters, each accepted by ok. */
static bool all_chars(const char *v, size_t min, size_t max, bool (*ok)(unsigned char)) {
  size_t n = bounded_len(v, max);
  if (n < min || n > max) return false;
  for (size_t i = 0; i < n; i++)
    if (!ok((unsigned char)v[i])) return false;
  return true;
}


err_code validate_global_id(const char *field, const char *v, err_t *err) {
  if (all_chars(v, 1, REC_GLOBAL_ID_MAX, is_id_char)) return ERR_OK;
  return err_set(err, ERR_INVALID, "%s: must be 1 to %d characters of [A-Za-z0-9._:-]", field,
                 REC_GLOBAL_ID_MAX);
}

err_code validate_tenant(const char *tenant, err_t *err) {
  return validate_global_id("tenant", tenant, err);
}

err_code validate_name(const char *field, const char *v, err_t *err) {
  if (all_chars(v, 1, REC_NAME_MAX, is_name_char)) return ERR_OK;
  return err_set(err, ERR_INVALID, "%s: must be 1 to %d characters of [a-z0-9._-]", field,
                 REC_NAME_MAX);
}

err_code validate_key(const char *tenant, const char *global_id, const char *service,
                      const char *operation, int phase, step_key *out, err_t *err) {
  err_code rc;
  if ((rc = validate_tenant(tenant, err)) != ERR_OK) return rc;
  if ((rc = validate_global_id("key.global_id", global_id, err)) != ERR_OK) return rc;
  if ((rc = validate_name("key.service", service, err)) != ERR_OK) return rc;
  if ((rc = validate_name("key.operation", operation, err)) != ERR_OK) return rc;
  if (phase != PHASE_FORWARD && phase != PHASE_COMPENSATION)
    return err_set(err, ERR_INVALID, "key.phase: must be PHASE_FORWARD or PHASE_COMPENSATION");
  if (out) {
    memset(out, 0, sizeof *out);
    /* lengths were checked above, so these copies always fit */
    memcpy(out->tenant, tenant, strlen(tenant) + 1);
    memcpy(out->global_id, global_id, strlen(global_id) + 1);
    memcpy(out->service, service, strlen(service) + 1);
    memcpy(out->operation, operation, strlen(operation) + 1);
    out->phase = (step_phase)phase;
  }
  return ERR_OK;
}

err_code validate_fingerprint(size_t len, err_t *err) {
  if (len <= REC_FP_MAX) return ERR_OK;
  return err_set(err, ERR_INVALID, "fingerprint: must be at most %d bytes", REC_FP_MAX);
}

err_code validate_body(size_t len, size_t max, err_t *err) {
  if (len <= max) return ERR_OK;
  return err_set(err, ERR_INVALID, "body: must be at most %zu bytes", max);
}

err_code validate_request_id(const char *v, err_t *err) {
  if (!v || v[0] == '\0') return ERR_OK; /* no request id */
  if (all_chars(v, 1, REC_REQUEST_ID_MAX, is_printable_ascii)) return ERR_OK;
  return err_set(err, ERR_INVALID, "request_id: must be 1 to %d printable ASCII characters",
                 REC_REQUEST_ID_MAX);
}

err_code validate_saga_type(const char *v, err_t *err) {
  if (all_chars(v, 0, REC_SAGA_TYPE_MAX, is_printable_ascii)) return ERR_OK;
  return err_set(err, ERR_INVALID, "saga_type: must be at most %d printable ASCII characters",
                 REC_SAGA_TYPE_MAX);
}

err_code validate_label(const char *key, const char *value, err_t *err) {
  if (!all_chars(key, 1, REC_LABEL_KEY_MAX, is_label_key_char))
    return err_set(err, ERR_INVALID, "labels: key must be 1 to %d characters of [A-Za-z0-9._/-]",
                   REC_LABEL_KEY_MAX);
  size_t n = bounded_len(value, REC_LABEL_VALUE_MAX);
  if (n > REC_LABEL_VALUE_MAX || !utf8_valid((const unsigned char *)(value ? value : ""), n))
    return err_set(err, ERR_INVALID, "labels: value of %s must be at most %d bytes of UTF-8", key,
                   REC_LABEL_VALUE_MAX);
  return ERR_OK;
}

err_code validate_lease_ms(const char *field, uint32_t v, int zero_ok, err_t *err) {
  if (v == 0 && zero_ok) return ERR_OK;
  if (v >= 1 && v <= REC_LEASE_MS_MAX) return ERR_OK;
  if (zero_ok)
    return err_set(err, ERR_INVALID, "%s: must be 0 (the policy's lease) or 1 to %u", field,
                   REC_LEASE_MS_MAX);
  return err_set(err, ERR_INVALID, "%s: must be 1 to %u", field, REC_LEASE_MS_MAX);
}

err_code validate_wait_ms(uint32_t v, err_t *err) {
  if (v <= REC_WAIT_MS_MAX) return ERR_OK;
  return err_set(err, ERR_INVALID, "wait_ms: must be 0 to %u, got %u", REC_WAIT_MS_MAX, v);
}

err_code validate_outcome(int outcome, err_t *err) {
  if (outcome >= OUTCOME_SUCCEEDED && outcome <= OUTCOME_UNKNOWN) return ERR_OK;
  return err_set(err, ERR_INVALID, "outcome: must be one of SUCCEEDED, FAILED, RETRYABLE, UNKNOWN");
}

err_code validate_attempt(uint64_t attempt, err_t *err) {
  if (attempt >= 1) return ERR_OK;
  return err_set(err, ERR_INVALID, "attempt: must be at least 1");
}

/* The text check of validate_text and validate_reason: lines says whether LF may appear. */
static err_code text_check(const char *field, const char *v, size_t max, bool lines,
                           err_t *err) {
  const unsigned char *p = (const unsigned char *)(v ? v : "");
  size_t n = bounded_len((const char *)p, max);
  bool ok = n <= max && utf8_valid(p, n);
  for (size_t i = 0; ok && i < n; i++) {
    if ((p[i] < 0x20 && !(lines && p[i] == '\n')) || p[i] == 0x7F) ok = false; /* C0, DEL */
    if (p[i] == 0xC2 && i + 1 < n && p[i + 1] < 0xA0) ok = false; /* C1: U+0080..U+009F */
  }
  if (ok) return ERR_OK;
  const char *what = lines ? "UTF-8 whose only control character is the line feed (LF)"
                           : "UTF-8 without control characters";
  if (max == SIZE_MAX) return err_set(err, ERR_INVALID, "%s: must be %s", field, what);
  return err_set(err, ERR_INVALID, "%s: must be at most %zu bytes of %s", field, max, what);
}

err_code validate_text(const char *field, const char *v, size_t max, err_t *err) {
  return text_check(field, v, max, false, err);
}

err_code validate_reason(const char *field, const char *v, size_t max, err_t *err) {
  return text_check(field, v, max, true, err);
}
