/* b64.c — base64 through OpenSSL's EVP_EncodeBlock / EVP_DecodeBlock (b64.h). Both work on groups
 * (3 bytes, 4 characters) so that a capacity is exact and no padded copy is allocated; the
 * alphabet and padding are checked here first, since EVP_DecodeBlock skips whitespace and
 * accepts '=' anywhere in a group. */
#include "b64.h"

#include <openssl/evp.h>
#include <string.h>

size_t b64_encoded_len(b64_variant v, size_t n) {
  if (v == B64_STD) return (n + 2) / 3 * 4;
  return n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
}

size_t b64_decoded_max(size_t n) {
  return (n + 3) / 4 * 3;
}

bool b64_encode(b64_variant v, const void *in, size_t n, char *out, size_t cap) {
  if (b64_encoded_len(v, n) >= cap) return false;
  const unsigned char *p = in;
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    size_t take = n - i >= 3 ? 3 : n - i;
    unsigned char group[5]; /* 4 characters and EVP's NUL */
    EVP_EncodeBlock(group, p + i, (int)take);
    size_t chars = 4;
    if (v == B64_URL) {
      chars = take + 1; /* the padding dropped */
      for (size_t k = 0; k < chars; k++) {
        if (group[k] == '+') group[k] = '-';
        if (group[k] == '/') group[k] = '_';
      }
    }
    memcpy(out + o, group, chars);
    o += chars;
  }
  out[o] = '\0';
  return true;
}

/* c is in v's alphabet (without '='); returns it in the standard alphabet, or 0. */
static char std_char(b64_variant v, char c) {
  if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) return c;
  if (v == B64_STD) return c == '+' || c == '/' ? c : 0;
  return c == '-' ? '+' : c == '_' ? '/' : 0;
}

long b64_decode(b64_variant v, const char *in, void *out, size_t cap) {
  size_t n = strlen(in);
  if (v == B64_STD ? n % 4 != 0 : n % 4 == 1) return -1;
  unsigned char *q = out;
  size_t o = 0;
  for (size_t i = 0; i < n; i += 4) {
    size_t chars = n - i >= 4 ? 4 : n - i; /* < 4 only in the last group of B64_URL */
    if (v == B64_STD && i + 4 == n) {     /* "xx==" or "xxx=": the padding of the last group */
      if (in[i + 3] == '=') chars = in[i + 2] == '=' ? 2 : 3;
    }
    unsigned char group[4] = {'=', '=', '=', '='};
    for (size_t k = 0; k < chars; k++)
      if (!(group[k] = (unsigned char)std_char(v, in[i + k]))) return -1;
    unsigned char bytes[3];
    if (EVP_DecodeBlock(bytes, group, 4) != 3) return -1;
    size_t got = chars - 1; /* EVP_DecodeBlock counts the bytes the padding stands for */
    if (got > cap - o) return -1;
    memcpy(q + o, bytes, got);
    o += got;
  }
  return (long)o;
}
