/* store_pg_batch.c — group commit (contract in store.h, "group commit").
 *
 * Callers (rpc workers) queue a bt_item that lives on their stack and wait on it; batcher
 * threads take up to max_batch queued items whose pairs no other batch holds, run them as one
 * transaction on their own connection, and wake each caller with its own answer after the
 * commit. Two round trips per batch:
 *   1. BEGIN; for each item in key order: the pair lock, the pair read          (one sync)
 *   2. for each item: its writes (upserts), its audit row; COMMIT               (one sync)
 * The callbacks run between the two. A statement error in either pipeline aborts the whole
 * transaction before COMMIT runs, so nothing is committed and the batch may run again; a lost
 * connection or a timeout during the second leaves the outcome unknown (like any commit), and
 * every item of the batch gets that error.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../metrics/metrics.h"
#include "../util/clock.h"
#include "../util/log.h"
#include "store_pg_internal.h"

/* Multi-row statements: every pair of the batch in one statement, the keys as four parallel
 * text arrays (in the batch's key order). */
#define UNNEST_KEYS "unnest($1::text[], $2::text[], $3::text[], $4::text[])"

/* The pair locks, in array order; the same lock key as the single path's pg__sql_pair_lock. */
static const char SQL_LOCK_MANY[] =
    "SELECT pg_advisory_xact_lock(hashtextextended("
    "k.t || E'\\x1f' || k.g || E'\\x1f' || k.s || E'\\x1f' || k.o, 0))"
    " FROM " UNNEST_KEYS " AS k(t, g, s, o)";

/* Both phases of every pair, in its own statement after the locks (READ COMMITTED: this
 * statement's snapshot sees what the holders we waited for committed). Rows come grouped by
 * the pair's position i (1-based); a pair without records has one row of NULLs. Each pair is
 * a lateral probe ordered by phase: only the primary key gives that order, so the plan uses
 * it whatever the table's statistics (a plain join, planned while the table was empty, probed
 * idem_steps_list_state_idx by tenant alone and filtered every row of the tenant). */
const char pg__sql_batch_read[] = "SELECT k.i, n.now_ms, " PG_STEP_COLS_AT(
    "n.now_ms") " FROM " UNNEST_KEYS
                " WITH ORDINALITY AS k(t, g, s, o, i)"
                " CROSS JOIN (SELECT " PG_NOW_MS
                " AS now_ms) n"
                " LEFT JOIN LATERAL (SELECT " PG_STEP_COLS
                " FROM idem_steps r WHERE r.tenant = k.t"
                " AND r.global_id = k.g AND r.service = k.s AND r.operation = k.o ORDER BY "
                "r.phase) st ON true"
                " ORDER BY k.i, st.phase";

/* Every record the batch writes, as upserts: the reaper may delete an expired row the batch
 * read (it skips only row-locked rows), and the upsert then still writes exactly the record
 * decided. No two rows of one statement share a key (a pair is in one batch at most once). */
static const char SQL_UPSERT_MANY[] =
    "INSERT INTO idem_steps (tenant, global_id, service, operation, phase, state, attempt,"
    " fingerprint, outcome, code, body, completed_ms, created_ms, updated_ms,"
    " lease_expires_ms, expires_ms, result_expires_ms, slot, begin_trace_id, complete_trace_id)"
    " SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::smallint[],"
    " $6::smallint[], $7::bigint[], $8::bytea[], $9::smallint[], $10::int[], $11::bytea[],"
    " $12::bigint[], $13::bigint[], $14::bigint[], $15::bigint[], $16::bigint[],"
    " $17::bigint[], $18::int[], $19::text[], $20::text[])"
    " ON CONFLICT (tenant, global_id, service, operation, phase) DO UPDATE SET"
    " state = EXCLUDED.state, attempt = EXCLUDED.attempt, fingerprint = EXCLUDED.fingerprint,"
    " outcome = EXCLUDED.outcome, code = EXCLUDED.code, body = EXCLUDED.body,"
    " completed_ms = EXCLUDED.completed_ms, created_ms = EXCLUDED.created_ms,"
    " updated_ms = EXCLUDED.updated_ms, lease_expires_ms = EXCLUDED.lease_expires_ms,"
    " expires_ms = EXCLUDED.expires_ms, result_expires_ms = EXCLUDED.result_expires_ms,"
    " begin_trace_id = EXCLUDED.begin_trace_id, complete_trace_id = EXCLUDED.complete_trace_id";

#define N_COLS 20 /* of the upsert */

#define BT_DEFAULT_CONNS 2
#define BT_DEFAULT_HELP_AFTER_US 2000
#define BT_DEFAULT_MAX 64
#define BT_MAX_CONNS 16
#define BT_MAX_BATCH 256

/* One queued step transaction: on its caller's stack (a blocking caller, woken through cv), or
 * allocated by store_batcher_submit (on_done set, freed after on_done ran). */
