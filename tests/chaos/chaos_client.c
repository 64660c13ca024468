/* chaos_client.c — one client process of the fault campaign (scripts/chaos, docs/api.md §15).
 *
 *   idem-chaos-client --address A[,B...] --process N --seconds S --seed S --out FILE [--run ID]
 *       drives a contended workload through libidem for S seconds and writes every call and its
 *       answer to FILE (history.h). The key space is small and moves on every 10 s: 4 sagas a
 *       generation (BeginSaga with a request id all processes share, so they meet on the same
 *       global ids), services "pay" and "stock", operation "charge", both phases.
 *       Each round is one of: a step run (BeginStep, then after a PROCEED: a Complete with a
 *       random outcome, or an ExtendLease first, or a Complete after the lease ran out, or
 *       nothing at all: a participant that crashed), a Lookup, or a ResolveStep. Leases are
 *       200–1000 ms, so takeovers happen; one BeginStep in ten sends another fingerprint, one in
 *       four waits up to 1.5 s on a step in progress (wait_ms: parked on the leader).
 *   idem-chaos-client --leader A[,B...] | --group-leader G A[,B...] | --groups-led A[,B...]
 *                     | --move A[,B...] SEED REQUEST_ID
 *       the nemesis's questions and slot moves (chaos_admin.h).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <idem/idem.h>

#include "chaos_admin.h"
#include "history.h"

typedef struct ctx {
  idem_client *c;
  hist h;
  uint64_t rng;
  const char *run;
  int64_t start_ms;
  long seq;
  long gen;                                /* the generation gids[] belong to, -1: none */
  char gids[4][IDEM_GLOBAL_ID_MAX + 1];
} ctx;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The history clients' pauses: a load's shape (a lease let run out, think time), never a wait for
 * a state. */
