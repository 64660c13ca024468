/* bench_ops.c — idem-bench's workloads (docs/api.md §11), the pacing of --rate, and the replay
 * set-up. Keys: run id (time + random, unique per run) + workload + caller + sequence, so
 * every run's keys are fresh. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "bench.h"

static void sleep_until(double t) {
  struct timespec ts = {.tv_sec = (time_t)t, .tv_nsec = (long)((t - (double)(time_t)t) * 1e9)};
  if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

bool bench_claim_op(shared *sh, long n, double *at) {
  const conf *cf = sh->cf;
  *at = 0;
  if (atomic_load(&sh->stop)) return false;
  long ticket = atomic_fetch_add(&sh->issued, n);
  if (cf->count > 0 && ticket >= cf->count) return false;
  if (cf->rate > 0) {
    *at = sh->t0 + (double)ticket / cf->rate;
    if (cf->count == 0 && *at >= sh->t0 + cf->duration_s) return false;
  }
  return true;
}

bool bench_next_op(shared *sh, long n, double *intended) {
  double at;
  if (!bench_claim_op(sh, n, &at)) return false;
  double now = now_s();
  if (at > now) sleep_until(at);
  *intended = at > 0 ? at : now;
  return true;
}

static idem_client *client_of(const shared *sh, int id) {
  return sh->clients[id % sh->cf->channels];
}

/* BeginStep (timed into begin_lat when given) and, when it proceeds, CompleteStep. */
static int begin_complete(idem_client *c, const idem_step_key *k, lat_buf *begin_lat) {
  idem_begin b = {0};
  idem_error e = {0};
  double t0 = now_s();
  int rc = idem_step_begin(c, k, NULL, 0, 0, &b, &e);
  if (begin_lat) lat_add(begin_lat, (now_s() - t0) * 1000.0);
  if (rc != IDEM_OK) return rc;
  if (b.decision == IDEM_DECISION_PROCEED)
    rc = idem_step_complete(c, k, b.attempt, IDEM_OUTCOME_SUCCEEDED, 200, "ok", 2, NULL, &e);
  idem_begin_clear(&b);
  return rc;
}

void bench_key_name(const shared *sh, const char *kind, long a, long b, char *out, size_t n) {
  /* replay's keys are the ones set up before the first run; every other kind's are fresh in
   * each run of a sweep */
  if (sh->round > 0 && strcmp(kind, "r") != 0)
    snprintf(out, n, "%s.%d-%s-%ld-%ld", sh->run_id, sh->round, kind, a, b);
  else
    snprintf(out, n, "%s-%s-%ld-%ld", sh->run_id, kind, a, b);
}

static int op_pairs(worker *w, long seq) {
  char gid[128];
  bench_key_name(w->sh, "p", w->id, seq, gid, sizeof gid);
  idem_step_key k = {gid, "bench", "pair", IDEM_FORWARD};
  return begin_complete(client_of(w->sh, w->id), &k, &w->begin);
}

