/* slot.c — see slot.h. */
#include "slot.h"

#include <string.h>

uint64_t slot_fnv1a64(const void *p, size_t n, uint64_t h) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= SLOT_FNV_PRIME;
  }
  return h;
}

uint32_t slot_of(const char *tenant, const char *id, uint32_t slots) {
  const char *t = tenant ? tenant : "", *g = id ? id : "";
  uint64_t h = slot_fnv1a64(t, strlen(t), SLOT_FNV_OFFSET);
  h = slot_fnv1a64("", 1, h); /* the NUL between them */
  h = slot_fnv1a64(g, strlen(g), h);
  return (uint32_t)(h % (slots ? slots : 1));
}
