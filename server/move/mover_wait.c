/* mover_wait.c — a move's result for its request id (mover_internal.h), and the MoveSlots
 * calls kept while their move goes on (mover.h, mover_cancel): no worker thread and no store
 * connection is held for them, only a small record here. One thread answers them: it looks up
 * each kept call's result when the slot map service sees a change (its watch sees the result
 * arrive), and answers a call whose deadline passed, or every call when the node stops. A call
 * whose client went away is answered at once by mover_cancel; its move goes on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/clock.h"
#include "../util/log.h"
#include "mover_internal.h"

typedef struct mover_waiter {
  struct mover_waiter *next;
  uint64_t id;
  char rid[SLOT_MOVE_RID_MAX], group[SLOT_MOVE_GROUP_MAX];
  slot_move_req rq; /* its strings point into rid and group */
  int64_t deadline;
  bool replayed; /* waiting again for a move already under way */
  slot_move_wait w;
} mover_waiter;

/* FAILED_PRECONDITION request-mismatch when the move of rq's request_id (slots from..to to
 * target) is not what rq asks: a request id names one move, like an idempotency key. */
err_code mover__same_request(const slot_move_req *rq, uint32_t from, uint32_t to,
                             const char *target, err_t *err) {
  if (rq->from == from && rq->to == to && strcmp(rq->group ? rq->group : "", target) == 0)
    return ERR_OK;
  err_fail(err, ERR_PRECONDITION, ERR_R_REQUEST_MISMATCH,
           "request_id %s already names the move of slots %u-%u to group %s, not %u-%u to %s",
           rq->request_id, from, to, target, rq->from, rq->to, rq->group ? rq->group : "");
  err_hint(err, "use a new request_id for another move");
  return ERR_PRECONDITION;
}

/* The result kept for rq's request id: ERR_OK with *found; an ended move's error comes back as
 * err (ERR_ABORTED); a result of other parameters as request-mismatch. Results kept before
 * they named their parameters replay whatever was asked. */
err_code mover__result_of(mover *m, const slot_move_req *rq, bool *found, slot_move_res *out,
                          err_t *err) {
  const char *rid = rq->request_id;
  char *value = NULL;
  size_t len = 0;
  *found = false;
  err_code rc = slot_service_result(m->slots, rid, &value, &len, err);
  if (rc != ERR_OK || !value) return rc;
  *found = true;
  slot_move_result r;
  char why[160];
  bool parsed = slot_move_result_parse(value, len, &r, why, sizeof why);
  free(value);
  if (!parsed) return err_set(err, ERR_INTERNAL, "request_id %s: %s", rid, why);
  if (r.has_params && mover__same_request(rq, r.from, r.to, r.target, err) != ERR_OK)
    return ERR_PRECONDITION;
  if (r.error[0])
    return err_fail(err, ERR_ABORTED, ERR_R_MOVE_ROLLED_BACK,
                    "the move of request_id %s was rolled back: %s", rid, r.error);
  out->version = r.version;
  out->steps_moved = r.steps_moved;
  out->sagas_moved = r.sagas_moved;
  out->paused_ms = r.paused_ms;
  return ERR_OK;
}

/* Answers and frees wt (taken out of the list by the caller). */
static void answer(mover_waiter *wt, err_code rc, const slot_move_res *res, err_t *err) {
  wt->w.done(wt->w.call, rc, res, err);
  free(wt);
}

err_code mover__park(mover *m, const slot_move_req *rq, int64_t deadline, bool replayed,
                     slot_move_wait *w, err_t *err) {
  mover_waiter *wt = calloc(1, sizeof *wt);
  if (!wt) return err_oom(err);
  snprintf(wt->rid, sizeof wt->rid, "%s", rq->request_id);
  snprintf(wt->group, sizeof wt->group, "%s", rq->group ? rq->group : "");
  wt->rq = *rq;
  wt->rq.request_id = wt->rid;
  wt->rq.group = wt->group;
  wt->deadline = deadline;
  wt->replayed = replayed;
  wt->w = *w;
  pthread_mutex_lock(&m->wmu);
  wt->id = w->id;
  wt->next = m->waiters;
  m->waiters = wt;
  pthread_mutex_unlock(&m->wmu);
  slot_service_kick(m->slots); /* the answerer looks at once: the result may be there already */
  return ERR_OK;
}

