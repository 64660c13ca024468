/* test_buf.c — util/buf: appends, formatting past the small stack buffer, and oom sticking. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "util/buf.h"

Test(buf, appends_and_formats) {
  buf_t b = {0};
  buf_put(&b, "a");
  buf_putn(&b, "bcd", 2);
  buf_printf(&b, "-%d-%s", 42, "x");
  cr_assert_str_eq(b.p, "abc-42-x");
  cr_assert_eq(b.n, 8);
  char big[3000];
  memset(big, 'z', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  buf_printf(&b, "%s!", big); /* longer than the 512-byte stack buffer */
  cr_assert_eq(b.n, 8 + 2999 + 1);
  cr_assert_eq(b.p[b.n - 1], '!');
  cr_assert_eq(strlen(b.p), b.n);
  cr_assert_not(b.oom);
  buf_free(&b);
  cr_assert_null(b.p);
  cr_assert_eq(b.n, 0);
}

Test(buf, oom_sticks) {
  buf_t b = {0};
  buf_put(&b, "kept");
  cr_assert_not(buf_reserve(&b, SIZE_MAX / 2)); /* more than can be had */
  cr_assert(b.oom);
  buf_put(&b, "dropped");
  cr_assert_str_eq(b.p, "kept");
  buf_free(&b);
  cr_assert_not(b.oom);
}
