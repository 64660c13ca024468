/* history.h — the fault campaign's history lines (docs/api.md §15), written by one client process.
 *
 * One JSON object a line: an `invoke` before each call and its `ok` / `fail` / `info` (sent,
 * outcome unknown) after it, each flushed at once so that a killed client leaves its history
 * readable up to the last line. Only this process writes its file.
 */
#ifndef IDEM_CHAOS_HISTORY_H
#define IDEM_CHAOS_HISTORY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <idem/idem.h>

typedef struct hist {
  FILE *f;
  int process;
} hist;

/* A line under construction: hist_begin, then the fields, then hist_end writes it. */
typedef struct hist_line {
  char buf[2048];
  size_t len;
} hist_line;

/* `t`, `process`, `type`, `f` and `key` of a call on the step `k`. */
void hist_begin(hist_line *l, const hist *h, const char *type, const char *f, const idem_step_key *k);
void hist_str(hist_line *l, const char *name, const char *value);
void hist_int(hist_line *l, const char *name, long long value);
#define HIST_BODY_MAX 256 /* hist_b64 writes at most this many bytes of a body */
void hist_b64(hist_line *l, const char *name, const uint8_t *p, size_t n);
void hist_end(hist_line *l, hist *h);

/* The answer to a call that returned rc: `ok`, or `info` when err says the outcome is unknown,
 * else `fail`, with `error` (the gRPC code's name) unless ok. */
const char *hist_type(int rc, const idem_error *err);
const char *hist_code_name(int rc);

#endif
