/* test_utf8.c — util/utf8: what utf8_valid takes (ASCII, 2-, 3- and 4-byte characters, NUL) and
 * what it refuses (overlong forms, surrogates, past U+10FFFF, cut or stray continuation bytes). */
#include <criterion/criterion.h>
#include <string.h>

#include "util/utf8.h"

static bool ok(const char *s, size_t n) {
  return utf8_valid((const uint8_t *)s, n);
}
#define OK(lit) ok(lit, sizeof lit - 1)

Test(utf8, valid) {
  cr_assert(ok("", 0));
  cr_assert(OK("plain ascii"));
  cr_assert(OK("\0nul inside"));
  cr_assert(OK("caf\xC3\xA9"));              /* U+00E9 */
  cr_assert(OK("\xE2\x82\xAC"));             /* U+20AC */
  cr_assert(OK("\xEF\xBF\xBD"));             /* U+FFFD */
  cr_assert(OK("\xF0\x9F\x98\x80"));         /* U+1F600 */
  cr_assert(OK("\xF4\x8F\xBF\xBF"));         /* U+10FFFF, the last */
  cr_assert(OK("\xED\x9F\xBF"));             /* U+D7FF, just below the surrogates */
}

Test(utf8, refused) {
  cr_assert_not(OK("\xC0\xAF"));             /* overlong '/' */
  cr_assert_not(OK("\xE0\x80\xAF"));         /* overlong, 3 bytes */
  cr_assert_not(OK("\xF0\x80\x80\xAF"));     /* overlong, 4 bytes */
  cr_assert_not(OK("\xED\xA0\x80"));         /* U+D800, a surrogate */
  cr_assert_not(OK("\xF4\x90\x80\x80"));     /* U+110000 */
  cr_assert_not(OK("\x80"));                 /* a stray continuation byte */
  cr_assert_not(OK("\xC3"));                 /* cut short */
  cr_assert_not(OK("\xE2\x82"));             /* cut short */
  cr_assert_not(OK("\xC3\x28"));             /* not a continuation */
  cr_assert_not(OK("\xF8\x88\x80\x80\x80")); /* a 5-byte form */
  cr_assert_not(OK("\xFF"));
  /* the length is what counts, not a NUL: a valid prefix of an invalid text */
  cr_assert(ok("ab\xC3\xA9", 2));
  cr_assert_not(ok("ab\xC3\xA9", 3));
}