typedef struct bt_item {
  struct bt_item *next;
  const step_key *key;
  int64_t deadline;
  store_step_fn fn;
  void *arg;
  const audit_rec *audit;
  store_step_done_fn on_done; /* NULL: a blocking caller */
  void *done_arg;
  pthread_cond_t cv; /* blocking callers: signalled (under the batcher's mutex) when done */
  bool done;
  err_code rc; /* the answer */
  err_t err;
  /* one run of the batch */
  step_pair pair; /* records borrow from the thread's read result */
  bool exists[3];
  step_writes w;
  err_code fn_rc;
  err_t fn_err;
  int64_t queued_us; /* monotonic: when it was queued (idem_store_queue_wait_seconds) */
  /* a submitted item's stages (metrics.h): the method of the call whose handler queued it
   * (-1: not staged), when that handler started, and (monotonic microseconds, 0 = not reached)
   * when its batch started, read, wrote and committed */
  int mmethod;
  int64_t handler_us, started_us, read_us, written_us, committed_us;
} bt_item;

typedef struct bt_thread {
  store_batcher *b;
  pthread_t thread;
  bool started;
  int index;             /* 0: the first thread; the others help (see help_wait) */
  int64_t busy_since_us; /* when its batch in progress started (under b->mu, with n > 0) */
  pg_store *conn;        /* a connection of its own (no ops table: only this thread uses it) */
  bt_item **items;       /* the batch in progress (read by other threads under b->mu) */
  int n;
  PGresult *read;     /* the batch's pair read (records of the items borrow from it) */
  pg_stmt *stmts;     /* scratch: 4 + max_batch statements */
  pg_params *params;  /* scratch: 2 + max_batch parameter sets */
  pg_arr arr[N_COLS]; /* scratch: the multi-row statements' arrays */
} bt_thread;

struct store_batcher {
  pthread_mutex_t mu;
  pthread_cond_t cv;      /* work queued while thread 0 is idle, or stopping */
  pthread_cond_t help_cv; /* work queued while thread 0 is busy, or stopping (monotonic) */
  int64_t help_after_us;
  bt_item *head, *tail;
  int queued_async; /* submitted items in the queue (at most queue_max) */
  int queue_max;
  bool stopping;
  int max_batch;
  int n_threads;
  bt_thread *threads;
  store_commit_fn on_commit;
  void *on_commit_arg;
  store_change_fn on_change;
  void *on_change_arg;
  _Atomic uint64_t batches, txns, largest;
  /* submitted items, answered: the answer thread runs their callbacks (under done_mu) */
  pthread_mutex_t done_mu;
  pthread_cond_t done_cv;
  bt_item *done_head, **done_tail;
  bool done_stop;
  pthread_t answerer;
  bool answerer_started;
};

static bool same_pair(const step_key *a, const step_key *b) {
  return strcmp(a->global_id, b->global_id) == 0 && strcmp(a->operation, b->operation) == 0 &&
         strcmp(a->service, b->service) == 0 && strcmp(a->tenant, b->tenant) == 0;
}

static int key_cmp(const step_key *a, const step_key *b) {
  int c = strcmp(a->tenant, b->tenant);
  if (!c) c = strcmp(a->global_id, b->global_id);
  if (!c) c = strcmp(a->service, b->service);
  if (!c) c = strcmp(a->operation, b->operation);
  return c;
}

static int item_cmp(const void *x, const void *y) {
  return key_cmp((*(bt_item *const *)x)->key, (*(bt_item *const *)y)->key);
}

/* --- the queue (under b->mu) --- */

/* The item's pair is in this batch already or in another thread's batch. */
static bool held(const store_batcher *b, const bt_item *it) {
  for (int i = 0; i < b->n_threads; i++) {
    const bt_thread *o = &b->threads[i]; /* t itself: the items collected so far */
    for (int j = 0; j < o->n; j++)
      if (same_pair(o->items[j]->key, it->key)) return true;
  }
  return false;
}

/* Moves up to max_batch eligible items from the queue into t's batch (in queue order). */
static void collect(store_batcher *b, bt_thread *t) {
  t->n = 0;
  bt_item *prev = NULL, *it = b->head;
  while (it && t->n < b->max_batch) {
    bt_item *next = it->next;
    if (held(b, it)) {
      prev = it;
    } else {
      if (prev)
        prev->next = next;
      else
        b->head = next;
      if (b->tail == it) b->tail = prev;
      it->next = NULL;
      if (it->on_done) b->queued_async--;
      t->items[t->n++] = it;
    }
    it = next;
  }
}

/* Hands answered submitted items (list, linked by next) to the answer thread. */
static void hand_over(store_batcher *b, bt_item *list) {
  if (!list) return;
  pthread_mutex_lock(&b->done_mu);
  *b->done_tail = list;
  while (list->next) list = list->next;
  b->done_tail = &list->next;
  pthread_cond_signal(&b->done_cv);
  pthread_mutex_unlock(&b->done_mu);
}

