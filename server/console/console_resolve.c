/* console_resolve.c — one step's page and its resolution (Admin.ResolveStep through
 * coord_resolve_step): the form, a confirmation page that says what will change, then the
 * change, with the session's identity as the audit actor. The step is read in the group its
 * saga's slot belongs to and resolved on that group's leader (console__page_saga_group). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../coord/coord_admin.h"
#include "console_pages.h"
#include "idem/v1/names.h"

static void kv(buf_t *b, const char *k) {
  console__html(b, "</span><span>%s</span><span>", k);
}

static void record_card(creq *r, const step_rec *rec) {
  buf_t *b = &r->out;
  console__html(b, "<div class=\"card kv\" id=\"record\"><span>saga</span><span><a href=\"/sagas/");
  console__url(b, rec->key.global_id);
  console__html(b, "\">%s</a>", rec->key.global_id);
  kv(b, "step");
  console__html(b, "%s / %s / %s", rec->key.service, rec->key.operation,
                idem_word_phase(rec->key.phase));
  kv(b, "state");
  console__state_badge(r, rec);
  kv(b, "attempt");
  console__attempt_cell(b, rec);
  kv(b, "fingerprint");
  for (size_t i = 0; i < rec->fp_len; i++) console__html(b, "%02x", rec->fp[i]);
  kv(b, "created");
  console__time(b, rec->created_ms, r->now_ms);
  kv(b, "updated");
  console__time(b, rec->updated_ms, r->now_ms);
  if (rec->state == STATE_IN_PROGRESS) {
    kv(b, "lease expires");
    console__time(b, rec->lease_expires_ms, r->now_ms);
  }
  kv(b, "forgotten at");
  console__time(b, rec->expires_ms, r->now_ms);
  kv(b, "begin trace"); /* docs/api.md §22: the calls that began and finished it */
  console__trace_id(r, rec->begin_trace_id);
  kv(b, "end trace");
  console__trace_id(r, rec->complete_trace_id);
  if (console__rec_skip(rec) == IDEM_SKIP_NULL_COMPENSATION) {
    kv(b, "outcome");
    console__html(
        b,
        "none: no compensation ran (the stored outcome, code and empty body are only what a "
        "retry of the compensation is told: skip_null_compensation). Written ");
    console__time(b, rec->completed_ms, r->now_ms);
  } else if (rec->outcome) {
    kv(b, "outcome");
    console__html(b, "%s, code %d, completed ", idem_word_outcome(rec->outcome), rec->code);
    console__time(b, rec->completed_ms, r->now_ms);
    kv(b, "body");
    console__rec_body(b, rec, 0);
  }
  console__html(b, "</span></div>");
}

static bool resolvable(const step_rec *rec) {
  return rec->state == STATE_IN_PROGRESS || rec->state == STATE_UNKNOWN;
}

static void resolve_form(creq *r, const step_rec *rec, size_t g) {
  buf_t *b = &r->out;
  char leader[ELECT_ADDR_MAX];
  console__html(b, "<h2>Resolve</h2>");
  if (!resolvable(rec)) {
    console__html(
        b, "<p class=\"muted\">Only a step in progress or of unknown outcome can be resolved.</p>");
    return;
  }
  if (!auth_role_at_least(r->s.role, AUTH_ROLE_ADMIN)) {
    console__html(b,
                  "<p class=\"muted\">Your role (service) may read only; an admin resolves.</p>");
    return;
  }
  if (!console__leads_group(r, g, leader)) {
    console__html(b, "<p>Resolve on the leader of group %s: ", r->c->groups[g].name);
    console__leader_link(r, leader, r->path);
    console__html(b, "</p>");
    return;
  }
  console__html(b, "<form class=\"card\" id=\"resolve\" method=\"post\" action=\"");
  console__step_href(b, &rec->key);
  console__html(b, "/resolve\">");
  console__form_csrf(r);
  console__html(
      b,
      "<div class=\"filters\"><label>outcome<select name=\"outcome\">"
      "<option value=\"succeeded\">succeeded: it happened (replayed from now on)</option>"
      "<option value=\"failed\">failed: it did not happen (replayed)</option>"
      "<option value=\"retryable\">retryable: release the key (the next call runs it "
      "again)</option>"
      "</select></label><label>result code<input name=\"code\" value=\"0\" size=\"6\"></label>"
      "</div><label>result body (text)<textarea name=\"body\"></textarea></label>"
      "<label>reason (required, kept in the audit trail)<textarea name=\"reason\" required>"
      "</textarea></label><p><button type=\"submit\">Review the change\xE2\x80\xA6</button></p>"
      "</form>");
}