static int op_replay(worker *w, long seq) {
  const conf *cf = w->sh->cf;
  char gid[128];
  bench_key_name(w->sh, "r", 0, (seq * cf->concurrency + w->id) % cf->keys, gid, sizeof gid);
  idem_step_key k = {gid, "bench", "replay", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  double t0 = now_s();
  int rc = idem_step_begin(client_of(w->sh, w->id), &k, NULL, 0, 0, &b, &e);
  lat_add(&w->begin, (now_s() - t0) * 1000.0);
  if (rc == IDEM_OK && b.decision != IDEM_DECISION_REPLAY) rc = IDEM_UNKNOWN;
  idem_begin_clear(&b);
  return rc;
}

static int op_saga(worker *w, long seq) {
  idem_client *c = client_of(w->sh, w->id);
  char rid[128], gid[IDEM_GLOBAL_ID_MAX + 1];
  bench_key_name(w->sh, "s", w->id, seq, rid, sizeof rid);
  idem_error e = {0};
  int rc = idem_saga_begin(c, rid, "bench", NULL, 0, gid, NULL, NULL, &e);
  static const char *const ops[] = {"create", "charge", "reserve"};
  for (int i = 0; rc == IDEM_OK && i < 3; i++) {
    idem_step_key k = {gid, "bench", ops[i], IDEM_FORWARD};
    rc = begin_complete(c, &k, &w->begin);
  }
  return rc;
}

/* storm: every caller begins the same key; the one that proceeds completes it. ABORTED is the
 * expected answer for all but one and is not an error. With --wait-ms the others wait for the
 * one that proceeds and replay its result. */
static int op_storm(worker *w, long round) {
  char gid[128];
  bench_key_name(w->sh, "storm", 0, round, gid, sizeof gid);
  idem_step_key k = {gid, "bench", "storm", IDEM_FORWARD};
  idem_client *c = client_of(w->sh, w->id);
  idem_begin b = {0};
  idem_error e = {0};
  double t0 = now_s();
  int rc = idem_step_begin_wait(c, &k, NULL, 0, 0, w->sh->cf->wait_ms, &b, &e);
  lat_add(&w->begin, (now_s() - t0) * 1000.0);
  atomic_fetch_add(&w->sh->calls, 1);
  if (rc == IDEM_OK && b.decision == IDEM_DECISION_PROCEED) {
    atomic_fetch_add(&w->sh->calls, 1);
    rc = idem_step_complete(c, &k, b.attempt, IDEM_OUTCOME_SUCCEEDED, 200, "ok", 2, NULL, &e);
  }
  idem_begin_clear(&b);
  return rc == IDEM_ABORTED ? IDEM_OK : rc;
}

/* dups: --concurrency duplicates of one step (a saga's "pay", retried by every caller at once)
 * through idem_step_run; the one that proceeds runs an action of --action-ms, the others get its
 * result: waiting on the coordinator (--wait-ms > 0) or retrying ABORTED with backoff. */
static void slow_action(void *arg, const idem_step_ctx *ctx, idem_step_output *out) {
  (void)ctx;
  usleep((useconds_t)(*(const int *)arg) * 1000);
  out->outcome = IDEM_OUTCOME_SUCCEEDED;
  out->code = 200;
  out->body = "paid";
  out->body_len = 4;
}

static int op_dups(worker *w, long round) {
  char gid[128];
  bench_key_name(w->sh, "dups", 0, round, gid, sizeof gid);
  idem_step_key k = {gid, "bench", "pay", IDEM_FORWARD};
  idem_run_options ro = {.deadline_ms = 30000, .no_wait = w->sh->cf->wait_ms == 0};
  idem_run_report rep;
  idem_error e = {0};
  int rc = idem_step_run(client_of(w->sh, w->id), &k, NULL, 0, slow_action,
                         (void *)&w->sh->cf->action_ms, &ro, &rep, &e);
  atomic_fetch_add(&w->sh->calls, 1 + rep.begin_retries + (rep.ran ? 1 : 0));
  if (rc == IDEM_OK && !rep.ran && !rep.replayed) rc = IDEM_UNKNOWN;
  idem_run_report_clear(&rep);
  return rc;
}

int bench_op(worker *w, long seq) {
  switch (w->sh->cf->w) {
    case W_PAIRS: return op_pairs(w, seq);
    case W_REPLAY: return op_replay(w, seq);
    case W_STORM: return op_storm(w, seq);
    case W_SAGA: return op_saga(w, seq);
    case W_DUPS: return op_dups(w, seq);
  }
  return IDEM_UNKNOWN;
}

typedef struct setup_arg {
  shared *sh;
  int id, n;
  atomic_int *failed;
} setup_arg;

static void *setup_main(void *p) {
  setup_arg *a = p;
  for (int i = a->id; i < a->sh->cf->keys && !atomic_load(a->failed); i += a->n) {
    char gid[128];
    bench_key_name(a->sh, "r", 0, i, gid, sizeof gid);
    idem_step_key k = {gid, "bench", "replay", IDEM_FORWARD};
    int rc = begin_complete(client_of(a->sh, a->id), &k, NULL);
    if (rc != IDEM_OK && !atomic_exchange(a->failed, rc)) {
      fprintf(stderr, "idem-bench: setting up replay keys: %s\n", idem_strerror(rc));
    }
  }
  return NULL;
}

int bench_setup_replay(shared *sh) {
  int n = sh->cf->concurrency < sh->cf->keys ? sh->cf->concurrency : sh->cf->keys;
  setup_arg *args = calloc((size_t)n, sizeof *args);
  pthread_t *th = calloc((size_t)n, sizeof *th);
  atomic_int failed = 0;
  if (!args || !th) {
    free(args);
    free(th);
    return 1;
  }
  int started = 0;
  for (; started < n; started++) {
    args[started] = (setup_arg){sh, started, n, &failed};
    if (pthread_create(&th[started], NULL, setup_main, &args[started]) != 0) {
      atomic_store(&failed, IDEM_UNKNOWN);
      break;
    }
  }
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  free(args);
  free(th);
  return atomic_load(&failed) ? 1 : 0;
}
