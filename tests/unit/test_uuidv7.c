/* test_uuidv7.c — global ids (RFC 9562 version 7): layout, timestamp, randomness. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "validate/validate.h"
#include "util/uuidv7.h"

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* Parses the 16 bytes of a canonical lower-case UUID string; fails the test when malformed. */
static void parse(const char *s, uint8_t b[16]) {
  cr_assert_eq(strlen(s), UUIDV7_STR_LEN, "length of %s", s);
  int k = 0;
  for (int i = 0; i < UUIDV7_STR_LEN;) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      cr_assert_eq(s[i], '-', "dash at %d in %s", i, s);
      i++;
      continue;
    }
    int hi = hexval(s[i]), lo = hexval(s[i + 1]);
    cr_assert(hi >= 0 && lo >= 0, "non-hex at %d in %s", i, s);
    b[k++] = (uint8_t)(hi << 4 | lo);
    i += 2;
  }
  cr_assert_eq(k, 16);
}

Test(uuidv7, canonical_layout_version_and_variant) {
  char id[UUIDV7_STR_LEN + 1];
  cr_assert(uuidv7_new(1700000000000, id));
  uint8_t b[16];
  parse(id, b);
  cr_assert_eq(b[6] >> 4, 7, "version nibble of %s", id);
  cr_assert_eq(b[8] >> 6, 2, "variant bits of %s", id);
  cr_assert_eq(id[14], '7');
  cr_assert(strchr("89ab", id[19]), "variant char of %s", id);
}

Test(uuidv7, encodes_the_millisecond_timestamp_big_endian) {
  const int64_t ms = 0x0123456789ABLL;
  char id[UUIDV7_STR_LEN + 1];
  cr_assert(uuidv7_new(ms, id));
  cr_assert(strncmp(id, "01234567-89ab-7", 15) == 0, "%s", id);
  uint8_t b[16];
  parse(id, b);
  int64_t got = 0;
  for (int i = 0; i < 6; i++) got = got << 8 | b[i];
  cr_assert_eq(got, ms);
}

Test(uuidv7, zero_and_max_timestamps) {
  char id[UUIDV7_STR_LEN + 1];
  cr_assert(uuidv7_new(0, id));
  cr_assert(strncmp(id, "00000000-0000-7", 15) == 0, "%s", id);
  cr_assert(uuidv7_new(0xFFFFFFFFFFFFLL, id));
  cr_assert(strncmp(id, "ffffffff-ffff-7", 15) == 0, "%s", id);
}

Test(uuidv7, ids_in_the_same_millisecond_differ) {
  enum { N = 2000 };
  char(*ids)[UUIDV7_STR_LEN + 1] = calloc(N, sizeof *ids);
  cr_assert_not_null(ids);
  for (int i = 0; i < N; i++) cr_assert(uuidv7_new(1700000000000, ids[i]));
  for (int i = 0; i < N; i++)
    for (int j = i + 1; j < N; j++) cr_assert_str_neq(ids[i], ids[j]);
  free(ids);
}

Test(uuidv7, random_bits_are_not_constant) {
  /* every one of the 74 random bits should take both values over many ids */
  enum { N = 256 };
  uint8_t or_[16] = {0}, and_[16];
  memset(and_, 0xFF, sizeof and_);
  char id[UUIDV7_STR_LEN + 1];
  for (int i = 0; i < N; i++) {
    uint8_t b[16];
    cr_assert(uuidv7_new(42, id));
    parse(id, b);
    for (int k = 0; k < 16; k++) {
      or_[k] |= b[k];
      and_[k] &= b[k];
    }
  }
  cr_assert_eq(or_[6] & 0x0F, 0x0F);
  cr_assert_eq(and_[6] & 0x0F, 0x00);
  cr_assert_eq(or_[7], 0xFF);
  cr_assert_eq(and_[7], 0x00);
  cr_assert_eq(or_[8] & 0x3F, 0x3F);
  cr_assert_eq(and_[8] & 0x3F, 0x00);
  for (int k = 9; k < 16; k++) {
    cr_assert_eq(or_[k], 0xFF, "byte %d", k);
    cr_assert_eq(and_[k], 0x00, "byte %d", k);
  }
}

Test(uuidv7, is_a_valid_global_id) {
  char id[UUIDV7_STR_LEN + 1];
  err_t e;
  cr_assert(uuidv7_new(1700000000000, id));
  cr_assert_eq(validate_global_id("global_id", id, &e), ERR_OK, "%s", e.msg);
}

Test(uuidv7, later_milliseconds_sort_later) {
  char a[UUIDV7_STR_LEN + 1], b[UUIDV7_STR_LEN + 1];
  cr_assert(uuidv7_new(1700000000000, a));
  cr_assert(uuidv7_new(1700000000001, b));
  cr_assert_lt(strcmp(a, b), 0, "%s !< %s", a, b);
}