/* A submitted item's stages up to now (its callback's start), in the answer thread. */
static void observe_stages(const bt_item *it, int64_t now) {
  int m = it->mmethod;
  if (m < 0) return;
  metrics_stage_observe(m, METRICS_STAGE_HANDLER, it->queued_us - it->handler_us);
  if (!it->committed_us) return; /* refused or failed: its store stages did not all run */
  metrics_stage_observe(m, METRICS_STAGE_QUEUE, it->started_us - it->queued_us);
  metrics_stage_observe(m, METRICS_STAGE_READ, it->read_us - it->started_us);
  metrics_stage_observe(m, METRICS_STAGE_WRITE, it->written_us - it->read_us);
  metrics_stage_observe(m, METRICS_STAGE_COMMIT, it->committed_us - it->written_us);
  metrics_stage_observe(m, METRICS_STAGE_ANSWER, now - it->committed_us);
}

/* The answer thread: runs the callbacks of submitted items (encoding and sending replies, in
 * the rpc layer) while the batch threads go on with the next batch, and frees the items. */
static void *answerer_main(void *arg) {
  store_batcher *b = arg;
  pthread_mutex_lock(&b->done_mu);
  for (;;) {
    while (!b->done_head && !b->done_stop) pthread_cond_wait(&b->done_cv, &b->done_mu);
    bt_item *list = b->done_head;
    if (!list) break; /* stopping, and everything answered */
    b->done_head = NULL;
    b->done_tail = &b->done_head;
    pthread_mutex_unlock(&b->done_mu);
    while (list) {
      bt_item *next = list->next;
      int64_t now = clock_mono_us();
      observe_stages(list, now);
      metrics_stage_answer_set(list->mmethod, now); /* the reply's stage starts here */
      list->on_done(list->done_arg, list->rc, list->rc == ERR_OK ? NULL : &list->err);
      metrics_stage_answer_set(-1, 0);
      free(list);
      list = next;
    }
    pthread_mutex_lock(&b->done_mu);
  }
  pthread_mutex_unlock(&b->done_mu);
  return NULL;
}

/* Wakes every blocking caller of t's batch, releases its pairs, then answers its submitted
 * items. */
static void finish(store_batcher *b, bt_thread *t) {
  bt_item *submitted = NULL, **last = &submitted;
  pthread_mutex_lock(&b->mu);
  for (int i = 0; i < t->n; i++) {
    bt_item *it = t->items[i];
    if (it->on_done) { /* in batch order */
      *last = it;
      last = &it->next;
      continue;
    }
    it->done = true; /* the caller may return (and its item vanish) from here on */
    pthread_cond_signal(&it->cv);
  }
  bool skipped = b->head != NULL; /* items may have waited for these pairs */
  t->n = 0;
  if (skipped) {
    pthread_cond_broadcast(&b->cv);
    pthread_cond_broadcast(&b->help_cv);
  }
  pthread_mutex_unlock(&b->mu);
  hand_over(b, submitted);
}

/* Thread 0 runs every batch while it keeps up: one connection makes bigger batches, and
 * costs Postgres less per step transaction, than two sharing the load (measured: 3,350-3,540
 * pairs/s with one, 3,080-3,140 with two, BeginStep p99 at half that rate 4.6-5.9 ms against
 * 6.2-6.5). Thread i > 0 takes queued work only once threads 0..i-1 have each been busy with
 * one batch for help_after_us: a batch that waits on a lock or a slow disk does not hold up
 * everyone queued behind it. 2 ms by default: against 10 ms, three rounds at half the maximum
 * (scripts/bench --stages --stages-vs) had BeginStep p99.9 15.4-24.8 ms against 31.6-59.2 and
 * queue p99 2.3-2.6 against 2.5-4.9, p99 about the same (7.9-9.5 against 6.9-13.4) and the
 * same pairs/s at 90 % (the closed-loop maximum not compared). Under b->mu: 0 = may collect
 * now; > 0 = microseconds until it may; -1 = a lower thread is idle (it takes the work; wait
 * for a signal). */
static int64_t help_wait(const store_batcher *b, const bt_thread *t) {
  int64_t now = clock_mono_us(), wait = 0;
  for (int j = 0; j < t->index; j++) {
    const bt_thread *o = &b->threads[j];
    if (o->n == 0) return -1;
    int64_t left = o->busy_since_us + b->help_after_us - now;
    if (left > wait) wait = left;
  }
  return wait;
}

static void wait_us(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t us) {
  struct timespec ts = clock_after_us(CLOCK_MONOTONIC, us);
  pthread_cond_timedwait(cv, mu, &ts);
}

/* --- one batch --- */

static void answer(bt_item *it, err_code rc, const err_t *err) {
  it->rc = rc;
  if (rc == ERR_OK)
    err_clear(&it->err);
  else
    it->err = *err;
}

static void drop_read(bt_thread *t) {
  PQclear(t->read);
  t->read = NULL;
}

