/* test_decide.c — the BeginStep decision table (docs/api.md §3), with retention expiry, on
 * decide_begin, as a table: each row is what the store holds (the forward and compensation
 * records), the request (phase, fingerprint) and the answer expected (decision or error, attempt,
 * takeover, the records written). One Criterion test per row; every failure names its row.
 * CompleteStep and ExtendLease are in test_decide_complete.c. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "coord/decide.h"
#include "support_decide.h"

/* sd_rec's times: created (kept by a takeover), and the retention end of a finished record. */
#define KEPT (SD_NOW - 9000)
#define HELD_EXP (SD_NOW + 3600000)
#define AT(d) (SD_NOW + (d))

/* One record the store holds. st STATE_NONE: none. The rest as sd_rec gives it, except: lease
 * (lease_expires_ms) and expires (expires_ms) when not 0; a result when outcome is set (code 0:
 * the outcome alone, no body; else sd_with_result's, with that code). */
typedef struct held {
  step_state st;
  uint64_t attempt;
  const char *fp;
  int64_t lease;
  int64_t expires;
  step_outcome outcome;
  int32_t code;
} held;

/* A record the decision must write, at writes[i]: a new attempt IN_PROGRESS of the request's
 * phase, the forward ABANDONED (a tombstone, or an expired forward given up), or a null
 * compensation (SUCCEEDED, attempt 0). fp NULL: none. created: its created_ms. */
typedef enum { W_IN_PROGRESS = 1, W_ABANDONED, W_NULL_COMP } write_kind;
typedef struct want_write {
  write_kind kind;
  uint64_t attempt;
  const char *fp;
  int64_t created;
} want_write;

typedef struct row {
  const char *name;
  held fwd, comp;
  step_phase phase; /* the request */
  const char *fp;
  /* the answer: rc ERR_OK and a decision, or an error whose message holds needle */
  err_code rc;
  const char *needle;
  int64_t retry_after; /* ERR_ABORTED: the time left on the lease */
  step_decision decision;
  uint64_t attempt; /* PROCEED and the skips (REPLAY: the replayed record's) */
  bool takeover;
  int64_t expires;      /* the skips: out.expires_ms */
  step_phase replay_of; /* REPLAY: the held record replayed */
  size_t n_writes;
  want_write w[2];
} row;

/* clang-format off */
#define PROCEED(a, t) .decision = DECISION_PROCEED, .attempt = (a), .takeover = (t)
#define REPLAY(ph) .decision = DECISION_REPLAY, .replay_of = (ph)
#define ALREADY(a, e) .decision = DECISION_SKIP_ALREADY_COMPENSATED, .attempt = (a), .expires = (e)
#define NULL_COMP(e) .decision = DECISION_SKIP_NULL_COMPENSATION, .attempt = 0, .expires = (e)
#define ABORTED(left) .rc = ERR_ABORTED, .needle = "in progress", .retry_after = (left)
#define MISMATCH .rc = ERR_PRECONDITION, .needle = "fingerprint mismatch"
#define WRITES1(a) .n_writes = 1, .w = {a}
#define WRITES2(a, b) .n_writes = 2, .w = {a, b}
#define IN_PROGRESS_W(a, f, c) {W_IN_PROGRESS, (a), (f), (c)}
#define ABANDONED_W(a, f, c) {W_ABANDONED, (a), (f), (c)}
#define NULL_COMP_W(f) {W_NULL_COMP, 0, (f), SD_NOW}
#define FWD PHASE_FORWARD
#define COMP PHASE_COMPENSATION
/* clang-format on */

