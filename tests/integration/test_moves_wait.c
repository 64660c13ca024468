/* test_moves_wait.c — a MoveSlots call waiting for its move (docs/api.md §18) holds no
 * worker, and a caller that goes away is noticed, the move going on. The nodes run one worker
 * each (IDEM_WORKERS=1) and the driver holds 4 s once subscribed (IDEM_TEST_MOVE_HOLD):
 *  - idemctl (the real binary: IDEMCTL_BIN) asks the node that does not drive the move for it,
 *    and is killed -9 while the move copies: that node logs that the caller went away;
 *  - meanwhile that node's one worker still serves: GetTopology (a worker's call) answers within
 *    a second, several times, while the call waits (it would wait behind it for the move to
 *    end, were the worker held);
 *  - the same request id asked again waits for the same move and answers its result, replayed. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "groups.h"
#include "harness.h"
#include "idem/v1/coordinator.pb-c.h"
#include "moves.h"
#include "spawn.h"

#ifndef IDEMCTL_BIN
#error "IDEMCTL_BIN must name the idemctl binary"
#endif

#define FROM 0
#define TO 15

/* Whether the file at path holds text (read whole; at most 4 MiB). */
static bool file_has(const char *path, const char *text) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  static char buf[4 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return strstr(buf, text) != NULL;
}

Test(moves_wait, a_waiting_move_holds_no_worker_and_a_caller_gone_is_noticed, .timeout = 180) {
  h_groups cl;
  h_groups_start_env(&cl, (const char *[]){"IDEM_WORKERS=1", "IDEM_TEST_MOVE_HOLD=copying:4000",
                                            NULL});
  h_groups_wait_balanced(&cl, NULL);
  int driver = h_groups_leader_of(&cl, 0);
  cr_assert_geq(driver, 0, "g1 has a leader");
  int other = 1 - driver;
  const char *argv[] = {IDEMCTL_BIN, "--addr", cl.node[other].addr, "slots", "move", "0-15",
                        "--to", "g2", "--request-id", "waits", "--timeout", "60s", NULL};
  char out[96];
  snprintf(out, sizeof out, "/tmp/idem-moves-wait-%d.out", (int)getpid());
  pid_t ctl = spawn_start(argv, &(spawn_opts){.out_log = out, .err_log = out});
  /* the move copies (held there 4 s): the call is waiting */
  cr_assert(h_wait_move_phase(&cl, other, "copying", 30000), "the move reached copying");
  /* the one worker serves while MoveSlots waits */
  int64_t slowest = 0;
  for (int i = 0; i < 5; i++) {
    int64_t t0 = h_now_ms();
    Idem__V1__Topology *t = h_topology(&cl, other);
    int64_t took = h_now_ms() - t0;
    cr_assert(t, "GetTopology answers while MoveSlots waits");
    bool still = t->move != NULL;
    idem__v1__topology__free_unpacked(t, NULL);
    cr_assert(still, "the move is still under way");
    if (took > slowest) slowest = took;
    h_sleep_ms(100); /* not a wait: the samples spread over the move's 4 s hold */
  }
  cr_log_info("GetTopology on the node whose one worker took MoveSlots: slowest %lld ms",
              (long long)slowest);
  H_EXPECT_TIMING(slowest < 1000,
                  "no worker is held by the waiting MoveSlots: a GetTopology took %lld ms",
                  (long long)slowest);
  /* the caller goes away: noticed at once, the move goes on */
  spawn_kill(ctl);
  H_WAIT(file_has(cl.node[other].log_path, "the caller went away"), 5000,
         "the node logged that MoveSlots's caller went away (%s)", cl.node[other].log_path);
  /* the same request id waits again and answers the move's result */
  move_answer a = h_move_slots(&cl, other, FROM, TO, "g2", "waits", false);
  cr_expect_eq(a.status, 0, "the move finished: %d %s", a.status, a.details);
  cr_expect(a.replayed, "answered as the same request's result");
  cr_expect(h_slot_is(&cl, other, FROM, "g2"), "slot %d is g2's", FROM);
  unlink(out);
  h_groups_stop(&cl);
}
