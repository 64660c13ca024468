/* main.c — idem-stream-cpu: `sizes`, `server ADDR` or `client ...` (stream_cpu.h). */
#include <stdio.h>
#include <string.h>

#include "stream_cpu.h"

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "sizes") == 0) {
    sc_sizes sz;
    sc_step_sizes(&sz);
    printf("begin_req %zu begin_resp %zu complete_req %zu complete_resp %zu\n",
           sz.size[SC_BEGIN][0], sz.size[SC_BEGIN][1], sz.size[SC_COMPLETE][0],
           sz.size[SC_COMPLETE][1]);
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "server") == 0) return sc_server_main(argv[2]);
  if (argc >= 2 && strcmp(argv[1], "client") == 0) return sc_client_main(argc - 1, argv + 1);
  fprintf(stderr,
          "usage: idem-stream-cpu sizes | server HOST:PORT | client --addr HOST:PORT "
          "--server-pid PID [...]\n");
  return 2;
}