static const row rows[] = {
    /* ===================== FORWARD ===================== */
    {"forward: nothing stored creates attempt 1", .phase = FWD, .fp = "fp-a", PROCEED(1, false),
     WRITES1(IN_PROGRESS_W(1, "fp-a", SD_NOW))},
    {"forward: nothing stored, without fingerprint", .phase = FWD, .fp = NULL, PROCEED(1, false),
     WRITES1(IN_PROGRESS_W(1, NULL, SD_NOW))},
    {"forward: compensation present skips", .comp = {STATE_IN_PROGRESS, 1, NULL}, .phase = FWD,
     .fp = "fp-a", ALREADY(0, 0)},
    {"forward: compensation check precedes fingerprint and state",
     .fwd = {STATE_IN_PROGRESS, 2, "fp-a"}, /* mismatch and live lease */
     .comp = {STATE_SUCCEEDED, 0, NULL}, .phase = FWD, .fp = "fp-b", ALREADY(2, HELD_EXP)},
    {"forward: expired compensation counts as absent",
     .comp = {STATE_SUCCEEDED, 0, NULL, .expires = SD_NOW}, .phase = FWD, .fp = "fp-a",
     PROCEED(1, false), WRITES1(IN_PROGRESS_W(1, "fp-a", SD_NOW))},
    {"forward: fingerprint mismatch",
     .fwd = {STATE_SUCCEEDED, 1, "fp-a", .outcome = OUTCOME_SUCCEEDED, .code = 200}, .phase = FWD,
     .fp = "fp-b", MISMATCH},
    {"forward: fingerprint prefix is a mismatch",
     .fwd = {STATE_SUCCEEDED, 1, "fp-ab", .outcome = OUTCOME_SUCCEEDED, .code = 200}, .phase = FWD,
     .fp = "fp-a", MISMATCH},
    {"forward: fingerprint check precedes in progress", .fwd = {STATE_IN_PROGRESS, 1, "fp-a"},
     .phase = FWD, .fp = "fp-b", MISMATCH},
    {"forward: empty request fingerprint matches",
     .fwd = {STATE_SUCCEEDED, 1, "fp-a", .outcome = OUTCOME_SUCCEEDED, .code = 200}, .phase = FWD,
     .fp = NULL, REPLAY(FWD)},
    {"forward: empty stored fingerprint matches",
     .fwd = {STATE_SUCCEEDED, 1, NULL, .outcome = OUTCOME_SUCCEEDED, .code = 200}, .phase = FWD,
     .fp = "fp-b", REPLAY(FWD)},
    {"forward: in progress with live lease is aborted", .fwd = {STATE_IN_PROGRESS, 1, "fp-a"},
     .phase = FWD, .fp = "fp-a", ABORTED(1234)},
    {"forward: in progress, one ms left", .fwd = {STATE_IN_PROGRESS, 1, "fp-a", .lease = AT(1)},
     .phase = FWD, .fp = "fp-a", ABORTED(1)},
    {"forward: in progress, lease ending now, is taken over",
     .fwd = {STATE_IN_PROGRESS, 3, "fp-a", .lease = AT(0)}, .phase = FWD, .fp = "fp-a",
     PROCEED(4, true), WRITES1(IN_PROGRESS_W(4, "fp-a", KEPT))},
    {"forward: takeover adopts the fingerprint when the record had none",
     .fwd = {STATE_IN_PROGRESS, 1, NULL, .lease = AT(-1)}, .phase = FWD, .fp = "fp-new",
     PROCEED(2, true), WRITES1(IN_PROGRESS_W(2, "fp-new", KEPT))},
    {"forward: released proceeds with the next attempt, result cleared",
     .fwd = {STATE_RELEASED, 2, "fp-a", .outcome = OUTCOME_RETRYABLE, .code = 429}, .phase = FWD,
     .fp = "fp-a", PROCEED(3, false), WRITES1(IN_PROGRESS_W(3, "fp-a", KEPT))},
    {"forward: released adopts the fingerprint when the record had none",
     .fwd = {STATE_RELEASED, 1, NULL}, .phase = FWD, .fp = "fp-new", PROCEED(2, false),
     WRITES1(IN_PROGRESS_W(2, "fp-new", KEPT))},
    {"forward: succeeded replays",
     .fwd = {STATE_SUCCEEDED, 2, "fp-a", .outcome = OUTCOME_SUCCEEDED, .code = 201}, .phase = FWD,
     .fp = "fp-a", REPLAY(FWD)},
    {"forward: failed replays",
     .fwd = {STATE_FAILED, 1, "fp-a", .outcome = OUTCOME_FAILED, .code = 402}, .phase = FWD,
     .fp = "fp-a", REPLAY(FWD)},
    {"forward: unknown replays",
     .fwd = {STATE_UNKNOWN, 1, "fp-a", .outcome = OUTCOME_UNKNOWN, .code = 500}, .phase = FWD,
     .fp = "fp-a", REPLAY(FWD)},
    {"forward: replay of an empty body",
     .fwd = {STATE_SUCCEEDED, 1, "fp-a", .outcome = OUTCOME_SUCCEEDED}, .phase = FWD, .fp = "fp-a",
     REPLAY(FWD)},
    {"forward: abandoned skips", .fwd = {STATE_ABANDONED, 3, "fp-a"}, .phase = FWD, .fp = "fp-a",
     ALREADY(3, HELD_EXP)},
    {"forward: retention-expired record is new again",
     .fwd = {STATE_SUCCEEDED, 5, "fp-a", .expires = SD_NOW, .outcome = OUTCOME_SUCCEEDED,
             .code = 200},
     .phase = FWD, .fp = "fp-b", /* would be a mismatch */
     PROCEED(1, false), WRITES1(IN_PROGRESS_W(1, "fp-b", SD_NOW))},
    {"forward: record one ms before expiry still replays",
     .fwd = {STATE_SUCCEEDED, 1, "fp-a", .expires = AT(1), .outcome = OUTCOME_SUCCEEDED,
             .code = 200},
     .phase = FWD, .fp = "fp-a", REPLAY(FWD)},
    {"forward: invalid phase is refused", .phase = PHASE_UNSPECIFIED, .fp = "fp-a",
     .rc = ERR_INVALID, .needle = "key.phase"},

    /* ===================== COMPENSATION ===================== */
    {"compensation: fingerprint mismatch comes first",
     .fwd = {STATE_IN_PROGRESS, 1, "x"}, /* would be ABORTED */
     .comp = {STATE_IN_PROGRESS, 1, "fp-a"}, .phase = COMP, .fp = "fp-b", MISMATCH},
    {"compensation: the forward's fingerprint is not compared",
     .fwd = {STATE_SUCCEEDED, 1, "fp-fwd", .outcome = OUTCOME_SUCCEEDED, .code = 200},
     .phase = COMP, .fp = "fp-comp", PROCEED(1, false),
     WRITES1(IN_PROGRESS_W(1, "fp-comp", SD_NOW))},
    {"compensation: no forward writes a tombstone and a null compensation", .phase = COMP,
     .fp = "fp-c", NULL_COMP(SD_RET_END),
     WRITES2(ABANDONED_W(0, NULL, SD_NOW), NULL_COMP_W("fp-c"))},
    {"compensation: released forward is treated as none",
     .fwd = {STATE_RELEASED, 2, "fp-f", .outcome = OUTCOME_RETRYABLE, .code = 429}, .phase = COMP,
     .fp = "fp-c", NULL_COMP(SD_RET_END),
     WRITES2(ABANDONED_W(2, "fp-f", KEPT), NULL_COMP_W("fp-c"))},
    {"compensation: retention-expired forward is none",
     .fwd = {STATE_SUCCEEDED, 4, "fp-f", .expires = AT(-1)}, .phase = COMP, .fp = "fp-c",
     NULL_COMP(SD_RET_END), WRITES2(ABANDONED_W(0, NULL, SD_NOW), NULL_COMP_W("fp-c"))},
    {"compensation: no forward, but a compensation in progress decides",
     .comp = {STATE_IN_PROGRESS, 1, "fp-c"}, .phase = COMP, .fp = "fp-c", ABORTED(1234)},
    {"compensation: no forward, but a finished compensation replays",
     .comp = {STATE_SUCCEEDED, 1, "fp-c", .outcome = OUTCOME_SUCCEEDED, .code = 200}, .phase = COMP,
     .fp = "fp-c", REPLAY(COMP)},
    {"compensation: released forward with a null compensation skips again",
     .fwd = {STATE_RELEASED, 1, NULL},
     .comp = {STATE_SUCCEEDED, 0, "fp-c", .outcome = OUTCOME_SUCCEEDED}, .phase = COMP,
     .fp = "fp-c", NULL_COMP(HELD_EXP)},
    {"compensation: failed forward writes a null compensation only",
     .fwd = {STATE_FAILED, 1, "fp-f", .outcome = OUTCOME_FAILED, .code = 402}, .phase = COMP,
     .fp = "fp-c", NULL_COMP(SD_RET_END), WRITES1(NULL_COMP_W("fp-c"))},
    {"compensation: failed forward with a null compensation skips again",
     .fwd = {STATE_FAILED, 1, "fp-f"}, .comp = {STATE_SUCCEEDED, 0, "fp-c"}, .phase = COMP,
     .fp = "fp-c", NULL_COMP(HELD_EXP)},
    {"compensation: failed forward with a released compensation proceeds",
     .fwd = {STATE_FAILED, 1, "fp-f"}, .comp = {STATE_RELEASED, 1, "fp-c"}, .phase = COMP,
     .fp = "fp-c", PROCEED(2, false), WRITES1(IN_PROGRESS_W(2, "fp-c", KEPT))},
    {"compensation: forward in progress is aborted",
     .fwd = {STATE_IN_PROGRESS, 1, "fp-f", .lease = AT(777)}, .phase = COMP, .fp = "fp-c",
     ABORTED(777)},
    {"compensation: abandoned forward with a null compensation skips",
     .fwd = {STATE_ABANDONED, 0, NULL},
     .comp = {STATE_SUCCEEDED, 0, "fp-c", .outcome = OUTCOME_SUCCEEDED}, .phase = COMP,
     .fp = "fp-c", NULL_COMP(HELD_EXP)},
    {"compensation: abandoned forward without a compensation proceeds",
     .fwd = {STATE_ABANDONED, 2, "fp-f"}, .phase = COMP, .fp = "fp-c", PROCEED(1, false),
     WRITES1(IN_PROGRESS_W(1, "fp-c", SD_NOW))},
    {"compensation: abandoned forward with a running compensation is aborted",
     .fwd = {STATE_ABANDONED, 2, "fp-f"}, .comp = {STATE_IN_PROGRESS, 1, "fp-c"}, .phase = COMP,
     .fp = "fp-c", ABORTED(1234)},
    {"compensation: expired forward is abandoned, then the compensation proceeds",
     .fwd = {STATE_IN_PROGRESS, 3, "fp-f", .lease = AT(0)}, .phase = COMP, .fp = "fp-c",
     PROCEED(1, false), WRITES2(ABANDONED_W(3, "fp-f", KEPT), IN_PROGRESS_W(1, "fp-c", SD_NOW))},
    {"compensation: expired forward's abandon is kept when the compensation conflicts",
     .fwd = {STATE_IN_PROGRESS, 3, "fp-f", .lease = AT(-10)},
     .comp = {STATE_IN_PROGRESS, 1, "fp-c", .lease = AT(50)}, .phase = COMP, .fp = "fp-c",
     ABORTED(50), WRITES1(ABANDONED_W(3, "fp-f", KEPT))},
    {"compensation: succeeded forward without a compensation proceeds",
     .fwd = {STATE_SUCCEEDED, 1, "fp-f", .outcome = OUTCOME_SUCCEEDED, .code = 200}, .phase = COMP,
     .fp = "fp-c", PROCEED(1, false), WRITES1(IN_PROGRESS_W(1, "fp-c", SD_NOW))},
    {"compensation: unknown forward without a compensation proceeds",
     .fwd = {STATE_UNKNOWN, 2, "fp-f", .outcome = OUTCOME_UNKNOWN, .code = 500}, .phase = COMP,
     .fp = NULL, PROCEED(1, false), WRITES1(IN_PROGRESS_W(1, NULL, SD_NOW))},
    {"compensation: compensation in progress is aborted", .fwd = {STATE_SUCCEEDED, 1, "fp-f"},
     .comp = {STATE_IN_PROGRESS, 2, "fp-c", .lease = AT(42)}, .phase = COMP, .fp = "fp-c",
     ABORTED(42)},
    {"compensation: expired compensation is taken over", .fwd = {STATE_SUCCEEDED, 1, "fp-f"},
     .comp = {STATE_IN_PROGRESS, 2, "fp-c", .lease = AT(-1)}, .phase = COMP, .fp = "fp-c",
     PROCEED(3, true), WRITES1(IN_PROGRESS_W(3, "fp-c", KEPT))},
    {"compensation: released compensation, next attempt", .fwd = {STATE_UNKNOWN, 1, "fp-f"},
     .comp = {STATE_RELEASED, 1, "fp-c", .outcome = OUTCOME_RETRYABLE, .code = 503}, .phase = COMP,
     .fp = "fp-c", PROCEED(2, false), WRITES1(IN_PROGRESS_W(2, "fp-c", KEPT))},
    {"compensation: succeeded compensation replays", .fwd = {STATE_SUCCEEDED, 1, "fp-f"},
     .comp = {STATE_SUCCEEDED, 1, "fp-c", .outcome = OUTCOME_SUCCEEDED, .code = 300}, .phase = COMP,
     .fp = "fp-c", REPLAY(COMP)},
    {"compensation: failed compensation replays", .fwd = {STATE_SUCCEEDED, 1, "fp-f"},
     .comp = {STATE_FAILED, 1, "fp-c", .outcome = OUTCOME_FAILED, .code = 301}, .phase = COMP,
     .fp = "fp-c", REPLAY(COMP)},
    {"compensation: unknown compensation replays", .fwd = {STATE_SUCCEEDED, 1, "fp-f"},
     .comp = {STATE_UNKNOWN, 1, "fp-c", .outcome = OUTCOME_UNKNOWN, .code = 302}, .phase = COMP,
     .fp = "fp-c", REPLAY(COMP)},
    {"compensation: abandoned compensation skips, already compensated",
     .fwd = {STATE_SUCCEEDED, 1, "fp-f"}, .comp = {STATE_ABANDONED, 1, "fp-c"}, .phase = COMP,
     .fp = "fp-c", ALREADY(1, HELD_EXP)},
    {"compensation: an executed compensation with attempt 1 is not null",
     .fwd = {STATE_ABANDONED, 1, "fp-f"},
     .comp = {STATE_SUCCEEDED, 1, "fp-c", .outcome = OUTCOME_SUCCEEDED, .code = 200}, .phase = COMP,
     .fp = "fp-c", REPLAY(COMP)},
    {"compensation: retention-expired compensation is new again",
     .fwd = {STATE_SUCCEEDED, 1, "fp-f"},
     .comp = {STATE_SUCCEEDED, 1, "fp-old", .expires = SD_NOW}, /* would mismatch */
     .phase = COMP, .fp = "fp-new", PROCEED(1, false), WRITES1(IN_PROGRESS_W(1, "fp-new", SD_NOW))},
    {"compensation: an expired pair gets a new tombstone",
     .fwd = {STATE_ABANDONED, 0, NULL, .expires = AT(-5)},
     .comp = {STATE_SUCCEEDED, 0, "fp-c", .expires = AT(-5)}, .phase = COMP, .fp = "fp-c",
     NULL_COMP(SD_RET_END), WRITES2(ABANDONED_W(0, NULL, SD_NOW), NULL_COMP_W("fp-c"))},
};

