/* slotmove.c — see slotmove.h. JSON through cJSON. */
#include "slotmove.h"
#include "slots_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

slot_move_check_result slotmap_move_check(const slotmap *m, uint32_t from, uint32_t to,
                                          const char *target,
                                          bool (*is_group)(void *arg, const char *name),
                                          void *arg, char *source, char *why, size_t cap) {
  if (m->move) {
    slots__why(why, cap, "a move is under way: slots %u-%u from %s to %s (request_id %s, %s)",
            m->move->from, m->move->to, m->move->source, m->move->target, m->move->request_id,
            slot_move_phase_word(m->move->phase));
    return MOVE_CHECK_BUSY;
  }
  if (from >= m->slots) {
    slots__why(why, cap, "from: slot %u is out of range (the cluster has slots 0-%u)", from,
            m->slots - 1);
    return MOVE_CHECK_INVALID;
  }
  if (to >= m->slots || to < from) {
    slots__why(why, cap, "to: slot %u is out of range (want from %u to %u)", to, from, m->slots - 1);
    return MOVE_CHECK_INVALID;
  }
  if (!target || !target[0] || !slotmap_name_ok(target, NULL, 0) || !is_group(arg, target)) {
    slots__why(why, cap, "group: '%s' is not a store group of this cluster", target ? target : "");
    return MOVE_CHECK_INVALID;
  }
  const slot_range *r = slotmap_range_of(m, from);
  for (uint32_t x = from; x <= to; x = r->to + 1) {
    const slot_range *rx = slotmap_range_of(m, x);
    if (strcmp(rx->group, r->group) != 0) {
      slots__why(why, cap,
              "from, to: slots %u-%u span groups %s and %s (slot %u): move one group's slots at "
              "a time",
              from, to, r->group, rx->group, x);
      return MOVE_CHECK_INVALID;
    }
    r = rx;
    if (r->to >= to) break;
  }
  r = slotmap_range_of(m, from);
  if (strcmp(r->group, target) == 0) {
    slots__why(why, cap, "group: slots %u-%u are group %s's already", from, to, target);
    return MOVE_CHECK_INVALID;
  }
  snprintf(source, SLOTMAP_NAME_MAX, "%s", r->group);
  return MOVE_CHECK_OK;
}

/* A map with room for n ranges, m's header and record copied (version + 1). */
static slotmap *next_of(const slotmap *m, size_t n, const slot_move *mv) {
  slotmap *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->ranges = calloc(n ? n : 1, sizeof *c->ranges);
  c->move = mv ? malloc(sizeof *c->move) : NULL;
  if (!c->ranges || (mv && !c->move)) {
    slotmap_free(c);
    return NULL;
  }
  if (mv) *c->move = *mv;
  c->version = m->version + 1;
  c->slots = m->slots;
  return c;
}

static void push(slotmap *c, uint32_t from, uint32_t to, const slot_range *like) {
  slot_range *r = &c->ranges[c->n_ranges++];
  *r = *like;
  r->from = from;
  r->to = to;
}

slotmap *slotmap_move_begin(const slotmap *m, const slot_move *mv) {
  slotmap *c = next_of(m, m->n_ranges + 2, mv);
  if (!c) return NULL;
  for (size_t i = 0; i < m->n_ranges; i++) {
    const slot_range *r = &m->ranges[i];
    if (r->to < mv->from || r->from > mv->to) {
      push(c, r->from, r->to, r);
      continue;
    }
    if (r->from < mv->from) push(c, r->from, mv->from - 1, r);
    if (r->from <= mv->from) { /* the moving range, once */
      slot_range mr = *r;
      mr.moving = true;
      snprintf(mr.to_group, sizeof mr.to_group, "%s", mv->target);
      push(c, mv->from, mv->to, &mr);
    }
    if (r->to > mv->to) push(c, mv->to + 1, r->to, r);
  }
  return c;
}

slotmap *slotmap_move_phase(const slotmap *m, const slot_move *mv) {
  slotmap *c = next_of(m, m->n_ranges, mv);
  if (!c) return NULL;
  for (size_t i = 0; i < m->n_ranges; i++) push(c, m->ranges[i].from, m->ranges[i].to, &m->ranges[i]);
  return c;
}

slotmap *slotmap_move_switch(const slotmap *m, const slot_move *mv) {
  slotmap *c = slotmap_move_phase(m, mv);
  if (!c) return NULL;
  for (size_t i = 0; i < c->n_ranges; i++) {
    slot_range *r = &c->ranges[i];
    if (r->from == mv->from && r->to == mv->to && r->moving) {
      snprintf(r->group, sizeof r->group, "%s", mv->target);
      r->moving = false;
      r->to_group[0] = '\0';
    }
  }
  return c;
}

slotmap *slotmap_move_end(const slotmap *m) {
  slotmap *c = next_of(m, m->n_ranges, NULL);
  if (!c) return NULL;
  for (size_t i = 0; i < m->n_ranges; i++) {
    slot_range r = m->ranges[i];
    r.moving = false;
    r.to_group[0] = '\0';
    if (c->n_ranges && strcmp(c->ranges[c->n_ranges - 1].group, r.group) == 0)
      c->ranges[c->n_ranges - 1].to = r.to; /* a neighbour of the same group */
    else
      push(c, r.from, r.to, &r);
  }
  return c;
}
