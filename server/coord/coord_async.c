/* coord_async.c — BeginStep and CompleteStep without blocking (see coord.h, "the non-blocking
 * forms"): the parts of coord_step.h around store_step_txn_submit. Each call's state lives in
 * one allocation from the call to its answer. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../metrics/metrics.h"
#include "../util/clock.h"
#include "../validate/validate.h"

#include "coord.h"
#include "coord_log.h"
#include "coord_step.h"

/* --- BeginStep --- */

/* A waiting call ends its wait this long before its deadline, so that the answer reaches the
 * caller in time. */
#define WAIT_DEADLINE_MARGIN_MS 50

typedef struct begin_op {
  step_key k;
  policy pol;
  coord__begin_arg a;
  coord_begin_result out;
  coord__txn txn;
  coord_begin_done_fn done;
  void *arg;
  /* waiting (wait_ms > 0 with ctx->waiters): the call is run again from the table */
  const coord_ctx *ctx;
  store *st;
  int64_t deadline;
  bool waits;
  coord__waiter wt; /* wt.retry / wt.give_up find the op from it */
} begin_op;

static begin_op *op_of(coord__waiter *wt) {
  return (begin_op *)((char *)wt - offsetof(begin_op, wt));
}

static void begin_answer(begin_op *op, err_code rc, err_t *err) {
  if (op->waits) coord__wait_done(op->ctx->waiters, &op->wt);
  op->done(op->arg, rc, &op->out, err);
  coord_begin_result_clear(&op->out);
  free(op);
}

/* The store's answer was "in progress": parks the call when it waits and may still wait. True
 * when the table took it; otherwise *rc and err say what to answer. */
static bool park(begin_op *op, err_code *rc, err_t *err) {
  if (!op->waits || *rc != ERR_ABORTED || err->reason != ERR_R_IN_PROGRESS) return false;
  int64_t now = clock_mono_ms();
  if (now >= op->wt.give_up_ms) {
    if (op->wt.counted) metrics_wait_timed_out();
    return false;
  }
  err_t perr;
  err_clear(&perr);
  switch (coord__wait_park(op->ctx->waiters, &op->wt, err->retry_after_ms, now, &perr)) {
    case COORD_PARKED:
      return true; /* the table (perhaps already another thread) owns op now */
    case COORD_FULL:
    case COORD_NO_TWIN:
      return false;
    case COORD_REFUSED:
      *err = perr;
      *rc = perr.code;
      return false;
  }
  return false;
}

static void submit(begin_op *op);
static bool still_may_join(begin_op *op, err_t *err, err_code *rc);

/* The store's answer, on the thread the store answers on (PostgreSQL: the batcher's answer
 * thread). */
static void begin_committed(void *p, err_code rc, const err_t *store_err) {
  begin_op *op = p;
  err_t err;
  err_clear(&err);
  if (store_err) err = *store_err;
  rc = coord__txn_done(&op->txn, &op->k, NULL, "begin", rc, &err);
  if (rc == ERR_ABORTED) coord_begin_result_clear(&op->out);
  err_code was = rc;
  if (park(op, &rc, &err)) return;
  if (rc != was) { /* the table refused it (not leading, stopping): not a store outage */
    begin_answer(op, rc, &err);
    return;
  }
  rc = coord__begin_settle(&op->k, &op->pol, rc, &op->out, &err);
  begin_answer(op, rc, &err);
}

/* Hands the step transaction to the store (the first time, and each re-run of a waiting
 * call); answers at once what the store cannot take. */
static void submit(begin_op *op) {
  err_t err;
  err_clear(&err);
  if (op->waits) coord__wait_mark(op->ctx->waiters, &op->wt);
  coord__txn_init(&op->txn, coord__begin_fn, &op->a);
  err_code rc =
      store_step_txn_submit(op->st, &op->k, coord__store_deadline(op->ctx, op->deadline),
                            coord__txn_wrap, &op->txn, begin_committed, op, &err);
  if (rc == ERR_OK) return; /* begin_committed answers */
  begin_answer(op, coord__begin_settle(&op->k, &op->pol, rc, &op->out, &err), &err);
}

/* The table runs a woken call again: from the cache when it answers, else through the store. */
static void begin_retry(coord__waiter *wt) {
  begin_op *op = op_of(wt);
  err_t err;
  err_clear(&err);
  err_code rc;
  coord_begin_result_clear(&op->out);
  if (op->ctx->cache && coord__begin_from_cache(op->ctx, &op->k, &op->a, true, &rc, &err)) {
    begin_answer(op, rc, &err);
    return;
  }
  if (still_may_join(op, &err, &rc)) return; /* another woken twin parked again already */
  if (rc != ERR_OK) {
    begin_answer(op, rc, &err);
    return;
  }
  submit(op);
}

static void begin_give_up(coord__waiter *wt, err_code rc, err_t *err) {
  begin_op *op = op_of(wt);
  coord_begin_result_clear(&op->out);
  begin_answer(op, rc, err);
}

/* Joins a parked twin without asking the store. True when the table took op; otherwise *rc is
 * ERR_OK (evaluate it) or the answer to give (err filled). */
