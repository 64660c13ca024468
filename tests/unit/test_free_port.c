/* test_free_port.c — testutil.h's h_free_port: a test that picks several ports (a node's
 * --listen, --metrics and --console) never gets the same one twice. The kernel gave the same
 * port to two binds a few picks apart (about 1 pick in 200 fell on one of the 64 before it, in a
 * loop by hand), and a node started with --metrics and --console on one port could not start. */
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"

#define PICKS 2000
#define WINDOW 64

Test(free_port, no_pick_repeats_one_of_the_last_64) {
  static int got[PICKS];
  for (int i = 0; i < PICKS; i++) {
    got[i] = h_free_port();
    cr_assert(got[i] > 0 && got[i] < 65536, "pick %d: port %d", i, got[i]);
    for (int j = i - 1; j >= 0 && j >= i - (WINDOW - 1); j--)
      cr_assert_neq(got[i], got[j], "pick %d got port %d again, %d picks after pick %d", i,
                    got[i], i - j, j);
  }
}

Test(free_port, the_port_is_free_to_bind) {
  int port = h_free_port();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0, "port %d binds", port);
  close(fd);
}
