/* pbenc.h — a tiny protobuf wire encoder for tests that must send bytes no generated encoder
 * would produce: NUL bytes inside strings, unknown enum values, wrong wire types, truncation.
 * Every function returns its pbuf for chaining; allocation failure fails the test. */
#ifndef IDEM_TEST_PBENC_H
#define IDEM_TEST_PBENC_H

#include <stddef.h>
#include <stdint.h>

typedef struct pbuf {
  uint8_t *b;
  size_t n, cap;
} pbuf;

pbuf *pb_new(void);
void pb_free(pbuf *p);
pbuf *pb_raw(pbuf *p, const void *d, size_t n);                 /* bytes as they are */
pbuf *pb_varint(pbuf *p, unsigned field, uint64_t v);           /* wire type 0 */
pbuf *pb_len(pbuf *p, unsigned field, const void *d, size_t n); /* wire type 2 */
pbuf *pb_str(pbuf *p, unsigned field, const char *s);           /* wire type 2, strlen(s) */
pbuf *pb_sub(pbuf *p, unsigned field, pbuf *sub);               /* embeds sub, frees it */
pbuf *pb_cut(pbuf *p, size_t n);                                /* keeps the first n bytes */
/* A StepKey {global_id = 1, service = 2, operation = 3, phase = 4} (phase as an int64). */
pbuf *pb_key(const char *global_id, const char *service, const char *operation, int64_t phase);

#endif
