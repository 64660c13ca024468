/* uuidv7.h — global transaction ids (RFC 9562 UUID version 7): a 48-bit Unix-millisecond
 * timestamp followed by 74 bits from the kernel's CSPRNG (getrandom), never a counter. */
#ifndef IDEM_UUIDV7_H
#define IDEM_UUIDV7_H

#include <stdbool.h>
#include <stdint.h>

#define UUIDV7_STR_LEN 36 /* "xxxxxxxx-xxxx-7xxx-Vxxx-xxxxxxxxxxxx", without the NUL */

/* Writes a new id for time unix_ms into out (37 bytes with the NUL). Returns false only when
 * the random source failed; out is then an empty string. */
bool uuidv7_new(int64_t unix_ms, char out[UUIDV7_STR_LEN + 1]);

#endif
