/* test_console_html.c — the console's writer (server/console/console_html.h): the formatter every
 * page writes with escapes each %s argument (so a page cannot forget to), writes numbers as
 * printf does, and only console__raw leaves text as it is. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
