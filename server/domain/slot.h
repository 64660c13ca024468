/* slot.h — which slot a saga lives in (docs/api.md §17).
 *
 * A cluster has S slots (1..65536), fixed when it is first created. The slot of a saga (and of
 * every one of its steps) is fnv1a64(tenant + "\0" + global_id) mod S; BeginSaga's slot is the
 * same over its request id. FNV-1a 64-bit: offset basis 14695981039346656037, prime
 * 1099511628211, over the bytes. Other tools (the SDKs, scripts) compute it too: the function is
 * part of the contract, not a detail: its one text is proto/idem/v1/slot.h, shared with libidem.
 */
#ifndef IDEM_DOMAIN_SLOT_H
#define IDEM_DOMAIN_SLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SLOTS_MIN 1
#define SLOTS_MAX 65536
#define SLOTS_DEFAULT 256

#define SLOT_FNV_OFFSET UINT64_C(14695981039346656037)
#define SLOT_FNV_PRIME UINT64_C(1099511628211)

/* FNV-1a 64 of n bytes, continuing from h (SLOT_FNV_OFFSET to start). */
uint64_t slot_fnv1a64(const void *p, size_t n, uint64_t h);

/* fnv1a64(tenant + "\0" + id) mod slots; NULL reads as "". slots must be >= 1. */
uint32_t slot_of(const char *tenant, const char *id, uint32_t slots);

/* Whether id is a slot move's id: "m" and 16 lowercase hex digits. It names PostgreSQL objects
 * (idem_move_<id>) in SQL text, so the store checks it again before any SQL uses it. */
#define SLOT_MOVE_ID_LEN 17
bool slot_move_id_valid(const char *id);

#endif
