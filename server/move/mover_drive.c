/* mover_drive.c — the phases of a move on the leader of its source group (mover.h). Every
 * store step is idempotent, so a phase cut short is repeated from its start: by this node at its
 * next look (finishing, rolling back) or by the group's next leader. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../metrics/metrics.h"
#include "../slots/move_throttle.h"
#include "../store/store.h"
#include "../util/clock.h"
#include "../util/log.h"
#include "mover_internal.h"

typedef struct drive {
  mover *m;
  slotmap *map; /* the map in etcd as last written or read */
  int64_t rev;
  slot_move mv; /* the record being written */
  const mover_group *src, *dst;
  const store_move_ops *st; /* the backend's move calls */
  store_move *ss;           /* one connection to each store for the drive */
  char range[32];
} drive;

static int64_t store_deadline(void) {
  return clock_mono_ms() + MOVE_STORE_MS;
}

/* Whether to run a store step that failed once more (every step is idempotent): after a lost
 * connection, up to STEP_TRIES times STEP_AGAIN_MS apart. A new leader of either group ends the
 * other coordinators' transactions on its store when it raises its fence, and the leadership of
 * the target (balanced between the nodes) moving must not roll the move back; a new leader of
 * the source fences the next try. */
#define STEP_TRIES 3
#define STEP_AGAIN_MS 200
static bool again(drive *d, err_t *err, int *tries) {
  if (err->reason != ERR_R_STORE_UNAVAILABLE || ++*tries >= STEP_TRIES) return false;
  log_kv(LOG_INFO, "slot move: a store step lost its connection; trying again", "move", d->mv.id,
         "error", err->msg, (const char *)NULL);
  err_clear(err);
  return !mover__pause(d->m, STEP_AGAIN_MS);
}

static void log_move(const drive *d, log_level lv, const char *what, const char *error) {
  log_kv(lv, what, "move", d->mv.id, "request_id", d->mv.request_id, "slots", d->range, "from",
         d->mv.source, "to", d->mv.target, "phase", slot_move_phase_word(d->mv.phase), "error",
         error ? error : "", (const char *)NULL);
}

/* Writes the next map make(map, mv) at the revision read; false when the map changed (another
 * driver: this one stops) or etcd did not answer (the next look decides again). */
static bool advance(drive *d, slotmap *(*make)(const slotmap *, const slot_move *)) {
  slotmap *next = make(d->map, &d->mv);
  if (!next) return false;
  bool swapped = false;
  err_t err;
  err_clear(&err);
  if (slot_service_swap(d->m->slots, next, d->rev, &swapped, &err) != ERR_OK || !swapped) {
    log_move(d, LOG_WARN, "slot move: the map changed under this driver; stopping here",
             err.msg[0] ? err.msg : "another writer");
    slotmap_free(next);
    return false;
  }
  slotmap *now = NULL;
  int64_t rev = 0;
  if (slot_service_read(d->m->slots, &now, &rev, &err) != ERR_OK || !now ||
      now->version != next->version) {
    slotmap_free(now);
    slotmap_free(next);
    return false;
  }
  slotmap_free(next);
  slotmap_free(d->map);
  d->map = now;
  d->rev = rev;
  return true;
}

static slotmap *end_map(const slotmap *m, const slot_move *mv) {
  (void)mv;
  return slotmap_move_end(m);
}

/* Keeps the move's result for its request id (created once; kept when there already). */
static bool keep_result(drive *d, const char *error) {
  char *json = slot_move_result_json(&d->mv, d->map->version, error);
  if (!json) return false;
  err_t err;
  err_clear(&err);
  err_code rc = slot_service_keep_result(d->m->slots, d->mv.request_id, json, &err);
  free(json);
  return rc == ERR_OK;
}

/* Undoes everything of the move (ROLLING_BACK), the source first (it serves the slots again and
 * keeps no WAL for the move even while the target cannot be reached), then the target's
 * subscription, copy and block; then the map without the move. Repeated until it gets through. */
