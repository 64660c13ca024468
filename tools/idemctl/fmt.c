/* fmt.c — idemctl output: aligned tables, relative ages, words for states, JSON records. */
#include <ctype.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "idem/v1/names.h"
#include "idemctl.h"
#include "util/b64.h"
#include "util/duration.h"
#include "util/utf8.h"

/* --- tables --- */

struct table {
  int ncols;
  char **cells; /* rows * ncols, row 0 = headers */
  size_t rows, cap;
};

static char *dup_or_empty(const char *s) {
  char *d = strdup(s ? s : "");
  if (!d) {
    fputs("idemctl: out of memory\n", stderr);
    exit(EXIT_UNAVAILABLE);
  }
  return d;
}

table *table_new(int ncols, const char *const *headers) {
  table *t = calloc(1, sizeof *t);
  if (!t) exit(EXIT_UNAVAILABLE);
  t->ncols = ncols;
  table_row(t, headers);
  return t;
}

void table_row(table *t, const char *const *cells) {
  if (t->rows == t->cap) {
    t->cap = t->cap ? t->cap * 2 : 16;
    t->cells = realloc(t->cells, t->cap * (size_t)t->ncols * sizeof *t->cells);
    if (!t->cells) exit(EXIT_UNAVAILABLE);
  }
  for (int i = 0; i < t->ncols; i++)
    t->cells[t->rows * (size_t)t->ncols + (size_t)i] = dup_or_empty(cells[i]);
  t->rows++;
}

/* Display width: UTF-8 code points (every character we print is one column wide). */
static size_t width(const char *s) {
  size_t w = 0;
  for (; *s; s++)
    if (((unsigned char)*s & 0xc0) != 0x80) w++;
  return w;
}

void table_print(table *t) {
  size_t *w = calloc((size_t)t->ncols, sizeof *w);
  if (!w) exit(EXIT_UNAVAILABLE);
  for (size_t r = 0; r < t->rows; r++)
    for (int c = 0; c < t->ncols; c++) {
      size_t n = width(t->cells[r * (size_t)t->ncols + (size_t)c]);
      if (n > w[c]) w[c] = n;
    }
  for (size_t r = 0; r < t->rows; r++) {
    for (int c = 0; c < t->ncols; c++) {
      const char *s = t->cells[r * (size_t)t->ncols + (size_t)c];
      fputs(s, stdout);
      if (c + 1 < t->ncols)
        for (size_t k = width(s); k < w[c] + 2; k++) fputc(' ', stdout);
    }
    fputc('\n', stdout);
  }
  free(w);
}

void table_free(table *t) {
  if (!t) return;
  for (size_t i = 0; i < t->rows * (size_t)t->ncols; i++) free(t->cells[i]);
  free(t->cells);
  free(t);
}

/* --- values --- */

int64_t fmt_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *fmt_age(int64_t unix_ms, char *buf, size_t n) {
  if (unix_ms <= 0) return "-";
  int64_t d = fmt_now_ms() - unix_ms;
  bool future = d < 0;
  if (future) d = -d;
  char v[24];
  duration_words(d, true, v, sizeof v);
  snprintf(buf, n, future ? "in %s" : "%s ago", v);
  return buf;
}

/* The words are names.h's, as the server and libidem spell them. Tables print "-" for 0 (none)
 * and "in progress" with a space; JSON prints the words as they are. */
const char *fmt_state(int state) {
  if (state == IDEM_STATE_UNSPECIFIED) return "-";
  if (state == IDEM_STATE_IN_PROGRESS) return "in progress";
  return idem_word_state(state);
}

const char *fmt_state_key(int state) {
  return idem_word_state(state);
}

const char *fmt_outcome(int outcome) {
  return outcome == IDEM_OUTCOME_UNSPECIFIED ? "-" : idem_word_outcome(outcome);
}

const char *fmt_phase(int phase) {
  return phase == IDEM_FORWARD || phase == IDEM_COMPENSATION ? idem_word_phase(phase) : "-";
}

bool fmt_parse_duration(const char *s, int64_t *ms) {
  return duration_parse(s, 0, ms);
}

int fmt_parse_state(const char *s) {
  char norm[32];
  size_t i = 0;
  for (; s[i] && i + 1 < sizeof norm; i++)
    norm[i] = s[i] == '-' || s[i] == ' ' ? '_' : (char)tolower((unsigned char)s[i]);
  norm[i] = '\0';
  const char *p = strncmp(norm, "step_state_", 11) == 0 ? norm + 11 : norm;
  int k = idem_word_find(idem_state_words, IDEM_WORD_COUNT(idem_state_words), 1, p);
  return k > 0 ? k : 0; /* from 1: state 0 (no record) is no filter */
}