static bool still_may_join(begin_op *op, err_t *err, err_code *rc) {
  *rc = ERR_OK;
  switch (coord__wait_join(op->ctx->waiters, &op->wt, clock_mono_ms(), err)) {
    case COORD_PARKED:
      return true;
    case COORD_FULL:
    case COORD_REFUSED:
      *rc = err->code;
      return false;
    case COORD_NO_TWIN:
      return false;
  }
  return false;
}

err_code coord_check_wait_ms(uint32_t wait_ms, err_t *err) {
  return validate_wait_ms(wait_ms, err);
}

void coord_begin_step_wait_async(const coord_ctx *ctx, store *st, const char *tenant,
                                 const coord_key_in *key, const uint8_t *fp, size_t fp_len,
                                 uint32_t lease_ms, uint32_t wait_ms, int64_t deadline,
                                 coord_wait_cell *cell, coord_begin_done_fn done, void *arg) {
  err_t err;
  err_clear(&err);
  begin_op *op = calloc(1, sizeof *op);
  if (!op) {
    coord_begin_result none = {0};
    done(arg, err_oom(&err), &none, &err);
    return;
  }
  op->done = done;
  op->arg = arg;
  op->ctx = ctx;
  op->st = st;
  op->deadline = deadline;
  err_code rc = coord__begin_prepare(ctx, tenant, key, fp, fp_len, lease_ms, &op->k, &op->pol,
                                     &op->a, &op->out, &err);
  if (rc == ERR_OK) rc = validate_wait_ms(wait_ms, &err);
  if (rc != ERR_OK ||
      (ctx->cache && coord__begin_from_cache(ctx, &op->k, &op->a, true, &rc, &err))) {
    begin_answer(op, rc, &err);
    return;
  }
  if (wait_ms > 0 && ctx->waiters) {
    int64_t end = clock_mono_ms() + wait_ms;
    if (end > deadline - WAIT_DEADLINE_MARGIN_MS) end = deadline - WAIT_DEADLINE_MARGIN_MS;
    op->waits = true;
    op->wt.key = &op->k;
    op->wt.fp = fp;
    op->wt.fp_len = fp_len;
    op->wt.give_up_ms = end;
    op->wt.retry = begin_retry;
    op->wt.give_up = begin_give_up;
    if (!coord__wait_link(ctx->waiters, &op->wt, cell)) {
      err_set(&err, ERR_ABORTED, "cancelled by the caller");
      begin_answer(op, ERR_ABORTED, &err);
      return;
    }
    if (end > clock_mono_ms() && still_may_join(op, &err, &rc)) return;
    if (rc != ERR_OK) {
      begin_answer(op, rc, &err);
      return;
    }
  }
  submit(op);
}

void coord_begin_step_async(const coord_ctx *ctx, store *st, const char *tenant,
                            const coord_key_in *key, const uint8_t *fp, size_t fp_len,
                            uint32_t lease_ms, int64_t deadline, coord_begin_done_fn done,
                            void *arg) {
  coord_begin_step_wait_async(ctx, st, tenant, key, fp, fp_len, lease_ms, 0, deadline, NULL, done,
                              arg);
}

/* --- CompleteStep --- */

typedef struct complete_op {
  step_key k;
  coord__complete_arg a;
  step_rec out;
  coord__txn txn;
  coord_complete_done_fn done;
  void *arg;
} complete_op;

static void complete_answer(complete_op *op, err_code rc, err_t *err) {
  if (rc != ERR_OK) step_rec_clear(&op->out);
  op->done(op->arg, rc, &op->out, err);
  step_rec_clear(&op->out);
  free(op);
}

static void complete_committed(void *p, err_code rc, const err_t *store_err) {
  complete_op *op = p;
  err_t err;
  err_clear(&err);
  if (store_err) err = *store_err;
  complete_answer(op, coord__txn_done(&op->txn, &op->k, NULL, "complete", rc, &err), &err);
}

void coord_complete_step_async(const coord_ctx *ctx, store *st, const char *tenant,
                               const coord_key_in *key, uint64_t attempt, int outcome, int32_t code,
                               const uint8_t *body, size_t body_len, int64_t deadline,
                               coord_complete_done_fn done, void *arg) {
  err_t err;
  err_clear(&err);
  complete_op *op = calloc(1, sizeof *op);
  if (!op) {
    step_rec none;
    memset(&none, 0, sizeof none);
    done(arg, err_oom(&err), &none, &err);
    return;
  }
  op->done = done;
  op->arg = arg;
  err_code rc = coord__complete_prepare(ctx, tenant, key, attempt, outcome, code, body, body_len,
                                        &op->k, &op->a, &op->out, &err);
  if (rc == ERR_OK) {
    coord__txn_init(&op->txn, coord__complete_fn, &op->a);
    rc = store_step_txn_submit(st, &op->k, coord__store_deadline(ctx, deadline), coord__txn_wrap,
                               &op->txn, complete_committed, op, &err);
    if (rc == ERR_OK) return; /* complete_committed answers */
  }
  complete_answer(op, rc, &err);
}
