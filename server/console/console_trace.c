/* console_trace.c — trace ids on the console (docs/api.md §22): each shown as a link to the
 * team's trace viewer when the node runs with --trace-url TEMPLATE ({trace_id} replaced), as
 * plain text otherwise. */
#include <stdio.h>
#include <string.h>

#include "console_pages.h"

#define TRACE_PLACEHOLDER "{trace_id}"

bool console_trace_url_check(const char *tpl, char *why, size_t cap) {
  if (!tpl || !*tpl) return true;
  if (strncmp(tpl, "https://", 8) != 0 && strncmp(tpl, "http://", 7) != 0) {
    snprintf(why, cap, "--trace-url: must start with http:// or https://");
    return false;
  }
  if (!strstr(tpl, TRACE_PLACEHOLDER)) {
    snprintf(why, cap, "--trace-url: must contain %s, replaced by each trace id",
             TRACE_PLACEHOLDER);
    return false;
  }
  if (strlen(tpl) > CONSOLE_TRACE_URL_MAX) {
    snprintf(why, cap, "--trace-url: longer than %d bytes", CONSOLE_TRACE_URL_MAX);
    return false;
  }
  for (const char *p = tpl; *p; p++) /* a URL as RFC 3986 writes it: no space, quote or < > */
    if (*p <= 0x20 || *p >= 0x7f || strchr("\"'<>\\`", *p)) {
      snprintf(why, cap, "--trace-url: byte 0x%02x at %zu is not allowed in a URL",
               (unsigned char)*p, (size_t)(p - tpl));
      return false;
    }
  return true;
}

void console__trace_id(creq *r, const char *trace_id) {
  buf_t *b = &r->out;
  if (!trace_id || !trace_id[0]) {
    console__html(b, "<span class=\"muted\">\xE2\x80\x94</span>");
    return;
  }
  const char *tpl = r->c->cfg.trace_url;
  if (!tpl || !*tpl) {
    console__html(b, "<code class=\"trace\">%s</code>", trace_id);
    return;
  }
  console__html(b, "<a class=\"trace\" href=\"");
  for (const char *p = tpl; *p;) { /* the template escaped as text, each id percent-encoded */
    const char *at = strstr(p, TRACE_PLACEHOLDER);
    size_t n = at ? (size_t)(at - p) : strlen(p);
    console__escn(b, p, n);
    if (!at) break;
    console__url(b, trace_id);
    p = at + strlen(TRACE_PLACEHOLDER);
  }
  console__html(b, "\"><code>%s</code></a>", trace_id);
}
