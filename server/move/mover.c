/* mover.c — see mover.h: Admin.MoveSlots and the thread that looks at the map. The
 * phases are in mover_drive.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "../util/clock.h"
#include "../util/log.h"
#include "mover_internal.h"

static bool is_group(void *arg, const char *name) {
  return mover__group(arg, name) >= 0;
}

/* One look at the map: the move in it is driven here when this node leads its source group.
 * True when the move is still there for this node to drive (a step did not get through: the
 * look is repeated after MOVE_RETRY_MS even without a change). */
static bool look(mover *m) {
  slots_view *v = slot_service_hold(m->slots);
  const slot_move *seen = slots_view_map(v)->move;
  int src = seen ? mover__group(m, seen->source) : -1;
  slots_view_release(v);
  if (src < 0 || !elect_is_leader(m->g[src].el, NULL)) return false;
  slotmap *map = NULL;
  int64_t rev = 0;
  err_t err;
  err_clear(&err);
  if (slot_service_read(m->slots, &map, &rev, &err) != ERR_OK) return true;
  if (map && map->move) mover__drive(m, map, rev);
  slotmap_free(map);
  v = slot_service_hold(m->slots);
  seen = slots_view_map(v)->move;
  src = seen ? mover__group(m, seen->source) : -1;
  slots_view_release(v);
  return src >= 0 && elect_is_leader(m->g[src].el, NULL);
}

/* The mover's thread: a look at every change the slot map service sees (a new map, a result, a
 * leadership won here), none in between unless a look left work undone. */
static void *mover_main(void *arg) {
  mover *m = arg;
  uint64_t seen = slot_service_changes(m->slots);
  while (!atomic_load(&m->stopping)) {
    bool again = look(m);
    int64_t until =
        clock_mono_ms() + (again ? MOVE_RETRY_MS : 3600000); /* no timer: a change wakes it */
    seen = slot_service_wait(m->slots, seen, until);
  }
  return NULL;
}

static void read_hold(mover *m) {
  m->hold_phase = -1;
  const char *h = getenv("IDEM_TEST_MOVE_HOLD");
  const char *colon = h ? strchr(h, ':') : NULL;
  if (!colon) return;
  for (int p = 0; p < MOVE__PHASES; p++)
    if (strncmp(h, slot_move_phase_word((slot_move_phase)p), (size_t)(colon - h)) == 0 &&
        strlen(slot_move_phase_word((slot_move_phase)p)) == (size_t)(colon - h))
      m->hold_phase = p;
  m->hold_ms = atoll(colon + 1);
  if (m->hold_phase >= 0)
    log_kv(LOG_WARN, "IDEM_TEST_MOVE_HOLD: moves hold in a phase (tests only)", "hold", h,
           (const char *)NULL);
}

mover *mover_start(const mover_cfg *cfg, slot_service *slots, const mover_group *g, size_t n) {
  if (n < 2 || !cfg->store) return NULL;
  mover *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->st = cfg->store;
  m->max_rows_per_s = cfg->max_rows_per_s;
  m->slots = slots;
  m->n = n < SLOTMAP_GROUPS_MAX ? n : SLOTMAP_GROUPS_MAX;
  memcpy(m->g, g, m->n * sizeof *g);
  snprintf(m->me, sizeof m->me, "%.30s/%ld/%lld", cfg->node_id ? cfg->node_id : "node",
           (long)getpid(), (long long)clock_wall_ms());
  read_hold(m);
  atomic_init(&m->driving, -1);
  pthread_mutex_init(&m->mu, NULL);
  if (clock_cond_init(&m->cv) != 0) {
    pthread_mutex_destroy(&m->mu);
    free(m);
    return NULL;
  }
  if (!mover__answerer_start(m)) {
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
    return NULL;
  }
  if (pthread_create(&m->th, NULL, mover_main, m) != 0) {
    atomic_store(&m->stopping, true);
    slot_service_kick(m->slots);
    mover__answerer_stop(m);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
    return NULL;
  }
  return m;
}

int mover_driving(mover *m) {
  return m ? atomic_load(&m->driving) : -1;
}

void mover_stop(mover *m) {
  if (!m) return;
  pthread_mutex_lock(&m->mu);
  atomic_store(&m->stopping, true);
  pthread_cond_broadcast(&m->cv);
  pthread_mutex_unlock(&m->mu);
  slot_service_kick(m->slots); /* out of their waits for a change */
  pthread_join(m->th, NULL);
  mover__answerer_stop(m); /* every kept MoveSlots answered */
  pthread_cond_destroy(&m->cv);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

/* Waits for the result of rq's request id until deadline: looked up again at each change the
 * slot map service sees (its watch sees the result arrive), not by polling. */
static err_code wait_result(mover *m, const slot_move_req *rq, int64_t deadline, slot_move_res *out,
                            err_t *err) {
  const char *rid = rq->request_id;
  uint64_t seen = slot_service_changes(m->slots);
  for (;;) {
    bool found = false;
    err_t e;
    err_clear(&e);
    err_code rc = mover__result_of(m, rq, &found, out, &e);
    if (found) {
      if (rc != ERR_OK) *err = e;
      return rc;
    }
    if (clock_mono_ms() + 300 >= deadline || atomic_load(&m->stopping)) break;
    seen = slot_service_wait(m->slots, seen, deadline - 300);
  }
  slots_view *v = slot_service_hold(m->slots);
  const slot_move *mv = slots_view_map(v)->move;
  const char *phase = mv ? slot_move_phase_word(mv->phase) : "ending";
  err_set(err, ERR_DEADLINE,
          "the move of request_id %s goes on (%s): call again with the same request_id to wait "
          "for its result",
          rid, phase);
  slots_view_release(v);
  return ERR_DEADLINE;
}

static void new_id(char *out, size_t cap) {
  unsigned char b[8] = {0};
  if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
    uint64_t x = (uint64_t)clock_wall_ms() ^ ((uint64_t)getpid() << 40);
    memcpy(b, &x, sizeof b);
  }
  snprintf(out, cap, "m%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5], b[6],
           b[7]);
}

