/* slotmap.c — see slotmap.h. JSON through cJSON. */
#include "slotmap.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../domain/slot.h"
#include "slotmove_record.h"
#include "slots_internal.h"

_Static_assert(SLOT_MOVE_GROUP_MAX == SLOTMAP_NAME_MAX, "a move names groups as the map does");

bool slotmap_name_ok(const char *name, char *why, size_t cap) {
  size_t n = name ? strlen(name) : 0;
  if (n == 0) {
    slots__why(why, cap, "a group name must not be empty");
    return false;
  }
  if (n >= SLOTMAP_NAME_MAX) {
    slots__why(why, cap, "group name '%.20s…' is %zu bytes, at most %d", name, n,
            SLOTMAP_NAME_MAX - 1);
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    char ch = name[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '.' || ch == '_' || ch == '-')) {
      slots__why(why, cap, "group name '%s': byte %zu is not one of A-Z a-z 0-9 . _ -", name, i + 1);
      return false;
    }
  }
  return true;
}

static slotmap *alloc_map(size_t n_ranges) {
  slotmap *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->ranges = calloc(n_ranges ? n_ranges : 1, sizeof *m->ranges);
  if (!m->ranges) {
    free(m);
    return NULL;
  }
  m->n_ranges = n_ranges;
  return m;
}

slotmap *slotmap_equal(uint32_t slots, const char *const *names, size_t n) {
  if (n == 0 || n > slots) return NULL;
  slotmap *m = alloc_map(n);
  if (!m) return NULL;
  m->version = 1;
  m->slots = slots;
  uint32_t base = slots / (uint32_t)n, extra = slots % (uint32_t)n, from = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t len = base + (i < extra ? 1 : 0);
    m->ranges[i].from = from;
    m->ranges[i].to = from + len - 1;
    snprintf(m->ranges[i].group, sizeof m->ranges[i].group, "%s", names[i]);
    from += len;
  }
  return m;
}

/* A non-negative integer member no larger than max; false when missing or out of range. */
static bool get_uint(const cJSON *o, const char *name, double max, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > max ||
      v->valuedouble != (double)(uint64_t)v->valuedouble)
    return false;
  *out = v->valuedouble;
  return true;
}

static bool get_name(const cJSON *o, const char *member, char *out, char *why, size_t cap) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, member);
  if (!cJSON_IsString(v)) {
    slots__why(why, cap, "%s: missing or not a string", member);
    return false;
  }
  if (!slotmap_name_ok(v->valuestring, why, cap)) return false;
  snprintf(out, SLOTMAP_NAME_MAX, "%s", v->valuestring);
  return true;
}

/* Fills r from the JSON range item i; false with why filled. */
static bool parse_range(const cJSON *it, size_t i, uint32_t slots, slot_range *r, char *why,
                        size_t cap) {
  double from, to;
  char w[160];
  if (!cJSON_IsObject(it) || !get_uint(it, "from", SLOTS_MAX, &from) ||
      !get_uint(it, "to", SLOTS_MAX, &to) || from > to || to >= slots) {
    slots__why(why, cap, "ranges[%zu]: from and to must be slots with from <= to < %u", i, slots);
    return false;
  }
  r->from = (uint32_t)from;
  r->to = (uint32_t)to;
  if (!get_name(it, "group", r->group, w, sizeof w)) {
    slots__why(why, cap, "ranges[%zu]: %s", i, w);
    return false;
  }
  r->moving = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "moving"));
  if (r->moving && !get_name(it, "to_group", r->to_group, w, sizeof w)) {
    slots__why(why, cap, "ranges[%zu]: %s", i, w);
    return false;
  }
  return true;
}

