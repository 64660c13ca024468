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
/* The Unix clock in milliseconds, as the API's *_unix_ms fields. */
int64_t h_wall_ms(void);

/* Sleeps ms milliseconds. Only between polls of a condition (H_WAIT and its kin), or where the
 * time itself is the test's subject (a load's pace, a fault held on purpose, a window in which
 * something must NOT happen): such a call says why on its line. */
void h_sleep_ms(int64_t ms);

/* How often the waits below poll: short next to the events waited for (a leader elected, a row
 * written, a process gone: tens of ms at least), long enough that polling loads nothing. */
#define H_WAIT_POLL_MS 10

/* H_WAIT(cond, timeout_ms, fmt, ...): waits until the expression cond is true, evaluated at once
 * and then every H_WAIT_POLL_MS, for at most timeout_ms; if it is still false then, fails the
 * test with "<fmt, ...> (not within N ms: cond)", the message naming what did not happen. cond
 * may have side effects (a call made again each turn, its answer kept); it must not assert: the
 * message says what did not happen, and is formatted only on failure (its arguments may read
 * what the last turn left).
 * H_WAITED(ok, cond, timeout_ms) is the same wait without the assertion: it sets the bool ok to
 * whether cond became true (for a caller that says more, or tries something else, on failure).
 * H_WAIT fails through Criterion: its caller includes criterion/criterion.h. */
#define H_WAITED(ok, cond, timeout_ms) H_WAITED_EVERY(H_WAIT_POLL_MS, ok, cond, timeout_ms)
#define H_WAIT(cond, timeout_ms, ...) H_WAIT_EVERY(H_WAIT_POLL_MS, cond, timeout_ms, __VA_ARGS__)
/* The same, polling every poll_ms instead: for a condition that costs something to evaluate
 * (a process run, a whole /metrics page, a query), so that polling does not load the machine. */
#define H_WAITED_EVERY(poll_ms, ok, cond, timeout_ms)                                    \
  do {                                                                                   \
    int64_t h_until_ = h_now_ms() + (timeout_ms);                                        \
    while (!((ok) = (cond)) && h_wait_tick_(h_until_, (poll_ms))) {                      \
    }                                                                                    \
  } while (0)
#define H_WAIT_EVERY(poll_ms, cond, timeout_ms, ...)                                     \
  do {                                                                                   \
    bool h_ok_;                                                                          \
    H_WAITED_EVERY(poll_ms, h_ok_, cond, timeout_ms);                                    \
    if (!h_ok_)                                                                          \
      cr_assert_fail("%s (not within %lld ms: %s)", h_wait_msg_(__VA_ARGS__),            \
                     (long long)(timeout_ms), #cond);                                    \
  } while (0)
/* Internal to the macros above: false once until (h_now_ms) has passed, else sleeps poll_ms
 * and returns true; and a failed H_WAIT's message, formatted into a buffer of the calling
 * thread. */
bool h_wait_tick_(int64_t until, int64_t poll_ms);
const char *h_wait_msg_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Timing assertions: a latency, a rate, "within N ms". Their figures mean something only when
 * the test runs alone on the machine, not beside two others or under the sanitizers: CMake gives
 * such a test the label load in the normal build, with IDEM_TEST_TIMING=1, and scripts/test runs
 * that label alone (tests/CMakeLists.txt, IDEM_TIMED_TESTS). h_timing_asserted says whether this
 * run is one of those. H_EXPECT_TIMING(cond, fmt, ...) is cr_expect(cond, fmt, ...) there; in any
 * other run a false cond only logs "timing not asserted here: <fmt, ...>" (the figure is still
 * printed, the test goes on). What a test checks besides timing is asserted in every run. */
bool h_timing_asserted(void);
#define H_EXPECT_TIMING(cond, ...)                                                          \
  do {                                                                                      \
    if (h_timing_asserted())                                                                \
      cr_expect(cond, __VA_ARGS__);                                                         \
    else if (!(cond))                                                                       \
      cr_log_warn("timing not asserted here (label load only): %s", h_wait_msg_(__VA_ARGS__)); \
  } while (0)

/* A free TCP port on 127.0.0.1 (bound and released), none of the last 64 this process got. */
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