/* Takes the kept call id out of the list (NULL when it is not there any more). */
static mover_waiter *take(mover *m, uint64_t id) {
  pthread_mutex_lock(&m->wmu);
  mover_waiter **p = &m->waiters, *wt = NULL;
  while (*p && (*p)->id != id) p = &(*p)->next;
  if (*p) {
    wt = *p;
    *p = wt->next;
  }
  pthread_mutex_unlock(&m->wmu);
  return wt;
}

void mover_cancel(mover *m, uint64_t id) {
  mover_waiter *wt = m ? take(m, id) : NULL;
  if (!wt) return; /* answered already */
  log_kv(LOG_INFO, "MoveSlots: the caller went away; the move goes on", "request_id", wt->rid,
         (const char *)NULL);
  err_t err;
  err_fail(&err, ERR_ABORTED, ERR_R_NONE,
           "cancelled by the caller: the move of request_id %s goes on (the same request_id "
           "waits for it again)",
           wt->rid);
  answer(wt, ERR_ABORTED, NULL, &err);
}

/* One round: every kept call whose result is there, or whose deadline passed, is answered;
 * the nearest deadline of the others. */
static int64_t answer_round(mover *m, bool stopping) {
  int64_t next = clock_mono_ms() + 3600000;
  pthread_mutex_lock(&m->wmu);
  size_t n = 0;
  for (mover_waiter *wt = m->waiters; wt; wt = wt->next) n++;
  uint64_t *ids = n ? calloc(n, sizeof *ids) : NULL;
  size_t k = 0;
  for (mover_waiter *wt = m->waiters; wt && ids; wt = wt->next) ids[k++] = wt->id;
  pthread_mutex_unlock(&m->wmu);
  for (size_t i = 0; i < k; i++) {
    mover_waiter *wt = take(m, ids[i]);
    if (!wt) continue; /* cancelled meanwhile */
    slot_move_res res = {0};
    bool found = false;
    err_t err;
    err_clear(&err);
    err_code rc = stopping ? ERR_OK : mover__result_of(m, &wt->rq, &found, &res, &err);
    if (found) {
      res.replayed = rc == ERR_OK && wt->replayed;
      answer(wt, rc, &res, &err);
      continue;
    }
    int64_t now = clock_mono_ms();
    if (stopping || now + 300 >= wt->deadline) {
      slots_view *v = slot_service_hold(m->slots);
      const slot_move *mv = slots_view_map(v)->move;
      err_fail(&err, stopping ? ERR_UNAVAILABLE : ERR_DEADLINE,
               stopping ? ERR_R_SHUTTING_DOWN : ERR_R_NONE,
               "the move of request_id %s goes on (%s): call again with the same request_id to "
               "wait for its result",
               wt->rid, mv ? slot_move_phase_word(mv->phase) : "ending");
      slots_view_release(v);
      answer(wt, err.code, NULL, &err);
      continue;
    }
    if (wt->deadline - 300 < next) next = wt->deadline - 300;
    pthread_mutex_lock(&m->wmu); /* still waiting: back in the list */
    wt->next = m->waiters;
    m->waiters = wt;
    pthread_mutex_unlock(&m->wmu);
  }
  free(ids);
  return next;
}

static void *answerer_main(void *arg) {
  mover *m = arg;
  uint64_t seen = slot_service_changes(m->slots);
  while (!atomic_load(&m->stopping)) {
    int64_t until = answer_round(m, false);
    seen = slot_service_wait(m->slots, seen, until);
  }
  answer_round(m, true);
  return NULL;
}

bool mover__answerer_start(mover *m) {
  pthread_mutex_init(&m->wmu, NULL);
  m->answering = pthread_create(&m->answerer, NULL, answerer_main, m) == 0;
  if (!m->answering) pthread_mutex_destroy(&m->wmu);
  return m->answering;
}

void mover__answerer_stop(mover *m) {
  if (!m->answering) return;
  pthread_join(m->answerer, NULL); /* m->stopping set and the service kicked by the caller */
  answer_round(m, true);           /* parked after its last round */
  pthread_mutex_destroy(&m->wmu);
  m->answering = false;
}
