#include "pbenc.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

pbuf *pb_new(void) {
  pbuf *p = calloc(1, sizeof *p);
  cr_assert(p);
  return p;
}

void pb_free(pbuf *p) {
  if (!p) return;
  free(p->b);
  free(p);
}

pbuf *pb_raw(pbuf *p, const void *d, size_t n) {
  if (p->n + n > p->cap) {
    size_t cap = p->cap ? p->cap : 64;
    while (cap < p->n + n) cap *= 2;
    p->b = realloc(p->b, cap);
    cr_assert(p->b);
    p->cap = cap;
  }
  if (n) memcpy(p->b + p->n, d, n);
  p->n += n;
  return p;
}

static pbuf *raw_varint(pbuf *p, uint64_t v) {
  uint8_t b[10];
  size_t n = 0;
  do {
    b[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) b[n] |= 0x80;
    n++;
  } while (v);
  return pb_raw(p, b, n);
}

pbuf *pb_varint(pbuf *p, unsigned field, uint64_t v) {
  raw_varint(p, (uint64_t)field << 3);
  return raw_varint(p, v);
}

pbuf *pb_len(pbuf *p, unsigned field, const void *d, size_t n) {
  raw_varint(p, ((uint64_t)field << 3) | 2);
  raw_varint(p, n);
  return pb_raw(p, d, n);
}

pbuf *pb_str(pbuf *p, unsigned field, const char *s) {
  return pb_len(p, field, s, strlen(s));
}

pbuf *pb_sub(pbuf *p, unsigned field, pbuf *sub) {
  pb_len(p, field, sub->b, sub->n);
  pb_free(sub);
  return p;
}

pbuf *pb_cut(pbuf *p, size_t n) {
  if (n < p->n) p->n = n;
  return p;
}

pbuf *pb_key(const char *global_id, const char *service, const char *operation, int64_t phase) {
  pbuf *k = pb_new();
  pb_str(k, 1, global_id);
  pb_str(k, 2, service);
  pb_str(k, 3, operation);
  return pb_varint(k, 4, (uint64_t)phase);
}