/* ===================== the loop ===================== */

#define N_ROWS (sizeof rows / sizeof rows[0])

/* Checks a == b, naming the row and the expression. */
#define EQ(r, a, b)                                                                                \
  cr_assert_eq((long long)(a), (long long)(b), "row \"%s\": %s is %lld, want %lld", (r)->name, #a, \
               (long long)(a), (long long)(b))
#define TRUE(r, c) cr_assert((c), "row \"%s\": not %s", (r)->name, #c)

static step_rec held_rec(step_phase ph, const held *h) {
  step_rec r;
  memset(&r, 0, sizeof r);
  if (h->st == STATE_NONE) return r;
  r = sd_rec(ph, h->st, h->attempt, h->fp);
  if (h->lease) r.lease_expires_ms = h->lease;
  if (h->expires) r.expires_ms = h->expires;
  if (h->outcome != OUTCOME_UNSPECIFIED && h->code != 0) sd_with_result(&r, h->outcome, h->code);
  if (h->outcome != OUTCOME_UNSPECIFIED) r.outcome = h->outcome;
  return r;
}

static void check_fp(const row *t, const step_rec *r, const char *fp) {
  size_t len = fp ? strlen(fp) : 0;
  EQ(t, r->fp_len, len);
  TRUE(t, memcmp(r->fp, fp ? fp : "", len) == 0);
}

