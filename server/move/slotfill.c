/* slotfill.c — see slotfill.h. */
#include "slotfill.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "../util/clock.h"
#include "../util/log.h"
#include "../util/ticker.h"

#define FILL_BATCH 2000
#define FILL_CALL_MS 10000
#define FILL_PAUSE_MS 20   /* between batches: leave the store to the calls */
#define FILL_RETRY_MS 1000 /* after a failed batch */

struct slotfill {
  const store_backend *db;
  uint32_t slots;
  slotfill_group g[SLOTMAP_GROUPS_MAX];
  size_t n;
  size_t group; /* the group being filled (the ticker's thread only) */
  long total;   /* its rows filled so far */
  ticker *t;
};

/* One batch of the current group; false once every group is done. */
static bool fill_once(void *arg) {
  slotfill *f = arg;
  long n = 0;
  err_t err;
  err_clear(&err);
  if (f->db->slots_fill(f->g[f->group].conninfo, f->slots, FILL_BATCH,
                        clock_mono_ms() + FILL_CALL_MS, &n, &err) != ERR_OK)
    return !ticker_pause(f->t, FILL_RETRY_MS);
  f->total += n;
  if (n > 0) return true;
  if (f->total > 0) {
    char num[24];
    snprintf(num, sizeof num, "%ld", f->total);
    log_kv(LOG_INFO, "gave rows written before slot groups their slot", "group",
           f->g[f->group].name, "rows", num, (const char *)NULL);
  }
  f->total = 0;
  return ++f->group < f->n;
}

slotfill *slotfill_start(const store_backend *db, uint32_t slots, const slotfill_group *g,
                         size_t n) {
  slotfill *f = n <= SLOTMAP_GROUPS_MAX ? calloc(1, sizeof *f) : NULL;
  if (f) {
    f->db = db;
    f->slots = slots;
    f->n = n;
    for (size_t i = 0; i < n; i++) f->g[i] = g[i];
  }
  if (f && !(f->t = ticker_start(FILL_PAUSE_MS, fill_once, f))) {
    free(f);
    f = NULL;
  }
  if (!f) log_kv(LOG_ERROR, "cannot start giving old rows their slot", (const char *)NULL);
  return f;
}

void slotfill_stop(slotfill *f) {
  if (!f) return;
  ticker_stop(f->t);
  free(f);
}
