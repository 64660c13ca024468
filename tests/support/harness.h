/* harness.h — the shared test harness: a real idem-coordinator process on loopback, against
 * the real Postgres that scripts/test started (IDEM_TEST_PG_URL), driven through libidem.
 *
 * Every test uses its own tenant, so tests can share the database and run in parallel.
 * Waits are conditions polled against a deadline, never bare sleeps.
 */
#ifndef IDEM_TEST_HARNESS_H
#define IDEM_TEST_HARNESS_H

#include <idem/idem.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct srv {
  pid_t pid;
  int port;
  char addr[64];
  char log_path[256];
  bool keep_log; /* h_srv_stop leaves the log even after a clean exit (the caller reads it) */
} srv;

/* An environment variable that must be set (fails the test with a clear message if not). */
const char *h_env(const char *name);

/* Starts idem-coordinator ($IDEM_COORDINATOR_BIN) on a free port against pg_url (NULL =
 * $IDEM_TEST_PG_URL) with extra args (NULL-terminated, may be NULL), and waits until
 * Admin.GetStatus answers (30 s deadline). Fails the test on error. */
void h_srv_start(srv *s, const char *pg_url, const char *const *extra_args);

/* h_srv_start whose readiness probe (Admin.GetStatus) connects with probe's options (TLS,
 * token; its address is filled in) instead of plaintext as tenant "default". */
void h_srv_start_probe(srv *s, const char *pg_url, const char *const *extra_args,
                       const idem_options *probe);

/* SIGTERM, wait up to 20 s for exit; returns the exit status (or -1 if it had to be killed). */
int h_srv_stop(srv *s);

/* Prints the last lines of the server's log to stderr (for failures). */
void h_srv_dump_log(const srv *s);

/* A fresh tenant name unique to this process and call: "t-<pid>-<n>-<rand>". */
void h_tenant(char out[64]);

/* A fresh global id / service-safe unique suffix. */
void h_unique(const char *prefix, char *out, size_t n);

/* Connects a client to s for tenant (deadline_ms 0 = 2000). Fails the test on error. */
idem_client *h_client(const srv *s, const char *tenant, int64_t deadline_ms);

/* Monotonic milliseconds. */
int64_t h_now_ms(void);

/* Sleeps ms milliseconds (only between polls of a condition). */
void h_sleep_ms(int64_t ms);

/* Runs one SQL statement with text params against $IDEM_TEST_PG_URL and returns the first
 * column of the first row as an integer (-1 if no row). Fails the test on error. */
long long h_sql_int(const char *sql, int nparams, const char *const *params);

/* A raw unary call with arbitrary request bytes (to send malformed protobuf). Returns the gRPC
 * status code; details copied into details (may be NULL). */
int h_raw_call(const char *addr, const char *method, const char *tenant, const void *req,
               size_t req_len, char *details, size_t details_len);

/* A fingerprint of everything tenant t has stored (steps, sagas, labels, policies, audit):
 * row counts plus a hash of every column. Equal before and after = nothing changed. */
long long h_tenant_hash(const char *t);

/* The value of one sample (exact name and labels, e.g. `idem_x_total{k="v"}`) on the
 * coordinator's /metrics at 127.0.0.1:port; -1 when absent (metrics.c). */
double h_metric(int port, const char *series);

/* A free TCP port on 127.0.0.1. */
int h_free_port(void);
/* Whether something accepts TCP connections on 127.0.0.1:port. */
bool h_port_open(int port);
/* How many lines of the file at path hold needle (0 without the file): a process's log. */
int h_log_count(const char *path, const char *needle);
/* Copies the file at path (a process's log) to stderr. */
void h_dump_log(const char *path);

/* A free port is only free until someone binds it: the test processes Criterion runs side by
 * side (--jobs=2) each pick ports, and two once picked the same one. Waits until the process
 * pid (its output in log) listens on 127.0.0.1:port: one more line than `listened` holds
 * "listening" (it bound the port, so nobody else answers there) and the port accepts. False
 * when it exited after one more line than `refused` holding "cannot listen" (the port was
 * taken after h_free_port chose it: the caller tries another, at most H_START_TRIES times in
 * all); a process that exits otherwise, or does not listen within 30 s, fails the test with
 * its log. */
#define H_START_TRIES 5
bool h_wait_listening(pid_t pid, const char *log, int port, int listened, int refused,
                      const char *what);

#endif
