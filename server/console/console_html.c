/* console_html.c — the output buffer, HTML escaping, times and bodies (console_internal.h),
 * and the console's stylesheet. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "console_internal.h"

static bool grow(cbuf *b, size_t more) {
  if (b->oom) return false;
  if (b->n + more + 1 <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 8192;
  while (cap < b->n + more + 1) cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) {
    b->oom = true;
    return false;
  }
  b->p = p;
  b->cap = cap;
  return true;
}

void cb_putn(cbuf *b, const char *s, size_t n) {
  if (!grow(b, n)) return;
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

void cb_put(cbuf *b, const char *s) {
  cb_putn(b, s, strlen(s));
}

void cb_printf(cbuf *b, const char *fmt, ...) {
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    cb_putn(b, small, (size_t)n);
    return;
  }
  if (!grow(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)n;
}

void cb_escn(cbuf *b, const char *s, size_t n) {
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
    cb_putn(b, s + run, i - run);
    cb_put(b, rep);
    run = i + 1;
  }
  cb_putn(b, s + run, n - run);
}

void cb_esc(cbuf *b, const char *s) {
  if (s) cb_escn(b, s, strlen(s));
}

void cb_url(cbuf *b, const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
        *p == '-' || *p == '_' || *p == '.' || *p == '~' || *p == ':') {
      cb_putn(b, (const char *)p, 1);
    } else {
      char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
      cb_putn(b, e, 3);
    }
  }
}

void cb_time(cbuf *b, int64_t ms, int64_t now_ms) {
  if (ms <= 0) {
    cb_put(b, "<span class=\"muted\">\xE2\x80\x94</span>");
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
  int64_t a = (past ? d : -d) / 1000;
  char rel[48];
  if (a < 60)
    snprintf(rel, sizeof rel, "%lld s", (long long)a);
  else if (a < 3600)
    snprintf(rel, sizeof rel, "%lld min", (long long)(a / 60));
  else if (a < 86400 * 2)
    snprintf(rel, sizeof rel, "%lld h %lld min", (long long)(a / 3600), (long long)(a % 3600 / 60));
  else
    snprintf(rel, sizeof rel, "%lld days", (long long)(a / 86400));
  cb_printf(b, "<time datetime=\"%s\">%s</time> <span class=\"rel\">(%s%s%s)</span>", iso, shown,
            past ? "" : "in ", rel, past ? " ago" : "");
}

bool console_utf8_ok(const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n;) {
    uint8_t c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

static bool printable_text(const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((s[i] < 0x20 && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') || s[i] == 0x7f) return false;
  return console_utf8_ok(s, n);
}

void cb_rec_body(cbuf *b, const step_rec *rec, size_t max) {
  if (rec->result_expired)
    cb_put(b, "<span class=\"muted expired\">(expired: the body was dropped after the policy's "
              "retention; the key is kept until it is forgotten)</span>");
  else
    cb_body(b, rec->body, rec->body_len, max);
}

void cb_body(cbuf *b, const uint8_t *body, size_t len, size_t max) {
  if (len == 0) {
    cb_put(b, "<span class=\"muted\">(empty)</span>");
    return;
  }
  size_t shown = max && len > max ? max : len;
  if (printable_text(body, len)) {
    /* cut on a character boundary */
    while (shown < len && shown > 0 && (body[shown] & 0xC0) == 0x80) shown--;
    cb_put(b, "<pre class=\"body\">");
    cb_escn(b, (const char *)body, shown);
    cb_put(b, "</pre>");
  } else {
    cb_put(b, "<pre class=\"body hex\" title=\"not UTF-8 text: hex\">");
    for (size_t i = 0; i < shown; i++)
      cb_printf(b, "%02x%s", body[i], (i + 1) % 32 == 0 ? "\n" : (i + 1) % 4 == 0 ? " " : "");
    cb_put(b, "</pre>");
  }
  if (shown < len) cb_printf(b, "<p class=\"muted\">%zu of %zu bytes shown</p>", shown, len);
}

void cb_free(cbuf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

/* clang-format off */
const char console_css[] =
  "*{box-sizing:border-box}"
  "body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}"
  "header{background:#1d2330;color:#fff;padding:8px 16px;display:flex;gap:16px;align-items:center;flex-wrap:wrap}"
  "header a{color:#cfe0ff;text-decoration:none}header a:hover{text-decoration:underline}"
  "header .who{margin-left:auto;color:#c9ced8}header form{display:inline}"
  "main{padding:12px 16px;max-width:1400px}"
  "h1{font-size:20px;margin:8px 0 12px}h2{font-size:16px;margin:18px 0 8px}"
  "table{border-collapse:collapse;background:#fff;width:100%;margin-bottom:12px}"
  "th,td{border:1px solid #dde1e7;padding:4px 8px;text-align:left;vertical-align:top}"
  "th{background:#eef1f5;font-weight:600}"
  "td.num{text-align:right;font-variant-numeric:tabular-nums}"
  ".banner{padding:8px 16px;font-weight:600}"
  ".banner.dev{background:#fff3cd;color:#664d03}.banner.standby{background:#cfe2ff;color:#084298}"
  ".banner.err{background:#f8d7da;color:#842029}.banner.ok{background:#d1e7dd;color:#0f5132}"
  ".state{display:inline-block;padding:1px 6px;border-radius:3px;font-weight:600;font-size:12px}"
  ".s-in_progress{background:#cfe2ff;color:#084298}.s-succeeded{background:#d1e7dd;color:#0f5132}"
  ".s-failed{background:#f8d7da;color:#842029}.s-unknown{background:#ffe5b4;color:#7a3e00}"
  ".s-abandoned,.s-released,.s-none,.s-skipped{background:#e2e3e5;color:#41464b}"
  ".stuck{outline:2px solid #dc3545}tr.stuck td{background:#fff0f0}"
  ".stuckword{color:#b02a37;font-weight:700}"
  ".muted,.rel{color:#6c757d}"
  "pre.body{white-space:pre-wrap;word-break:break-all;margin:2px 0;max-height:16em;overflow:auto;"
  "background:#f1f3f5;padding:4px;font:12px/1.3 ui-monospace,monospace}"
  "form.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:end;margin-bottom:12px}"
  "label{display:flex;flex-direction:column;font-size:12px;color:#495057;gap:2px}"
  "label.inline{flex-direction:row;align-items:center;gap:4px}"
  "input,select,textarea,button{font:inherit;padding:4px 6px}"
  "textarea{width:100%;min-height:6em}"
  "button{background:#0d6efd;color:#fff;border:0;border-radius:3px;padding:5px 12px;cursor:pointer}"
  "button.danger{background:#dc3545}button.plain{background:#6c757d}"
  ".card{background:#fff;border:1px solid #dde1e7;padding:10px 12px;margin-bottom:12px}"
  ".kv{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px}"
  ".change{font-size:16px}.pair{display:grid;grid-template-columns:1fr 1fr;gap:8px}";
/* clang-format on */