static void check_write(const row *t, const step_rec *r, const want_write *want) {
  TRUE(t, r->present);
  EQ(t, r->attempt, want->attempt);
  EQ(t, r->created_ms, want->created);
  EQ(t, r->updated_ms, SD_NOW);
  check_fp(t, r, want->fp);
  TRUE(t, strcmp(r->key.tenant, "acme") == 0);
  TRUE(t, strcmp(r->key.global_id, "g-1") == 0);
  TRUE(t, strcmp(r->key.service, SD_SERVICE) == 0);
  TRUE(t, strcmp(r->key.operation, "charge") == 0);
  switch (want->kind) {
    case W_IN_PROGRESS: /* a new attempt: a lease, no result */
      EQ(t, r->key.phase, t->phase);
      EQ(t, r->state, STATE_IN_PROGRESS);
      EQ(t, r->lease_expires_ms, SD_NOW + SD_LEASE);
      EQ(t, r->expires_ms, 0);
      EQ(t, r->outcome, OUTCOME_UNSPECIFIED);
      EQ(t, r->code, 0);
      TRUE(t, r->body == NULL);
      EQ(t, r->body_len, 0);
      EQ(t, r->completed_ms, 0);
      break;
    case W_ABANDONED: /* no lease, no result, kept for the policy's retention */
      EQ(t, r->key.phase, PHASE_FORWARD);
      EQ(t, r->state, STATE_ABANDONED);
      EQ(t, r->outcome, OUTCOME_UNSPECIFIED);
      EQ(t, r->body_len, 0);
      EQ(t, r->lease_expires_ms, 0);
      EQ(t, r->expires_ms, SD_RET_END);
      break;
    case W_NULL_COMP: /* SUCCEEDED now, code 0, no body */
      EQ(t, r->key.phase, PHASE_COMPENSATION);
      EQ(t, r->state, STATE_SUCCEEDED);
      EQ(t, r->outcome, OUTCOME_SUCCEEDED);
      EQ(t, r->code, 0);
      EQ(t, r->body_len, 0);
      EQ(t, r->completed_ms, SD_NOW);
      EQ(t, r->lease_expires_ms, 0);
      EQ(t, r->expires_ms, SD_RET_END);
      break;
  }
}

