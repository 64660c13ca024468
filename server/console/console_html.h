/* console_html.h — how the console writes HTML, safe by construction (console_html.c).
 *
 * Every page writes through console__html: its format is the page's own markup, a string literal
 * (the compiler checks it as a printf format, and the console is built with -Wformat-nonliteral
 * so a variable cannot stand in for it), and every %s argument is HTML-escaped on the way in.
 * Numbers are written as they are. The one way around the escaping is console__raw, for text
 * that is already HTML (the stylesheet); its name is the warning. The helpers below build their
 * markup the same way. */
#ifndef IDEM_CONSOLE_HTML_H
#define IDEM_CONSOLE_HTML_H

#include <stddef.h>
#include <stdint.h>

#include "../domain/record.h"
#include "../util/buf.h"

/* Appends fmt with its arguments, each %s (NULL = "", %.*s honoured) HTML-escaped as by
 * console__escn. Conversions: d i u x X o c (escaped) s p %, with the usual flags, width,
 * precision and hh h l ll z j t modifiers; width does not pad a %s. */
void console__html(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* html as it is, unescaped: only for text that is HTML already and comes from the program. */
void console__raw(buf_t *b, const char *html);
/* s[0..n) HTML-escaped: & < > " ' become entities; control bytes other than \t \n \r (NUL
 * included) become U+FFFD, so nothing of s can open a tag or leave an attribute. */
void console__escn(buf_t *b, const char *s, size_t n);
/* s (NULL = "") percent-encoded for a path segment or a query value (unreserved characters
 * kept): safe in an attribute as it is. */
void console__url(buf_t *b, const char *s);
/* ms (wall, Unix ms) as "2026-12-04 03:01:02 UTC" and its distance from now ("4 min ago",
 * "in 12 s"); 0 prints "—". */
void console__time(buf_t *b, int64_t ms, int64_t now_ms);
/* A step result's body: escaped text in <pre> when it is UTF-8 without control bytes (tab and
 * newlines allowed), else a hex dump; at most max bytes shown (0 = all), the rest counted. */
void console__body(buf_t *b, const uint8_t *body, size_t len, size_t max);
/* A stored step's body: console__body, or a note when its result expired (docs/api.md §12: the
 * body was dropped after the policy's retention_s while the key is kept). */
void console__rec_body(buf_t *b, const step_rec *rec, size_t max);
/* The value of one hex digit, -1 when c is not one. */
int console__hexval(char c);

/* The stylesheet served at /style.css (console_css.c). */
extern const char console__css[];

#endif