/* The step the path names: /steps/{global_id}/{service}/{operation}/{phase}; false with a 404
 * page written when the phase is not a word of one. */
static bool key_of(creq *r, char **seg, coord_key_in *key) {
  int phase = strcmp(seg[3], "forward") == 0        ? PHASE_FORWARD
              : strcmp(seg[3], "compensation") == 0 ? PHASE_COMPENSATION
                                                    : -1;
  if (phase < 0) {
    console__page_error(r, 404, "phase: forward or compensation");
    return false;
  }
  *key = (coord_key_in){seg[0], seg[1], seg[2], phase, NULL};
  return true;
}

void console__page_step(creq *r, char **seg) {
  coord_key_in k, *key = &k;
  if (!key_of(r, seg, key)) return;
  step_rec rec = {0};
  err_t err;
  err_clear(&err);
  store *st = NULL;
  int g = console__page_saga_group(r, key->global_id, &st);
  if (g < 0) return;
  if (coord_lookup_step(console__group_coord(r, (size_t)g), st, r->s.tenant, key, r->deadline, &rec,
                        &err) != ERR_OK) {
    console__page_err(r, &err);
    return;
  }
  console__page_begin(r, "Step");
  record_card(r, &rec);
  resolve_form(r, &rec, (size_t)g);
  console__page_end(r);
  step_rec_clear(&rec);
}

static void hidden(buf_t *b, const char *name, const char *v, size_t n) {
  console__html(b, "<input type=\"hidden\" name=\"%s\" value=\"", name);
  console__escn(b, v ? v : "", v ? n : 0);
  console__html(b, "\">");
}

/* The confirmation: the record now, and what it becomes. */
static void confirm_page(creq *r, const step_rec *rec, int outcome, const cfield *code,
                         const cfield *body, const cfield *reason) {
  char actor[AUDIT_ACTOR_MAX + 1];
  console__actor(r, actor, sizeof actor);
  console__page_begin(r, "Confirm the resolution");
  buf_t *b = &r->out;
  const char *to = outcome == OUTCOME_RETRYABLE ? "released" : idem_word_outcome(outcome);
  console__html(b,
                "<div class=\"card change\" id=\"change\">This step goes from <span class=\"state "
                "s-%s\">%s</span> to <span class=\"state s-%s\">%s</span>",
                idem_word_state(rec->state), idem_word_state(rec->state), to, to);
  if (outcome == OUTCOME_RETRYABLE)
    console__html(b,
                  ": the key is released, the next BeginStep runs the action again (attempt + 1).");
  else
    console__html(b, ": every BeginStep of this key is answered REPLAY with outcome %s, code ",
                  idem_word_outcome(outcome));
  if (outcome != OUTCOME_RETRYABLE) {
    console__escn(b, code->value, code->value_len);
    console__html(b, " and the body below.");
  }
  console__html(b, "</div><div class=\"card kv\"><span>body</span><span>");
  console__body(b, (const uint8_t *)body->value, body->value_len, 0);
  console__html(b, "</span><span>reason</span><span>");
  console__escn(b, reason->value, reason->value_len);
  console__html(b, "</span><span>audit actor</span><span>%s</span></div>", actor);
  record_card(r, rec);
  console__html(b, "<form method=\"post\" id=\"confirm\" action=\"");
  console__step_href(b, &rec->key);
  console__html(b, "/resolve\">");
  console__form_csrf(r);
  hidden(b, "outcome", idem_word_outcome(outcome), strlen(idem_word_outcome(outcome)));
  hidden(b, "code", code->value, code->value_len);
  /* the exact bytes reviewed above, whatever they are: as hex, which no browser re-encodes */
  console__html(b, "<input type=\"hidden\" name=\"body_hex\" value=\"");
  for (size_t i = 0; i < body->value_len; i++) console__html(b, "%02x", (uint8_t)body->value[i]);
  console__html(b, "\">");
  hidden(b, "reason", reason->value, reason->value_len);
  hidden(b, "confirm", "yes", 3);
  console__html(b, "<button class=\"danger\" type=\"submit\">Resolve the step</button> <a href=\"");
  console__step_href(b, &rec->key);
  console__html(b, "\">Cancel</a></form>");
  console__page_end(r);
}

