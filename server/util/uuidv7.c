/* uuidv7.c — UUID version 7 global ids from the Unix ms clock and getrandom (uuidv7.h). */
#include "uuidv7.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

static bool fill_random(void *dst, size_t n) {
  uint8_t *p = dst;
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += got;
    n -= (size_t)got;
  }
  return true;
}

bool uuidv7_random(void *p, size_t n) {
  return fill_random(p, n);
}

bool uuidv7_new(int64_t unix_ms, char out[UUIDV7_STR_LEN + 1]) {
  uint8_t rnd[10];
  out[0] = '\0';
  if (!fill_random(rnd, sizeof rnd)) return false;
  uuidv7_format(unix_ms, rnd, out);
  return true;
}

void uuidv7_format(int64_t unix_ms, const uint8_t rnd[10], char out[UUIDV7_STR_LEN + 1]) {
  uint8_t b[16];
  memcpy(b + 6, rnd, 10);
  uint64_t ts = (uint64_t)unix_ms & 0xFFFFFFFFFFFFull;
  for (int i = 0; i < 6; i++) b[i] = (uint8_t)(ts >> (40 - 8 * i));
  b[6] = (uint8_t)(0x70 | (b[6] & 0x0F)); /* version 7 */
  b[8] = (uint8_t)(0x80 | (b[8] & 0x3F)); /* variant 10 */
  snprintf(out, UUIDV7_STR_LEN + 1,
           "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
           b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}
