/* testutil.h — small helpers every test directory shares: required environment variables, the
 * monotonic clock and polling sleeps, loopback ports, unique names, process logs, and the wait
 * until a started server listens.
 *
 * Waits are conditions polled against a deadline, never bare sleeps.
 */
#ifndef IDEM_TEST_UTIL_H
#define IDEM_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* An environment variable that must be set (fails the test with a clear message if not). */
const char *h_env(const char *name);

/* Monotonic milliseconds. */
int64_t h_now_ms(void);

/* Sleeps ms milliseconds (only between polls of a condition). */
void h_sleep_ms(int64_t ms);

/* A free TCP port on 127.0.0.1 (bound and released). */
int h_free_port(void);
/* Whether something accepts TCP connections on 127.0.0.1:port. */
bool h_port_open(int port);

/* A fresh tenant name unique to this process and call: "t-<pid>-<n>-<rand>". */
void h_tenant(char out[64]);

/* A fresh global id / service-safe unique suffix: "<prefix>-<pid>-<n>-<rand>". */
void h_unique(const char *prefix, char *out, size_t n);

/* How many lines of the file at path hold needle (0 without the file): a process's log. */
int h_log_count(const char *path, const char *needle);
/* How many lines the file at path holds (0 without the file): a journal. */
int h_line_count(const char *path);
/* Copies the file at path (a process's log) to stderr. */
void h_dump_log(const char *path);

/* A free port is only free until someone binds it: the test processes Criterion runs side by
 * side (--jobs=2) each pick ports, and two once picked the same one. Waits until the process
 * pid (started with spawn_start, its output in log) listens on 127.0.0.1:port: one more line
 * than `listened` holds "listening" (it bound the port, so nobody else answers there) and the
 * port accepts. False when it exited after one more line than `refused` holding "cannot
 * listen" (the port was taken after h_free_port chose it: the caller tries another, at most
 * H_START_TRIES times in all); a process that exits otherwise, or does not listen within 30 s,
 * fails the test with its log. */
#define H_START_TRIES 5
bool h_wait_listening(pid_t pid, const char *log, int port, int listened, int refused,
                      const char *what);

#endif
