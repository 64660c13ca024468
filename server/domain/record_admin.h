/* record_admin.h — the data model of incident response (docs/api.md §2 Admin: ListSteps,
 * ResolveStep, ListAudit), shared by coord/ and store/. Plain C, no gRPC, no libpq.
 *
 * Ownership: a step_list and an audit_list filled by a store function are owned by the caller
 * and freed with step_list_clear / audit_list_clear (safe on a zeroed value, idempotent).
 * Strings in a step_filter are borrowed for the duration of the call.
 */
#ifndef IDEM_RECORD_ADMIN_H
#define IDEM_RECORD_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"

#define AUDIT_ACTOR_MAX 128   /* actor: 1–128 printable characters (default: the tenant) */
#define AUDIT_REASON_MAX 1024 /* reason: 1–1024 bytes of UTF-8, no control characters */
#define AUDIT_ACTION_MAX 31   /* "resolve" */
#define BULK_ID_MAX 36        /* a ResolveSteps batch id: a UUIDv7 */
#define BULK_STEPS_MAX 10000  /* max_steps of one ResolveSteps */
#define BULK_SAMPLE_MAX 20    /* keys a ResolveSteps answer shows */
#define LIST_PAGE_DEFAULT 100
#define LIST_PAGE_MAX 1000

/* ListSteps, as the store runs it. Rows come in key order (global_id, service, operation,
 * phase) of one tenant, strictly after `after` when has_after: a row's key never changes, so
 * a cursor stays correct while rows are updated or inserted (keyset pagination). Records past
 * their retention are never listed. */
typedef struct step_filter {
  const char *tenant;        /* required */
  step_state state;          /* STATE_NONE = any */
  const char *service;       /* NULL or "" = any */
  const char *operation;     /* NULL or "" = any */
  const char *global_id;     /* NULL or "" = any */
  const char *trace_id;      /* NULL or "" = any; else begin or complete trace id equal to it */
  int64_t updated_before_ms; /* 0 = any; else updated_ms < this (Unix ms) */
  bool lease_expired_only;   /* IN_PROGRESS with lease_expires_ms <= the database clock */
  uint32_t limit;            /* rows wanted, 1..LIST_PAGE_MAX */
  size_t max_body_bytes;     /* 0 = no bound; else stop once the bodies read pass it (the row
                                that crosses it is still read: see saga_page) */
  bool has_after;
  step_key after; /* tenant ignored; global_id, service, operation, phase */
} step_filter;

/* Owned: records (each an owned record) and whether more rows follow the last one. */
typedef struct step_list {
  step_rec *recs;
  size_t n;
  bool more;
} step_list;

/* One row of the audit trail. In a store call's input it is filled by the caller (id, at_ms
 * are set by the store: the database clock); in an audit_list it is owned by the list. */
typedef struct audit_rec {
  int64_t id;    /* increasing; the keyset cursor of ListAudit */
  int64_t at_ms; /* database clock, Unix ms */
  char actor[AUDIT_ACTOR_MAX + 1];
  char action[AUDIT_ACTION_MAX + 1];
  step_key key; /* key.tenant is the row's tenant */
  char reason[AUDIT_REASON_MAX + 1];
  step_state from_state;
  step_state to_state;
  char batch_id[BULK_ID_MAX + 1]; /* "" unless the resolution was part of a ResolveSteps */
} audit_rec;

typedef struct audit_list {
  audit_rec *recs; /* owned array */
  size_t n;
  bool more;
} audit_list;

/* Counts for the gauges of /metrics, over all tenants (live records only). */
typedef struct step_counts {
  uint64_t in_progress;
  uint64_t unknown;
  uint64_t lease_expired; /* of in_progress: lease_expires_ms at or before the database clock */
} step_counts;

static inline void step_list_clear(step_list *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) step_rec_clear(&l->recs[i]);
  free(l->recs);
  memset(l, 0, sizeof *l);
}

static inline void audit_list_clear(audit_list *l) {
  if (!l) return;
  free(l->recs);
  memset(l, 0, sizeof *l);
}

/* A ResolveSteps answer as remembered under its request id (docs/api.md §12): the same request id
 * again gets it back (replayed) and resolves nothing. */
typedef struct bulk_rec {
  char tenant[REC_GLOBAL_ID_MAX + 1];
  char request_id[REC_REQUEST_ID_MAX + 1];
  char batch_id[BULK_ID_MAX + 1];
  uint32_t matched, resolved;
  step_key sample[BULK_SAMPLE_MAX]; /* tenant fields unused */
  size_t n_sample;
} bulk_rec;

#endif
