/* console_html.c — the escaping formatter and the HTML pieces built on it (console_html.h):
 * escaping, URLs, times, bodies. The stylesheet is in console_css.c. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/duration.h"
#include "../util/utf8.h"
#include "console_html.h"

void console__escn(buf_t *b, const char *s, size_t n) {
  size_t run = 0; /* bytes copied as they are, flushed before each replacement */
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    const char *rep = NULL;
    switch (ch) {
      case '&':
        rep = "&amp;";
        break;
      case '<':
        rep = "&lt;";
        break;
      case '>':
        rep = "&gt;";
        break;
      case '"':
        rep = "&quot;";
        break;
      case '\'':
        rep = "&#39;";
        break;
      default:
        if ((ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') || ch == 0x7f)
          rep = "\xEF\xBF\xBD";
    }
    if (!rep) continue;
    buf_putn(b, s + run, i - run);
    buf_put(b, rep);
    run = i + 1;
  }
  buf_putn(b, s + run, n - run);
}

/* The argument of one numeric conversion of console__html, written with its spec (a format
 * built here from the caller's literal one, so not a literal itself). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static void number(buf_t *b, const char *spec, char len, char conv, va_list *ap) {
  char tmp[128];
  int n;
#define NUM(type) snprintf(tmp, sizeof tmp, spec, va_arg(*ap, type))
  bool sign = conv == 'd' || conv == 'i', real = strchr("feEgGaAF", conv) != NULL;
  if (conv == 'p')
    n = NUM(void *);
  else if (real)
    n = len == 'L' ? NUM(long double) : NUM(double);
  else if (sign)
    n = len == 'l'                 ? NUM(long)
        : len == 'q'               ? NUM(long long)
        : len == 'j'               ? NUM(intmax_t)
        : len == 'z' || len == 't' ? NUM(ptrdiff_t)
                                   : NUM(int);
  else
    n = len == 'l'   ? NUM(unsigned long)
        : len == 'q' ? NUM(unsigned long long)
        : len == 'j' ? NUM(uintmax_t)
        : len == 'z' ? NUM(size_t)
        : len == 't' ? NUM(ptrdiff_t)
                     : NUM(unsigned);
#undef NUM
  if (n > 0) buf_putn(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}
#pragma GCC diagnostic pop

/* One conversion at p (its '%'): writes it, returns what follows it. */
static const char *conversion(buf_t *b, const char *p, va_list *ap) {
  char spec[48];
  size_t k = 0;
  int prec = -1;
  spec[k++] = *p++;
  if (*p == '%') {
    buf_putn(b, "%", 1);
    return p + 1;
  }
  while (*p && strchr("-+ #0", *p) && k < 8) spec[k++] = *p++;
  if (*p == '*') {
    k += (size_t)snprintf(spec + k, 12, "%d", va_arg(*ap, int));
    p++;
  }
  while (*p >= '0' && *p <= '9' && k < 20) spec[k++] = *p++;
  if (*p == '.') {
    spec[k++] = *p++;
    if (*p == '*') {
      prec = va_arg(*ap, int);
      k += (size_t)snprintf(spec + k, 12, "%d", prec < 0 ? 0 : prec);
      p++;
    } else {
      for (prec = 0; *p >= '0' && *p <= '9' && k < 34; p++)
        prec = prec * 10 + (spec[k++] = *p) - '0';
    }
  }
  char len = 0; /* h (hh too), l, q (ll), z, j, t, L */
  while (*p && strchr("hlzjtL", *p) && k < 40) {
    len = len == 'l' && *p == 'l' ? 'q' : *p;
    spec[k++] = *p++;
  }
  char conv = *p ? *p++ : '\0';
  spec[k++] = conv;
  spec[k] = '\0';
  if (conv == 's') {
    const char *s = va_arg(*ap, const char *);
    if (!s) s = "";
    console__escn(b, s, prec >= 0 ? strnlen(s, (size_t)prec) : strlen(s));
  } else if (conv == 'c') {
    char c = (char)va_arg(*ap, int);
    console__escn(b, &c, 1);
  } else if (conv && strchr("diuxXopfeEgGaAF", conv)) {
    number(b, spec, len, conv, ap);
  }
  return p;
}

void console__html(buf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const char *run = fmt, *p = fmt;
  while (*p) {
    if (*p != '%') {
      p++;
      continue;
    }
    buf_putn(b, run, (size_t)(p - run));
    p = run = conversion(b, p, &ap);
  }
  buf_putn(b, run, (size_t)(p - run));
  va_end(ap);
}

void console__raw(buf_t *b, const char *html) {
  buf_put(b, html);
}

void console__url(buf_t *b, const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
        *p == '-' || *p == '_' || *p == '.' || *p == '~' || *p == ':') {
      buf_putn(b, (const char *)p, 1);
    } else {
      char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
      buf_putn(b, e, 3);
    }
  }
}

void console__time(buf_t *b, int64_t ms, int64_t now_ms) {
  if (ms <= 0) {
    buf_put(b, "<span class=\"muted\">\xE2\x80\x94</span>");
    return;
  }
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char iso[40], shown[40];
  strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
  strftime(shown, sizeof shown, "%Y-%m-%d %H:%M:%S UTC", &tm);
  int64_t d = now_ms - ms;
  bool past = d >= 0;
  char rel[48];
  duration_words(d, false, rel, sizeof rel);
  buf_printf(b, "<time datetime=\"%s\">%s</time> <span class=\"rel\">(%s%s%s)</span>", iso, shown,
             past ? "" : "in ", rel, past ? " ago" : "");
}

static bool printable_text(const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((s[i] < 0x20 && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') || s[i] == 0x7f) return false;
  return utf8_valid(s, n);
}

void console__rec_body(buf_t *b, const step_rec *rec, size_t max) {
  if (rec->result_expired)
    buf_put(b,
            "<span class=\"muted expired\">(expired: the body was dropped after the policy's "
            "retention; the key is kept until it is forgotten)</span>");
  else
    console__body(b, rec->body, rec->body_len, max);
}

void console__body(buf_t *b, const uint8_t *body, size_t len, size_t max) {
  if (len == 0) {
    buf_put(b, "<span class=\"muted\">(empty)</span>");
    return;
  }
  size_t shown = max && len > max ? max : len;
  if (printable_text(body, len)) {
    /* cut on a character boundary */
    while (shown < len && shown > 0 && (body[shown] & 0xC0) == 0x80) shown--;
    buf_put(b, "<pre class=\"body\">");
    console__escn(b, (const char *)body, shown);
    buf_put(b, "</pre>");
  } else {
    buf_put(b, "<pre class=\"body hex\" title=\"not UTF-8 text: hex\">");
    for (size_t i = 0; i < shown; i++)
      buf_printf(b, "%02x%s", body[i], (i + 1) % 32 == 0 ? "\n" : (i + 1) % 4 == 0 ? " " : "");
    buf_put(b, "</pre>");
  }
  if (shown < len) buf_printf(b, "<p class=\"muted\">%zu of %zu bytes shown</p>", shown, len);
}

int console__hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
