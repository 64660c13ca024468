/* test_console_trace.c — the console shows each step's trace ids (docs/api.md §22) and, with
 * --trace-url TEMPLATE, links them to the trace viewer ({trace_id} replaced, the template's text
 * escaped); a template that is not an http(s) URL holding {trace_id} stops the coordinator at
 * start (exit 2, naming --trace-url). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define TA "4bf92f3577b34da6a3ce929d0e0e4736"
#define TB "0af7651916cd43dd8448eb211c80319c"
#define TP(t) "00-" t "-00f067aa0ba902b7-01"

static int cport;
static char cport_arg[32];

static void setup(void) {
  cport = h_free_port();
  snprintf(cport_arg, sizeof cport_arg, "127.0.0.1:%d", cport);
  static const char *args[] = {"--console", cport_arg, "--trace-url",
                               "https://traces.example/trace/{trace_id}?from=idem&view=1", NULL};
  args[1] = cport_arg;
  h_fixture_start(&H, &(h_fixture_conf){.args = args});
}

TestSuite(console_trace, .init = setup, .fini = h_teardown, .timeout = 60);

/* A development session of the fixture's tenant: "idem_session=ID". */
static void session(char *cookie, size_t cap) {
  h_console_session(cport, H.t, cookie, cap);
}

static char *page(const char *cookie, const char *path) {
  char *resp = NULL;
  cr_assert_eq(h_http_request(cport, "GET", path, cookie, NULL, &resp), 200, "%s", resp);
  return resp;
}

#define LINK(t) \
  "href=\"https://traces.example/trace/" t "?from=idem&amp;view=1\"><code>" t "</code>"

Test(console_trace, the_step_and_saga_pages_link_both_ids) {
  char gid[64], other[64];
  h_unique("g", gid, sizeof gid);
  h_unique("g", other, sizeof other);
  idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD},
                k2 = {other, "pay", "charge", IDEM_FORWARD};
  idem_begin b;
  idem_error e = {0};
  cr_assert_eq(idem_trace_set(TP(TA), NULL, &e), IDEM_OK);
  cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);
  cr_assert_eq(idem_trace_set(TP(TB), NULL, &e), IDEM_OK);
  cr_assert_eq(idem_step_complete(H.c, &k, 1, IDEM_OUTCOME_SUCCEEDED, 200, NULL, 0, NULL, &e),
               IDEM_OK, "%s", e.message);
  cr_assert_eq(idem_trace_set(NULL, NULL, &e), IDEM_OK);
  cr_assert_eq(idem_step_begin(H.c, &k2, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  idem_begin_clear(&b);

  char cookie[256], path[256];
  session(cookie, sizeof cookie);
  snprintf(path, sizeof path, "/steps/%s/pay/charge/forward", gid);
  char *html = page(cookie, path);
  cr_assert(strstr(html, "begin trace</span><span><a class=\"trace\" " LINK(TA)), "%s", html);
  cr_assert(strstr(html, "end trace</span><span><a class=\"trace\" " LINK(TB)), "%s", html);
  free(html);
  snprintf(path, sizeof path, "/sagas/%s", gid);
  html = page(cookie, path);
  cr_assert(strstr(html, LINK(TA)) && strstr(html, LINK(TB)), "%s", html);
  free(html);
  /* a step begun without a trace: dashes, no link */
  snprintf(path, sizeof path, "/steps/%s/pay/charge/forward", other);
  html = page(cookie, path);
  cr_assert(strstr(html, "begin trace</span><span><span class=\"muted\">"), "%s", html);
  cr_assert_null(strstr(html, "traces.example"), "%s", html);
  free(html);
}

Test(console_trace, a_bad_template_stops_the_start_naming_the_flag) {
  static const char *const bad[] = {"ftp://traces.example/{trace_id}", "https://traces.example/",
                                    "https://traces.example/{trace_id}\"><script>"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char log[96];
    h_unique("/tmp/idem-trace-url", log, sizeof log);
    const char *argv[] = {h_env("IDEM_COORDINATOR_BIN"),
                          "--pg",
                          h_env("IDEM_TEST_PG_URL"),
                          "--listen",
                          "127.0.0.1:0",
                          "--trace-url",
                          bad[i],
                          NULL};
    cr_assert_eq(spawn_run(argv, &(spawn_opts){.log = log}, 20000), 2, "%s", bad[i]);
    if (h_log_count(log, "--trace-url: ") != 1) h_dump_log(log);
    cr_assert_eq(h_log_count(log, "--trace-url: "), 1, "%s", bad[i]);
    unlink(log);
  }
}