/* Valid UTF-8 (util/utf8.h) without control bytes but tab: safe to print on a terminal. */
static bool printable_utf8(const uint8_t *b, size_t len) {
  for (size_t i = 0; i < len; i++)
    if ((b[i] < 0x20 && b[i] != '\t') || b[i] == 0x7f) return false;
  return utf8_valid(b, len);
}

const char *fmt_body(const uint8_t *b, size_t len, size_t max, char *buf, size_t n) {
  if (len == 0) return "";
  if (!printable_utf8(b, len)) {
    snprintf(buf, n, "<%zu bytes>", len);
    return buf;
  }
  if (len <= max) {
    snprintf(buf, n, "%.*s", (int)len, (const char *)b);
    return buf;
  }
  size_t cut = max;
  while (cut > 0 && (b[cut] & 0xc0) == 0x80) cut--; /* not inside a character */
  snprintf(buf, n, "%.*s…", (int)cut, (const char *)b);
  return buf;
}

/* --- JSON --- */

/* Standard base64 with padding (util/b64, OpenSSL). */
static char *b64(const uint8_t *b, size_t len) {
  size_t cap = b64_encoded_len(B64_STD, len) + 1;
  char *o = malloc(cap);
  if (!o || !b64_encode(B64_STD, b, len, o, cap)) exit(EXIT_UNAVAILABLE);
  return o;
}

void json_add_key(cJSON *o, const char *global_id, const char *service, const char *operation,
                  int phase) {
  cJSON_AddStringToObject(o, "global_id", global_id);
  cJSON_AddStringToObject(o, "service", service);
  cJSON_AddStringToObject(o, "operation", operation);
  cJSON_AddStringToObject(o, "phase", fmt_phase(phase));
}

cJSON *json_record(const idem_record *r) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "tenant", r->tenant);
  json_add_key(o, r->global_id, r->service, r->operation, r->phase);
  cJSON_AddStringToObject(o, "state", fmt_state_key(r->state));
  cJSON_AddNumberToObject(o, "attempt", (double)r->attempt);
  cJSON_AddNumberToObject(o, "created_unix_ms", (double)r->created_unix_ms);
  cJSON_AddNumberToObject(o, "updated_unix_ms", (double)r->updated_unix_ms);
  cJSON_AddNumberToObject(o, "lease_expires_unix_ms", (double)r->lease_expires_unix_ms);
  cJSON_AddNumberToObject(o, "expires_unix_ms", (double)r->expires_unix_ms);
  bool expired = r->state == IDEM_STATE_IN_PROGRESS && r->lease_expires_unix_ms > 0 &&
                 r->lease_expires_unix_ms <= fmt_now_ms();
  cJSON_AddBoolToObject(o, "lease_expired", expired);
  /* a record no caller's attempt finished (names.h): "null_compensation", "never_ran",
   * "abandoned"; null for one that is what its state says */
  int skip = idem_skip_of(r->phase, r->state, (unsigned long long)r->attempt);
  if (skip != IDEM_SKIP_NONE)
    cJSON_AddStringToObject(o, "skipped", idem_word_skip(skip));
  else
    cJSON_AddNullToObject(o, "skipped");
  if (r->has_result) {
    cJSON *res = cJSON_AddObjectToObject(o, "result");
    cJSON_AddStringToObject(res, "outcome", idem_word_outcome(r->result.outcome));
    cJSON_AddNumberToObject(res, "code", r->result.code);
    char *enc = b64(r->result.body, r->result.body_len);
    cJSON_AddStringToObject(res, "body_base64", enc);
    free(enc);
    cJSON_AddNumberToObject(res, "completed_unix_ms", (double)r->result.completed_unix_ms);
    cJSON_AddBoolToObject(res, "expired", r->result_expired); /* body dropped (docs/api.md §12) */
  } else {
    cJSON_AddNullToObject(o, "result");
  }
  return o;
}

void json_print(cJSON *v) {
  char *s = cJSON_Print(v);
  if (!s) exit(EXIT_UNAVAILABLE);
  puts(s);
  cJSON_free(s);
  cJSON_Delete(v);
}
