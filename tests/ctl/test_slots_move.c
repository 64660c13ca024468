/* test_slots_move.c — `idemctl slots move` (docs/api.md §18) through the real idemctl binary
 * (h_idemctl, tests/support/capture.h):
 *  - usage errors exit 2 naming the argument, before anything is sent: the address given has no
 *    coordinator, so a command that reached the network would exit 3 instead;
 *  - against a real coordinator: a group name libidem refuses exits 2 naming group; a node with
 *    one store group refuses a move (FAILED_PRECONDITION), exit 1 with its message; `slots --json`
 * carries "move" (null: no move under way) and the table no "moving" line. The moves themselves are
 * tested end to end with the server side (tests/integration). */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "harness.h"

#define NOBODY "127.0.0.1:1" /* no coordinator listens there */

/* A usage error: exit 2, stderr says want, nothing on stdout. */
#define USAGE(r, want)                                                                      \
  do {                                                                                      \
    cr_expect_eq((r)->status, 2, "exit %d: %s", (r)->status, (r)->err);                     \
    cr_expect(strstr((r)->err, (want)), "wanted \"%s\" in: %s", (want), (r)->err);          \
    cr_expect_str_empty((r)->out, "%s", (r)->out);                                          \
  } while (0)

Test(slots_move_usage, arguments_are_checked_before_anything_is_sent, .timeout = 60) {
  h_ctl *r = calloc(1, sizeof *r);
  h_idemctl(r, NOBODY, NULL, "slots", "move", "--to", "g2", NULL);
  USAGE(r, "slots move: FROM-TO is required");
  h_idemctl(r, NOBODY, NULL, "slots", "move", "0-63", NULL);
  USAGE(r, "--to is required");
  h_idemctl(r, NOBODY, NULL, "slots", "move", "0-63", "--to", "", NULL);
  USAGE(r, "--to is required");
  const char *bad[] = {"a-b", "0-", "5-x", "1-2-3", "0-65536", "70000", "0x10", " 1", "1.5"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    h_idemctl(r, NOBODY, NULL, "slots", "move", bad[i], "--to", "g2", NULL);
    USAGE(r, "slots move: FROM-TO: want two slot numbers like 0-63");
    cr_expect(strstr(r->err, bad[i]), "names what it got (%s): %s", bad[i], r->err);
  }
  h_idemctl(r, NOBODY, NULL, "slots", "move", "63-0", "--to", "g2", NULL);
  USAGE(r, "slots move: FROM-TO: 63-0 runs backwards");
  const char *timeouts[] = {"0", "soon", "-5", "90000", "2d"};
  for (size_t i = 0; i < sizeof timeouts / sizeof timeouts[0]; i++) {
    h_idemctl(r, NOBODY, NULL, "slots", "move", "0-63", "--to", "g2", "--timeout", timeouts[i],
              NULL);
    USAGE(r, "--timeout: expected seconds");
  }
  h_idemctl(r, NOBODY, NULL, "slots", "move", "0-63", "--to", "g2", "--request-id", "", NULL);
  USAGE(r, "--request-id: empty");
  const char *rates[] = {"0", "-5", "x", "10000001", "5k", ""};
  for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) {
    h_idemctl(r, NOBODY, NULL, "slots", "move", "0-63", "--to", "g2", "--max-rate", rates[i], NULL);
    USAGE(r, "--max-rate: expected rows per second");
  }
  h_idemctl(r, NOBODY, NULL, "slots", "move", "0-63", "extra", "--to", "g2", NULL);
  USAGE(r, "unexpected argument extra");
  h_idemctl(r, NOBODY, NULL, "slots", "move", "0-63", "--to", "g2", "--stuck", NULL);
  USAGE(r, "unknown flag --stuck");
  h_idemctl(r, NOBODY, NULL, "slots", "move", "0-63", "--to", NULL);
  USAGE(r, "--to needs a value");
  free(r);
}