/* The batch's statements, prepared once per connection (parsed and planned once). */
enum { PS_LOCK, PS_READ, PS_UPSERT, PS_AUDIT, PS_N };
static const char *const ps_name[PS_N] = {"idem_b_lock", "idem_b_read", "idem_b_upsert",
                                          "idem_b_audit"};

/* The batch connections use each statement's generic plan, made once: left to choose, Postgres
 * planned the pair read afresh at every batch (a custom plan for each batch's arrays: 0.54 ms
 * per bind, measured with log_min_duration_statement, against 0.05 for the other statements).
 * A generic plan made while idem_steps is empty or small (a new deployment, a test, a
 * benchmark) would join the batch's keys to the table by hash over a sequential scan: every
 * batch would then read the whole table (at 17,000 rows the two batch connections used 1.35
 * cores for 1,600 pairs/s). So the batch connections plan without sequential scans, hash or
 * merge joins, and the read's form (pg__sql_batch_read) picks the primary key: every pair is
 * one primary-key probe, whatever the statistics said when the plan was made. */
const char pg__sql_batch_plan_settings[] =
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', false),"
    " set_config('enable_seqscan', 'off', false), set_config('enable_hashjoin', 'off', false),"
    " set_config('enable_mergejoin', 'off', false)";

static err_code prepare(pg_store *s, pg_stmt *st, int64_t deadline, err_t *err) {
  if (s->prepared && s->conn) return ERR_OK;
  const char *sql[PS_N] = {SQL_LOCK_MANY, pg__sql_batch_read, SQL_UPSERT_MANY,
                           pg__sql_audit_insert};
  st[0] = (pg_stmt){.sql = pg__sql_batch_plan_settings};
  for (int i = 0; i < PS_N; i++)
    st[1 + i] = (pg_stmt){.sql = sql[i], .name = ps_name[i], .prepare = true};
  err_code rc = pg__pipeline(s, st, 1 + PS_N, deadline, err);
  if (rc != ERR_OK) return rc;
  for (int i = 0; i < 1 + PS_N; i++) PQclear(st[i].res);
  s->prepared = true;
  return ERR_OK;
}

/* Closes arrays [0, n) into p as text parameters; false when one ran out of memory. */
static bool arrays_to_params(bt_thread *t, int n, pg_params *p) {
  pg__p_reset(p);
  for (int c = 0; c < n; c++) {
    const char *lit = pg__arr_end(&t->arr[c]);
    if (!lit) return false;
    pg__p_text(p, lit);
  }
  return true;
}

static void key_arrays(bt_thread *t, const step_key *k) {
  pg__arr_text(&t->arr[0], k->tenant);
  pg__arr_text(&t->arr[1], k->global_id);
  pg__arr_text(&t->arr[2], k->service);
  pg__arr_text(&t->arr[3], k->operation);
}

/* Pipeline 1: BEGIN, every pair lock, every pair read. On ERR_OK t->read holds the read and
 * each item its pair's rows. */
static err_code lock_and_read(bt_thread *t, bt_item **v, int n, int64_t deadline, err_t *err) {
  pg_store *s = t->conn;
  pg_stmt *st = t->stmts;
  err_code rc = prepare(s, st, deadline, err);
  if (rc != ERR_OK) return rc;
  for (int c = 0; c < 4; c++) pg__arr_reset(&t->arr[c]);
  for (int i = 0; i < n; i++) key_arrays(t, v[i]->key);
  if (!arrays_to_params(t, 4, &t->params[0])) return err_oom(err);
  st[0] = (pg_stmt){.sql = "BEGIN ISOLATION LEVEL READ COMMITTED"};
  st[1] = (pg_stmt){.name = ps_name[PS_LOCK], .p = &t->params[0]};
  st[2] = (pg_stmt){.name = ps_name[PS_READ], .p = &t->params[0]};
  rc = pg__pipeline(s, st, 3, deadline, err);
  if (rc != ERR_OK) return rc;
  PQclear(st[0].res);
  PQclear(st[1].res);
  t->read = st[2].res;
  int rows = PQntuples(t->read), r = 0;
  for (int i = 0; i < n; i++) {
    int r0 = r;
    while (r < rows && pg__int(t->read, r, 0) == i + 1) r++;
    if (r == r0) { /* every pair has a row (LEFT JOIN): anything else is not our statement */
      PQclear(t->read);
      t->read = NULL;
      return err_fail(err, ERR_INTERNAL, ERR_R_STORE_ERROR,
                      "store error: batch read returned no row for a pair");
    }
    bool exists[3];
    pg__read_pair(t->read, r0, r, 1, v[i]->key, &v[i]->pair, exists);
  }
  return ERR_OK;
}