static void roll_back(drive *d) {
  err_t err;
  err_clear(&err);
  store_move *ss = d->ss;
  int64_t deleted = 0;
  if (d->st->unblock(ss, MOVE_SIDE_SOURCE, false, store_deadline(), &err) != ERR_OK ||
      d->st->unpublish(ss, store_deadline(), &err) != ERR_OK ||
      d->st->unsubscribe(ss, store_deadline(), &err) != ERR_OK ||
      d->st->delete_rows(ss, MOVE_SIDE_TARGET, true, &deleted, store_deadline(), &err) != ERR_OK ||
      d->st->unblock(ss, MOVE_SIDE_TARGET, false, store_deadline(), &err) != ERR_OK) {
    log_move(d, LOG_WARN, "slot move: rolling back, a store did not answer; trying again", err.msg);
    return;
  }
  d->mv.steps_moved = d->mv.sagas_moved = 0;
  if (!keep_result(d, d->mv.note[0] ? d->mv.note : "rolled back")) return;
  if (advance(d, end_map)) {
    metrics_move_ended(false);
    log_move(d, LOG_WARN, "slot move rolled back", d->mv.note);
  }
}

/* Starts rolling back, saying why. */
static void give_up(drive *d, const char *why) {
  snprintf(d->mv.note, sizeof d->mv.note, "%s", why);
  log_move(d, LOG_WARN, "slot move: rolling back", why);
  d->mv.phase = MOVE_ROLLING_BACK;
  if (advance(d, slotmap_move_phase)) roll_back(d);
}

/* Ends a switched move: the target serves, the source's rows and publication go. */
static void finish(drive *d) {
  err_t err;
  err_clear(&err);
  store_move *ss = d->ss;
  int64_t deleted = 0;
  if (d->st->unsubscribe(ss, store_deadline(), &err) != ERR_OK ||
      d->st->unblock(ss, MOVE_SIDE_TARGET, true, store_deadline(), &err) != ERR_OK ||
      d->st->delete_rows(ss, MOVE_SIDE_SOURCE, true, &deleted, store_deadline(), &err) != ERR_OK ||
      d->st->delete_rows(ss, MOVE_SIDE_TARGET, false, &deleted, store_deadline(), &err) != ERR_OK ||
      d->st->unpublish(ss, store_deadline(), &err) != ERR_OK) {
    log_move(d, LOG_WARN, "slot move: finishing, a store did not answer; trying again", err.msg);
    return;
  }
  if (!keep_result(d, NULL)) return;
  if (advance(d, end_map)) {
    metrics_move_ended(true);
    char v[64];
    snprintf(v, sizeof v, "paused %lld ms", (long long)d->mv.paused_ms);
    log_move(d, LOG_INFO, "slot move finished", v);
  }
}

/* Whether the server behind conninfo is still the one named was (no failover since). Its
 * identity is asked again for up to wait_ms while it does not answer (a promotion under way);
 * not reachable by then: true, the move's own store errors decide. */
static bool same_server(drive *d, store_move_side which, const char *was, const char *side,
                        int64_t wait_ms, char *why, size_t cap) {
  char now[128];
  err_t err;
  int64_t until = clock_mono_ms() + wait_ms;
  while (d->st->identity(d->ss, which, now, sizeof now, store_deadline(), &err) != ERR_OK)
    if (clock_mono_ms() >= until || mover__pause(d->m, 200)) return true;
  if (strcmp(now, was) == 0) return true;
  snprintf(why, cap,
           "the %s's PostgreSQL failed over (server %s, now %s): logical replication slots do not "
           "survive a PostgreSQL 15 failover",
           side, was, now);
  return false;
}

/* Whether either store failed over since the copy began (why says which), waiting up to
 * wait_ms for each to answer. */
static bool failed_over(drive *d, int64_t wait_ms, char *why, size_t cap) {
  if (!d->mv.src_server[0] || !d->mv.dst_server[0]) return false;
  return !same_server(d, MOVE_SIDE_SOURCE, d->mv.src_server, "source", wait_ms, why, cap) ||
         !same_server(d, MOVE_SIDE_TARGET, d->mv.dst_server, "target", wait_ms, why, cap);
}

