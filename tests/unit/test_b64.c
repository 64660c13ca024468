/* test_b64.c — util/b64: the RFC 4648 vectors, round trips in both variants, the exact capacities
 * and the strict decoder's refusals (whitespace, misplaced padding, the other alphabet). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "util/b64.h"

static const char *enc(b64_variant v, const char *s) {
  static char out[64];
  cr_assert(b64_encode(v, s, strlen(s), out, sizeof out));
  return out;
}

static long dec(b64_variant v, const char *s, char out[64]) {
  memset(out, 0, 64);
  return b64_decode(v, s, out, 63);
}

Test(b64, rfc4648_vectors) {
  static const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
  static const char *std[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
  static const char *url[] = {"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};
  for (size_t i = 0; i < sizeof plain / sizeof *plain; i++) {
    cr_assert_str_eq(enc(B64_STD, plain[i]), std[i]);
    cr_assert_str_eq(enc(B64_URL, plain[i]), url[i]);
    cr_assert_eq(b64_encoded_len(B64_STD, strlen(plain[i])), strlen(std[i]));
    cr_assert_eq(b64_encoded_len(B64_URL, strlen(plain[i])), strlen(url[i]));
    char out[64];
    cr_assert_eq(dec(B64_STD, std[i], out), (long)strlen(plain[i]), "%s", std[i]);
    cr_assert_str_eq(out, plain[i]);
    cr_assert_eq(dec(B64_URL, url[i], out), (long)strlen(plain[i]), "%s", url[i]);
    cr_assert_str_eq(out, plain[i]);
  }
}

Test(b64, the_two_alphabets) {
  static const uint8_t b[] = {0xfb, 0xff, 0xbf};
  char out[16];
  cr_assert(b64_encode(B64_STD, b, 3, out, sizeof out));
  cr_assert_str_eq(out, "+/+/");
  cr_assert(b64_encode(B64_URL, b, 3, out, sizeof out));
  cr_assert_str_eq(out, "-_-_");
  uint8_t got[3];
  cr_assert_eq(b64_decode(B64_URL, "-_-_", got, 3), 3);
  cr_assert_eq(memcmp(got, b, 3), 0);
  cr_assert_eq(b64_decode(B64_STD, "+/+/", got, 3), 3);
  cr_assert_eq(memcmp(got, b, 3), 0);
  cr_assert_eq(b64_decode(B64_URL, "+/+/", got, 3), -1, "the standard alphabet in a URL text");
  cr_assert_eq(b64_decode(B64_STD, "-_-_", got, 3), -1, "the URL alphabet in a standard text");
}

Test(b64, round_trips_every_length_and_byte) {
  uint8_t in[260], back[260];
  char text[400];
  for (size_t i = 0; i < sizeof in; i++) in[i] = (uint8_t)(i * 167 + 13);
  for (int v = B64_STD; v <= B64_URL; v++) {
    for (size_t n = 0; n <= sizeof in; n++) {
      cr_assert(b64_encode((b64_variant)v, in, n, text, sizeof text));
      cr_assert_eq(strlen(text), b64_encoded_len((b64_variant)v, n));
      cr_assert_leq(n, b64_decoded_max(strlen(text)));
      cr_assert_eq(b64_decode((b64_variant)v, text, back, n), (long)n, "variant %d, %zu bytes", v, n);
      cr_assert_eq(memcmp(back, in, n), 0);
    }
  }
}

Test(b64, capacities_are_exact) {
  char out[9];
  cr_assert(b64_encode(B64_STD, "foob", 4, out, 9), "8 characters and the NUL");
  cr_assert_not(b64_encode(B64_STD, "foob", 4, out, 8));
  cr_assert(b64_encode(B64_URL, "foob", 4, out, 7), "6 characters and the NUL");
  cr_assert_not(b64_encode(B64_URL, "foob", 4, out, 6));
  cr_assert_not(b64_encode(B64_STD, "foo", 3, out, 4));
  cr_assert(b64_encode(B64_STD, "foo", 3, out, 5));
  char got[6];
  cr_assert_eq(b64_decode(B64_STD, "Zm9vYg==", got, 4), 4);
  cr_assert_eq(b64_decode(B64_STD, "Zm9vYg==", got, 3), -1);
  cr_assert_eq(b64_decode(B64_URL, "Zm9vYmE", got, 5), 5);
  cr_assert_eq(b64_decode(B64_URL, "Zm9vYmE", got, 4), -1);
}

Test(b64, invalid_text_refused) {
  static const char *bad_std[] = {
      "Zg=",      /* not a multiple of 4 */
      "Zg",       /* padding missing */
      "Zm9vY",    /* length 5 */
      "Z===",     /* one character cannot hold a byte */
      "====",     /* only padding */
      "Zg=a",     /* '=' then a character */
      "Zg==Zm8=", /* padding before the end */
      "Zm 9",     /* a space */
      " Zm9",     /* a leading space */
      "Zm9\n",    /* a trailing newline (EVP_DecodeBlock alone strips it) */
      "Zm9\t",    /* a tab */
      "Zm9*",     /* outside the alphabet */
      "Zm9-",     /* the URL alphabet */
  };
  char out[64];
  for (size_t i = 0; i < sizeof bad_std / sizeof *bad_std; i++)
    cr_assert_eq(dec(B64_STD, bad_std[i], out), -1, "standard: \"%s\"", bad_std[i]);
  static const char *bad_url[] = {
      "Z",        /* one character cannot hold a byte */
      "Zm9vY",    /* nor can a lone last one */
      "Zg==",     /* no padding in this variant */
      "Zm8=",     /* nor one '=' */
      "Zm9v Zg",  /* a space */
      "Zm9v\nA",  /* a newline */
      "Zm9+",     /* the standard alphabet */
      "Zm9/",     /* the standard alphabet */
      "Zm\xc3\xa9", /* non-ASCII bytes */
  };
  for (size_t i = 0; i < sizeof bad_url / sizeof *bad_url; i++)
    cr_assert_eq(dec(B64_URL, bad_url[i], out), -1, "URL: \"%s\"", bad_url[i]);
}
