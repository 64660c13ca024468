/* coord_admin.c — ListSteps, ResolveStep and ListAudit (see coord_admin.h): validation, page
 * tokens, the resolution rule, and the audited step transaction. */
#include "coord_admin.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../metrics/metrics.h"
#include "../util/clock.h"
#include "coord_log.h"
#include "coord_step.h"
#include "../validate/validate.h"

/* --- shared helpers --- */

static const char *nz(const char *s) {
  return s ? s : "";
}

static uint32_t page_size(uint32_t n) {
  if (n == 0) return LIST_PAGE_DEFAULT;
  return n > LIST_PAGE_MAX ? LIST_PAGE_MAX : n;
}

/* --- base64url without padding, and FNV-1a --- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static bool b64_encode(const uint8_t *in, size_t n, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16;
    if (i + 1 < n) v |= (uint32_t)in[i + 1] << 8;
    if (i + 2 < n) v |= in[i + 2];
    size_t chars = n - i >= 3 ? 4 : n - i + 1;
    if (o + chars >= cap) return false;
    for (size_t k = 0; k < chars; k++) out[o++] = b64[(v >> (18 - 6 * k)) & 63];
  }
  out[o] = '\0';
  return true;
}

static int b64_val(char c) {
  const char *p = c ? strchr(b64, c) : NULL;
  return p ? (int)(p - b64) : -1;
}

/* Decodes into out (cap bytes); returns the length or -1. */
static long b64_decode(const char *in, uint8_t *out, size_t cap) {
  size_t n = strlen(in), o = 0;
  if (n % 4 == 1) return -1;
  for (size_t i = 0; i < n; i += 4) {
    uint32_t v = 0;
    size_t chars = n - i >= 4 ? 4 : n - i;
    for (size_t k = 0; k < 4; k++) {
      int d = k < chars ? b64_val(in[i + k]) : 0;
      if (d < 0) return -1;
      v = (v << 6) | (uint32_t)d;
    }
    for (size_t k = 0; k < chars - 1; k++) {
      if (o >= cap) return -1;
      out[o++] = (uint8_t)(v >> (16 - 8 * k));
    }
  }
  return (long)o;
}

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
  return fnv(h, nz(f->global_id));
}

#define TOKEN_RAW_MAX 420

bool coord_steps_token_encode(const step_filter *f, const step_key *after,
                              char out[COORD_TOKEN_MAX]) {
  char raw[TOKEN_RAW_MAX];
  int n = snprintf(raw, sizeof raw, "s%016" PRIx64 "%s\x1f%s\x1f%s\x1f%d", filter_hash(f),
                   after->global_id, after->service, after->operation, (int)after->phase);
  if (n < 0 || (size_t)n >= sizeof raw) return false;
  return b64_encode((const uint8_t *)raw, (size_t)n, out, COORD_TOKEN_MAX);
}

static err_code bad_token(err_t *err) {
  return err_set(err, ERR_INVALID, "invalid page_token: not a token of this listing");
}

/* Decodes a token into raw (NUL-terminated) and checks its kind letter and hash. */
static err_code token_open(const char *token, char kind, uint64_t hash, char *raw, size_t cap,
                           err_t *err) {
  if (strlen(token) >= COORD_TOKEN_MAX) return bad_token(err);
  long n = b64_decode(token, (uint8_t *)raw, cap - 1);
  if (n < 17 || raw[0] != kind) return bad_token(err);
  raw[n] = '\0';
  if (strlen(raw) != (size_t)n) return bad_token(err); /* an embedded NUL */
  char want[17];
  snprintf(want, sizeof want, "%016" PRIx64, hash);
  if (memcmp(raw + 1, want, 16) != 0)
    return err_set(err, ERR_INVALID, "invalid page_token: the filters changed since it was issued");
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
  return b64_encode((const uint8_t *)raw, (size_t)n, out, COORD_TOKEN_MAX);
}

