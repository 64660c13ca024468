#include "metrics.h"

#include <stdatomic.h>
#include <string.h>

static atomic_uint_fast64_t g_unguarded;
static atomic_uint_fast64_t g_reaped_steps;
static atomic_uint_fast64_t g_reaped_sagas;

void metrics_unguarded(void) { atomic_fetch_add(&g_unguarded, 1); }

void metrics_reaped(const char *kind, uint64_t n) {
  atomic_fetch_add(strcmp(kind, "sagas") == 0 ? &g_reaped_sagas : &g_reaped_steps, n);
}

uint64_t metrics_unguarded_total(void) { return atomic_load(&g_unguarded); }

uint64_t metrics_reaped_total(const char *kind) {
  return atomic_load(strcmp(kind, "sagas") == 0 ? &g_reaped_sagas : &g_reaped_steps);
}