/* The answer of a REPLAY is the replayed record's, its body borrowed from it. */
static void check_replay(const row *t, const decide_begin_out *out, const step_rec *r) {
  TRUE(t, out->has_result);
  EQ(t, out->outcome, r->outcome);
  EQ(t, out->code, r->code);
  TRUE(t, out->body == r->body);
  EQ(t, out->body_len, r->body_len);
  EQ(t, out->completed_ms, r->completed_ms);
  EQ(t, out->attempt, r->attempt);
  EQ(t, out->expires_ms, r->expires_ms);
}

/* The parameters are row numbers: a test runs in a process of its own, where the pointers in
 * a copied row (its strings) would not be valid. */
ParameterizedTestParameters(begin, row) {
  static size_t idx[N_ROWS];
  for (size_t i = 0; i < N_ROWS; i++) idx[i] = i;
  return cr_make_param_array(size_t, idx, N_ROWS);
}

ParameterizedTest(const size_t *nth, begin, row) {
  const row *t = &rows[*nth];
  step_key key = sd_key(t->phase);
  step_pair cur;
  memset(&cur, 0, sizeof cur);
  cur.now_ms = SD_NOW;
  cur.fwd = held_rec(PHASE_FORWARD, &t->fwd);
  cur.comp = held_rec(PHASE_COMPENSATION, &t->comp);
  decide_begin_in in = {.key = &key,
                        .fp = (const uint8_t *)t->fp,
                        .fp_len = t->fp ? strlen(t->fp) : 0,
                        .lease_ms = SD_LEASE,
                        .retention = {SD_RET_S, SD_RET_S}};
  decide_begin_out out;
  memset(&out, 0, sizeof out);
  step_writes w;
  memset(&w, 0, sizeof w);
  w.n = 99; /* must be reset by decide */
  err_t err;
  memset(&err, 0, sizeof err);

  err_code rc = decide_begin(&in, &cur, &out, &w, &err);

  cr_assert_eq(rc, t->rc, "row \"%s\": rc %d, want %d: %s", t->name, rc, t->rc, err.msg);
  if (t->rc != ERR_OK) {
    EQ(t, err.code, t->rc);
    cr_assert(strstr(err.msg, t->needle), "row \"%s\": message \"%s\" lacks \"%s\"", t->name,
              err.msg, t->needle);
    if (t->rc == ERR_ABORTED) EQ(t, err.retry_after_ms, t->retry_after);
  } else {
    EQ(t, out.decision, t->decision);
    switch (t->decision) {
      case DECISION_PROCEED:
        EQ(t, out.attempt, t->attempt);
        EQ(t, out.takeover, t->takeover);
        EQ(t, out.lease_expires_ms, SD_NOW + SD_LEASE);
        EQ(t, out.expires_ms, 0);
        TRUE(t, !out.has_result);
        break;
      case DECISION_REPLAY:
        check_replay(t, &out, t->replay_of == PHASE_FORWARD ? &cur.fwd : &cur.comp);
        break;
      default: /* the skips */
        EQ(t, out.attempt, t->attempt);
        EQ(t, out.expires_ms, t->expires);
        break;
    }
  }
  EQ(t, w.n, t->n_writes);
  for (size_t i = 0; i < t->n_writes; i++) check_write(t, &w.recs[i], &t->w[i]);
}
