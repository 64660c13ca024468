/* node_move.c — see node_move.h: Admin.MoveSlots, the thread, the map in etcd. The phases are
 * in node_move_drive.c. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "../elect/etcd_kv.h"
#include "../store/store_pg_move.h"
#include "../util/clock.h"
#include "../util/log.h"
#include "node_move_internal.h"

static bool is_group(void *arg, const char *name) {
  return nm__group(arg, name) >= 0;
}

/* Reads another driver's progress now and then (the driver keeps its own). */
static void read_progress(node_move *m) {
  int64_t now = clock_mono_ms();
  if (now - m->progress_read_ms < 1000) return;
  m->progress_read_ms = now;
  char *value = NULL;
  size_t len = 0;
  int64_t rev = 0;
  err_t err;
  if (etcd_kv_get(m->o->etcd, m->progress_key, 500, &value, &len, &rev, &err) != ERR_OK || !value)
    return;
  cJSON *j = cJSON_ParseWithLength(value, len);
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "rows");
  const cJSON *l = cJSON_GetObjectItemCaseSensitive(j, "lag");
  if (cJSON_IsNumber(r) && cJSON_IsNumber(l)) {
    atomic_store(&m->rows, (uint64_t)r->valuedouble);
    atomic_store(&m->lag, (int64_t)l->valuedouble);
    atomic_store(&m->have_progress, true);
  }
  cJSON_Delete(j);
  free(value);
}

static bool tick(void *arg) {
  node_move *m = arg;
  const slotmap *seen = node_slots_map(m->slots);
  if (!seen->move) {
    atomic_store(&m->have_progress, false);
    return true;
  }
  int src = nm__group(m, seen->move->source);
  if (src < 0 || !elect_is_leader(m->g[src].el, NULL)) {
    read_progress(m);
    return true;
  }
  slotmap *map = NULL;
  int64_t rev = 0;
  err_t err;
  err_clear(&err);
  if (nm__map_get(m, &map, &rev, &err) == ERR_OK && map && map->move) nm__drive(m, map, rev);
  slotmap_free(map);
  return true;
}

static void read_hold(node_move *m) {
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

node_move *node_move_start(const idem_options *o, node_slots *slots, const node_move_group *g,
                           size_t n) {
  if (!o->etcd || n < 2) return NULL;
  node_move *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->o = o;
  m->slots = slots;
  m->n = n < OPT_LIST_MAX ? n : OPT_LIST_MAX;
  memcpy(m->g, g, m->n * sizeof *g);
  snprintf(m->map_key, sizeof m->map_key, "%s/slotmap", o->election_prefix);
  snprintf(m->results, sizeof m->results, "%s/moves/", o->election_prefix);
  snprintf(m->progress_key, sizeof m->progress_key, "%s/slotmove.progress", o->election_prefix);
  snprintf(m->me, sizeof m->me, "%.30s/%ld/%lld", o->node_id ? o->node_id : "node", (long)getpid(),
           (long long)clock_wall_ms());
  read_hold(m);
  atomic_init(&m->driving, -1);
  if (!(m->t = ticker_start(MOVE_TICK_MS, tick, m))) {
    free(m);
    return NULL;
  }
  return m;
}

int node_move_driving(node_move *m) {
  return m ? atomic_load(&m->driving) : -1;
}

void node_move_stop(node_move *m) {
  if (!m) return;
  ticker_stop(m->t);
  free(m);
}

bool node_move_progress(node_move *m, uint64_t *rows, int64_t *lag) {
  if (!m || !atomic_load(&m->have_progress)) return false;
  *rows = atomic_load(&m->rows);
  *lag = atomic_load(&m->lag);
  return true;
}

/* FAILED_PRECONDITION request-mismatch when the move of rq's request_id (slots from..to to
 * target) is not what rq asks: a request id names one move, like an idempotency key. */
static err_code same_request(const slot_move_req *rq, uint32_t from, uint32_t to,
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
static err_code result_of(node_move *m, const slot_move_req *rq, bool *found, slot_move_res *out,
                          err_t *err) {
  const char *rid = rq->request_id;
  char key[640], *value = NULL;
  size_t len = 0;
  int64_t rev = 0;
  *found = false;
  snprintf(key, sizeof key, "%s%s", m->results, rid);
  err_code rc = etcd_kv_get(m->o->etcd, key, MOVE_ETCD_MS, &value, &len, &rev, err);
  if (rc != ERR_OK || !value) return rc;
  *found = true;
  cJSON *j = cJSON_ParseWithLength(value, len);
  free(value);
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "from");
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "to");
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "target");
  if (cJSON_IsNumber(f) && cJSON_IsNumber(t) && cJSON_IsString(g) &&
      same_request(rq, (uint32_t)f->valuedouble, (uint32_t)t->valuedouble, g->valuestring,
                   err) != ERR_OK) {
    rc = ERR_PRECONDITION;
  } else if (cJSON_IsString(e) && e->valuestring[0]) {
    rc = err_fail(err, ERR_ABORTED, ERR_R_MOVE_ROLLED_BACK,
                  "the move of request_id %s was rolled back: %s", rid, e->valuestring);
  } else {
    const cJSON *v;
    out->version = (v = cJSON_GetObjectItemCaseSensitive(j, "version")) ? (uint64_t)v->valuedouble : 0;
    out->steps_moved =
        (v = cJSON_GetObjectItemCaseSensitive(j, "steps_moved")) ? (uint64_t)v->valuedouble : 0;
    out->sagas_moved =
        (v = cJSON_GetObjectItemCaseSensitive(j, "sagas_moved")) ? (uint64_t)v->valuedouble : 0;
    out->paused_ms =
        (v = cJSON_GetObjectItemCaseSensitive(j, "paused_ms")) ? (int64_t)v->valuedouble : 0;
  }
  cJSON_Delete(j);
  return rc;
}

