/* duration.c — see duration.h. */
#include "duration.h"

#include <ctype.h>
#include <stdio.h>
#include <strings.h>

bool duration_parse(const char *s, int64_t max_ms, int64_t *out_ms) {
  if (!s) return false;
  while (isspace((unsigned char)*s)) s++;
  if (!isdigit((unsigned char)*s)) return false;
  int64_t n = 0;
  for (; isdigit((unsigned char)*s); s++) {
    if (n > (INT64_MAX - 9) / 10) return false;
    n = n * 10 + (*s - '0');
  }
  while (isspace((unsigned char)*s)) s++;
  static const struct {
    const char *unit;
    int64_t ms;
  } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
  int64_t mult = 0;
  size_t len = 0;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    size_t ul = units[i].unit[1] ? 2 : 1;
    if (strncasecmp(s, units[i].unit, ul) == 0 && (!s[ul] || isspace((unsigned char)s[ul]))) {
      mult = units[i].ms;
      len = ul;
      break;
    }
  }
  if (!mult) {
    if (*s) return false;
    mult = 1000; /* a bare number is seconds */
  }
  for (s += len; isspace((unsigned char)*s); s++) {
  }
  if (*s) return false;
  int64_t max = max_ms > 0 ? max_ms : INT64_MAX;
  if (n > max / mult) return false;
  *out_ms = n * mult;
  return true;
}

void duration_words(int64_t ms, bool terse, char *buf, size_t cap) {
  long long s = (long long)((ms < 0 ? -ms : ms) / 1000);
  if (s < 60)
    snprintf(buf, cap, terse ? "%llds" : "%lld s", s);
  else if (s < 3600)
    snprintf(buf, cap, terse ? "%lldm" : "%lld min", s / 60);
  else if (s < 86400 * 2 && terse)
    snprintf(buf, cap, "%lldh", s / 3600);
  else if (s < 86400 * 2)
    snprintf(buf, cap, "%lld h %lld min", s / 3600, s % 3600 / 60);
  else
    snprintf(buf, cap, terse ? "%lldd" : "%lld days", s / 86400);
}

void duration_exact(int64_t ms, char *buf, size_t cap) {
  static const struct {
    int64_t ms;
    const char *unit;
  } units[] = {{86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (ms >= units[i].ms && ms % units[i].ms == 0) {
      snprintf(buf, cap, "%lld%s", (long long)(ms / units[i].ms), units[i].unit);
      return;
    }
  snprintf(buf, cap, ms == 0 ? "0s" : "%lldms", (long long)ms);
}