/* Checks both stores can take part; ERR_PRECONDITION naming the group otherwise. */
static err_code stores_ready(mover *m, store_move *ss, int src, int dst, int64_t deadline,
                             err_t *err) {
  char what[96];
  snprintf(what, sizeof what, "group %s", m->g[src].name);
  err_code rc = m->st->check(ss, MOVE_SIDE_SOURCE, what, deadline, err);
  if (rc != ERR_OK) return rc;
  snprintf(what, sizeof what, "group %s", m->g[dst].name);
  return m->st->check(ss, MOVE_SIDE_TARGET, what, deadline, err);
}

err_code mover_request(mover *m, const slot_move_req *rq, int64_t deadline, slot_move_res *out,
                       err_t *err, slot_move_wait *w, bool *parked) {
  *parked = false;
  memset(out, 0, sizeof *out);
  char why[320];
  if (!slot_move_request_id_ok(rq->request_id, why, sizeof why))
    return err_set(err, ERR_INVALID, "%s", why);
  err_code rc = ERR_OK;
  for (int attempt = 0; attempt < 5; attempt++) {
    slotmap *map = NULL;
    int64_t rev = 0;
    if ((rc = slot_service_read(m->slots, &map, &rev, err)) != ERR_OK) return rc;
    if (!map) return err_set(err, ERR_UNAVAILABLE, "no slot map in etcd yet");
    if (map->move && strcmp(map->move->request_id, rq->request_id) == 0) {
      rc = mover__same_request(rq, map->move->from, map->move->to, map->move->target, err);
      slotmap_free(map);
      if (rc != ERR_OK) return rc;
      if (w) {
        rc = mover__park(m, rq, deadline, true, w, err);
        *parked = rc == ERR_OK;
        return rc;
      }
      rc = wait_result(m, rq, deadline, out, err);
      out->replayed = rc == ERR_OK;
      return rc;
    }
    /* the result after the map: a move ends (leaves the map) only after its result is kept, so
     * a move of this request_id that is not in the map read above has its result by now */
    bool found = false;
    rc = mover__result_of(m, rq, &found, out, err);
    if (found || rc != ERR_OK) {
      slotmap_free(map);
      out->replayed = found && rc == ERR_OK;
      return rc;
    }
    char source[SLOTMAP_NAME_MAX] = "";
    slot_move_check_result cr =
        slotmap_move_check(map, rq->from, rq->to, rq->group, is_group, m, source, why, sizeof why);
    if (cr != MOVE_CHECK_OK) {
      slotmap_free(map);
      if (cr == MOVE_CHECK_BUSY)
        return err_fail(err, ERR_PRECONDITION, ERR_R_MOVE_IN_PROGRESS, "%s", why);
      return err_set(err, ERR_INVALID, "%s", why);
    }
    int src = mover__group(m, source), dst = mover__group(m, rq->group);
    int64_t until = clock_mono_ms() + MOVE_STORE_MS;
    if (until > deadline) until = deadline;
    store_move *ss = NULL;
    if ((rc = m->st->open(m->g[src].conninfo, m->g[dst].conninfo, NULL, rq->from, rq->to, &ss,
                          err)) == ERR_OK)
      rc = stores_ready(m, ss, src, dst, until, err);
    if (rc == ERR_OK && rq->dry_run) {
      out->version = map->version;
      rc = m->st->count(ss, MOVE_SIDE_SOURCE, &out->steps_moved, &out->sagas_moved, until, err);
    }
    m->st->close(ss);
    if (rc != ERR_OK || rq->dry_run) {
      slotmap_free(map);
      return rc;
    }
    slot_move mv = {0};
    new_id(mv.id, sizeof mv.id);
    snprintf(mv.request_id, sizeof mv.request_id, "%s", rq->request_id);
    mv.from = rq->from;
    mv.to = rq->to;
    snprintf(mv.source, sizeof mv.source, "%s", source);
    snprintf(mv.target, sizeof mv.target, "%s", rq->group);
    mv.phase = MOVE_PLANNED;
    mv.started_ms = clock_wall_ms();
    mv.max_rows_per_s = rq->max_rows_per_s ? rq->max_rows_per_s : m->max_rows_per_s;
    slotmap *next = slotmap_move_begin(map, &mv);
    slotmap_free(map);
    if (!next) return err_oom(err);
    bool swapped = false;
    rc = slot_service_swap(m->slots, next, rev, &swapped, err);
    slotmap_free(next);
    if (rc != ERR_OK) return rc;
    if (!swapped) continue; /* the map changed meanwhile: check again */
    char range[32];
    snprintf(range, sizeof range, "%u-%u", mv.from, mv.to);
    log_kv(LOG_INFO, "slot move planned", "request_id", mv.request_id, "slots", range, "from",
           mv.source, "to", mv.target, "move", mv.id, (const char *)NULL);
    if (w) {
      rc = mover__park(m, rq, deadline, false, w, err);
      *parked = rc == ERR_OK;
      return rc;
    }
    return wait_result(m, rq, deadline, out, err);
  }
  return err_set(err, ERR_UNAVAILABLE, "the slot map kept changing: try again");
}
