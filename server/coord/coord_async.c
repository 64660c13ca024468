/* coord_async.c — BeginStep and CompleteStep without blocking (see coord.h, "the non-blocking
 * forms"): the parts of coord_step.h around store_step_txn_submit. Each call's state lives in
 * one allocation from the call to its answer. */
#include <stdlib.h>
#include <string.h>

#include "coord.h"
#include "coord_log.h"
#include "coord_step.h"

/* --- BeginStep --- */

typedef struct begin_op {
  step_key k;
  policy pol;
  coord__begin_arg a;
  coord_begin_result out;
  coord__txn txn;
  coord_begin_done_fn done;
  void *arg;
} begin_op;

static void begin_answer(begin_op *op, err_code rc, err_t *err) {
  op->done(op->arg, rc, &op->out, err);
  coord_begin_result_clear(&op->out);
  free(op);
}

/* The store's answer, on the thread the store answers on (PostgreSQL: the batcher's answer
 * thread). */
static void begin_committed(void *p, err_code rc, const err_t *store_err) {
  begin_op *op = p;
  err_t err;
  err_clear(&err);
  if (store_err) err = *store_err;
  rc = coord__txn_done(&op->txn, &op->k, NULL, "begin", rc, &err);
  rc = coord__begin_settle(&op->k, &op->pol, rc, &op->out, &err);
  begin_answer(op, rc, &err);
}

void coord_begin_step_async(const coord_ctx *ctx, store *st, const char *tenant,
                            const coord_key_in *key, const uint8_t *fp, size_t fp_len,
                            uint32_t lease_ms, int64_t deadline, coord_begin_done_fn done,
                            void *arg) {
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
  err_code rc = coord__begin_prepare(ctx, tenant, key, fp, fp_len, lease_ms, &op->k, &op->pol,
                                     &op->a, &op->out, &err);
  if (rc != ERR_OK ||
      (ctx->cache && coord__begin_from_cache(ctx, &op->k, &op->a, true, &rc, &err))) {
    begin_answer(op, rc, &err);
    return;
  }
  coord__txn_init(&op->txn, coord__begin_fn, &op->a);
  rc = store_step_txn_submit(st, &op->k, coord__store_deadline(ctx, deadline), coord__txn_wrap,
                             &op->txn, begin_committed, op, &err);
  if (rc == ERR_OK) return; /* begin_committed answers */
  begin_answer(op, coord__begin_settle(&op->k, &op->pol, rc, &op->out, &err), &err);
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
