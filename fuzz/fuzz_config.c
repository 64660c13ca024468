/* fuzz_config.c — libFuzzer target: the --config file parser (server/config/config_file.h,
 * libinih) and the policy checks the server then runs on its [policy ...] seeds (main.c:
 * tenant "*" or a valid tenant, coord_policy_validate).
 *
 * Input: the file's bytes. They are written to an in-memory file (memfd; a temporary file
 * where that is missing) whose path goes to config_file_load, the exact function the server
 * calls. Option lines go to a callback that knows a few of the server's option names (others
 * are refused, as main.c refuses unknown keys). Aborts when the loader breaks its contract: a
 * failure without a message, seeds left behind by a failure, or a seed whose strings are not
 * terminated.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config/config_file.h"
#include "coord/coord_policy.h"
#include "validate/validate.h"

static int fd = -1;
static char path[64];

static void fail(const char *what) {
  fprintf(stderr, "fuzz_config: %s\n", what);
  abort();
}

static int on_option(void *arg, const char *name, const char *value) {
  static const char *known[] = {"listen",          "pg",           "workers", "store-timeout-ms",
                                "node-id",         "log-format",   "etcd",    "advertise",
                                "election-prefix", "election-ttl", "metrics", "reaper-interval"};
  if (strlen(value) > 4096) fail("an option value longer than any line");
  (*(int *)arg)++;
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcmp(known[i], name) == 0) return 0;
  return 1;
}

static void remove_tmp(void) {
  unlink(path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fd = memfd_create("fuzz-config", 0);
  if (fd >= 0 && snprintf(path, sizeof path, "/proc/self/fd/%d", fd) > 0 && access(path, R_OK) == 0)
    return 0;
  if (fd >= 0) close(fd);
  snprintf(path, sizeof path, "/tmp/idem-fuzz-config.XXXXXX");
  fd = mkstemp(path);
  if (fd < 0) fail("cannot create a temporary file");
  atexit(remove_tmp);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) fail("memfd write");
  config_seeds seeds;
  char msg[512];
  msg[0] = '\0';
  int options = 0;
  if (config_file_load(path, on_option, &options, &seeds, msg, sizeof msg) != 0) {
    if (!msg[0]) fail("a failure without a message");
    if (seeds.rows || seeds.n) fail("seeds left after a failure");
    return 0;
  }
  for (size_t i = 0; i < seeds.n; i++) {
    const policy_row *r = &seeds.rows[i];
    if (!memchr(r->tenant, '\0', sizeof r->tenant) ||
        !memchr(r->p.service, '\0', sizeof r->p.service) ||
        !memchr(r->p.operation, '\0', sizeof r->p.operation))
      fail("a seed string not terminated");
    err_t err;
    err_clear(&err);
    bool tenant_ok =
        strcmp(r->tenant, POLICY_ANY) == 0 || validate_tenant(r->tenant, &err) == ERR_OK;
    if (tenant_ok && coord_policy_validate(&r->p, &err) != ERR_OK && !err.msg[0])
      fail("a refused seed without a message");
  }
  free(seeds.rows);
  return 0;
}
