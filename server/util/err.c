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

err_code err_set(err_t *e, err_code code, const char *fmt, ...) {
  if (!e) return code;
  e->code = code;
  e->retry_after_ms = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return code;
}

void err_clear(err_t *e) {
  if (!e) return;
  e->code = ERR_OK;
  e->retry_after_ms = 0;
  e->msg[0] = '\0';
}

const char *err_str(err_code code) {
  return (code >= 0 && code < ERR__COUNT) ? texts[code] : "unknown error";
}

const char *err_name(err_code code) {
  return (code >= 0 && code < ERR__COUNT) ? names[code] : "UNKNOWN";
}
