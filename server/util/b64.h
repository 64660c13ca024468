/* b64.h — base64 through OpenSSL (EVP_EncodeBlock / EVP_DecodeBlock), in the two variants we use:
 * the standard alphabet with '=' padding (RFC 4648 §4: the etcd gateway's keys and values) and
 * the URL-safe alphabet without padding (§5: page tokens). Decoding is strict: a character outside
 * the variant's alphabet (whitespace included), misplaced padding or a wrong length is refused. */
#ifndef IDEM_B64_H
#define IDEM_B64_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
  B64_STD, /* A-Z a-z 0-9 + /, padded with '=' to a multiple of 4 characters */
  B64_URL, /* A-Z a-z 0-9 - _, no padding: the text of n bytes is ceil(4n/3) characters */
} b64_variant;

/* The length of the text of n bytes, without the NUL. */
size_t b64_encoded_len(b64_variant v, size_t n);

/* The most bytes the text of n characters can decode to (a buffer size for b64_decode). */
size_t b64_decoded_max(size_t n);

/* Writes the text of in[0..n) and a NUL into out (cap bytes). false, out unspecified, when
 * b64_encoded_len(v, n) + 1 > cap. */
bool b64_encode(b64_variant v, const void *in, size_t n, char *out, size_t cap);

/* Decodes the NUL-terminated text in into out (cap bytes; no NUL is added). Returns the byte
 * count, or -1 when in is not text of variant v or its bytes do not fit in cap. Bits of the
 * last character beyond the last byte are ignored, as most decoders do. */
long b64_decode(b64_variant v, const char *in, void *out, size_t cap);

#endif