/* Rolls back after a store error before the switch, naming a failover of either store as the
 * cause when there was one (the error itself is then only its symptom, e.g. "connection
 * refused" while the standby is being promoted). */
static void give_up_store(drive *d, const char *error) {
  char why[300];
  give_up(d, failed_over(d, MOVE_STORE_MS, why, sizeof why) ? why : error);
}

static void report_progress(drive *d, uint64_t rows, int64_t lag) {
  slot_service_put_progress(d->m->slots, rows, lag);
}

/* The target's side of the handoff: its rows counted, its store opened to the slots. */
static err_code open_target(drive *d, err_t *err) {
  err_code rc = d->st->count(d->ss, MOVE_SIDE_TARGET, &d->mv.steps_moved, &d->mv.sagas_moved,
                             store_deadline(), err);
  if (rc == ERR_OK) rc = d->st->unblock(d->ss, MOVE_SIDE_TARGET, true, store_deadline(), err);
  return rc;
}

/* The copy's start (or its resumption: each call is idempotent): the publication, the
 * subscription. */
static err_code begin_copy(drive *d, err_t *err) {
  err_code rc = d->st->publish(d->ss, store_deadline(), err);
  if (rc == ERR_OK) rc = d->st->subscribe(d->ss, store_deadline(), err);
  return rc;
}

/* Both stores' servers, into the record (the copy begins on them). */
static err_code identify(drive *d, err_t *err) {
  err_code rc = d->st->identity(d->ss, MOVE_SIDE_SOURCE, d->mv.src_server, sizeof d->mv.src_server,
                                store_deadline(), err);
  if (rc == ERR_OK)
    rc = d->st->identity(d->ss, MOVE_SIDE_TARGET, d->mv.dst_server, sizeof d->mv.dst_server,
                         store_deadline(), err);
  return rc;
}

/* The handoff: the source refuses, the last changes arrive, the target serves. The target's
 * subscription is dropped after the switch (finish: before the source's rows are deleted, whose
 * deletes it would otherwise carry over), so that it is not part of the pause. */
static void hand_off(drive *d) {
  d->mv.phase = MOVE_BLOCKED;
  d->mv.blocked_ms = clock_wall_ms();
  int64_t t0 = clock_mono_ms();
  if (!advance(d, slotmap_move_phase)) return;
  err_t err;
  err_clear(&err);
  int64_t t_map = clock_mono_ms();
  err_code rc;
  int tries = 0;
  while ((rc = d->st->block(d->ss, atomic_load(d->src->epoch), store_deadline(), &err)) != ERR_OK &&
         again(d, &err, &tries)) {
  }
  if (rc != ERR_OK) {
    if (err.reason == ERR_R_FENCED) return; /* a newer leader of the source decides */
    give_up_store(d, err.msg);
    return;
  }
  if (mover__hold(d->m, MOVE_BLOCKED)) return;
  int64_t t_block = clock_mono_ms();
  bool arrived = false;
  /* the target's session LISTENs for the mark's arrival (no polling), in slices so that a
   * stopping node does not wait out the whole time; a store that did not answer is asked again
   * 50 ms later */
  while (!arrived) {
    int64_t now = clock_mono_ms(),
            slice = now + 250 < t0 + MOVE_MARK_MAX_MS ? now + 250 : t0 + MOVE_MARK_MAX_MS;
    bool answered = d->st->wait_marked(d->ss, slice, &arrived, &err) == ERR_OK;
    if (arrived) break;
    if (clock_mono_ms() - t0 > MOVE_MARK_MAX_MS) {
      give_up_store(d, "the last changes did not reach the target within 15 s");
      return;
    }
    if (answered ? atomic_load(&d->m->stopping) : mover__pause(d->m, 50))
      return; /* stopping: the next leader rolls back */
  }
  int64_t t_drain = clock_mono_ms();
  /* before the commit point both stores must be known to be the ones the copy began on: one
   * not answering now (a standby being promoted) is waited for, not assumed unchanged */
  char why[300];
  if (failed_over(d, MOVE_STORE_MS, why, sizeof why)) {
    give_up(d, why);
    return;
  }
  int64_t t_check = clock_mono_ms();
  tries = 0;
  while ((rc = open_target(d, &err)) != ERR_OK && again(d, &err, &tries)) {
  }
  if (rc != ERR_OK) {
    give_up_store(d, err.msg);
    return;
  }
  d->mv.phase = MOVE_SWITCHED;
  int64_t t_ready = clock_mono_ms();
  d->mv.paused_ms = t_ready - t0;
  if (!advance(d, slotmap_move_switch)) return;
  char ms[5][24];
  int64_t at[] = {t0, t_map, t_block, t_drain, t_check, t_ready};
  for (int i = 0; i < 5; i++) snprintf(ms[i], sizeof ms[i], "%lld", (long long)(at[i + 1] - at[i]));
  log_kv(LOG_INFO, "slot move switched: the target serves the slots", "move", d->mv.id, "slots",
         d->range, "map_ms", ms[0], "block_ms", ms[1], "drain_ms", ms[2], "check_ms", ms[3],
         "serve_ms", ms[4], (const char *)NULL);
  if (mover__hold(d->m, MOVE_SWITCHED)) return;
  finish(d);
}

