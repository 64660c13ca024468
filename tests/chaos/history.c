/* history.c — see history.h. */
#include "history.h"

#include <stdarg.h>
#include <time.h>

#include <openssl/evp.h>

static void add(hist_line *l, const char *fmt, ...) {
  if (l->len >= sizeof l->buf) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(l->buf + l->len, sizeof l->buf - l->len, fmt, ap);
  va_end(ap);
  if (n > 0) l->len += (size_t)n;
  if (l->len > sizeof l->buf) l->len = sizeof l->buf;
}

void hist_begin(hist_line *l, const hist *h, const char *type, const char *f, const idem_step_key *k) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  double t = (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
  l->len = 0;
  add(l, "{\"t\":%.3f,\"process\":%d,\"type\":\"%s\",\"f\":\"%s\"", t, h->process, type, f);
  /* names and global ids are [A-Za-z0-9._-] (docs/api.md §1): no escaping needed */
  if (k)
    add(l, ",\"key\":\"%s/%s/%s/%s\"", k->global_id, k->service, k->operation,
        k->phase == IDEM_FORWARD ? "forward" : "compensation");
}

void hist_str(hist_line *l, const char *name, const char *value) {
  add(l, ",\"%s\":\"%s\"", name, value);
}

void hist_int(hist_line *l, const char *name, long long value) {
  add(l, ",\"%s\":%lld", name, value);
}

void hist_b64(hist_line *l, const char *name, const uint8_t *p, size_t n) {
  unsigned char out[4 * ((HIST_BODY_MAX + 2) / 3) + 1];
  if (n > HIST_BODY_MAX) n = HIST_BODY_MAX; /* the clients' bodies are far shorter */
  EVP_EncodeBlock(out, p, (int)n);
  hist_str(l, name, (const char *)out);
}

void hist_end(hist_line *l, hist *h) {
  add(l, "}\n");
  fwrite(l->buf, 1, l->len, h->f);
  fflush(h->f);
}

const char *hist_type(int rc, const idem_error *err) {
  if (rc == IDEM_OK) return "ok";
  /* the library's own codes (>= 100, a malformed answer) cannot prove nothing happened */
  return err->outcome_unknown || rc >= 100 ? "info" : "fail";
}

const char *hist_code_name(int rc) {
  static const char *names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
                                "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                                "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
                                "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                                "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  if (rc >= 0 && rc <= 16) return names[rc];
  return "CLIENT_ERROR"; /* the library's own codes (>= 100): nothing reached the server */
}
