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

/* JSON string escaping for log fields (control characters, quotes, backslashes). */
static void put_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

static void emit(log_level lvl, const char *msg, va_list kv) {
  char ts[40];
  stamp(ts, sizeof ts);
  pthread_mutex_lock(&g_mu);
  if (g_fmt == LOG_JSON) {
    fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":", ts, level_names[lvl]);
    put_json_str(stderr, msg);
    const char *k;
    while ((k = va_arg(kv, const char *)) != NULL) {
      const char *v = va_arg(kv, const char *);
      fputc(',', stderr);
      put_json_str(stderr, k);
      fputc(':', stderr);
      put_json_str(stderr, v ? v : "");
    }
    fputs("}\n", stderr);
  } else {
    fprintf(stderr, "%s %-5s %s", ts, level_names[lvl], msg);
    const char *k;
    while ((k = va_arg(kv, const char *)) != NULL) {
      const char *v = va_arg(kv, const char *);
      fprintf(stderr, " %s=%s", k, v ? v : "");
    }
    fputc('\n', stderr);
  }
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