/* Pauses or runs the subscription as the throttle says (slots/move_throttle.h). *paused: -1
 * not known (a drive's first reading applies the answer either way, so that a subscription left
 * paused runs again), else 0 / 1; an ALTER that fails is tried again at the next reading. */
static void pace(drive *d, move_throttle *th, int *paused, int64_t now, uint64_t rows, int64_t lag,
                 bool synced) {
  bool want = move_throttle_step(th, now, rows, lag, synced);
  if (*paused == (int)want) return;
  err_t err;
  err_clear(&err);
  if (d->st->pause(d->ss, want, store_deadline(), &err) != ERR_OK) return;
  *paused = want;
  char v[64];
  snprintf(v, sizeof v, "%u of %u rows/s", (unsigned)move_throttle_rate(th), d->mv.max_rows_per_s);
  log_kv(LOG_INFO, want ? "slot move: the throttle pauses the copy" : "slot move: the copy runs",
         "move", d->mv.id, "rows", v, (const char *)NULL);
}

/* Copying: publication, subscription, catch-up; then the handoff. */
static void run(drive *d) {
  err_t err;
  err_clear(&err);
  char why[300];
  err_code rc;
  int tries = 0;
  while ((rc = begin_copy(d, &err)) != ERR_OK && again(d, &err, &tries)) {
  }
  if (rc != ERR_OK) {
    give_up(d, err.msg);
    return;
  }
  log_move(d, LOG_INFO, "slot move copying", NULL);
  if (mover__hold(d->m, MOVE_COPYING)) return;
  int64_t t0 = clock_mono_ms(), synced_at = 0, failing_since = 0, checked = t0;
  move_throttle th;
  move_throttle_init(&th, d->mv.max_rows_per_s, t0);
  int paused = -1;
  for (;;) {
    /* each round: the progress read, then the throttle (pace) pauses or runs the subscription */
    if (mover__pause(d->m, 200)) return; /* stopping: the next leader resumes it */
    if (!elect_is_leader(d->src->el, NULL)) {
      log_move(d, LOG_WARN,
               "slot move: no longer the source group's leader; its next leader "
               "resumes the copy",
               NULL);
      return;
    }
    int64_t now = clock_mono_ms();
    if (now - t0 - th.paused_total_ms > MOVE_COPY_MAX_MS) {
      give_up(d, "the copy did not catch up within 10 minutes");
      return;
    }
    if (now - checked >= 2000) {
      checked = now;
      if (failed_over(d, 0, why, sizeof why)) {
        give_up(d, why);
        return;
      }
    }
    bool synced = false;
    int64_t lag = -1;
    uint64_t rows = 0;
    rc = d->st->progress(d->ss, &synced, &lag, &rows, store_deadline(), &err);
    if (rc == ERR_PRECONDITION) {
      give_up(d, err.msg);
      return;
    }
    if (rc != ERR_OK) {
      if (!failing_since) failing_since = now;
      if (now - failing_since > MOVE_ERRORS_MAX_MS) {
        give_up_store(d, err.msg);
        return;
      }
      continue;
    }
    failing_since = 0;
    report_progress(d, rows, lag);
    pace(d, &th, &paused, now, rows, lag, synced);
    if (!synced || paused != 0) continue;
    if (!synced_at) synced_at = now;
    if ((lag >= 0 && lag <= MOVE_LAG_OK) || now - synced_at > MOVE_LAG_WAIT_MS) break;
  }
  hand_off(d);
}

