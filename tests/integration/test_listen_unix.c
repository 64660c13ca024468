/* test_listen_unix.c — a coordinator listening on a unix or unix-abstract socket reports that
 * address (GetStatus.leader_address, what standbys send clients to), not a TCP-style
 * "unix-abstract:PORT" made by cutting the address at its last colon. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <idem/idem.h>

#include "spawn.h"
#include "testutil.h"
#include "util/clock.h"

TestSuite(listen_unix, .timeout = 60);

static void status_on(const char *listen) {
  char log_path[160], tag[64];
  h_unique("listen-unix", tag, sizeof tag);
  snprintf(log_path, sizeof log_path, "/tmp/idem-%s.log", tag);
  const char *argv[] = {h_env("IDEM_COORDINATOR_BIN"), "--pg", h_env("IDEM_TEST_PG_URL"),
                        "--listen", listen, "--reaper-interval", "0", NULL};
  pid_t pid = spawn_start(argv, &(spawn_opts){.log = log_path});
  idem_options o = {.address = listen, .deadline_ms = 1000};
  idem_client *c = NULL;
  idem_error e;
  cr_assert_eq(idem_connect(&o, &c, &e), IDEM_OK, "%s", e.message);
  idem_status st;
  int rc = -1;
  bool done, exited = false;
  H_WAITED_EVERY(50, done,
                 (rc = idem_get_status(c, &st, &e)) == IDEM_OK || (exited = spawn_reap(pid, NULL)),
                 30000);
  idem_close(c);
  int status = spawn_stop(pid, 20000);
  cr_assert_eq(rc, IDEM_OK, "GetStatus on %s: %s%s (log %s)", listen, e.message,
               exited ? " (the coordinator exited)" : done ? "" : " (not within 30 s)", log_path);
  cr_expect(st.leader);
  cr_expect_str_eq(st.leader_address, listen);
  cr_expect_eq(status, 0);
  unlink(log_path);
}

Test(listen_unix, an_abstract_socket_is_reported_as_given) {
  char listen[96], tag[64];
  h_unique("abs", tag, sizeof tag);
  snprintf(listen, sizeof listen, "unix-abstract:idem-test-%s", tag);
  status_on(listen);
}

Test(listen_unix, a_socket_file_is_reported_as_given) {
  char listen[128], tag[64];
  h_unique("sock", tag, sizeof tag);
  snprintf(listen, sizeof listen, "unix:/tmp/idem-test-%s.sock", tag);
  status_on(listen);
  unlink(listen + 5);
}
