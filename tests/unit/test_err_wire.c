/* test_err_wire.c — err_wire_text (server/util/err.h): an error's detail or hint made a valid
 * metadata value (docs/api.md §20): printable ASCII, within the buffer, no edge spaces. */
#include <criterion/criterion.h>
#include <string.h>

#include "util/err.h"

Test(err_wire, text_becomes_printable_ascii) {
  char out[64];
  cr_expect_eq(err_wire_text("use a new request_id", out, sizeof out), 20);
  cr_expect_str_eq(out, "use a new request_id");
  err_wire_text("line one\nline\ttwo\r\x01\x1b[31m\x7f", out, sizeof out);
  cr_expect_str_eq(out, "line one line two [31m", "controls: newline and tab a space, others gone");
  err_wire_text("caf\xc3\xa9 ok", out, sizeof out);
  cr_expect_str_eq(out, "caf?? ok", "each byte of UTF-8 a '?'");
  cr_expect_eq(err_wire_text("  \n padded \t ", out, sizeof out), 6);
  cr_expect_str_eq(out, "padded");
  cr_expect_eq(err_wire_text("\n\x01 ", out, sizeof out), 0, "nothing left: nothing to send");
  cr_expect_eq(err_wire_text(NULL, out, sizeof out), 0);
  cr_expect_str_eq(out, "");
}

Test(err_wire, text_is_cut_to_the_buffer) {
  char big[ERR_DETAIL_MAX * 2], out[ERR_DETAIL_MAX];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  cr_expect_eq(err_wire_text(big, out, sizeof out), ERR_DETAIL_MAX - 1);
  cr_expect_eq(strlen(out), ERR_DETAIL_MAX - 1);
  char one[1];
  cr_expect_eq(err_wire_text("x", one, sizeof one), 0);
  cr_expect_str_eq(one, "");
}

Test(err_wire, permanent_is_set_and_cleared) {
  err_t e;
  err_clear(&e);
  cr_expect(!e.permanent);
  err_fail(&e, ERR_UNAVAILABLE, ERR_R_STORE_UNAVAILABLE, "store unavailable: refused");
  err_permanent(&e);
  cr_expect(e.permanent);
  err_fail(&e, ERR_UNAVAILABLE, ERR_R_STORE_UNAVAILABLE, "store unavailable: again");
  cr_expect(!e.permanent, "a new error is not permanent");
  err_permanent(&e);
  err_clear(&e);
  cr_expect(!e.permanent);
  err_permanent(NULL);
}
