/* node_move_map.c — the slot map in etcd as the mover reads and writes it, and the test hook
 * (node_move_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "../elect/etcd_kv.h"
#include "node_move_internal.h"

err_code nm__map_get(node_move *m, slotmap **out, int64_t *rev, err_t *err) {
  *out = NULL;
  char *value = NULL, why[256];
  size_t len = 0;
  err_code rc = etcd_kv_get(m->o->etcd, m->map_key, MOVE_ETCD_MS, &value, &len, rev, err);
  if (rc != ERR_OK || !value) return rc;
  *out = slotmap_parse(value, len, why, sizeof why);
  free(value);
  if (!*out) return err_set(err, ERR_INTERNAL, "the slot map in etcd is not valid: %s", why);
  return ERR_OK;
}

err_code nm__map_put(node_move *m, const slotmap *next, int64_t rev, bool *swapped, err_t *err) {
  *swapped = false;
  char *json = slotmap_json(next);
  if (!json) return err_oom(err);
  err_code rc = etcd_kv_swap(m->o->etcd, m->map_key, json, rev, MOVE_ETCD_MS, swapped, err);
  free(json);
  if (rc == ERR_OK && *swapped) {
    slotmap *mine = slotmap_copy(next);
    if (mine) node_slots_follow(m->slots, mine);
  }
  return rc;
}

int nm__group(const node_move *m, const char *name) {
  for (size_t i = 0; i < m->n; i++)
    if (strcmp(m->g[i].name, name) == 0) return (int)i;
  return -1;
}

bool nm__hold(node_move *m, slot_move_phase p) {
  if (m->hold_phase != (int)p || m->hold_ms <= 0) return false;
  return ticker_pause(m->t, m->hold_ms);
}

