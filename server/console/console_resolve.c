/* console_resolve.c — one step's page and its resolution (Admin.ResolveStep through
 * coord_resolve_step): the form, a confirmation page that says what will change, then the
 * change, with the session's identity as the audit actor. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../coord/coord_admin.h"
#include "console_internal.h"
#include "idem/v1/names.h"

void console_actor(const creq *r, char *out, size_t n) {
  const char *role = auth_role_name(r->s.role);
  size_t rl = strlen(role), tl = strlen(r->s.tenant);
  if (r->s.dev || n < rl + 3) {
    snprintf(out, n, "console");
    return;
  }
  if (tl > n - rl - 2) tl = n - rl - 2; /* a 128-character tenant: the actor limit wins */
  memcpy(out, r->s.tenant, tl);
  out[tl] = '/';
  memcpy(out + tl + 1, role, rl + 1);
}

static void kv(cbuf *b, const char *k) {
  cb_printf(b, "</span><span>%s</span><span>", k);
}

static void record_card(creq *r, const step_rec *rec) {
  cbuf *b = &r->out;
  cb_put(b, "<div class=\"card kv\" id=\"record\"><span>saga</span><span><a href=\"/sagas/");
  cb_url(b, rec->key.global_id);
  cb_put(b, "\">");
  cb_esc(b, rec->key.global_id);
  cb_put(b, "</a>");
  kv(b, "step");
  cb_esc(b, rec->key.service);
  cb_put(b, " / ");
  cb_esc(b, rec->key.operation);
  cb_printf(b, " / %s", idem_word_phase(rec->key.phase));
  kv(b, "state");
  state_badge(r, rec);
  kv(b, "attempt");
  attempt_cell(b, rec);
  kv(b, "fingerprint");
  for (size_t i = 0; i < rec->fp_len; i++) cb_printf(b, "%02x", rec->fp[i]);
  kv(b, "created");
  cb_time(b, rec->created_ms, r->now_ms);
  kv(b, "updated");
  cb_time(b, rec->updated_ms, r->now_ms);
  if (rec->state == STATE_IN_PROGRESS) {
    kv(b, "lease expires");
    cb_time(b, rec->lease_expires_ms, r->now_ms);
  }
  kv(b, "forgotten at");
  cb_time(b, rec->expires_ms, r->now_ms);
  if (rec_skip(rec) == IDEM_SKIP_NULL_COMPENSATION) {
    kv(b, "outcome");
    cb_put(b,
           "none: no compensation ran (the stored outcome, code and empty body are only what "
           "a retry of the compensation is told: skip_null_compensation). Written ");
    cb_time(b, rec->completed_ms, r->now_ms);
  } else if (rec->outcome) {
    kv(b, "outcome");
    cb_printf(b, "%s, code %d, completed ", idem_word_outcome(rec->outcome), rec->code);
    cb_time(b, rec->completed_ms, r->now_ms);
    kv(b, "body");
    cb_rec_body(b, rec, 0);
  }
  cb_put(b, "</span></div>");
}

static bool resolvable(const step_rec *rec) {
  return rec->state == STATE_IN_PROGRESS || rec->state == STATE_UNKNOWN;
}

static void resolve_form(creq *r, const step_rec *rec) {
  cbuf *b = &r->out;
  char leader[ELECT_ADDR_MAX];
  cb_put(b, "<h2>Resolve</h2>");
  if (!resolvable(rec)) {
    cb_put(b,
           "<p class=\"muted\">Only a step in progress or of unknown outcome can be "
           "resolved.</p>");
    return;
  }
  if (r->s.role != AUTH_ROLE_ADMIN) {
    cb_put(b, "<p class=\"muted\">Your role (service) may read only; an admin resolves.</p>");
    return;
  }
  if (!cr_is_leader(r, leader)) {
    cb_put(b, "<p>Resolve on the leader: ");
    leader_link(r, leader, r->path);
    cb_put(b, "</p>");
    return;
  }
  cb_put(b, "<form class=\"card\" id=\"resolve\" method=\"post\" action=\"");
  step_href(b, &rec->key);
  cb_put(b, "/resolve\">");
  form_csrf(r);
  cb_put(b,
         "<div class=\"filters\"><label>outcome<select name=\"outcome\">"
         "<option value=\"succeeded\">succeeded: it happened (replayed from now on)</option>"
         "<option value=\"failed\">failed: it did not happen (replayed)</option>"
         "<option value=\"retryable\">retryable: release the key (the next call runs it "
         "again)</option></select></label>"
         "<label>result code<input name=\"code\" value=\"0\" size=\"6\"></label></div>"
         "<label>result body (text)<textarea name=\"body\"></textarea></label>"
         "<label>reason (required, kept in the audit trail)<textarea name=\"reason\" "
         "required></textarea></label>"
         "<p><button type=\"submit\">Review the change\xE2\x80\xA6</button></p></form>");
}

