/* main.c — idem-coordinator: read the options, start one node, wait for a signal, stop it.
 *
 * Exit status: 0 after a drain on SIGTERM/SIGINT, 1 when start-up fails, 2 on a usage error
 * (a bad option, a TLS or tokens file that cannot be read or is invalid, a --pg that libpq cannot
 * parse or that Postgres refuses for good: authentication, a missing database).
 */
#include <pthread.h>

#include "node/node.h"
#include "util/log.h"

int main(int argc, char **argv) {
  idem_options opts;
  char msg[512];
  options_result parsed = options_parse(argc, argv, &opts, msg, sizeof msg);
  if (parsed != OPTIONS_RUN) {
    if (parsed == OPTIONS_USAGE) options_usage_error(msg);
    options_free(&opts);
    return parsed == OPTIONS_USAGE ? 2 : 0;
  }
  log_init((log_format)opts.log_format, LOG_INFO);

  sigset_t sigs; /* blocked before any thread starts: every thread inherits the mask */
  node_signals(&sigs);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);

  node *nd = NULL;
  node_result started = node_start(&opts, &sigs, &nd, msg, sizeof msg);
  if (started == NODE_RUNNING) {
    node_wait(nd);
    node_stop(nd);
    log_kv(LOG_INFO, "stopped", (const char *)NULL);
  } else if (started == NODE_USAGE) {
    options_usage_error(msg);
  }
  options_free(&opts);
  if (started == NODE_RUNNING || started == NODE_STOPPED) return 0;
  return started == NODE_REFUSED ? 2 : (int)started;
}
