/* slots_internal.c — see slots_internal.h. */
#include "slots_internal.h"

#include <stdarg.h>
#include <stdio.h>

void slots__why(char *why, size_t cap, const char *fmt, ...) {
  if (!why || !cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, cap, fmt, ap);
  va_end(ap);
}