void page_step(creq *r, const coord_key_in *key) {
  step_rec rec = {0};
  err_t err;
  err_clear(&err);
  store *st = cr_store(r);
  if (!st) {
    page_error(r, 503, "cannot open a store connection");
    return;
  }
  if (coord_lookup_step(r->c->cfg.coord, st, r->s.tenant, key, r->deadline, &rec, &err) != ERR_OK) {
    page_err(r, &err);
    return;
  }
  page_begin(r, "Step");
  record_card(r, &rec);
  resolve_form(r, &rec);
  page_end(r);
  step_rec_clear(&rec);
}

static void hidden(cbuf *b, const char *name, const char *v, size_t n) {
  cb_printf(b, "<input type=\"hidden\" name=\"%s\" value=\"", name);
  cb_escn(b, v ? v : "", v ? n : 0);
  cb_put(b, "\">");
}

/* The confirmation: the record now, and what it becomes. */
static void confirm_page(creq *r, const step_rec *rec, int outcome, const cfield *code,
                         const cfield *body, const cfield *reason) {
  char actor[AUDIT_ACTOR_MAX + 1];
  console_actor(r, actor, sizeof actor);
  page_begin(r, "Confirm the resolution");
  cbuf *b = &r->out;
  const char *to = outcome == OUTCOME_RETRYABLE ? "released" : idem_word_outcome(outcome);
  cb_printf(b,
            "<div class=\"card change\" id=\"change\">This step goes from "
            "<span class=\"state s-%s\">%s</span> to <span class=\"state s-%s\">%s</span>",
            idem_word_state(rec->state), idem_word_state(rec->state), to, to);
  if (outcome == OUTCOME_RETRYABLE)
    cb_put(b, ": the key is released, the next BeginStep runs the action again (attempt + 1).");
  else
    cb_printf(b, ": every BeginStep of this key is answered REPLAY with outcome %s, code ",
              idem_word_outcome(outcome));
  if (outcome != OUTCOME_RETRYABLE) {
    cb_escn(b, code->value, code->value_len);
    cb_put(b, " and the body below.");
  }
  cb_put(b, "</div><div class=\"card kv\"><span>body</span><span>");
  cb_body(b, (const uint8_t *)body->value, body->value_len, 0);
  cb_put(b, "</span><span>reason</span><span>");
  cb_escn(b, reason->value, reason->value_len);
  cb_put(b, "</span><span>audit actor</span><span>");
  cb_esc(b, actor);
  cb_put(b, "</span></div>");
  record_card(r, rec);
  cb_put(b, "<form method=\"post\" id=\"confirm\" action=\"");
  step_href(b, &rec->key);
  cb_put(b, "/resolve\">");
  form_csrf(r);
  hidden(b, "outcome", idem_word_outcome(outcome), strlen(idem_word_outcome(outcome)));
  hidden(b, "code", code->value, code->value_len);
  /* the exact bytes reviewed above, whatever they are: as hex, which no browser re-encodes */
  cb_printf(b, "<input type=\"hidden\" name=\"body_hex\" value=\"");
  for (size_t i = 0; i < body->value_len; i++) cb_printf(b, "%02x", (uint8_t)body->value[i]);
  cb_put(b, "\">");
  hidden(b, "reason", reason->value, reason->value_len);
  hidden(b, "confirm", "yes", 3);
  cb_put(b, "<button class=\"danger\" type=\"submit\">Resolve the step</button> <a href=\"");
  step_href(b, &rec->key);
  cb_put(b, "\">Cancel</a></form>");
  page_end(r);
}

