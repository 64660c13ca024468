/* buf.h — one growable byte buffer for the product: appends that never fail loudly. On an
 * allocation failure the buffer stops growing and sets oom; every later append is a no-op, so a
 * caller builds its whole text and checks oom once at the end. The text is always NUL-terminated
 * once anything was appended (p is NULL before). */
#ifndef IDEM_BUF_H
#define IDEM_BUF_H

#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>

typedef struct buf {
  char *p;        /* owned; NULL until the first append */
  size_t n, cap;  /* bytes held (without the NUL), bytes allocated */
  bool oom;       /* an append could not grow the buffer: the text is cut short */
} buf_t;

/* Room for more bytes (and the NUL) past n; false (and oom set) when it cannot be had. */
bool buf_reserve(buf_t *b, size_t more);
void buf_putn(buf_t *b, const char *s, size_t n);
void buf_put(buf_t *b, const char *s); /* s must not be NULL */
void buf_printf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_vprintf(buf_t *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Empties *b for reuse, keeping its allocation (and clearing oom). */
void buf_clear(buf_t *b);
/* Frees the text and zeroes *b (a zeroed buf is empty and ready to use again). */
void buf_free(buf_t *b);

#endif