/* Waits for the result of rq's request id until deadline. */
static err_code wait_result(node_move *m, const slot_move_req *rq, int64_t deadline,
                            slot_move_res *out, err_t *err) {
  const char *rid = rq->request_id;
  for (;;) {
    bool found = false;
    err_t e;
    err_clear(&e);
    err_code rc = result_of(m, rq, &found, out, &e);
    if (found) {
      if (rc != ERR_OK) *err = e;
      return rc;
    }
    if (clock_mono_ms() + 300 >= deadline) break;
    struct timespec ts = clock_span_timespec(200);
    nanosleep(&ts, NULL);
  }
  const slotmap *now = node_slots_map(m->slots);
  return err_set(err, ERR_DEADLINE,
                 "the move of request_id %s goes on (%s): call again with the same request_id to "
                 "wait for its result",
                 rid, now->move ? slot_move_phase_word(now->move->phase) : "ending");
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
static err_code stores_ready(node_move *m, int src, int dst, int64_t deadline, err_t *err) {
  char what[96];
  snprintf(what, sizeof what, "group %s", m->g[src].name);
  err_code rc = store_pg_move_check(m->g[src].conninfo, true, what, deadline, err);
  if (rc != ERR_OK) return rc;
  snprintf(what, sizeof what, "group %s", m->g[dst].name);
  return store_pg_move_check(m->g[dst].conninfo, false, what, deadline, err);
}

err_code node_move_request(node_move *m, const slot_move_req *rq, int64_t deadline,
                           slot_move_res *out, err_t *err) {
  memset(out, 0, sizeof *out);
  char why[320];
  if (!slot_move_request_id_ok(rq->request_id, why, sizeof why))
    return err_set(err, ERR_INVALID, "%s", why);
  err_code rc = ERR_OK;
  for (int attempt = 0; attempt < 5; attempt++) {
    slotmap *map = NULL;
    int64_t rev = 0;
    if ((rc = nm__map_get(m, &map, &rev, err)) != ERR_OK) return rc;
    if (!map) return err_set(err, ERR_UNAVAILABLE, "no slot map in etcd yet");
    if (map->move && strcmp(map->move->request_id, rq->request_id) == 0) {
      rc = same_request(rq, map->move->from, map->move->to, map->move->target, err);
      slotmap_free(map);
      if (rc != ERR_OK) return rc;
      rc = wait_result(m, rq, deadline, out, err);
      out->replayed = rc == ERR_OK;
      return rc;
    }
    /* the result after the map: a move ends (leaves the map) only after its result is kept, so
     * a move of this request_id that is not in the map read above has its result by now */
    bool found = false;
    rc = result_of(m, rq, &found, out, err);
    if (found || rc != ERR_OK) {
      slotmap_free(map);
      out->replayed = found && rc == ERR_OK;
      return rc;
    }
    char source[SLOTMAP_NAME_MAX] = "";
    slot_move_check_result cr = slotmap_move_check(map, rq->from, rq->to, rq->group, is_group, m,
                                                   source, why, sizeof why);
    if (cr != MOVE_CHECK_OK) {
      slotmap_free(map);
      if (cr == MOVE_CHECK_BUSY)
        return err_fail(err, ERR_PRECONDITION, ERR_R_MOVE_IN_PROGRESS, "%s", why);
      return err_set(err, ERR_INVALID, "%s", why);
    }
    int src = nm__group(m, source), dst = nm__group(m, rq->group);
    int64_t until = clock_mono_ms() + MOVE_STORE_MS;
    if (until > deadline) until = deadline;
    if ((rc = stores_ready(m, src, dst, until, err)) != ERR_OK) {
      slotmap_free(map);
      return rc;
    }
    if (rq->dry_run) {
      out->version = map->version;
      slotmap_free(map);
      return store_pg_move_count(m->g[src].conninfo, rq->from, rq->to, &out->steps_moved,
                                 &out->sagas_moved, until, err);
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
    mv.max_rows_per_s = rq->max_rows_per_s ? rq->max_rows_per_s : (uint32_t)m->o->move_max_rate;
    slotmap *next = slotmap_move_begin(map, &mv);
    slotmap_free(map);
    if (!next) return err_oom(err);
    bool swapped = false;
    rc = nm__map_put(m, next, rev, &swapped, err);
    slotmap_free(next);
    if (rc != ERR_OK) return rc;
    if (!swapped) continue; /* the map changed meanwhile: check again */
    char range[32];
    snprintf(range, sizeof range, "%u-%u", mv.from, mv.to);
    log_kv(LOG_INFO, "slot move planned", "request_id", mv.request_id, "slots", range, "from",
           mv.source, "to", mv.target, "move", mv.id, (const char *)NULL);
    return wait_result(m, rq, deadline, out, err);
  }
  return err_set(err, ERR_UNAVAILABLE, "the slot map kept changing: try again");
}
