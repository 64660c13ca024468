/* fuzz_store.h — the store behind the RPC fuzz target: every store_ops entry, in memory, no
 * database, single-threaded.
 *
 * The step transactions, lookups and sagas are tests/unit's memstore (support_memstore.h); the
 * rest (ListSteps, the audit trail, policies, counts, reaping) answer small plausible results.
 * It is not a model of the database: it exists so that decoding, validation and the decisions
 * run end to end without Postgres. It also checks what coord/ hands a store (filters within
 * their limits, audit rows NUL-terminated) and aborts when that is broken, so the fuzzer
 * reports it.
 */
#ifndef IDEM_FUZZ_STORE_H
#define IDEM_FUZZ_STORE_H

#include <stdint.h>

#include "support_memstore.h"

/* A new store whose database clock reads now_ms, holding a few records and one saga of tenant
 * "default" (fuzz_store.c names them; the seed corpus uses the same keys). Free with
 * store_close(&m->base). Set m->fail_rc to make every call fail. */
memstore *fuzz_store_new(int64_t now_ms);

#endif