err_code coord_audit_token_decode(const char *tenant, const char *global_id, const char *token,
                                  int64_t *last_id, err_t *err) {
  char raw[TOKEN_RAW_MAX];
  err_code rc = token_open(token, 'a', audit_hash(tenant, global_id), raw, sizeof raw, err);
  if (rc != ERR_OK) return rc;
  char *end;
  long long v = strtoll(raw + 17, &end, 10);
  if (end == raw + 17 || *end || v <= 0) return bad_token(err);
  *last_id = v;
  return ERR_OK;
}

/* --- ListSteps --- */

err_code coord_list_steps(const coord_ctx *ctx, store *st, const char *tenant,
                          const coord_list_in *in, int64_t deadline, step_list *out,
                          char next_token[COORD_TOKEN_MAX], err_t *err) {
  memset(out, 0, sizeof *out);
  next_token[0] = '\0';
  err_clear(err);
  err_code rc;
  if ((rc = validate_tenant(tenant, err)) != ERR_OK) return rc;
  if (in->state < STATE_NONE || in->state > STATE_RELEASED)
    return err_set(err, ERR_INVALID, "invalid state: unknown step state %d", in->state);
  if (in->lease_expired_only && in->state != STATE_NONE && in->state != STATE_IN_PROGRESS)
    return err_set(err, ERR_INVALID,
                   "invalid lease_expired_only: only IN_PROGRESS steps hold a lease");
  if (*nz(in->service) && (rc = validate_name("service", in->service, err)) != ERR_OK) return rc;
  if (*nz(in->operation) && (rc = validate_name("operation", in->operation, err)) != ERR_OK)
    return rc;
  if (*nz(in->global_id) && (rc = validate_global_id("global_id", in->global_id, err)) != ERR_OK)
    return rc;
  if (in->updated_before_ms < 0)
    return err_set(err, ERR_INVALID, "invalid updated_before_unix_ms: must not be negative");

  step_filter f = {
      .tenant = tenant,
      .state = (step_state)in->state,
      .service = nz(in->service),
      .operation = nz(in->operation),
      .global_id = nz(in->global_id),
      .updated_before_ms = in->updated_before_ms,
      .lease_expired_only = in->lease_expired_only,
      .limit = page_size(in->page_size),
  };
  if (*nz(in->page_token)) {
    if ((rc = coord_steps_token_decode(&f, in->page_token, &f.after, err)) != ERR_OK) return rc;
    f.has_after = true;
  }
  rc = store_list_steps(st, &f, coord__store_deadline(ctx, deadline), out, err);
  if (rc != ERR_OK) {
    step_list_clear(out);
    return rc;
  }
  if (out->more && out->n > 0 &&
      !coord_steps_token_encode(&f, &out->recs[out->n - 1].key, next_token)) {
    step_list_clear(out);
    return err_set(err, ERR_INTERNAL, "page token too long");
  }
  return ERR_OK;
}

/* --- ResolveStep --- */

typedef struct resolve_arg {
  const step_key *key;
  step_outcome outcome;
  int32_t code;
  const uint8_t *body;
  size_t body_len;
  uint32_t retention_s;
  audit_rec *audit; /* from/to filled here; inserted by the store on ERR_OK */
  step_rec *out;
} resolve_arg;

static err_code resolve_fn(void *argp, const step_pair *cur, step_writes *w, err_t *err) {
  resolve_arg *a = argp;
  step_rec_clear(a->out);
  const step_rec *after = NULL;
  step_state from;
  err_code rc = coord_decide_resolve(a->key, a->outcome, a->code, a->body, a->body_len,
                                     a->retention_s, cur, w, &after, &from, err);
  if (rc != ERR_OK) return rc;
  a->audit->from_state = from;
  a->audit->to_state = after->state;
  if (!step_rec_copy(a->out, after)) {
    w->n = 0;
    return err_oom(err);
  }
  return ERR_OK;
}

/* Strict UTF-8 without control characters (C0, DEL, C1 are refused): validate_text. A lenient
 * check here let surrogates through to Postgres, which refused them as an internal error. */
static bool clean_utf8(const char *s) {
  err_t e;
  return validate_text("text", s, SIZE_MAX, &e) == ERR_OK;
}

