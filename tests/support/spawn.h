/* spawn.h — the one way tests start a process (a coordinator, a saga service, etcd, idemctl,
 * openssl, pg_ctl, curl): fork + exec, the child's output into log files, and stopping and
 * waiting bounded in time.
 *
 * The child asks for SIGKILL when the thread that forked it exits (PR_SET_PDEATHSIG) and checks
 * that its parent is still there after asking, so nothing a test starts outlives a test process
 * that is killed (a Criterion timeout, kill -9). Children still running when the test process
 * exits normally (a failed assertion skips the test's own stop) are killed and reaped then.
 * Start, stop and kill processes from the test's main thread only: the death signal follows
 * the forking thread, and the list of running children is not locked.
 *
 * Exit statuses: the exit code (0-127), 128 + the signal for a child a signal ended, -1 for one
 * that had to be killed because it did not exit in time.
 */
#ifndef IDEM_TEST_SPAWN_H
#define IDEM_TEST_SPAWN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Where the child's output goes: stdout to out_log, else log, else the test's own stdout;
 * stderr to err_log, else log, else the test's own stderr. */
typedef struct spawn_opts {
  const char *log;        /* stdout and stderr */
  const char *out_log;    /* stdout alone */
  const char *err_log;    /* stderr alone */
  bool append;            /* append to the log files (default: truncate them) */
  const char *const *env; /* NAME=VALUE added to the environment (NULL-terminated, may be NULL) */
} spawn_opts;

/* Starts argv[0] (a path, or a name looked up in $PATH) with argv (NULL-terminated); o may be
 * NULL (inherit stdout and stderr). Returns the child's pid; fails the test when it cannot fork
 * or open a log. A program that cannot be executed exits 127. */
pid_t spawn_start(const char *const *argv, const spawn_opts *o);

/* Reaps pid if it has exited, without waiting: true then, with its status in *status (may be
 * NULL). */
bool spawn_reap(pid_t pid, int *status);

/* Waits up to timeout_ms for pid to exit by itself; its status, or -1 after SIGKILL. */
int spawn_wait(pid_t pid, int64_t timeout_ms);

/* SIGTERM, then spawn_wait(pid, timeout_ms): the status, or -1 when it had to be killed. */
int spawn_stop(pid_t pid, int64_t timeout_ms);

/* SIGKILL, reaped. */
void spawn_kill(pid_t pid);

/* spawn_start + spawn_wait: runs argv to its end; its status, or -1 after timeout_ms. */
int spawn_run(const char *const *argv, const spawn_opts *o, int64_t timeout_ms);

#endif
