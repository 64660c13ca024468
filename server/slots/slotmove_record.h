/* slotmove_record.h — a move's record (docs/api.md §18) as the slot map carries it: its phases,
 * its fields, its JSON object ("move" in the map's JSON) and the rule of its request id. Used by
 * slotmap.c (parsing and printing the map) and slotmove.c (the moves' maps). Pure data. */
#ifndef IDEM_SLOTS_SLOTMOVE_RECORD_H
#define IDEM_SLOTS_SLOTMOVE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum slot_move_phase {
  MOVE_PLANNED,
  MOVE_COPYING,
  MOVE_BLOCKED,
  MOVE_SWITCHED,
  MOVE_ROLLING_BACK,
  MOVE__PHASES
} slot_move_phase;

const char *slot_move_phase_word(slot_move_phase p);

#define SLOT_MOVE_GROUP_MAX 64 /* a group name, as SLOTMAP_NAME_MAX (slotmap.c checks) */
#define SLOT_MOVE_ID_MAX 24  /* "m" + 16 hex digits: names publication, slot, subscription */
#define SLOT_MOVE_RID_MAX 64 /* a request id: 1..63 bytes of [A-Za-z0-9._-] */

typedef struct slot_move {
  char id[SLOT_MOVE_ID_MAX];
  char request_id[SLOT_MOVE_RID_MAX];
  uint32_t from, to; /* inclusive */
  char source[SLOT_MOVE_GROUP_MAX], target[SLOT_MOVE_GROUP_MAX];
  slot_move_phase phase;
  char driver[64];    /* the node driving it ("" while planned) */
  int64_t started_ms; /* wall clock */
  int64_t blocked_ms; /* wall clock: when the source began refusing (blocked), else 0 */
  int64_t paused_ms;  /* blocked -> switched */
  uint64_t steps_moved, sagas_moved;
  char note[200]; /* why it rolls back */
  /* the stores' servers when the copy began ("<system id>/<timeline>", "" until known): a move
   * resumed by another driver compares them with the servers now (a failover loses the
   * replication slot in PostgreSQL 15) */
  char src_server[64], dst_server[64];
  uint32_t max_rows_per_s; /* the copy's throttle (slots/move_throttle.h); 0 = no limit */
} slot_move;

struct cJSON;
/* The record from / to its JSON object; false with why filled. */
bool slot_move_from_json(const struct cJSON *o, uint32_t slots, slot_move *mv, char *why,
                         size_t cap);
struct cJSON *slot_move_to_json(const slot_move *mv);

/* Whether id is a move id as slotmove makes them: "m" and 16 lowercase hex digits (it names the
 * publication, replication slot and subscription in SQL, so a record read from etcd with any
 * other id is refused before it reaches a store); false with why naming id. */
bool slot_move_id_ok(const char *id, char *why, size_t cap);

/* A move's result, kept for its request id at <prefix>/moves/<request_id> once it ended: its
 * counts, or the error that rolled it back, and what was asked (from, to, target: the same request
 * id with other parameters is refused). */
typedef struct slot_move_result {
  char move[SLOT_MOVE_ID_MAX];
  uint32_t from, to;
  char target[SLOT_MOVE_GROUP_MAX];
  bool has_params; /* results kept before they named their parameters: false */
  uint64_t version, steps_moved, sagas_moved;
  int64_t paused_ms;
  char error[240]; /* "" when it finished */
} slot_move_result;

/* The result of mv (ended at map version) in JSON (malloc'd; NULL on allocation failure). */
char *slot_move_result_json(const slot_move *mv, uint64_t version, const char *error);

/* Parses a kept result: false with why when it is not one (a result that cannot be read is an
 * error, never a success with zero counts). */
bool slot_move_result_parse(const char *json, size_t len, slot_move_result *out, char *why,
                            size_t cap);

/* Whether rid is a usable request id; false with why naming request_id. */
bool slot_move_request_id_ok(const char *rid, char *why, size_t cap);

#endif
