/* elect_single.c — the single-node elector: always the leader, one fixed epoch. */
#include <stdio.h>
#include <stdlib.h>

#include "elect.h"

typedef struct single_elect {
  elect base;
  uint64_t epoch;
  char addr[ELECT_ADDR_MAX];
} single_elect;

static err_code single_start(elect *e, err_t *err) {
  (void)e;
  (void)err;
  return ERR_OK;
}

static void single_status(elect *e, elect_status *out) {
  single_elect *s = (single_elect *)e;
  out->leader = true;
  out->epoch = s->epoch;
  snprintf(out->leader_addr, sizeof out->leader_addr, "%s", s->addr);
  out->election_ok = true;
}

static void single_resign(elect *e) {
  (void)e; /* nobody to hand over to: SIGTERM just drains */
}

static void single_free(elect *e) {
  free(e);
}

static const elect_ops single_ops = {
    .version = ELECT_OPS_VERSION,
    .start = single_start,
    .status = single_status,
    .resign = single_resign,
    .free = single_free,
};

elect *elect_single_new(uint64_t epoch, const char *advertise) {
  single_elect *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->base.ops = &single_ops;
  s->epoch = epoch;
  snprintf(s->addr, sizeof s->addr, "%s", advertise ? advertise : "");
  return &s->base;
}
