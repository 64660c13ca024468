/* test_client_move.c — libidem's idem_move_slots (docs/api.md §18) checks its arguments before
 * anything is sent (INVALID_ARGUMENT naming the field; *out left zeroed), and Topology.move is
 * read into idem_slot_move (absent: not active; a string past its field: BAD_RESPONSE). The
 * client points at an address with no coordinator: a request that went out would answer
 * UNAVAILABLE or DEADLINE_EXCEEDED, as the valid one does. */
#include <criterion/criterion.h>
#include <string.h>

#include "idem_internal.h"

static idem_client *C;

static void setup(void) {
  idem_options o = {.address = "127.0.0.1:1", .deadline_ms = 300};
  idem_error e = {0};
  cr_assert_eq(idem_connect(&o, &C, &e), IDEM_OK, "%s", e.message);
}

static void teardown(void) {
  idem_close(C);
}

TestSuite(client_move, .init = setup, .fini = teardown, .timeout = 30);

/* m refused here: INVALID_ARGUMENT, message starting with field, out zeroed, outcome known. */
static void refused(const idem_move *m, const char *field) {
  idem_move_result out;
  memset(&out, 0xab, sizeof out);
  idem_error e;
  memset(&e, 0, sizeof e);
  int rc = idem_move_slots(C, m, &out, &e);
  cr_expect_eq(rc, IDEM_INVALID_ARGUMENT, "%s: %d %s", field, rc, e.message);
  cr_expect_eq(e.code, IDEM_INVALID_ARGUMENT);
  cr_expect_eq(strncmp(e.message, field, strlen(field)), 0, "names %s: %s", field, e.message);
  cr_expect(!e.outcome_unknown, "%s", e.message);
  idem_move_result zero;
  memset(&zero, 0, sizeof zero);
  cr_expect_eq(memcmp(&out, &zero, sizeof out), 0, "out is zeroed on error");
}

Test(client_move, arguments_are_checked_before_anything_is_sent) {
  refused(NULL, "move");
  refused(&(idem_move){.from = 64, .to = 63, .group = "g2"}, "from: slot 64 is past to");
  refused(&(idem_move){.from = 0, .to = 63}, "group: missing");
  refused(&(idem_move){.from = 0, .to = 63, .group = ""}, "group: missing");
  refused(&(idem_move){.from = 0, .to = 63, .group = "g 2"}, "group: byte 2");
  refused(&(idem_move){.from = 0, .to = 63, .group = "g2/x"}, "group: byte 3");
  char long_group[IDEM_GROUP_NAME_MAX + 2];
  memset(long_group, 'g', sizeof long_group - 1);
  long_group[sizeof long_group - 1] = '\0';
  refused(&(idem_move){.from = 0, .to = 63, .group = long_group}, "group: 64 bytes");
  char long_rid[IDEM_MOVE_REQUEST_ID_MAX + 2];
  memset(long_rid, 'r', sizeof long_rid - 1);
  long_rid[sizeof long_rid - 1] = '\0';
  refused(&(idem_move){.from = 0, .to = 63, .group = "g2", .request_id = long_rid},
          "request_id: 64 bytes");
  refused(&(idem_move){.from = 0, .to = 63, .group = "g2", .request_id = "r\x01"},
          "request_id: byte 2");
  refused(&(idem_move){.from = 0, .to = 63, .group = "g2", .request_id = "a b"},
          "request_id: byte 2");
  refused(&(idem_move){.from = 0, .to = 63, .group = "g2", .timeout_ms = -1}, "timeout_ms");
  idem_error e = {0};
  cr_expect_eq(idem_move_slots(NULL, &(idem_move){.group = "g2"}, NULL, &e), IDEM_INVALID_ARGUMENT);
}

Test(client_move, a_valid_move_is_sent) {
  /* the longest group and request id that pass, one slot, and no out: sent (no one answers) */
  char group[IDEM_GROUP_NAME_MAX + 1], rid[IDEM_MOVE_REQUEST_ID_MAX + 1];
  memset(group, 'g', sizeof group - 1);
  group[sizeof group - 1] = '\0';
  memset(rid, '_', sizeof rid - 1);
  rid[sizeof rid - 1] = '\0';
  const idem_move ms[] = {{.from = 7, .to = 7, .group = group, .request_id = rid},
                          {.from = 0, .to = 65535, .group = "g-2_x.y", .timeout_ms = 200}};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
    idem_error e = {0};
    int rc = idem_move_slots(C, &ms[i], NULL, &e);
    cr_expect(rc == IDEM_UNAVAILABLE || rc == IDEM_DEADLINE_EXCEEDED, "%zu: %d %s", i, rc,
              e.message);
  }
}

Test(client_move, topology_move_is_read_into_idem_slot_move) {
  idem_slot_move m;
  memset(&m, 0xab, sizeof m);
  cr_assert_eq(idem__slot_move_from_pb(NULL, &m, NULL), IDEM_OK);
  cr_expect(!m.active && m.phase[0] == '\0' && m.rows_copied == 0, "no move: zeroed");

  Idem__V1__SlotMove pb = IDEM__V1__SLOT_MOVE__INIT;
  pb.request_id = "rid-1";
  pb.from = 0;
  pb.to = 63;
  pb.source = "g1";
  pb.target = "g2";
  pb.phase = "copying";
  pb.rows_copied = 120;
  pb.lag_bytes = 4096;
  pb.started_unix_ms = 1700000000000LL;
  pb.note = "waiting for g2's subscription";
  cr_assert_eq(idem__slot_move_from_pb(&pb, &m, NULL), IDEM_OK);
  cr_expect(m.active);
  cr_expect_str_eq(m.request_id, "rid-1");
  cr_expect_eq(m.from, 0);
  cr_expect_eq(m.to, 63);
  cr_expect_str_eq(m.source, "g1");
  cr_expect_str_eq(m.target, "g2");
  cr_expect_str_eq(m.phase, "copying");
  cr_expect_eq(m.rows_copied, 120);
  cr_expect_eq(m.lag_bytes, 4096);
  cr_expect_eq(m.started_unix_ms, 1700000000000LL);
  cr_expect_str_eq(m.note, "waiting for g2's subscription");

  char phase[64];
  memset(phase, 'p', sizeof phase - 1);
  phase[sizeof phase - 1] = '\0';
  pb.phase = phase;
  idem_error e = {0};
  cr_expect_eq(idem__slot_move_from_pb(&pb, &m, &e), IDEM_BAD_RESPONSE);
  cr_expect(strstr(e.message, "move.phase"), "%s", e.message);
  cr_expect(!m.active && m.request_id[0] == '\0', "zeroed on error");
}