/* Runs one item's callback on its pair; bad writes become the item's ERR_INTERNAL. */
static void decide(bt_item *it) {
  memset(&it->w, 0, sizeof it->w);
  err_clear(&it->fn_err);
  it->fn_rc = it->fn(it->arg, &it->pair, &it->w, &it->fn_err);
  if (it->fn_rc == ERR_OK) err_clear(&it->fn_err);
  bool bad = it->w.n < 0 || it->w.n > 2;
  for (int j = 0; !bad && j < it->w.n; j++) {
    step_phase ph = it->w.recs[j].key.phase;
    bad = ph != PHASE_FORWARD && ph != PHASE_COMPENSATION;
  }
  if (bad) {
    it->w.n = 0;
    it->fn_rc = err_set(&it->fn_err, ERR_INTERNAL, "step transaction: bad writes");
  }
}

static void write_arrays(bt_thread *t, const step_key *k, const step_rec *r) {
  pg_arr *a = t->arr;
  key_arrays(t, k);
  pg__arr_i64(&a[4], r->key.phase);
  pg__arr_i64(&a[5], r->state);
  pg__arr_i64(&a[6], (int64_t)r->attempt);
  pg__arr_bytes(&a[7], r->fp, r->fp_len > REC_FP_MAX ? REC_FP_MAX : r->fp_len);
  pg__arr_i64(&a[8], r->outcome);
  pg__arr_i64(&a[9], r->code);
  pg__arr_bytes(&a[10], r->body, r->body_len);
  pg__arr_i64(&a[11], r->completed_ms);
  pg__arr_i64(&a[12], r->created_ms);
  pg__arr_i64(&a[13], r->updated_ms);
  pg__arr_i64(&a[14], r->lease_expires_ms);
  pg__arr_i64(&a[15], r->expires_ms);
  pg__arr_i64(&a[16], r->result_expires_ms);
  pg__arr_i64(&a[17], pg__slot(k->tenant, k->global_id)); /* written once, kept on update */
  pg__arr_text(&a[18], r->begin_trace_id);
  pg__arr_text(&a[19], r->complete_trace_id);
}

/* Pipeline 2: every write (one statement), the audit rows, COMMIT. On ERR_OK *written_us is
 * when the results of the writes came (the server sends them before it runs COMMIT), and
 * *committed_us when COMMIT's came (after its WAL flush). */
static err_code write_and_commit(bt_thread *t, bt_item **v, int n, int64_t deadline,
                                 int64_t *written_us, int64_t *committed_us, err_t *err) {
  pg_stmt *st = t->stmts;
  int k = 0, np = 1, writes = 0;
  for (int c = 0; c < N_COLS; c++) pg__arr_reset(&t->arr[c]);
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < v[i]->w.n; j++, writes++) write_arrays(t, v[i]->key, &v[i]->w.recs[j]);
  }
  if (writes > 0) {
    if (!arrays_to_params(t, N_COLS, &t->params[0])) return err_oom(err);
    st[k++] = (pg_stmt){.name = ps_name[PS_UPSERT], .p = &t->params[0]};
  }
  for (int i = 0; i < n; i++) {
    if (v[i]->audit && v[i]->fn_rc == ERR_OK) {
      pg__audit_params(&t->params[np], v[i]->audit);
      st[k++] = (pg_stmt){.name = ps_name[PS_AUDIT], .p = &t->params[np++]};
    }
  }
  if (k > 0) st[k - 1].flush = true;
  st[k++] = (pg_stmt){.sql = "COMMIT"};
  err_code rc = pg__pipeline(t->conn, st, k, deadline, err);
  if (rc != ERR_OK) return rc;
  *committed_us = st[k - 1].at_us;
  *written_us = k > 1 ? st[k - 2].at_us : *committed_us;
  for (int i = 0; i < k; i++) PQclear(st[i].res);
  return ERR_OK;
}

/* Tells the commit hook each item's pair as committed (the read with the writes applied), then
 * the change hook each pair that was written to (so that what it wakes finds the cache
 * current). */
static void report(store_batcher *b, uint64_t epoch, bt_item **v, int n) {
  for (int i = 0; i < n; i++) {
    if (b->on_commit) {
      step_pair after = v[i]->pair;
      for (int j = 0; j < v[i]->w.n; j++) {
        const step_rec *r = &v[i]->w.recs[j];
        if (r->key.phase == PHASE_FORWARD)
          after.fwd = *r;
        else
          after.comp = *r;
      }
      b->on_commit(b->on_commit_arg, epoch, &after);
    }
    if (b->on_change && v[i]->w.n > 0) b->on_change(b->on_change_arg, v[i]->key);
  }
}

/* Answers (with a timeout) and removes the items whose deadline has passed; returns how many
 * are left in v and sets *deadline to the earliest left. */
static int drop_expired(bt_item **v, int n, int64_t *deadline) {
  int64_t now = clock_mono_ms();
  int m = 0;
  *deadline = INT64_MAX;
  for (int i = 0; i < n; i++) {
    if (v[i]->deadline <= now) {
      err_t e;
      answer(v[i], err_fail(&e, ERR_UNAVAILABLE, ERR_R_STORE_TIMEOUT, "store timeout"), &e);
      continue;
    }
    if (v[i]->deadline < *deadline) *deadline = v[i]->deadline;
    v[m++] = v[i];
  }
  return m;
}

