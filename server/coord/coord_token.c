/* coord_token.c — page tokens (coord_admin.h): base64url text of a kind letter, a hash of the
 * listing's scope (tenant and filters) and the cursor of the last row returned. The hash makes a
 * token of one listing useless for another; the cursor is a key or id that never changes. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/b64.h"
#include "../validate/validate.h"
#include "coord_admin.h"

static const char *nz(const char *s) {
  return s ? s : "";
}

/* --- FNV-1a --- */

static uint64_t fnv(uint64_t h, const char *s) {
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return (h ^ 0x1f) * 1099511628211ull; /* separator: "ab"+"c" differs from "a"+"bc" */
}

static uint64_t filter_hash(const step_filter *f) {
  char num[64];
  uint64_t h = 14695981039346656037ull;
  h = fnv(h, nz(f->tenant));
  snprintf(num, sizeof num, "%d/%" PRId64 "/%d", (int)f->state, f->updated_before_ms,
           f->lease_expired_only ? 1 : 0);
  h = fnv(h, num);
  h = fnv(h, nz(f->service));
  h = fnv(h, nz(f->operation));
  h = fnv(h, nz(f->global_id));
  /* a trace id only when set: tokens of listings without one stay valid across an upgrade */
  return *nz(f->trace_id) ? fnv(h, f->trace_id) : h;
}

#define TOKEN_RAW_MAX 420

bool coord_steps_token_encode(const step_filter *f, const step_key *after,
                              char out[COORD_TOKEN_MAX]) {
  char raw[TOKEN_RAW_MAX];
  int n = snprintf(raw, sizeof raw, "s%016" PRIx64 "%s\x1f%s\x1f%s\x1f%d", filter_hash(f),
                   after->global_id, after->service, after->operation, (int)after->phase);
  if (n < 0 || (size_t)n >= sizeof raw) return false;
  return b64_encode(B64_URL, raw, (size_t)n, out, COORD_TOKEN_MAX);
}

static err_code bad_token(err_t *err) {
  return err_set(err, ERR_INVALID, "page_token: not a token of this listing");
}

/* Decodes a token into raw (NUL-terminated) and checks its kind letter and hash. */
static err_code token_open(const char *token, char kind, uint64_t hash, char *raw, size_t cap,
                           err_t *err) {
  if (strlen(token) >= COORD_TOKEN_MAX) return bad_token(err);
  long n = b64_decode(B64_URL, token, raw, cap - 1);
  if (n < 17 || raw[0] != kind) return bad_token(err);
  raw[n] = '\0';
  if (strlen(raw) != (size_t)n) return bad_token(err); /* an embedded NUL */
  char want[17];
  snprintf(want, sizeof want, "%016" PRIx64, hash);
  if (memcmp(raw + 1, want, 16) != 0)
    return err_set(err, ERR_INVALID, "page_token: the filters changed since it was issued");
  return ERR_OK;
}

err_code coord_steps_token_decode(const step_filter *f, const char *token, step_key *after,
                                  err_t *err) {
  char raw[TOKEN_RAW_MAX];
  err_code rc = token_open(token, 's', filter_hash(f), raw, sizeof raw, err);
  if (rc != ERR_OK) return rc;
  char *parts[4], *p = raw + 17;
  for (int i = 0; i < 4; i++) {
    parts[i] = p;
    char *sep = strchr(p, '\x1f');
    if (i < 3) {
      if (!sep) return bad_token(err);
      *sep = '\0';
      p = sep + 1;
    } else if (sep) {
      return bad_token(err);
    }
  }
  int phase = parts[3][0] == '1' ? 1 : parts[3][0] == '2' ? 2 : 0;
  if (!phase || parts[3][1]) return bad_token(err);
  err_t ignored;
  if (validate_key(nz(f->tenant), parts[0], parts[1], parts[2], phase, after, &ignored) != ERR_OK)
    return bad_token(err);
  return ERR_OK;
}

static uint64_t audit_hash(const char *tenant, const char *global_id) {
  return fnv(fnv(14695981039346656037ull, nz(tenant)), nz(global_id));
}

bool coord_audit_token_encode(const char *tenant, const char *global_id, int64_t last_id,
                              char out[COORD_TOKEN_MAX]) {
  char raw[64];
  int n =
      snprintf(raw, sizeof raw, "a%016" PRIx64 "%" PRId64, audit_hash(tenant, global_id), last_id);
  return b64_encode(B64_URL, raw, (size_t)n, out, COORD_TOKEN_MAX);
}

/* The decimal int64 at s (>= min), ended by `stop`; *next after it. False when it is not one
 * (a saturating 30-digit number included). */
static bool read_i64(char *s, int64_t min, char stop, int64_t *v, char **next) {
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (end == s || *end != stop || x < min || errno == ERANGE) return false;
  *v = x;
  *next = end;
  return true;
}

err_code coord_audit_token_decode(const char *tenant, const char *global_id, const char *token,
                                  int64_t *last_id, err_t *err) {
  char raw[TOKEN_RAW_MAX], *end;
  err_code rc = token_open(token, 'a', audit_hash(tenant, global_id), raw, sizeof raw, err);
  if (rc != ERR_OK) return rc;
  return read_i64(raw + 17, 1, '\0', last_id, &end) ? ERR_OK : bad_token(err);
}

/* GetSaga tokens: the saga (tenant, global_id) and the timeline cursor of the last step. */
bool coord_saga_token_encode(const char *tenant, const char *global_id, const step_rec *last,
                             char out[COORD_TOKEN_MAX]) {
  char raw[TOKEN_RAW_MAX];
  int n = snprintf(raw, sizeof raw, "g%016" PRIx64 "%" PRId64 "\x1f%d\x1f%s\x1f%s",
                   audit_hash(tenant, global_id), last->created_ms, (int)last->key.phase,
                   last->key.service, last->key.operation);
  if (n < 0 || (size_t)n >= sizeof raw) return false;
  return b64_encode(B64_URL, raw, (size_t)n, out, COORD_TOKEN_MAX);
}

err_code coord_saga_token_decode(const char *tenant, const char *global_id, const char *token,
                                 saga_page *pg, err_t *err) {
  char raw[TOKEN_RAW_MAX];
  err_code rc = token_open(token, 'g', audit_hash(tenant, global_id), raw, sizeof raw, err);
  if (rc != ERR_OK) return rc;
  char *end;
  int64_t created;
  if (!read_i64(raw + 17, 0, '\x1f', &created, &end)) return bad_token(err);
  char *phase = end + 1, *service = strchr(phase, '\x1f');
  char *operation = service ? strchr(service + 1, '\x1f') : NULL;
  if (!operation || strchr(operation + 1, '\x1f')) return bad_token(err);
  *service++ = '\0';
  *operation++ = '\0';
  int ph = strcmp(phase, "1") == 0 ? 1 : strcmp(phase, "2") == 0 ? 2 : 0;
  step_key k;
  err_t ignored;
  if (!ph ||
      validate_key(nz(tenant), nz(global_id), service, operation, ph, &k, &ignored) != ERR_OK)
    return bad_token(err);
  pg->has_after = true;
  pg->after_created_ms = created;
  pg->after_phase = k.phase;
  snprintf(pg->after_service, sizeof pg->after_service, "%s", k.service);
  snprintf(pg->after_operation, sizeof pg->after_operation, "%s", k.operation);
  return ERR_OK;
}
