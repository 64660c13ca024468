/* log.c — one line per event on stderr, as text or JSON, under a lock (log.h). */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static log_format g_fmt = LOG_TEXT;
static log_level g_min = LOG_INFO;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_init(log_format fmt, log_level min_level) {
  g_fmt = fmt;
  g_min = min_level;
}

static void stamp(char *buf, size_t n) {
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  size_t k = strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + k, n - k, ".%03ldZ", ts.tv_nsec / 1000000);
}

/* One log line, built in memory and written with one call (stderr is unbuffered: writing
 * piece by piece would cost a system call per piece). A line longer than the buffer is cut. */
typedef struct line {
  char buf[4096];
  size_t len;
} line;

static void put(line *l, const char *s, size_t n) {
  size_t room = sizeof l->buf - 1 - l->len; /* keep one byte for the newline */
  if (n > room) n = room;
  memcpy(l->buf + l->len, s, n);
  l->len += n;
}

static void puts_(line *l, const char *s) {
  put(l, s, strlen(s));
}

/* JSON string escaping for log fields (control characters, quotes, backslashes). */
static void put_json_str(line *l, const char *s) {
  put(l, "\"", 1);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      put(l, esc, 2);
    } else if (c < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      put(l, esc, 6);
    } else {
      put(l, (const char *)&c, 1);
    }
  }
  put(l, "\"", 1);
}

static void emit(log_level lvl, const char *msg, va_list kv) {
  char ts[40];
  stamp(ts, sizeof ts);
  line l;
  l.len = 0;
  const char *k;
  if (g_fmt == LOG_JSON) {
    puts_(&l, "{\"ts\":\"");
    puts_(&l, ts);
    puts_(&l, "\",\"level\":\"");
    puts_(&l, level_names[lvl]);
    puts_(&l, "\",\"msg\":");
    put_json_str(&l, msg);
    while ((k = va_arg(kv, const char *)) != NULL) {
      const char *v = va_arg(kv, const char *);
      if (!v) continue; /* a NULL value leaves the field out */
      puts_(&l, ",");
      put_json_str(&l, k);
      puts_(&l, ":");
      put_json_str(&l, v ? v : "");
    }
    puts_(&l, "}");
  } else {
    char head[96];
    snprintf(head, sizeof head, "%s %-5s ", ts, level_names[lvl]);
    puts_(&l, head);
    puts_(&l, msg);
    while ((k = va_arg(kv, const char *)) != NULL) {
      const char *v = va_arg(kv, const char *);
      if (!v) continue;
      puts_(&l, " ");
      puts_(&l, k);
      puts_(&l, "=");
      puts_(&l, v ? v : "");
    }
  }
  l.buf[l.len++] = '\n';
  pthread_mutex_lock(&g_mu);
  fwrite(l.buf, 1, l.len, stderr);
  fflush(stderr);
  pthread_mutex_unlock(&g_mu);
}

void log_kv(log_level lvl, const char *msg, ...) {
  if (lvl < g_min) return;
  va_list ap;
  va_start(ap, msg);
  emit(lvl, msg, ap);
  va_end(ap);
}

static void emit_plain(log_level lvl, const char *msg, ...) {
  va_list ap;
  va_start(ap, msg);
  emit(lvl, msg, ap);
  va_end(ap);
}

void log_msg(log_level lvl, const char *fmt, ...) {
  if (lvl < g_min) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  emit_plain(lvl, buf, (const char *)NULL);
}
