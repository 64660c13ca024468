/* slots_internal.h — what slotmap.c and slotmove.c share. */
#ifndef IDEM_SLOTS_INTERNAL_H
#define IDEM_SLOTS_INTERNAL_H

#include <stddef.h>

/* Fills why (when not NULL) with the printf-style message: why a map, a record or a request is
 * refused. */
void slots__why(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