/* The confirmation's body_hex (the exact bytes shown for review) decoded in place into a field
 * of its own; false when it is not hex. */
static bool body_from_hex(cfield *f) {
  if (f->value_len % 2) return false;
  for (size_t i = 0; i < f->value_len / 2; i++) {
    int hi = console__hexval(f->value[2 * i]), lo = console__hexval(f->value[2 * i + 1]);
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

void console__post_resolve(creq *r, char **seg) {
  coord_key_in k, *key = &k;
  if (!key_of(r, seg, key)) return;
  store *st = NULL; /* made on the leader of the saga's group (the route checked the rest) */
  int g = console__page_saga_group(r, key->global_id, &st);
  if (g < 0 || !console__page_group_leader(r, (size_t)g)) return;
  const coord_ctx *coord = console__group_coord(r, (size_t)g);
  const cfield *outcome_f = console__field(r, "outcome"), *code = console__field(r, "code"),
               *body = console__field(r, "body"), *reason = console__field(r, "reason");
  cfield *body_hex = (cfield *)console__field(r, "body_hex");
  if (body_hex) {
    if (body) {
      console__page_error(r, 400, "body: send body or body_hex, not both");
      return;
    }
    if (!body_from_hex(body_hex)) {
      console__page_error(r, 400, "body_hex: expected hex digits");
      return;
    }
    body = body_hex;
  }
  if (reason) lf_lines((cfield *)reason);
  int outcome = outcome_f ? idem_word_find(idem_outcome_words, IDEM_WORD_COUNT(idem_outcome_words),
                                           1, outcome_f->value)
                          : -1;
  if (outcome != OUTCOME_SUCCEEDED && outcome != OUTCOME_FAILED && outcome != OUTCOME_RETRYABLE) {
    console__page_error(r, 400, "outcome: succeeded, failed or retryable");
    return;
  }
  char *end = NULL;
  errno = 0;
  long code_v = code && code->value[0] ? strtol(code->value, &end, 10) : 0;
  if (errno || (end && *end) || code_v < INT32_MIN || code_v > INT32_MAX) {
    console__page_error(r, 400, "code: expected an integer");
    return;
  }
  if (!reason || !reason->value[0]) {
    console__page_error(r, 400, "reason: required");
    return;
  }
  static const cfield none = {.name = (char *)"", .value = (char *)"", .value_len = 0};
  if (!body) body = &none;
  if (!code) code = &none;
  err_t err;
  err_clear(&err);
  step_rec rec = {0};
  const char *confirm = console__form(r, "confirm");
  if (!confirm || strcmp(confirm, "yes") != 0) {
    if (coord_lookup_step(coord, st, r->s.tenant, key, r->deadline, &rec, &err) != ERR_OK) {
      console__page_err(r, &err);
      return;
    }
    confirm_page(r, &rec, outcome, code, body, reason);
    step_rec_clear(&rec);
    return;
  }
  char actor[AUDIT_ACTOR_MAX + 1];
  console__actor(r, actor, sizeof actor);
  coord_resolve_in in = {.key = *key,
                         .outcome = outcome,
                         .code = (int32_t)code_v,
                         .body = (const uint8_t *)body->value,
                         .body_len = body->value_len,
                         .reason = reason->value,
                         .actor = actor};
  if (coord_resolve_step(coord, st, r->s.tenant, &in, r->deadline, &rec, &err) != ERR_OK) {
    console__page_err(r, &err);
    return;
  }
  buf_t loc = {0};
  console__html(&loc, "/sagas/");
  console__url(&loc, rec.key.global_id);
  console__html(&loc, "?resolved=1");
  console__redirect(r, loc.oom ? "/" : loc.p);
  buf_free(&loc);
  step_rec_clear(&rec);
}
