/* moves.c — moving slots between groups (docs/api.md §18): Admin.MoveSlots (idem_move_slots),
 * its arguments checked before anything is sent, and the move under way from Topology.move. */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "idem_internal.h"

static bool copy_field(char *dst, size_t cap, const char *src) {
  if (!src) src = "";
  size_t n = strlen(src);
  if (n >= cap) return false;
  memcpy(dst, src, n + 1);
  return true;
}

int idem__slot_move_from_pb(const Idem__V1__SlotMove *pb, idem_slot_move *out, idem_error *err) {
  memset(out, 0, sizeof *out);
  if (!pb) return IDEM_OK;
  const char *field = NULL;
  if (!copy_field(out->request_id, sizeof out->request_id, pb->request_id))
    field = "request_id";
  else if (!copy_field(out->source, sizeof out->source, pb->source))
    field = "source";
  else if (!copy_field(out->target, sizeof out->target, pb->target))
    field = "target";
  else if (!copy_field(out->phase, sizeof out->phase, pb->phase))
    field = "phase";
  else if (!copy_field(out->note, sizeof out->note, pb->note))
    field = "note";
  if (field) {
    memset(out, 0, sizeof *out);
    return idem__fail(err, IDEM_BAD_RESPONSE, "move.%s in the response is too long", field);
  }
  out->active = true;
  out->from = pb->from;
  out->to = pb->to;
  out->rows_copied = pb->rows_copied;
  out->lag_bytes = pb->lag_bytes;
  out->started_unix_ms = pb->started_unix_ms;
  return IDEM_OK;
}

/* A group name as the server takes it (server/slots/slotmap.h): 1..63 bytes of [A-Za-z0-9._-]. */
static int check_group(const char *g, idem_error *err) {
  if (!g || !*g) return idem__fail(err, IDEM_INVALID_ARGUMENT, "group: missing (the target group)");
  size_t n = strlen(g);
  if (n > IDEM_GROUP_NAME_MAX)
    return idem__fail(err, IDEM_INVALID_ARGUMENT, "group: %zu bytes, at most %d", n,
                      IDEM_GROUP_NAME_MAX);
  for (size_t i = 0; i < n; i++) {
    char ch = g[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '.' || ch == '_' || ch == '-'))
      return idem__fail(err, IDEM_INVALID_ARGUMENT,
                        "group: byte %zu of '%.64s' is not one of A-Z a-z 0-9 . _ -", i + 1, g);
  }
  return IDEM_OK;
}

/* The server's rule (docs/api.md §18): 1–63 bytes of [A-Za-z0-9._-]. */
static int check_request_id(const char *r, idem_error *err) {
  size_t n = strlen(r);
  if (n > IDEM_MOVE_REQUEST_ID_MAX)
    return idem__fail(err, IDEM_INVALID_ARGUMENT, "request_id: %zu bytes, at most %d", n,
                      IDEM_MOVE_REQUEST_ID_MAX);
  for (size_t i = 0; i < n; i++) {
    char ch = r[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '.' || ch == '_' || ch == '-'))
      return idem__fail(err, IDEM_INVALID_ARGUMENT,
                        "request_id: byte %zu is not one of A-Z a-z 0-9 . _ -", i + 1);
  }
  return IDEM_OK;
}

/* 16 random bytes as 32 hex digits into out (at least 33 bytes). */
static void new_request_id(char *out) {
  unsigned char b[16];
  if (getrandom(b, sizeof b, GRND_NONBLOCK) != (ssize_t)sizeof b)
    for (size_t i = 0; i < sizeof b; i++) b[i] = (unsigned char)idem__rand_upto(255);
  for (size_t i = 0; i < sizeof b; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
}

int idem_move_slots(idem_client *c, const idem_move *m, idem_move_result *out, idem_error *err) {
  return idem_move_slots_rate(c, m, 0, out, err);
}

int idem_move_slots_rate(idem_client *c, const idem_move *m, uint32_t max_rows_per_s,
                         idem_move_result *out, idem_error *err) {
  idem__err_reset(err);
  if (out) memset(out, 0, sizeof *out);
  if (!c) return idem__fail(err, IDEM_INVALID_ARGUMENT, "client is null");
  if (!m) return idem__fail(err, IDEM_INVALID_ARGUMENT, "move: missing");
  if (m->from > m->to)
    return idem__fail(err, IDEM_INVALID_ARGUMENT, "from: slot %u is past to (slot %u)", m->from,
                      m->to);
  int rc = check_group(m->group, err);
  if (rc != IDEM_OK) return rc;
  if (m->timeout_ms < 0)
    return idem__fail(err, IDEM_INVALID_ARGUMENT, "timeout_ms: %lld is negative",
                      (long long)m->timeout_ms);
  char rid[IDEM_REQUEST_ID_MAX + 1];
  if (m->request_id && *m->request_id) {
    if ((rc = check_request_id(m->request_id, err)) != IDEM_OK) return rc;
    snprintf(rid, sizeof rid, "%s", m->request_id);
  } else {
    new_request_id(rid); /* so that a retry after an unknown outcome is the same request */
  }
  Idem__V1__MoveSlotsRequest req = IDEM__V1__MOVE_SLOTS_REQUEST__INIT;
  req.from = m->from;
  req.to = m->to;
  req.group = (char *)m->group;
  req.request_id = rid;
  req.dry_run = m->dry_run;
  req.max_rows_per_s = max_rows_per_s;
  Idem__V1__MoveSlotsResponse *resp = NULL;
  rc = idem__unary(c, IDEM__M_MOVE_SLOTS, &req.base, NULL,
                   &idem__v1__move_slots_response__descriptor, m->timeout_ms,
                   (ProtobufCMessage **)&resp, err);
  if (rc != IDEM_OK) return rc;
  if (out) {
    out->version = resp->version;
    out->steps_moved = resp->steps_moved;
    out->sagas_moved = resp->sagas_moved;
    out->paused_ms = resp->paused_ms;
    out->replayed = resp->replayed;
    memcpy(out->request_id, rid, sizeof rid);
  }
  idem__v1__move_slots_response__free_unpacked(resp, NULL);
  return IDEM_OK;
}
