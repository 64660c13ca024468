/* slotmove_record.c — see slotmove_record.h. JSON through cJSON. */
#include "slotmove_record.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../domain/slot.h"
#include "slots_internal.h"

static const char *const phase_words[MOVE__PHASES] = {"planned", "copying", "blocked", "switched",
                                                      "rolling_back"};

const char *slot_move_phase_word(slot_move_phase p) {
  return (unsigned)p < MOVE__PHASES ? phase_words[p] : "invalid";
}

bool slot_move_request_id_ok(const char *rid, char *why, size_t cap) {
  size_t n = rid ? strlen(rid) : 0;
  if (n == 0 || n >= SLOT_MOVE_RID_MAX) {
    slots__why(why, cap, "request_id: required, 1 to %d bytes (got %zu)", SLOT_MOVE_RID_MAX - 1, n);
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    char ch = rid[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '.' || ch == '_' || ch == '-')) {
      slots__why(why, cap, "request_id: byte %zu is not one of A-Z a-z 0-9 . _ -", i + 1);
      return false;
    }
  }
  return true;
}

bool slot_move_id_ok(const char *id, char *why, size_t cap) {
  bool ok = slot_move_id_valid(id);
  if (!ok) slots__why(why, cap, "id: a move id is m and 16 lowercase hex digits");
  return ok;
}

static bool get_str(const cJSON *o, const char *name, char *out, size_t cap) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  if (!v) {
    out[0] = '\0';
    return true;
  }
  if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap) return false;
  snprintf(out, cap, "%s", v->valuestring);
  return true;
}

static bool get_num(const cJSON *o, const char *name, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  if (!v) {
    *out = 0;
    return true;
  }
  if (!cJSON_IsNumber(v)) return false;
  *out = v->valuedouble;
  return true;
}

bool slot_move_from_json(const cJSON *o, uint32_t slots, slot_move *mv, char *why, size_t cap) {
  memset(mv, 0, sizeof *mv);
  char phase[24];
  double from, to, started, blocked, paused, steps, sagas, rate;
  if (!cJSON_IsObject(o) || !get_str(o, "id", mv->id, sizeof mv->id) ||
      !get_str(o, "request_id", mv->request_id, sizeof mv->request_id) ||
      !get_str(o, "source", mv->source, sizeof mv->source) ||
      !get_str(o, "target", mv->target, sizeof mv->target) ||
      !get_str(o, "phase", phase, sizeof phase) ||
      !get_str(o, "driver", mv->driver, sizeof mv->driver) ||
      !get_str(o, "note", mv->note, sizeof mv->note) ||
      !get_str(o, "src_server", mv->src_server, sizeof mv->src_server) ||
      !get_str(o, "dst_server", mv->dst_server, sizeof mv->dst_server) || !get_num(o, "from", &from) ||
      !get_num(o, "to", &to) || !get_num(o, "started_ms", &started) ||
      !get_num(o, "blocked_ms", &blocked) || !get_num(o, "paused_ms", &paused) ||
      !get_num(o, "steps_moved", &steps) || !get_num(o, "sagas_moved", &sagas) ||
      !get_num(o, "max_rows_per_s", &rate) || rate < 0 || rate > UINT32_MAX) {
    slots__why(why, cap, "a member has the wrong type or is too long");
    return false;
  }
  mv->phase = MOVE__PHASES;
  for (int p = 0; p < MOVE__PHASES; p++)
    if (strcmp(phase, phase_words[p]) == 0) mv->phase = (slot_move_phase)p;
  if (mv->phase == MOVE__PHASES) {
    slots__why(why, cap, "phase: '%s' is not a phase", phase);
    return false;
  }
  if (!mv->id[0] || !mv->source[0] || !mv->target[0] || from < 0 || from > to || to >= slots) {
    slots__why(why, cap, "id, source, target and from <= to < %u are required", slots);
    return false;
  }
  if (!slot_move_id_ok(mv->id, why, cap)) return false;
  mv->from = (uint32_t)from;
  mv->to = (uint32_t)to;
  mv->started_ms = (int64_t)started;
  mv->blocked_ms = (int64_t)blocked;
  mv->paused_ms = (int64_t)paused;
  mv->steps_moved = (uint64_t)steps;
  mv->sagas_moved = (uint64_t)sagas;
  mv->max_rows_per_s = (uint32_t)rate;
  return true;
}

