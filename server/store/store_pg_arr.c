/* store_pg_arr.c — array literals in PostgreSQL's text format (see store_pg_internal.h), in a
 * util/buf. Every element is double-quoted with '"' and '\' escaped, so no value can end an
 * element, open a nested array or read as NULL. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "store_pg_internal.h"

void pg__arr_reset(pg_arr *a) {
  buf_clear(&a->b);
  a->n = 0;
  buf_putn(&a->b, "{", 1);
}

static void sep(pg_arr *a) {
  if (a->n++ > 0) buf_putn(&a->b, ",", 1);
}

void pg__arr_text(pg_arr *a, const char *v) {
  sep(a);
  size_t n = strlen(v);
  if (!buf_reserve(&a->b, 2 * n + 2)) return;
  char *p = a->b.p + a->b.n;
  *p++ = '"';
  for (size_t i = 0; i < n; i++) {
    if (v[i] == '"' || v[i] == '\\') *p++ = '\\';
    *p++ = v[i];
  }
  *p++ = '"';
  *p = '\0';
  a->b.n = (size_t)(p - a->b.p);
}

void pg__arr_i64(pg_arr *a, int64_t v) {
  sep(a);
  buf_printf(&a->b, "%" PRId64, v);
}

void pg__arr_bytes(pg_arr *a, const void *v, size_t len) {
  static const char hex[] = "0123456789abcdef";
  sep(a);
  if (!buf_reserve(&a->b, 2 * len + 5)) return;
  char *p = a->b.p + a->b.n;
  memcpy(p, "\"\\\\x", 4); /* "\\x : an escaped backslash, then x */
  p += 4;
  const unsigned char *s = v;
  for (size_t i = 0; i < len; i++) {
    *p++ = hex[s[i] >> 4];
    *p++ = hex[s[i] & 15];
  }
  *p++ = '"';
  *p = '\0';
  a->b.n = (size_t)(p - a->b.p);
}

const char *pg__arr_end(pg_arr *a) {
  buf_putn(&a->b, "}", 1);
  return a->b.oom ? NULL : a->b.p;
}

void pg__arr_free(pg_arr *a) {
  buf_free(&a->b);
  a->n = 0;
}