err_code coord_resolve_step(const coord_ctx *ctx, store *st, const char *tenant,
                            const coord_resolve_in *in, int64_t deadline, step_rec *out,
                            err_t *err) {
  memset(out, 0, sizeof *out);
  err_clear(err);
  step_key k;
  err_code rc = validate_key(nz(tenant), nz(in->key.global_id), nz(in->key.service),
                             nz(in->key.operation), in->key.phase, &k, err);
  if (rc != ERR_OK) return rc;
  if (in->outcome != OUTCOME_SUCCEEDED && in->outcome != OUTCOME_FAILED &&
      in->outcome != OUTCOME_RETRYABLE)
    return err_set(err, ERR_INVALID,
                   "invalid outcome: must be OUTCOME_SUCCEEDED, OUTCOME_FAILED or "
                   "OUTCOME_RETRYABLE");
  if ((rc = validate_body(in->body_len, ctx->body_max, err)) != ERR_OK) return rc;
  if (in->body_len > 0 && !in->body) return err_set(err, ERR_INVALID, "body: missing bytes");
  const char *reason = nz(in->reason), *actor = nz(in->actor);
  if (!*reason)
    return err_set(err, ERR_INVALID, "invalid reason: a reason is required to resolve a step");
  if (strlen(reason) > AUDIT_REASON_MAX || !clean_utf8(reason))
    return err_set(err, ERR_INVALID,
                   "invalid reason: must be at most %d bytes of UTF-8 without control characters",
                   AUDIT_REASON_MAX);
  if (!*actor) actor = k.tenant; /* the caller is known by its tenant (from its credentials) */
  if (strlen(actor) > AUDIT_ACTOR_MAX || !clean_utf8(actor))
    return err_set(err, ERR_INVALID,
                   "invalid actor: must be at most %d bytes of UTF-8 without control characters",
                   AUDIT_ACTOR_MAX);

  policy pol;
  coord_get_policy(ctx, k.tenant, k.service, k.operation, &pol, err);
  err_clear(err);
  audit_rec audit;
  memset(&audit, 0, sizeof audit);
  audit.key = k;
  snprintf(audit.actor, sizeof audit.actor, "%s", actor);
  snprintf(audit.action, sizeof audit.action, "resolve");
  snprintf(audit.reason, sizeof audit.reason, "%s", reason);
  resolve_arg a = {.key = &k,
                   .outcome = (step_outcome)in->outcome,
                   .code = in->code,
                   .body = in->body,
                   .body_len = in->body_len,
                   .retention_s = pol.retention_s ? pol.retention_s : POLICY_DEFAULT_RETENTION_S,
                   .audit = &audit,
                   .out = out};
  rc = coord__step_txn(st, &k, coord__store_deadline(ctx, deadline), resolve_fn, &a, &audit,
                       "resolve", err);
  if (rc != ERR_OK) {
    step_rec_clear(out);
    return rc;
  }
  metrics_resolved(in->outcome);
  return ERR_OK;
}

/* --- ListAudit --- */

err_code coord_list_audit(const coord_ctx *ctx, store *st, const char *tenant,
                          const char *global_id, uint32_t size, const char *page_token,
                          int64_t deadline, audit_list *out, char next_token[COORD_TOKEN_MAX],
                          err_t *err) {
  memset(out, 0, sizeof *out);
  next_token[0] = '\0';
  err_clear(err);
  err_code rc;
  if ((rc = validate_tenant(tenant, err)) != ERR_OK) return rc;
  global_id = nz(global_id);
  if (*global_id && (rc = validate_global_id("global_id", global_id, err)) != ERR_OK) return rc;
  int64_t before = 0;
  if (*nz(page_token) &&
      (rc = coord_audit_token_decode(tenant, global_id, page_token, &before, err)) != ERR_OK)
    return rc;
  rc = store_list_audit(st, tenant, global_id, before, page_size(size),
                        coord__store_deadline(ctx, deadline), out, err);
  if (rc != ERR_OK) {
    audit_list_clear(out);
    return rc;
  }
  if (out->more && out->n > 0)
    coord_audit_token_encode(tenant, global_id, out->recs[out->n - 1].id, next_token);
  return ERR_OK;
}
