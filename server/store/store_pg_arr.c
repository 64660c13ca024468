/* store_pg_arr.c — array literals in PostgreSQL's text format (see store_pg_internal.h).
 * Every element is double-quoted with '"' and '\' escaped, so no value can end an element,
 * open a nested array or read as NULL. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_pg_internal.h"

static bool grow(pg_arr *a, size_t more) {
  if (a->oom) return false;
  if (a->len + more + 2 <= a->cap) return true; /* room for '}' and NUL */
  size_t cap = a->cap ? a->cap : 256;
  while (cap < a->len + more + 2) cap *= 2;
  char *b = realloc(a->buf, cap);
  if (!b) {
    a->oom = true;
    return false;
  }
  a->buf = b;
  a->cap = cap;
  return true;
}

static void put(pg_arr *a, const char *s, size_t n) {
  if (!grow(a, n)) return;
  memcpy(a->buf + a->len, s, n);
  a->len += n;
}

void pg__arr_reset(pg_arr *a) {
  a->len = 0;
  a->n = 0;
  a->oom = false;
  put(a, "{", 1);
}

static void sep(pg_arr *a) {
  if (a->n++ > 0) put(a, ",", 1);
}

void pg__arr_text(pg_arr *a, const char *v) {
  sep(a);
  size_t n = strlen(v);
  if (!grow(a, 2 * n + 2)) return;
  a->buf[a->len++] = '"';
  for (size_t i = 0; i < n; i++) {
    if (v[i] == '"' || v[i] == '\\') a->buf[a->len++] = '\\';
    a->buf[a->len++] = v[i];
  }
  a->buf[a->len++] = '"';
}

void pg__arr_i64(pg_arr *a, int64_t v) {
  sep(a);
  char num[24];
  int n = snprintf(num, sizeof num, "%" PRId64, v);
  put(a, num, (size_t)n);
}

void pg__arr_bytes(pg_arr *a, const void *v, size_t len) {
  static const char hex[] = "0123456789abcdef";
  sep(a);
  if (!grow(a, 2 * len + 5)) return;
  memcpy(a->buf + a->len, "\"\\\\x", 4); /* "\\x : an escaped backslash, then x */
  a->len += 4;
  const unsigned char *p = v;
  for (size_t i = 0; i < len; i++) {
    a->buf[a->len++] = hex[p[i] >> 4];
    a->buf[a->len++] = hex[p[i] & 15];
  }
  a->buf[a->len++] = '"';
}

const char *pg__arr_end(pg_arr *a) {
  put(a, "}", 1);
  if (a->oom) return NULL;
  a->buf[a->len] = '\0';
  return a->buf;
}

void pg__arr_free(pg_arr *a) {
  free(a->buf);
  memset(a, 0, sizeof *a);
}