slotmap *slotmap_parse(const char *json, size_t len, char *why, size_t cap) {
  cJSON *root = cJSON_ParseWithLength(json, len);
  slotmap *m = NULL;
  double version, slots;
  const cJSON *ranges = root ? cJSON_GetObjectItemCaseSensitive(root, "ranges") : NULL;
  if (!cJSON_IsObject(root)) {
    slots__why(why, cap, "not a JSON object");
  } else if (!get_uint(root, "version", 9007199254740991.0, &version)) {
    slots__why(why, cap, "version: missing or not a non-negative integer");
  } else if (!get_uint(root, "slots", SLOTS_MAX, &slots) || slots < SLOTS_MIN) {
    slots__why(why, cap, "slots: missing or not from %d to %d", SLOTS_MIN, SLOTS_MAX);
  } else if (!cJSON_IsArray(ranges) || cJSON_GetArraySize(ranges) == 0) {
    slots__why(why, cap, "ranges: missing or empty");
  } else if ((m = alloc_map((size_t)cJSON_GetArraySize(ranges)))) {
    m->version = (uint64_t)version;
    m->slots = (uint32_t)slots;
    uint32_t next = 0; /* ranges come in order, each starting where the last ended */
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, ranges) {
      if (!parse_range(it, i, m->slots, &m->ranges[i], why, cap)) goto bad;
      if (m->ranges[i].from != next) {
        slots__why(why, cap, "ranges[%zu]: starts at %u, expected %u (gap or overlap)", i,
                m->ranges[i].from, next);
        goto bad;
      }
      next = m->ranges[i].to + 1;
      i++;
    }
    if (next != m->slots) {
      slots__why(why, cap, "ranges: end at slot %u, expected %u", next - 1, m->slots - 1);
      goto bad;
    }
    const cJSON *mv = cJSON_GetObjectItemCaseSensitive(root, "move");
    if (mv && !cJSON_IsNull(mv)) {
      char w[160];
      if (!(m->move = calloc(1, sizeof *m->move)) ||
          !slot_move_from_json(mv, m->slots, m->move, w, sizeof w)) {
        slots__why(why, cap, "move: %s", m->move ? w : "out of memory");
        goto bad;
      }
    }
  } else {
    slots__why(why, cap, "out of memory");
  }
  cJSON_Delete(root);
  return m;
bad:
  cJSON_Delete(root);
  slotmap_free(m);
  return NULL;
}

char *slotmap_json(const slotmap *m) {
  cJSON *root = cJSON_CreateObject(), *ranges = cJSON_CreateArray();
  char *out = NULL;
  if (!root || !ranges) goto done;
  cJSON_AddItemToObject(root, "version", cJSON_CreateNumber((double)m->version));
  cJSON_AddItemToObject(root, "slots", cJSON_CreateNumber(m->slots));
  cJSON_AddItemToObject(root, "ranges", ranges);
  ranges = NULL; /* owned by root */
  cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "ranges");
  for (size_t i = 0; i < m->n_ranges; i++) {
    const slot_range *r = &m->ranges[i];
    cJSON *o = cJSON_CreateObject();
    if (!o) goto done;
    cJSON_AddItemToArray(arr, o);
    cJSON_AddItemToObject(o, "from", cJSON_CreateNumber(r->from));
    cJSON_AddItemToObject(o, "to", cJSON_CreateNumber(r->to));
    cJSON_AddItemToObject(o, "group", cJSON_CreateString(r->group));
    if (r->moving) {
      cJSON_AddItemToObject(o, "moving", cJSON_CreateTrue());
      cJSON_AddItemToObject(o, "to_group", cJSON_CreateString(r->to_group));
    }
  }
  if (m->move) {
    cJSON *mv = slot_move_to_json(m->move);
    if (!mv) goto done;
    cJSON_AddItemToObject(root, "move", mv);
  }
  out = cJSON_PrintUnformatted(root);
done:
  cJSON_Delete(ranges);
  cJSON_Delete(root);
  return out;
}

const slot_range *slotmap_range_of(const slotmap *m, uint32_t slot) {
  size_t lo = 0, hi = m->n_ranges;
  while (lo < hi) { /* ranges are in order: binary search */
    size_t mid = lo + (hi - lo) / 2;
    if (m->ranges[mid].to < slot)
      lo = mid + 1;
    else if (m->ranges[mid].from > slot)
      hi = mid;
    else
      return &m->ranges[mid];
  }
  return NULL;
}

uint32_t slotmap_count(const slotmap *m, const char *name) {
  uint32_t n = 0;
  for (size_t i = 0; i < m->n_ranges; i++)
    if (strcmp(m->ranges[i].group, name) == 0) n += m->ranges[i].to - m->ranges[i].from + 1;
  return n;
}

slotmap *slotmap_copy(const slotmap *m) {
  slotmap *c = alloc_map(m->n_ranges);
  if (!c) return NULL;
  c->version = m->version;
  c->slots = m->slots;
  memcpy(c->ranges, m->ranges, m->n_ranges * sizeof *m->ranges);
  if (m->move) {
    if (!(c->move = malloc(sizeof *c->move))) {
      slotmap_free(c);
      return NULL;
    }
    *c->move = *m->move;
  }
  return c;
}

void slotmap_free(slotmap *m) {
  if (!m) return;
  free(m->move);
  free(m->ranges);
  free(m);
}
