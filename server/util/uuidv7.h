/* uuidv7.h — global transaction ids (RFC 9562 UUID version 7): a 48-bit Unix-millisecond
 * timestamp followed by 74 bits from the kernel's CSPRNG (getrandom), never a counter. */
#ifndef IDEM_UUIDV7_H
#define IDEM_UUIDV7_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UUIDV7_STR_LEN 36 /* "xxxxxxxx-xxxx-7xxx-Vxxx-xxxxxxxxxxxx", without the NUL */

/* Writes a new id for time unix_ms into out (37 bytes with the NUL). Returns false only when
 * the random source failed; out is then an empty string. */
bool uuidv7_new(int64_t unix_ms, char out[UUIDV7_STR_LEN + 1]);

/* The UUIDv7 of unix_ms whose random bits come from rnd (10 bytes; the version and variant bits
 * are overwritten), for a caller that draws many (BeginSaga looking for a slot). */
void uuidv7_format(int64_t unix_ms, const uint8_t rnd[10], char out[UUIDV7_STR_LEN + 1]);

/* Fills p with n random bytes (getrandom). false when the random source failed. */
bool uuidv7_random(void *p, size_t n);

#endif
