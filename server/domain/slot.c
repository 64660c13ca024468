/* slot.c — see slot.h: the contract's function (proto/idem/v1/slot.h), under the server's names. */
#include "slot.h"

#include <string.h>

#include "idem/v1/slot.h"

uint64_t slot_fnv1a64(const void *p, size_t n, uint64_t h) {
  return idem_v1_fnv1a64(p, n, h);
}

uint32_t slot_of(const char *tenant, const char *id, uint32_t slots) {
  return idem_v1_slot_of(tenant, id, slots);
}

bool slot_move_id_valid(const char *id) {
  size_t n = id ? strlen(id) : 0;
  bool ok = n == SLOT_MOVE_ID_LEN && id[0] == 'm';
  for (size_t i = 1; ok && i < n; i++)
    ok = (id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f');
  return ok;
}
