/* traceparent.c — traceparent.h. */
#include "traceparent.h"

#include <string.h>

static bool lower_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}

static bool all_zero(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != '0') return false;
  return true;
}

/* 2 + 1 + 32 + 1 + 16 + 1 + 2 */
#define TP_V00_LEN 55

bool traceparent_parse(const char *value, size_t len, char trace_id[TRACE_ID_LEN + 1]) {
  trace_id[0] = '\0';
  if (!value || len < TP_V00_LEN) return false;
  const char *v = value, *tid = v + 3, *pid = tid + TRACE_ID_LEN + 1, *fl = pid + SPAN_ID_LEN + 1;
  if (!lower_hex(v, 2) || v[2] != '-' || tid[TRACE_ID_LEN] != '-' || pid[SPAN_ID_LEN] != '-')
    return false;
  if (v[0] == 'f' && v[1] == 'f') return false; /* version ff is forbidden */
  if (!lower_hex(tid, TRACE_ID_LEN) || all_zero(tid, TRACE_ID_LEN)) return false;
  if (!lower_hex(pid, SPAN_ID_LEN) || all_zero(pid, SPAN_ID_LEN)) return false;
  if (!lower_hex(fl, 2)) return false;
  bool v00 = v[0] == '0' && v[1] == '0';
  if (len != TP_V00_LEN && (v00 || value[TP_V00_LEN] != '-')) return false;
  memcpy(trace_id, tid, TRACE_ID_LEN);
  trace_id[TRACE_ID_LEN] = '\0';
  return true;
}

bool trace_id_valid(const char *s) {
  return s && strlen(s) == TRACE_ID_LEN && lower_hex(s, TRACE_ID_LEN) && !all_zero(s, TRACE_ID_LEN);
}
