/* err.c — the server's error type (err.h): setting, clearing, and the words and texts of its
 * codes and reasons. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const texts[] = {
#define X(name, text) text,
    ERR_CODES(X)
#undef X
};

static const char *const names[] = {
#define X(name, text) #name,
    ERR_CODES(X)
#undef X
};

static const char *const words[] = {
#define X(name, word) word,
    ERR_REASONS(X)
#undef X
};

static err_code vset(err_t *e, err_code code, err_reason reason, const char *fmt, va_list ap) {
  if (!e) return code;
  e->code = code;
  e->reason = reason;
  e->retry_after_ms = 0;
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  e->detail[0] = e->hint[0] = e->leader[0] = '\0';
  e->permanent = false;
  return code;
}

err_code err_fail(err_t *e, err_code code, err_reason reason, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vset(e, code, reason, fmt, ap);
  va_end(ap);
  return code;
}

err_code err_oom(err_t *e) {
  return err_fail(e, ERR_RESOURCE, ERR_R_OUT_OF_MEMORY, "out of memory");
}

void err_note(err_t *e, int hint, const char *fmt, ...) {
  if (!e) return;
  va_list ap;
  va_start(ap, fmt);
  if (hint)
    vsnprintf(e->hint, sizeof e->hint, fmt, ap);
  else
    vsnprintf(e->detail, sizeof e->detail, fmt, ap);
  va_end(ap);
}

void err_permanent(err_t *e) {
  if (e) e->permanent = true;
}

void err_leader(err_t *e, const char *address) {
  if (e) snprintf(e->leader, sizeof e->leader, "%s", address ? address : "");
}

int err_is_not_leader(const err_t *e) {
  return e && (e->reason == ERR_R_NOT_LEADER || e->reason == ERR_R_FENCED);
}

int err_from_store(const err_t *e) {
  if (!e) return 0;
  switch (e->reason) {
    case ERR_R_STORE_UNAVAILABLE:
    case ERR_R_STORE_TIMEOUT:
    case ERR_R_STORE_CONFLICT:
    case ERR_R_STORE_STOPPING:
    case ERR_R_STORE_ERROR:
    case ERR_R_FENCED:
    case ERR_R_OUT_OF_MEMORY:
    case ERR_R_OVERLOADED:
      return 1;
    default:
      return 0;
  }
}

void err_clear(err_t *e) {
  if (!e) return;
  e->code = ERR_OK;
  e->reason = ERR_R_NONE;
  e->retry_after_ms = 0;
  e->msg[0] = e->detail[0] = e->hint[0] = e->leader[0] = '\0';
  e->permanent = false;
}

const char *err_str(err_code code) {
  return (code >= 0 && code < ERR__COUNT) ? texts[code] : "unknown error";
}

const char *err_name(err_code code) {
  return (code >= 0 && code < ERR__COUNT) ? names[code] : "UNKNOWN";
}

const char *err_reason_word(err_reason reason) {
  return (reason >= 0 && reason < ERR_R__COUNT) ? words[reason] : "unknown";
}

/* the words of the codes whose reason is ERR_R_NONE, indexed by err_code */
static const char *const code_words[ERR__COUNT] = {
    [ERR_OK] = "ok",
    [ERR_INVALID] = "invalid-argument",
    [ERR_PRECONDITION] = "failed-precondition",
    [ERR_ABORTED] = "aborted",
    [ERR_NOT_FOUND] = "not-found",
    [ERR_UNAVAILABLE] = "unavailable",
    [ERR_DEADLINE] = "deadline-exceeded",
    [ERR_INTERNAL] = "internal",
    [ERR_UNAUTHENTICATED] = "unauthenticated",
    [ERR_PERMISSION] = "permission-denied",
    [ERR_UNIMPLEMENTED] = "unimplemented",
    [ERR_RESOURCE] = "resource-exhausted",
};

const char *err_wire_reason(const err_t *e) {
  if (!e) return "unknown";
  if (e->reason == ERR_R_NOT_LEADER && !e->leader[0]) return err_reason_word(ERR_R_NO_LEADER);
  if (e->reason != ERR_R_NONE) return err_reason_word(e->reason);
  return (e->code >= 0 && e->code < ERR__COUNT) ? code_words[e->code] : "unknown";
}

size_t err_wire_text(const char *text, char *out, size_t cap) {
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)(text ? text : ""); *p && n + 1 < cap; p++) {
    unsigned char ch = *p;
    if (ch == '\t' || ch == '\n' || ch == '\r')
      ch = ' ';
    else if (ch < 0x20 || ch == 0x7f) /* another control character */
      continue;
    else if (ch > 0x7e) /* a byte of a UTF-8 sequence */
      ch = '?';
    if (ch == ' ' && n == 0) continue; /* no leading space */
    out[n++] = (char)ch;
  }
  while (n > 0 && out[n - 1] == ' ') n--; /* nor a trailing one */
  out[n] = '\0';
  return n;
}