/* Copying found in the map (its driver died, lost the source group, or this node's drive
 * stopped after a map read that failed or a swap of unknown outcome): the copy is resumed from
 * where the subscription stands, by this node as the new driver; rolled back only when a store
 * failed over since the copy began (its replication slot is gone with it) or the target or its
 * replication cannot be set up again (run: begin_copy, then the progress checks). */
static void resume(drive *d) {
  char why[300];
  bool mine = strcmp(d->mv.driver, d->m->me) == 0;
  log_kv(LOG_INFO, "slot move: resuming the copy", "move", d->mv.id, "slots", d->range, "driver",
         d->mv.driver[0] ? d->mv.driver : "unknown", "me", d->m->me, "same_driver",
         mine ? "yes" : "no", (const char *)NULL);
  err_t err;
  err_clear(&err);
  if (!d->mv.src_server[0] && identify(d, &err) != ERR_OK) {
    log_move(d, LOG_WARN, "slot move: cannot resume yet, a store does not answer", err.msg);
    return; /* the next look tries again */
  }
  if (failed_over(d, MOVE_STORE_MS, why, sizeof why)) {
    give_up(d, why);
    return;
  }
  if (!mine) {
    memcpy(d->mv.driver, d->m->me, sizeof d->mv.driver);
    if (!advance(d, slotmap_move_phase)) return;
  }
  run(d);
}

void mover__drive(mover *m, const slotmap *map, int64_t rev) {
  drive d = {.m = m, .st = m->st, .rev = rev, .mv = *map->move};
  int s = mover__group(m, d.mv.source), t = mover__group(m, d.mv.target);
  err_t err;
  err_clear(&err);
  if (s < 0 || t < 0 || !(d.map = slotmap_copy(map)) ||
      d.st->open(m->g[s].conninfo, m->g[t].conninfo, d.mv.id, d.mv.from, d.mv.to, &d.ss, &err) !=
          ERR_OK) {
    if (err.msg[0])
      log_kv(LOG_ERROR, "slot move: cannot drive it", "move", d.mv.id, "error", err.msg,
             (const char *)NULL);
    slotmap_free(d.map);
    return;
  }
  d.src = &m->g[s];
  atomic_store(&m->driving, s);
  d.dst = &m->g[t];
  snprintf(d.range, sizeof d.range, "%u-%u", d.mv.from, d.mv.to);
  switch (d.mv.phase) {
    case MOVE_PLANNED:
      if (identify(&d, &err) != ERR_OK) {
        give_up(&d, err.msg);
        break;
      }
      d.mv.phase = MOVE_COPYING;
      memcpy(d.mv.driver, m->me, sizeof d.mv.driver);
      if (advance(&d, slotmap_move_phase)) run(&d);
      break;
    case MOVE_COPYING:
      resume(&d);
      break;
    case MOVE_BLOCKED: {
      char why[200];
      snprintf(why, sizeof why,
               "cut short in phase %s (its driver %s stopped or lost the source group's "
               "leadership)",
               slot_move_phase_word(d.mv.phase), d.mv.driver[0] ? d.mv.driver : "unknown");
      give_up(&d, why);
      break;
    }
    case MOVE_SWITCHED:
      finish(&d);
      break;
    case MOVE_ROLLING_BACK:
      roll_back(&d);
      break;
    default:
      break;
  }
  slotmap_free(d.map);
  d.st->close(d.ss);
  atomic_store(&m->driving, -1);
}
