/* utf8.h — UTF-8 validation (RFC 3629): no overlong forms, no surrogates, nothing past U+10FFFF. */
#ifndef IDEM_UTF8_H
#define IDEM_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether s[0..n) is valid UTF-8 (n = 0: true; NUL bytes are valid, one byte each). */
bool utf8_valid(const uint8_t *s, size_t n);

#endif
