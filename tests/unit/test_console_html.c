/* test_console_html.c — the console's writer (server/console/console_html.h): the formatter every
 * page writes with escapes each %s argument (so a page cannot forget to), writes numbers as
 * printf does, and only console__raw leaves text as it is. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "console/console_frame.h"
#include "console/console_html.h"

static buf_t b;

static void fresh(void) {
  buf_free(&b);
}

TestSuite(console_html, .fini = fresh);

Test(console_html, string_arguments_are_escaped) {
  console__html(&b, "<p title=\"%s\">%s</p>", "\" onmouseover=\"x", "<script>alert('x')&</script>");
  cr_assert_str_eq(b.p,
                   "<p title=\"&quot; onmouseover=&quot;x\">"
                   "&lt;script&gt;alert(&#39;x&#39;)&amp;&lt;/script&gt;</p>");
}

Test(console_html, control_bytes_null_and_precision) {
  const char *none = getenv("IDEM_TEST_NOT_SET_EVER"); /* NULL, unknown to the compiler */
  console__html(&b, "[%s|%s|%.3s|%.*s|%c]", "a\x01" "b\x7f" "\tc", none, "<<<<<", 2, "&&&", '<');
  cr_assert_null(none);
  cr_assert_str_eq(b.p, "[a\xEF\xBF\xBD" "b\xEF\xBF\xBD\tc||&lt;&lt;&lt;|&amp;&amp;|&lt;]");
}

Test(console_html, numbers_as_printf_writes_them) {
  console__html(&b, "%d %u %zu %lld %llu %02x %5.1f %% %ld %-3d|", -7, 42u, (size_t)9,
                (long long)INT64_MIN, (unsigned long long)UINT64_MAX, 10, 2.25, -1L, 5);
  cr_assert_str_eq(b.p, "-7 42 9 -9223372036854775808 18446744073709551615 0a   2.2 % -1 5  |");
}

Test(console_html, the_template_and_raw_are_not_escaped) {
  console__html(&b, "<b>a&amp;b</b>");
  console__raw(&b, "<i>raw</i>");
  cr_assert_str_eq(b.p, "<b>a&amp;b</b><i>raw</i>");
}

Test(console_html, escn_keeps_length_and_nul) {
  console__escn(&b, "a\0<", 3);
  cr_assert_str_eq(b.p, "a\xEF\xBF\xBD&lt;");
}

/* An error page's status says what kind of failure it was (issue 31: not 500 for everything). */
Test(console_html, error_pages_carry_the_status_of_their_code) {
  static const struct {
    err_code code;
    err_reason reason;
    unsigned status;
  } S[] = {
      {ERR_INVALID, ERR_R_NONE, 400},          {ERR_NOT_FOUND, ERR_R_NONE, 404},
      {ERR_PRECONDITION, ERR_R_NONE, 409},     {ERR_ABORTED, ERR_R_IN_PROGRESS, 409},
      {ERR_UNAUTHENTICATED, ERR_R_NONE, 401},  {ERR_PERMISSION, ERR_R_NONE, 403},
      {ERR_RESOURCE, ERR_R_OVERLOADED, 429},   {ERR_RESOURCE, ERR_R_OUT_OF_MEMORY, 503},
      {ERR_UNAVAILABLE, ERR_R_STORE_UNAVAILABLE, 503}, {ERR_DEADLINE, ERR_R_STORE_TIMEOUT, 504},
      {ERR_UNIMPLEMENTED, ERR_R_NONE, 501},    {ERR_INTERNAL, ERR_R_NONE, 500},
  };
  for (size_t i = 0; i < sizeof S / sizeof S[0]; i++) {
    err_t e;
    err_fail(&e, S[i].code, S[i].reason, "x");
    cr_expect_eq(console__http_status(&e), S[i].status, "%s / %s: %u, want %u", err_name(S[i].code),
                 err_reason_word(S[i].reason), console__http_status(&e), S[i].status);
  }
}