/* The confirmation's body_hex (the exact bytes shown for review) decoded in place into a field
 * of its own; false when it is not hex. */
static bool body_from_hex(cfield *f) {
  if (f->value_len % 2) return false;
  for (size_t i = 0; i < f->value_len / 2; i++) {
    int hi = console_hexval(f->value[2 * i]), lo = console_hexval(f->value[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    f->value[i] = (char)(hi * 16 + lo);
  }
  f->value_len /= 2;
  f->value[f->value_len] = '\0';
  return true;
}

/* A reason typed into a textarea comes with CRLF line breaks (HTML forms send them so): kept
 * with LF, the one line break the audit trail stores. */
static void lf_lines(cfield *f) {
  size_t o = 0;
  for (size_t i = 0; i < f->value_len; i++) {
    if (f->value[i] == '\r') {
      f->value[o++] = '\n';
      if (i + 1 < f->value_len && f->value[i + 1] == '\n') i++;
    } else {
      f->value[o++] = f->value[i];
    }
  }
  f->value_len = o;
  f->value[o] = '\0';
}

void post_resolve(creq *r, const coord_key_in *key) {
  if (!post_allowed(r, true)) return;
  const cfield *outcome_f = cr_field(r, "outcome"), *code = cr_field(r, "code"),
               *body = cr_field(r, "body"), *reason = cr_field(r, "reason");
  cfield *body_hex = (cfield *)cr_field(r, "body_hex");
  if (body_hex) {
    if (body) {
      page_error(r, 400, "body: send body or body_hex, not both");
      return;
    }
    if (!body_from_hex(body_hex)) {
      page_error(r, 400, "body_hex: expected hex digits");
      return;
    }
    body = body_hex;
  }
  if (reason) lf_lines((cfield *)reason);
  int outcome = outcome_f ? idem_word_find(idem_outcome_words, IDEM_WORD_COUNT(idem_outcome_words),
                                           1, outcome_f->value)
                          : -1;
  if (outcome != OUTCOME_SUCCEEDED && outcome != OUTCOME_FAILED && outcome != OUTCOME_RETRYABLE) {
    page_error(r, 400, "outcome: succeeded, failed or retryable");
    return;
  }
  char *end = NULL;
  errno = 0;
  long code_v = code && code->value[0] ? strtol(code->value, &end, 10) : 0;
  if (errno || (end && *end) || code_v < INT32_MIN || code_v > INT32_MAX) {
    page_error(r, 400, "code: expected an integer");
    return;
  }
  if (!reason || !reason->value[0]) {
    page_error(r, 400, "reason: required");
    return;
  }
  static const cfield none = {.name = (char *)"", .value = (char *)"", .value_len = 0};
  if (!body) body = &none;
  if (!code) code = &none;
  err_t err;
  err_clear(&err);
  step_rec rec = {0};
  store *st = cr_store(r);
  if (!st) {
    page_error(r, 503, "cannot open a store connection");
    return;
  }
  const char *confirm = cr_form(r, "confirm");
  if (!confirm || strcmp(confirm, "yes") != 0) {
    if (coord_lookup_step(r->c->cfg.coord, st, r->s.tenant, key, r->deadline, &rec, &err) !=
        ERR_OK) {
      page_err(r, &err);
      return;
    }
    confirm_page(r, &rec, outcome, code, body, reason);
    step_rec_clear(&rec);
    return;
  }
  char actor[AUDIT_ACTOR_MAX + 1];
  console_actor(r, actor, sizeof actor);
  coord_resolve_in in = {.key = *key,
                         .outcome = outcome,
                         .code = (int32_t)code_v,
                         .body = (const uint8_t *)body->value,
                         .body_len = body->value_len,
                         .reason = reason->value,
                         .actor = actor};
  if (coord_resolve_step(r->c->cfg.coord, st, r->s.tenant, &in, r->deadline, &rec, &err) !=
      ERR_OK) {
    page_err(r, &err);
    return;
  }
  cbuf loc = {0};
  cb_put(&loc, "/sagas/");
  cb_url(&loc, rec.key.global_id);
  cb_put(&loc, "?resolved=1");
  cr_redirect(r, loc.oom ? "/" : loc.p);
  cb_free(&loc);
  step_rec_clear(&rec);
}
