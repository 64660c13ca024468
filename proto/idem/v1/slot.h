/* slot.h — the slot of a saga (docs/api.md §17), shared by the server and libidem so that both
 * compute it from one text: fnv1a64(tenant + "\0" + id) mod slots, FNV-1a 64-bit over the bytes
 * (offset basis 14695981039346656037, prime 1099511628211). id is a global id, or BeginSaga's
 * request id. Header-only and self-contained.
 */
#ifndef IDEM_V1_SLOT_H
#define IDEM_V1_SLOT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define IDEM_V1_FNV_OFFSET UINT64_C(14695981039346656037)
#define IDEM_V1_FNV_PRIME UINT64_C(1099511628211)

/* FNV-1a 64 of n bytes, continuing from h (IDEM_V1_FNV_OFFSET to start). */
static inline uint64_t idem_v1_fnv1a64(const void *p, size_t n, uint64_t h) {
  const unsigned char *b = (const unsigned char *)p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= IDEM_V1_FNV_PRIME;
  }
  return h;
}

/* fnv1a64(tenant + "\0" + id) mod slots; NULL reads as "", slots 0 as 1. */
static inline uint32_t idem_v1_slot_of(const char *tenant, const char *id, uint32_t slots) {
  const char *t = tenant ? tenant : "", *g = id ? id : "";
  uint64_t h = idem_v1_fnv1a64(t, strlen(t), IDEM_V1_FNV_OFFSET);
  h = idem_v1_fnv1a64("", 1, h); /* the NUL between them */
  h = idem_v1_fnv1a64(g, strlen(g), h);
  return (uint32_t)(h % (slots ? slots : 1));
}

#endif
