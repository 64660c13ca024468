/* test_console_move.c — the Slots page's box for the move under way (docs/api.md §18,
 * server/console/console_slots.c): slots, source and target, phase as a word and a colour, rows
 * copied, lag in bytes for people, the start (absolute and relative), the request id and the note,
 * with every string from the move escaped. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "console/console_pages.h"

static buf_t b;

static void fresh(void) {
  buf_free(&b);
}

TestSuite(console_move, .fini = fresh);

static console_move a_move(const char *phase) {
  console_move m;
  memset(&m, 0, sizeof m);
  snprintf(m.request_id, sizeof m.request_id, "%s", "rid-42");
  m.from = 0;
  m.to = 63;
  snprintf(m.source, sizeof m.source, "%s", "g1");
  snprintf(m.target, sizeof m.target, "%s", "g2");
  snprintf(m.phase, sizeof m.phase, "%s", phase);
  m.rows_copied = 12345;
  m.lag_bytes = 4 * 1024 * 1024 + 100 * 1024;
  m.started_unix_ms = 1700000000000LL;
  return m;
}

Test(console_move, shows_every_field_of_the_move) {
  console_move m = a_move("copying");
  console__move_html(&b, &m, m.started_unix_ms + 180000);
  cr_assert(b.p, "nothing written");
  cr_expect(strstr(b.p, "<table id=\"move\">"), "%s", b.p);
  cr_expect(strstr(b.p, "<td class=\"num\">0\xE2\x80\x93" "63</td><td>g1</td><td>g2</td>"), "%s",
            b.p);
  cr_expect(strstr(b.p, "<span class=\"state s-in_progress\">copying</span>"), "%s", b.p);
  cr_expect(strstr(b.p, ">12345</td>"), "%s", b.p);
  cr_expect(strstr(b.p, ">4.1 MiB</td>"), "%s", b.p);
  cr_expect(strstr(b.p, "2023-11-14 22:13:20 UTC"), "the start, absolute: %s", b.p);
  cr_expect(strstr(b.p, "3 min ago"), "the start, relative: %s", b.p);
  cr_expect(strstr(b.p, "<td>rid-42</td>"), "%s", b.p);
  cr_expect(!strstr(b.p, "move-note"), "no note, no paragraph: %s", b.p);
}

Test(console_move, phases_have_their_colours) {
  const char *const phase[][2] = {{"planned", "s-none"},       {"copying", "s-in_progress"},
                                  {"blocked", "s-unknown"},     {"switched", "s-succeeded"},
                                  {"rolling_back", "s-failed"}, {"new-word", "s-none"}};
  for (size_t i = 0; i < sizeof phase / sizeof phase[0]; i++) {
    buf_free(&b);
    console_move m = a_move(phase[i][0]);
    console__move_html(&b, &m, m.started_unix_ms);
    char want[96];
    snprintf(want, sizeof want, "<span class=\"state %s\">%s</span>", phase[i][1], phase[i][0]);
    cr_expect(strstr(b.p, want), "%s: %s", phase[i][0], b.p);
  }
}

Test(console_move, strings_from_the_move_are_escaped) {
  console_move m = a_move("<b>copying</b>");
  snprintf(m.request_id, sizeof m.request_id, "%s", "<script>alert(1)</script>");
  snprintf(m.note, sizeof m.note, "%s", "waiting for \"g2\" & <its> replica");
  snprintf(m.target, sizeof m.target, "%s", "g2'><img src=x>");
  m.lag_bytes = 512;
  console__move_html(&b, &m, m.started_unix_ms);
  cr_expect(!strstr(b.p, "<script>") && !strstr(b.p, "<img") && !strstr(b.p, "<b>"), "%s", b.p);
  cr_expect(strstr(b.p, "&lt;script&gt;alert(1)&lt;/script&gt;"), "%s", b.p);
  cr_expect(strstr(b.p, "<p class=\"muted\" id=\"move-note\">waiting for &quot;g2&quot; &amp; "
                        "&lt;its&gt; replica</p>"),
            "%s", b.p);
  cr_expect(strstr(b.p, ">512 B</td>"), "%s", b.p);
}

Test(console_move, a_lag_not_known_yet_says_not_started) {
  console_move m = a_move("planned");
  m.rows_copied = 0;
  m.lag_bytes = -1; /* no progress read: the subscription may not exist yet */
  console__move_html(&b, &m, m.started_unix_ms);
  cr_expect(strstr(b.p, ">not started</td>"), "%s", b.p);
  cr_expect(!strstr(b.p, "-1 B") && !strstr(b.p, ">-1<"), "no -1 lag: %s", b.p);
}