Test(slots_move_usage, help_names_the_command_and_its_flags, .timeout = 60) {
  h_ctl *r = calloc(1, sizeof *r);
  h_idemctl(r, NOBODY, NULL, "slots", "move", "--help", NULL);
  cr_expect_eq(r->status, 0, "%s", r->err);
  cr_expect(strstr(r->out, "usage: idemctl slots move FROM-TO --to GROUP"), "%s", r->out);
  cr_expect(strstr(r->out, "--dry-run") && strstr(r->out, "--request-id") &&
                strstr(r->out, "--timeout") && strstr(r->out, "--max-rate"),
            "%s", r->out);
  h_idemctl(r, NOBODY, NULL, "--help", NULL);
  cr_expect_eq(r->status, 0, "%s", r->err);
  cr_expect(strstr(r->out, "slots move FROM-TO --to GROUP"), "%s", r->out);
  /* `slots` alone is still the map: it goes to the network (nothing there: 3) */
  h_idemctl(r, NOBODY, NULL, "slots", "--deadline-ms", "300", NULL);
  cr_expect_eq(r->status, 3, "%s", r->err);
  free(r);
}

Test(slots_move_usage, nothing_answering_fails_at_once_not_after_the_timeout, .timeout = 60) {
  h_ctl *r = calloc(1, sizeof *r);
  int64_t t0 = h_now_ms();
  h_idemctl(r, NOBODY, NULL, "slots", "move", "0-63", "--to", "g2", "--deadline-ms", "500", NULL);
  int64_t took = h_now_ms() - t0;
  cr_expect_eq(r->status, 3, "%s", r->err);
  cr_expect(strstr(r->err, "slots move: reading the slot map"), "%s", r->err);
  cr_expect_lt(took, 30000, "waited %lld ms (--timeout is 600 s)", (long long)took);
  free(r);
}

static srv S;

static void start(void) {
  h_srv_start(&S, NULL, NULL);
}

static void stop(void) {
  h_srv_stop(&S);
}

TestSuite(slots_move_server, .init = start, .fini = stop, .timeout = 90);

Test(slots_move_server, a_single_group_node_refuses_with_its_message) {
  h_ctl *r = calloc(1, sizeof *r);
  h_idemctl(r, S.addr, NULL, "slots", "move", "0-63", "--to", "default", NULL);
  cr_expect_eq(r->status, 1, "exit %d: %s", r->status, r->err);
  cr_expect(strstr(r->err, "idemctl: slots move: failed precondition"), "%s", r->err);
  cr_expect(strstr(r->err, "two or more --store groups"), "the server's message: %s", r->err);
  cr_expect_str_empty(r->out, "%s", r->out);
  /* libidem checks the group name before sending: a usage error naming the field */
  h_idemctl(r, S.addr, NULL, "slots", "move", "0-63", "--to", "no such group", NULL);
  cr_expect_eq(r->status, 2, "exit %d: %s", r->status, r->err);
  cr_expect(strstr(r->err, "group: byte 3"), "%s", r->err);
  free(r);
}

Test(slots_move_server, slots_says_no_move_is_under_way) {
  h_ctl *r = calloc(1, sizeof *r);
  h_idemctl(r, S.addr, NULL, "--json", "slots", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cJSON *o = cJSON_Parse(r->out);
  cr_assert(cJSON_IsObject(o), "%s", r->out);
  cJSON *mv = cJSON_GetObjectItem(o, "move");
  cr_expect(mv && cJSON_IsNull(mv), "\"move\": null without a move: %s", r->out);
  cJSON_Delete(o);
  h_idemctl(r, S.addr, NULL, "slots", NULL);
  cr_assert_eq(r->status, 0, "%s", r->err);
  cr_expect(strstr(r->out, "256 slots, map version"), "%s", r->out);
  cr_expect(!strstr(r->out, "moving "), "%s", r->out);
  free(r);
}
