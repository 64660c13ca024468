/* args.c — the flags that more than one idemctl command reads: the step filters of `steps` and
 * `resolve --where`, the resolution of `resolve` (both forms), and fresh request ids (`resolve
 * --where`, `slots move`). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/v1/names.h"
#include "idemctl.h"
#include "util/buf.h"

int ctl_parse_filter(ctl *c, idem_steps_filter *f) {
  memset(f, 0, sizeof *f);
  const char *v;
  if ((v = ctl_flag_value(c, "state")) && !(f->state = (idem_state)fmt_parse_state(v)))
    return ctl_usage_error(c, "--state: unknown state %s", v);
  f->service = ctl_flag_value(c, "service");
  f->operation = ctl_flag_value(c, "operation");
  f->global_id = ctl_flag_value(c, "global-id");
  if ((v = ctl_flag_value(c, "older-than"))) {
    int64_t ms;
    if (!fmt_parse_duration(v, &ms)) return ctl_usage_error(c, "--older-than: expected e.g. 5m");
    f->updated_before_unix_ms = fmt_now_ms() - ms;
  }
  return EXIT_OK;
}

/* --- resolve --- */

static int read_file(const char *path, uint8_t **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  buf_t b = {0};
  char chunk[4096];
  size_t r;
  /* at most 1 MiB: the server refuses more than 64 KiB anyway */
  while (b.n < (1u << 20) && (r = fread(chunk, 1, sizeof chunk, f)) > 0) buf_putn(&b, chunk, r);
  bool bad = ferror(f) || b.oom;
  fclose(f);
  if (bad) {
    buf_free(&b);
    return -1;
  }
  *out = (uint8_t *)b.p; /* NULL for an empty file */
  *len = b.n;
  return 0;
}

int ctl_parse_resolution(ctl *c, idem_resolution *res, uint8_t **body) {
  memset(res, 0, sizeof *res);
  *body = NULL;
  const char *v = ctl_flag_value(c, "outcome");
  if (!v) return ctl_usage_error(c, "--outcome is required (succeeded, failed or retryable)");
  int oc = idem_word_find(idem_outcome_words, IDEM_WORD_COUNT(idem_outcome_words), 1, v);
  if (oc < IDEM_OUTCOME_SUCCEEDED || oc > IDEM_OUTCOME_RETRYABLE)
    return ctl_usage_error(c, "--outcome: expected succeeded, failed or retryable");
  res->outcome = (idem_outcome)oc;
  res->reason = ctl_flag_value(c, "reason");
  if (!res->reason || !*res->reason) return ctl_usage_error(c, "--reason is required");
  res->actor = ctl_flag_value(c, "actor");
  if (!res->actor) res->actor = getenv("USER"); /* NULL: the server records the tenant */
  if ((v = ctl_flag_value(c, "code"))) {
    char *end;
    errno = 0;
    long code = strtol(v, &end, 10);
    if (errno || *end || end == v || code < INT32_MIN || code > INT32_MAX)
      return ctl_usage_error(c, "--code: expected an integer");
    res->code = (int32_t)code;
  }
  if ((v = ctl_flag_value(c, "body-file"))) {
    size_t len = 0;
    if (read_file(v, body, &len) != 0) {
      fprintf(stderr, "idemctl: cannot read %s: %s\n", v, strerror(errno));
      return EXIT_USAGE;
    }
    res->body = *body;
    res->body_len = len;
  } else if ((v = ctl_flag_value(c, "body"))) {
    res->body = v;
    res->body_len = strlen(v);
  }
  return EXIT_OK;
}

bool ctl_new_request_id(char out[40]) {
  unsigned char b[16];
  FILE *f = fopen("/dev/urandom", "rb");
  size_t n = f ? fread(b, 1, sizeof b, f) : 0;
  if (f) fclose(f);
  if (n != sizeof b) return false;
  for (size_t i = 0; i < sizeof b; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
  return true;
}