static void sleep_ms(int64_t ms) {
  if (ms <= 0) return;
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

static uint32_t rnd(ctx *x, uint32_t n) { /* xorshift64*, uniform enough for a workload */
  x->rng ^= x->rng >> 12;
  x->rng ^= x->rng << 25;
  x->rng ^= x->rng >> 27;
  return (uint32_t)((x->rng * 2685821657736338717ULL) >> 33) % n;
}

/* A non-OK answer: its code, and the coordinator's reason word when it gave one (idem-reason:
 * lower-case words and '-', nothing to escape). */
static void answer_error(hist_line *l, int rc, const idem_error *e) {
  if (rc == IDEM_OK) return;
  hist_str(l, "error", hist_code_name(rc));
  if (e->reason[0]) hist_str(l, "reason", e->reason);
}

/* The generation's global ids; false when BeginSaga failed (the round is skipped). */
static bool sagas(ctx *x) {
  long gen = (long)((now_ms() - x->start_ms) / 10000);
  if (gen == x->gen) return true;
  for (int i = 0; i < 4; i++) {
    char rid[96];
    snprintf(rid, sizeof rid, "chaos-%s-g%ld-s%d", x->run, gen, i);
    idem_error e = {0};
    if (idem_saga_begin(x->c, rid, "chaos", NULL, 0, x->gids[i], NULL, NULL, &e) != IDEM_OK)
      return false;
  }
  x->gen = gen;
  return true;
}

static idem_step_key pick_key(ctx *x, idem_phase phase) {
  static const char *services[] = {"pay", "stock"};
  idem_step_key k = {.global_id = x->gids[rnd(x, 4)], .service = services[rnd(x, 2)],
                     .operation = "charge", .phase = phase};
  return k;
}

static void complete(ctx *x, const idem_step_key *k, uint64_t attempt) {
  static const idem_outcome outs[] = {IDEM_OUTCOME_SUCCEEDED, IDEM_OUTCOME_SUCCEEDED,
                                      IDEM_OUTCOME_SUCCEEDED, IDEM_OUTCOME_SUCCEEDED,
                                      IDEM_OUTCOME_SUCCEEDED, IDEM_OUTCOME_FAILED,
                                      IDEM_OUTCOME_FAILED,    IDEM_OUTCOME_RETRYABLE,
                                      IDEM_OUTCOME_RETRYABLE, IDEM_OUTCOME_UNKNOWN};
  idem_outcome o = outs[rnd(x, 10)];
  int32_t code = o == IDEM_OUTCOME_SUCCEEDED ? 200 : (int32_t)(400 + rnd(x, 200));
  char body[64];
  int n = snprintf(body, sizeof body, "p%d-%ld-a%" PRIu64, x->h.process, ++x->seq, attempt);
  hist_line l;
  hist_begin(&l, &x->h, "invoke", "complete", k);
  hist_int(&l, "attempt", (long long)attempt);
  hist_str(&l, "outcome", idem_outcome_name(o));
  hist_int(&l, "code", code);
  hist_b64(&l, "body", (const uint8_t *)body, (size_t)n);
  hist_end(&l, &x->h);
  idem_error e = {0};
  int rc = idem_step_complete(x->c, k, attempt, o, code, body, (size_t)n, NULL, &e);
  hist_begin(&l, &x->h, hist_type(rc, &e), "complete", k);
  hist_int(&l, "attempt", (long long)attempt);
  answer_error(&l, rc, &e);
  hist_end(&l, &x->h);
}

static bool extend(ctx *x, const idem_step_key *k, uint64_t attempt, uint32_t lease_ms) {
  hist_line l;
  hist_begin(&l, &x->h, "invoke", "extend", k);
  hist_int(&l, "attempt", (long long)attempt);
  hist_int(&l, "lease_ms", lease_ms);
  hist_end(&l, &x->h);
  idem_error e = {0};
  int rc = idem_step_extend(x->c, k, attempt, lease_ms, NULL, &e);
  hist_begin(&l, &x->h, hist_type(rc, &e), "extend", k);
  hist_int(&l, "attempt", (long long)attempt);
  answer_error(&l, rc, &e);
  hist_end(&l, &x->h);
  return rc == IDEM_OK;
}

static void write_result(hist_line *l, const idem_result *r) {
  hist_str(l, "outcome", idem_outcome_name(r->outcome));
  hist_int(l, "code", r->code);
  hist_b64(l, "body", r->body, r->body_len);
}

/* BeginStep, then what a participant does with the answer. */
static void step(ctx *x) {
  idem_step_key k = pick_key(x, rnd(x, 4) == 0 ? IDEM_COMPENSATION : IDEM_FORWARD);
  const char *fp = rnd(x, 10) == 0 ? "b" : "a";
  uint32_t lease = 200 + rnd(x, 800);
  /* one BeginStep in four waits on a step in progress (parked on the leader) */
  uint32_t wait = rnd(x, 4) == 0 ? 200 + rnd(x, 1300) : 0;
  hist_line l;
  hist_begin(&l, &x->h, "invoke", "begin", &k);
  hist_str(&l, "fingerprint", fp[0] == 'a' ? "61" : "62");
  hist_int(&l, "lease_ms", lease);
  if (wait) hist_int(&l, "wait_ms", wait);
  hist_end(&l, &x->h);
  idem_begin b = {0};
  idem_error e = {0};
  int rc = idem_step_begin_wait(x->c, &k, (const uint8_t *)fp, 1, lease, wait, &b, &e);
  hist_begin(&l, &x->h, hist_type(rc, &e), "begin", &k);
  if (rc == IDEM_OK) {
    hist_str(&l, "decision", idem_decision_name(b.decision));
    if (b.decision == IDEM_DECISION_PROCEED) hist_int(&l, "attempt", (long long)b.attempt);
    if (b.has_result) write_result(&l, &b.result);
  }
  answer_error(&l, rc, &e);
  hist_end(&l, &x->h);
  bool proceed = rc == IDEM_OK && b.decision == IDEM_DECISION_PROCEED;
  uint64_t attempt = b.attempt;
  idem_begin_clear(&b);
  if (!proceed) return;

  uint32_t r = rnd(x, 100);
  if (r < 8) return;                       /* crashed: the lease runs out, someone takes over */
  if (r < 18) {                            /* too slow: completes after the lease ran out */
    sleep_ms(lease + 50 + rnd(x, 250));
  } else if (r < 30) {                     /* a long action keeps its lease */
    sleep_ms(rnd(x, lease / 2));
    if (!extend(x, &k, attempt, 200 + rnd(x, 800))) return;
    sleep_ms(rnd(x, 100));
  } else {
    sleep_ms(rnd(x, 50));
  }
  complete(x, &k, attempt);
}

static void lookup(ctx *x) {
  idem_step_key k = pick_key(x, rnd(x, 4) == 0 ? IDEM_COMPENSATION : IDEM_FORWARD);
  hist_line l;
  hist_begin(&l, &x->h, "invoke", "lookup", &k);
  hist_end(&l, &x->h);
  idem_record r = {0};
  idem_error e = {0};
  int rc = idem_step_lookup(x->c, &k, &r, &e);
  hist_begin(&l, &x->h, hist_type(rc, &e), "lookup", &k);
  if (rc == IDEM_OK) {
    hist_str(&l, "state", idem_state_name(r.state));
    hist_int(&l, "attempt", (long long)r.attempt);
    if (r.has_result) write_result(&l, &r.result);
  }
  answer_error(&l, rc, &e);
  hist_end(&l, &x->h);
  idem_record_clear(&r);
}

static void resolve(ctx *x) {
  idem_step_key k = pick_key(x, IDEM_FORWARD);
  char body[64];
  int n = snprintf(body, sizeof body, "r-p%d-%ld", x->h.process, ++x->seq);
  idem_resolution res = {.outcome = rnd(x, 2) ? IDEM_OUTCOME_SUCCEEDED : IDEM_OUTCOME_FAILED,
                         .code = 299, .body = body, .body_len = (size_t)n,
                         .reason = "fault campaign", .actor = "chaos"};
  hist_line l;
  hist_begin(&l, &x->h, "invoke", "resolve", &k);
  hist_str(&l, "outcome", idem_outcome_name(res.outcome));
  hist_int(&l, "code", res.code);
  hist_b64(&l, "body", (const uint8_t *)body, (size_t)n);
  hist_end(&l, &x->h);
  idem_error e = {0};
  int rc = idem_step_resolve(x->c, &k, &res, NULL, &e);
  hist_begin(&l, &x->h, hist_type(rc, &e), "resolve", &k);
  answer_error(&l, rc, &e);
  hist_end(&l, &x->h);
}

static void usage(void) {
  fprintf(stderr, "usage: idem-chaos-client --address A[,B] --process N --seconds S --seed S "
                  "--out FILE [--run ID]\n       idem-chaos-client --leader A[,B] | --group-leader G A[,B]"
                  " | --groups-led A[,B]\n"
                  "                         | --move A[,B] SEED REQUEST_ID\n");
  exit(2);
}

int main(int argc, char **argv) {
  const char *addr = NULL, *out = NULL, *run = "r";
  long process = -1, seconds = 0;
  unsigned long long seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--leader") == 0 && v) return chaos_leader(v);
    if (strcmp(a, "--groups-led") == 0 && v) return chaos_groups_led(v);
    if (strcmp(a, "--group-leader") == 0 && v && i + 2 < argc)
      return chaos_group_leader(v, argv[i + 2]);
    if (strcmp(a, "--move") == 0 && v && i + 3 < argc)
      return chaos_move(v, strtoull(argv[i + 2], NULL, 10), argv[i + 3]);
    if (!v) usage();
    if (strcmp(a, "--address") == 0) addr = v;
    else if (strcmp(a, "--out") == 0) out = v;
    else if (strcmp(a, "--run") == 0) run = v;
    else if (strcmp(a, "--process") == 0) process = strtol(v, NULL, 10);
    else if (strcmp(a, "--seconds") == 0) seconds = strtol(v, NULL, 10);
    else if (strcmp(a, "--seed") == 0) seed = strtoull(v, NULL, 10);
    else usage();
    i++;
  }
  if (!addr || !out || process < 0 || seconds <= 0) usage();

  ctx x = {.run = run, .gen = -1, .rng = seed * 1000003ULL + (uint64_t)process + 1};
  x.h.process = (int)process;
  x.h.f = fopen(out, "w");
  if (!x.h.f) {
    perror(out);
    return 1;
  }
  idem_options o = {.address = addr, .tenant = "chaos", .deadline_ms = 1500};
  idem_error e = {0};
  if (idem_connect(&o, &x.c, &e) != IDEM_OK) {
    fprintf(stderr, "idem-chaos-client: %s\n", e.message);
    return 1;
  }
  x.start_ms = now_ms();
  int64_t end = x.start_ms + seconds * 1000;
  while (now_ms() < end) {
    if (!sagas(&x)) {
      sleep_ms(20);
      continue;
    }
    uint32_t r = rnd(&x, 100);
    if (r < 80) step(&x);
    else if (r < 95) lookup(&x);
    else resolve(&x);
  }
  idem_close(x.c);
  fclose(x.h.f);
  return 0;
}
