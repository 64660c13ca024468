/* buf.c — the growable buffer (buf.h): doubles from 8 KiB, oom sticks. */
#include "buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool buf_reserve(buf_t *b, size_t more) {
  if (b->oom) return false;
  if (b->n + more + 1 <= b->cap) return true;
  if (more > SIZE_MAX / 4 - b->n) { /* doubling could not reach it without overflowing */
    b->oom = true;
    return false;
  }
  size_t cap = b->cap ? b->cap : 8192;
  while (cap < b->n + more + 1) cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) {
    b->oom = true;
    return false;
  }
  b->p = p;
  b->cap = cap;
  return true;
}

void buf_clear(buf_t *b) {
  b->n = 0;
  b->oom = false;
  if (b->p) b->p[0] = '\0';
}

void buf_putn(buf_t *b, const char *s, size_t n) {
  if (!buf_reserve(b, n)) return;
  if (n) memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

void buf_put(buf_t *b, const char *s) {
  buf_putn(b, s, strlen(s));
}

void buf_vprintf(buf_t *b, const char *fmt, va_list ap) {
  char small[512];
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  if (n >= 0 && (size_t)n < sizeof small) {
    buf_putn(b, small, (size_t)n);
  } else if (n >= 0 && buf_reserve(b, (size_t)n)) {
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, again);
    b->n += (size_t)n;
  }
  va_end(again);
}

void buf_printf(buf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  buf_vprintf(b, fmt, ap);
  va_end(ap);
}

void buf_free(buf_t *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}