cJSON *slot_move_to_json(const slot_move *mv) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "id", mv->id);
  cJSON_AddStringToObject(o, "request_id", mv->request_id);
  cJSON_AddNumberToObject(o, "from", mv->from);
  cJSON_AddNumberToObject(o, "to", mv->to);
  cJSON_AddStringToObject(o, "source", mv->source);
  cJSON_AddStringToObject(o, "target", mv->target);
  cJSON_AddStringToObject(o, "phase", slot_move_phase_word(mv->phase));
  cJSON_AddStringToObject(o, "driver", mv->driver);
  cJSON_AddNumberToObject(o, "started_ms", (double)mv->started_ms);
  cJSON_AddNumberToObject(o, "blocked_ms", (double)mv->blocked_ms);
  cJSON_AddNumberToObject(o, "paused_ms", (double)mv->paused_ms);
  cJSON_AddNumberToObject(o, "steps_moved", (double)mv->steps_moved);
  cJSON_AddNumberToObject(o, "sagas_moved", (double)mv->sagas_moved);
  cJSON_AddStringToObject(o, "note", mv->note);
  if (mv->src_server[0]) cJSON_AddStringToObject(o, "src_server", mv->src_server);
  if (mv->dst_server[0]) cJSON_AddStringToObject(o, "dst_server", mv->dst_server);
  cJSON_AddNumberToObject(o, "max_rows_per_s", mv->max_rows_per_s);
  return o;
}

char *slot_move_result_json(const slot_move *mv, uint64_t version, const char *error) {
  cJSON *j = cJSON_CreateObject();
  if (!j) return NULL;
  cJSON_AddNumberToObject(j, "version", (double)version);
  cJSON_AddNumberToObject(j, "steps_moved", (double)mv->steps_moved);
  cJSON_AddNumberToObject(j, "sagas_moved", (double)mv->sagas_moved);
  cJSON_AddNumberToObject(j, "paused_ms", (double)mv->paused_ms);
  cJSON_AddStringToObject(j, "error", error ? error : "");
  cJSON_AddStringToObject(j, "move", mv->id);
  cJSON_AddNumberToObject(j, "from", (double)mv->from);
  cJSON_AddNumberToObject(j, "to", (double)mv->to);
  cJSON_AddStringToObject(j, "target", mv->target);
  char *json = cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  return json;
}

bool slot_move_result_parse(const char *json, size_t len, slot_move_result *out, char *why,
                            size_t cap) {
  memset(out, 0, sizeof *out);
  cJSON *j = cJSON_ParseWithLength(json, len);
  double version, steps, sagas, paused, from = 0, to = 0;
  const cJSON *v = NULL;
  bool ok = cJSON_IsObject(j) && get_num(j, "version", &version) && get_num(j, "steps_moved", &steps) &&
            get_num(j, "sagas_moved", &sagas) && get_num(j, "paused_ms", &paused) &&
            get_str(j, "error", out->error, sizeof out->error) &&
            get_str(j, "move", out->move, sizeof out->move) &&
            get_str(j, "target", out->target, sizeof out->target) &&
            get_num(j, "from", &from) && get_num(j, "to", &to) &&
            (v = cJSON_GetObjectItemCaseSensitive(j, "version")) && cJSON_IsNumber(v) &&
            cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "error")) && version >= 0 &&
            steps >= 0 && sagas >= 0 && from >= 0 && to >= from;
  if (ok) {
    out->version = (uint64_t)version;
    out->steps_moved = (uint64_t)steps;
    out->sagas_moved = (uint64_t)sagas;
    out->paused_ms = (int64_t)paused;
    out->has_params = out->target[0] != '\0';
    out->from = (uint32_t)from;
    out->to = (uint32_t)to;
  } else {
    slots__why(why, cap, "the kept result of a move is not one (version and error are required)");
  }
  cJSON_Delete(j);
  return ok;
}