/* Answers the items of slot (err) and removes them from v; false when none is of it. */
/* After a write met a blocked slot (SQLSTATE IF002, rolled back): reads the slot ranges this
 * store refuses to write from idem_slot_blocks (the table the refusing triggers are made from;
 * the refusal's message is not read), answers the items whose slot is in one with err, and
 * keeps the others in v for another pass. Returns whether it answered any: false when none is
 * in a range (the block was lifted meanwhile) or the ranges could not be read; the caller then
 * answers every item with err (UNAVAILABLE slot-moving, which clients retry). */
static bool drop_blocked(pg_store *s, bt_item **v, int *n, const err_t *err, int64_t deadline) {
  PGresult *r = NULL;
  err_t rerr;
  err_clear(&rerr);
  if (pg__exec(s, "SELECT from_slot, to_slot FROM idem_slot_blocks", NULL, deadline, &r, &rerr) !=
      ERR_OK)
    return false;
  int rows = PQntuples(r), m = 0;
  for (int i = 0; i < *n; i++) {
    int64_t slot = pg__slot(v[i]->key->tenant, v[i]->key->global_id);
    bool blocked = false;
    for (int j = 0; j < rows && !blocked; j++)
      blocked = slot >= pg__int(r, j, 0) && slot <= pg__int(r, j, 1);
    if (blocked) {
      answer(v[i], err->code, err);
      continue;
    }
    v[m++] = v[i];
  }
  PQclear(r);
  bool dropped = m < *n;
  *n = m;
  return dropped;
}

static void run_batch(bt_thread *t) {
  store_batcher *b = t->b;
  pg_store *s = t->conn;
  bt_item *live[BT_MAX_BATCH];
  int n = t->n;
  memcpy(live, t->items, (size_t)n * sizeof *live);
  qsort(live, (size_t)n, sizeof *live, item_cmp); /* locks in key order */
  err_t err;
  err_code rc = ERR_OK;
  bool stale_retried = false;
  int64_t start_us = clock_mono_us();
  for (int i = 0; i < n; i++)
    metrics_store_observe_g(s->mgroup, METRICS_QUEUE_WAIT,
                            (double)(start_us - live[i]->queued_us) / 1e6);
  int trips = 0; /* pipelines sent to PostgreSQL: each one round trip */
  for (int tries = 0;; tries++) {
    int64_t deadline;
    n = drop_expired(live, n, &deadline);
    if (n == 0) return;
    bool commit_sent = false;
    rc = pg__call_start(s, deadline, &err);
    int64_t read_us = 0, written_us = 0, committed_us = 0;
    if (rc == ERR_OK) {
      trips++;
      rc = lock_and_read(t, live, n, deadline, &err);
      read_us = clock_mono_us();
    }
    if (rc == ERR_OK) {
      for (int i = 0; i < n; i++) decide(live[i]);
      commit_sent = true;
      trips++;
      rc = write_and_commit(t, live, n, deadline, &written_us, &committed_us, &err);
    }
    if (rc == ERR_OK) {
      for (int i = 0; i < n; i++) {
        live[i]->started_us = start_us;
        live[i]->read_us = read_us;
        live[i]->written_us = written_us;
        live[i]->committed_us = committed_us;
      }
      metrics_store_observe_g(s->mgroup, METRICS_BATCH_SIZE, (double)n);
      metrics_store_observe_g(s->mgroup, METRICS_ROUND_TRIPS, (double)trips);
      metrics_store_observe_g(s->mgroup, METRICS_COMMIT,
                              (double)(clock_mono_us() - start_us) / 1e6);
      report(b, s->epoch_sent, live, n);
      for (int i = 0; i < n; i++) answer(live[i], live[i]->fn_rc, &live[i]->fn_err);
      drop_read(t);
      metrics_batch_g(s->mgroup, (uint64_t)n);
      atomic_fetch_add(&b->batches, 1);
      atomic_fetch_add(&b->txns, (uint64_t)n);
      uint64_t big = atomic_load(&b->largest);
      while ((uint64_t)n > big && !atomic_compare_exchange_weak(&b->largest, &big, (uint64_t)n)) {
      }
      return;
    }
    drop_read(t);
    pg_retry why = s->retry;
    /* the database refused a statement (and the connection is up): nothing was committed */
    bool sql_error = s->sqlstate[0] != '\0' && s->conn != NULL;
    pg__rollback(s, deadline);
    trips++;
    if (commit_sent && !sql_error) break; /* the outcome of the COMMIT is unknown */
    if (why == PG_RETRY_STALE && !stale_retried) {
      stale_retried = true;
      continue;
    }
    bool timed_out = !sql_error && err.reason == ERR_R_STORE_TIMEOUT;
    if (timed_out && !commit_sent) continue; /* the expired go; the others run again */
    /* a write to a slot this store does not serve (a move's handoff, docs/api.md §18): the
     * items of every blocked slot get the refusal, the batch's other slots run again */
    if (sql_error && err.reason == ERR_R_SLOT_MOVING && drop_blocked(s, live, &n, &err, deadline))
      continue;
    if (why != PG_RETRY_SERIAL) break;
    if (tries + 1 >= PG_TXN_RETRIES) {
      metrics_store_error_g(s->mgroup, "conflict");
      log_kv(LOG_WARN, "store conflict: giving up", "sqlstate", s->sqlstate, NULL);
      err_fail(&err, ERR_UNAVAILABLE, ERR_R_STORE_CONFLICT, "store conflict: too many retries");
      break;
    }
    pg__backoff(tries + 1, deadline);
  }
  for (int i = 0; i < n; i++) answer(live[i], rc, &err);
}

static void *batcher_main(void *arg) {
  bt_thread *t = arg;
  store_batcher *b = t->b;
  pthread_mutex_lock(&b->mu);
  for (;;) {
    int64_t wait = t->index == 0 ? 0 : help_wait(b, t);
    if (wait == 0) collect(b, t);
    if (t->n == 0) {
      if (b->stopping) break;
      if (t->index == 0)
        pthread_cond_wait(&b->cv, &b->mu);
      else if (wait > 0 && b->head)
        wait_us(&b->help_cv, &b->mu, wait);
      else
        pthread_cond_wait(&b->help_cv, &b->mu);
      continue;
    }
    t->busy_since_us = clock_mono_us();
    if (b->head) pthread_cond_signal(&b->help_cv); /* more queued: a helper keeps an eye on it */
    pthread_mutex_unlock(&b->mu);
    run_batch(t);
    finish(b, t);
    pthread_mutex_lock(&b->mu);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

/* --- the caller's side --- */

/* Appends it to the queue and tells the thread that should take it. Under b->mu. */
static void enqueue(store_batcher *b, bt_item *it) {
  bool was_empty = b->head == NULL;
  it->queued_us = clock_mono_us();
  if (b->tail)
    b->tail->next = it;
  else
    b->head = it;
  b->tail = it;
  if (b->threads[0].n == 0)
    pthread_cond_signal(&b->cv);
  else if (was_empty) /* otherwise the helpers were told when the queue filled */
    pthread_cond_signal(&b->help_cv);
}

err_code pg__batch_step_txn(pg_store *s, const step_key *key, int64_t deadline, store_step_fn fn,
                            void *arg, const audit_rec *audit, err_t *err) {
  store_batcher *b = s->batcher;
  bt_item it;
  memset(&it, 0, sizeof it);
  it.key = key;
  it.deadline = deadline;
  it.fn = fn;
  it.arg = arg;
  it.audit = audit;
  pthread_cond_init(&it.cv, NULL);
  pthread_mutex_lock(&b->mu);
  if (b->stopping) {
    pthread_mutex_unlock(&b->mu);
    pthread_cond_destroy(&it.cv);
    return err_fail(err, ERR_UNAVAILABLE, ERR_R_STORE_STOPPING, "store stopping");
  }
  enqueue(b, &it);
  while (!it.done) pthread_cond_wait(&it.cv, &b->mu);
  pthread_mutex_unlock(&b->mu);
  pthread_cond_destroy(&it.cv);
  if (it.rc == ERR_OK) {
    err_clear(err);
  } else if (err) {
    *err = it.err;
  }
  return it.rc;
}

err_code store_batcher_submit(store_batcher *b, const step_key *key, int64_t deadline,
                              store_step_fn fn, void *arg, store_step_done_fn done, void *done_arg,
                              err_t *err) {
  bt_item *it = calloc(1, sizeof *it);
  if (!it) return err_oom(err);
  it->key = key;
  it->deadline = deadline;
  it->fn = fn;
  it->arg = arg;
  it->on_done = done;
  it->done_arg = done_arg;
  if (!metrics_stage_handler_get(&it->mmethod, &it->handler_us)) it->mmethod = -1;
  pthread_mutex_lock(&b->mu);
  err_code rc = ERR_OK;
  if (b->stopping)
    rc = err_fail(err, ERR_UNAVAILABLE, ERR_R_STORE_STOPPING, "store stopping");
  else if (b->queued_async >= b->queue_max)
    rc = err_fail(err, ERR_RESOURCE, ERR_R_OVERLOADED, "server overloaded: too many calls waiting");
  if (rc == ERR_OK) {
    b->queued_async++;
    enqueue(b, it);
  }
  pthread_mutex_unlock(&b->mu);
  if (rc != ERR_OK) free(it);
  return rc;
}

void store_pg_set_batcher(store *st, store_batcher *b) {
  ((pg_store *)st)->batcher = b;
}

/* --- lifecycle --- */

store_batcher *store_batcher_start(const store_batcher_cfg *cfg, err_t *err) {
  store_batcher *b = calloc(1, sizeof *b);
  if (!b) return err_oom(err), NULL;
  b->n_threads = cfg->conns > 0 ? cfg->conns : BT_DEFAULT_CONNS;
  if (b->n_threads > BT_MAX_CONNS) b->n_threads = BT_MAX_CONNS;
  b->max_batch = cfg->max_batch > 0 ? cfg->max_batch : BT_DEFAULT_MAX;
  if (b->max_batch > BT_MAX_BATCH) b->max_batch = BT_MAX_BATCH;
  b->queue_max = cfg->queue_max > 0 ? cfg->queue_max : STORE_BATCH_QUEUE_MAX;
  b->on_commit = cfg->on_commit;
  b->on_commit_arg = cfg->on_commit_arg;
  b->on_change = cfg->on_change;
  b->on_change_arg = cfg->on_change_arg;
  b->help_after_us = cfg->help_after_us > 0 ? cfg->help_after_us : BT_DEFAULT_HELP_AFTER_US;
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  clock_cond_init(&b->help_cv);
  pthread_mutex_init(&b->done_mu, NULL);
  pthread_cond_init(&b->done_cv, NULL);
  b->done_tail = &b->done_head;
  b->threads = calloc((size_t)b->n_threads, sizeof *b->threads);
  if (!b->threads) goto oom;
  for (int i = 0; i < b->n_threads; i++) {
    bt_thread *t = &b->threads[i];
    t->b = b;
    t->index = i;
    t->conn = calloc(1, sizeof *t->conn);
    if (t->conn && !pg__init(t->conn, cfg->conninfo)) {
      free(t->conn);
      t->conn = NULL;
    }
    t->items = calloc((size_t)b->max_batch, sizeof *t->items);
    t->stmts = calloc(4 + (size_t)b->max_batch, sizeof *t->stmts);
    t->params = calloc(2 + (size_t)b->max_batch, sizeof *t->params);
    if (!t->conn || !t->items || !t->stmts || !t->params) goto oom;
    t->conn->epoch_src = cfg->epoch; /* fenced like the store it serves (NULL: unfenced) */
    t->conn->mgroup = cfg->metrics_group;
  }
  if (pthread_create(&b->answerer, NULL, answerer_main, b) != 0) {
    store_batcher_stop(b);
    return err_set(err, ERR_INTERNAL, "cannot start the batcher's answer thread"), NULL;
  }
  b->answerer_started = true;
  for (int i = 0; i < b->n_threads; i++) {
    if (pthread_create(&b->threads[i].thread, NULL, batcher_main, &b->threads[i]) != 0) {
      store_batcher_stop(b);
      return err_set(err, ERR_INTERNAL, "cannot start batcher thread"), NULL;
    }
    b->threads[i].started = true;
  }
  return b;
oom:
  store_batcher_stop(b);
  return err_oom(err), NULL;
}

void store_batcher_stop(store_batcher *b) {
  if (!b) return;
  pthread_mutex_lock(&b->mu);
  b->stopping = true;
  pthread_cond_broadcast(&b->cv);
  pthread_cond_broadcast(&b->help_cv);
  pthread_mutex_unlock(&b->mu);
  for (int i = 0; b->threads && i < b->n_threads; i++)
    if (b->threads[i].started) pthread_join(b->threads[i].thread, NULL);
  /* callers still queued (none when the workers and the rpc server stopped first) */
  bt_item *submitted = NULL, **last = &submitted;
  pthread_mutex_lock(&b->mu);
  for (bt_item *it = b->head; it;) {
    bt_item *next = it->next;
    err_t e;
    answer(it, err_fail(&e, ERR_UNAVAILABLE, ERR_R_STORE_STOPPING, "store stopping"), &e);
    if (it->on_done) {
      it->next = NULL;
      *last = it;
      last = &it->next;
    } else {
      it->done = true;
      pthread_cond_signal(&it->cv);
    }
    it = next;
  }
  b->head = b->tail = NULL;
  b->queued_async = 0;
  pthread_mutex_unlock(&b->mu);
  if (b->answerer_started) { /* answers everything handed over, then ends */
    hand_over(b, submitted);
    pthread_mutex_lock(&b->done_mu);
    b->done_stop = true;
    pthread_cond_signal(&b->done_cv);
    pthread_mutex_unlock(&b->done_mu);
    pthread_join(b->answerer, NULL);
  }
  for (int i = 0; b->threads && i < b->n_threads; i++) {
    if (b->threads[i].conn) pg__fini(b->threads[i].conn);
    free(b->threads[i].conn);
    free(b->threads[i].items);
    free(b->threads[i].stmts);
    free(b->threads[i].params);
    for (int c = 0; c < N_COLS; c++) pg__arr_free(&b->threads[i].arr[c]);
  }
  free(b->threads);
  pthread_cond_destroy(&b->cv);
  pthread_cond_destroy(&b->help_cv);
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->done_cv);
  pthread_mutex_destroy(&b->done_mu);
  free(b);
}

void store_batcher_stats(store_batcher *b, store_batch_stats *out) {
  out->batches = atomic_load(&b->batches);
  out->txns = atomic_load(&b->txns);
  out->largest = atomic_load(&b->largest);
}
