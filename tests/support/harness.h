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

#include "etcd_proc.h"
#include "pgexec.h"
#include "spawn.h"
#include "testutil.h"

typedef struct srv {
  pid_t pid;
  int port;
  char addr[64];
  char log_path[256];
  bool keep_log; /* h_srv_stop leaves the log even after a clean exit (the caller reads it) */
} srv;

/* Starts idem-coordinator ($IDEM_COORDINATOR_BIN) on a free port against pg_url (NULL =
 * $IDEM_TEST_PG_URL; "" = no --pg, extra_args name the --store groups) with extra args
 * (NULL-terminated, may be NULL), and waits until Admin.GetStatus answers (30 s deadline). Fails
 * the test on error. */
void h_srv_start(srv *s, const char *pg_url, const char *const *extra_args);

/* h_srv_start whose readiness probe (Admin.GetStatus) connects with probe's options (TLS,
 * token; its address is filled in) instead of plaintext as tenant "default". */
void h_srv_start_probe(srv *s, const char *pg_url, const char *const *extra_args,
                       const idem_options *probe);

/* h_srv_start with NAME=VALUE entries added to the coordinator's environment (env
 * NULL-terminated, may be NULL; e.g. libfaketime's LD_PRELOAD and FAKETIME). */
void h_srv_start_env(srv *s, const char *pg_url, const char *const *extra_args,
                     const char *const *env);

/* SIGTERM, wait up to 20 s for exit; returns the exit status (or -1 if it had to be killed). */
int h_srv_stop(srv *s);

/* Prints the last lines of the server's log to stderr (for failures). */
void h_srv_dump_log(const srv *s);

/* Connects a client to s for tenant (deadline_ms 0 = 2000). Fails the test on error. */
idem_client *h_client(const srv *s, const char *tenant, int64_t deadline_ms);

/* A raw unary call with arbitrary request bytes (to send malformed protobuf). Returns the gRPC
 * status code; details copied into details (may be NULL). */
int h_raw_call(const char *addr, const char *method, const char *tenant, const void *req,
               size_t req_len, char *details, size_t details_len);
/* h_raw_call that also copies the answer's idem-reason trailer into reason ("" when none). */
int h_raw_call_reason(const char *addr, const char *method, const char *tenant, const void *req,
                      size_t req_len, char *details, size_t details_len, char *reason,
                      size_t reason_len);

/* h_raw_call that copies the value of one trailing metadata entry (e.g. "idem-group") into
 * value ("" when absent). */
int h_raw_call_trailer(const char *addr, const char *method, const char *tenant, const void *req,
                       size_t req_len, char *details, size_t details_len, const char *trailer,
                       char *value, size_t value_len);

/* h_raw_call with more: the trailer to copy (default idem-reason) into value, the deadline
 * (default 5000 ms), with resp set the answer's bytes (malloc'd into *resp, resp_len), and with
 * trailers set every trailing metadata entry as "key: value\n" lines (cut at trailers_len). */
typedef struct h_raw_opts {
  const char *trailer;
  char *value;
  size_t value_len;
  char *trailers;
  size_t trailers_len;
  int64_t deadline_ms;
  void **resp;
  size_t resp_len;
} h_raw_opts;
int h_raw_call_opts(const char *addr, const char *method, const char *tenant, const void *req,
                    size_t req_len, char *details, size_t details_len, h_raw_opts *o);
/* The value of key in h_raw_opts.trailers' "key: value\n" lines, into out ("" when absent). */
void h_trailer_of(const char *lines, const char *key, char *out, size_t cap);

/* A fingerprint of everything tenant t has stored (steps, sagas, labels, policies, audit):
 * row counts plus a hash of every column. Equal before and after = nothing changed. */
long long h_tenant_hash(const char *t);

/* Sets the policy of (svc, op) for c's tenant: failure mode mode (IDEM_FAIL_*), retention 1 h,
 * lease 5 s; fails the test unless the coordinator says OK. */
void h_set_policy(idem_client *c, const char *svc, const char *op, int mode);

/* An action for idem_step_run that counts its runs (h_action_run, its arg an h_action). */
typedef struct h_action {
  int calls;      /* how many times it ran */
  bool unguarded; /* the last run's ctx->unguarded */
  int code;       /* the code it answers */
} h_action;
/* The step function: counts the run, notes ctx->unguarded, and answers SUCCEEDED with the
 * h_action's code and the body "ok %ref". */
void h_action_run(void *arg, const idem_step_ctx *ctx, idem_step_output *out);

/* GET path from 127.0.0.1:port over HTTP/1.0: the status code; the malloc'd body in *body. */
int h_http_get(int port, const char *path, char **body);
/* One HTTP/1.0 request to 127.0.0.1:port with the cookie (NULL: none) and a form body (NULL:
 * none, as for GET): the status; the whole response, headers included, in *resp (malloc'd). */
int h_http_request(int port, const char *method, const char *path, const char *cookie,
                   const char *form, char **resp);
/* The text after needle in s up to the first of the stop characters, into out: false when
 * needle is absent or the text does not fit. */
bool h_text_after(const char *s, const char *needle, const char *stop, char *out, size_t cap);
/* A development session of tenant on the console at 127.0.0.1:port (its / page with ?tenant=):
 * "idem_session=ID" into cookie; fails the test when the page or the cookie is missing. */
void h_console_session(int port, const char *tenant, char *cookie, size_t cap);

/* The value of one sample (exact name and labels, e.g. `idem_x_total{k="v"}`) on the
 * coordinator's /metrics at 127.0.0.1:port; -1 when absent (metrics.c). */
double h_metric(int port, const char *series);

/* --- the fixture the suites share ---
 * One coordinator against $IDEM_TEST_PG_URL, a fresh tenant, and a client for that tenant. */
typedef struct h_fixture {
  srv s;
  char t[64];       /* the tenant (h_tenant) */
  idem_client *c;   /* for t; NULL with no_client */
  int metrics_port; /* with metrics: the --metrics port on 127.0.0.1; else 0 */
  bool any_exit;    /* h_fixture_stop accepts any exit status */
  etcd_proc etcd;   /* with etcd: the private etcd the coordinator is elected through */
  char db[64];      /* with etcd: the coordinator's own database (pgx_db_create), else "" */
  char pg_url[256]; /* its URL */
} h_fixture;

typedef struct h_fixture_conf {
  const char *const *args; /* more coordinator arguments (NULL-terminated, may be NULL) */
  bool metrics;            /* --metrics on a free port */
  bool no_client;          /* connect no client */
  int64_t deadline_ms;     /* the client's deadline (0 = 2000) */
  bool any_exit;           /* stopping does not require exit status 0 */
  bool etcd;               /* elected through a private etcd (--etcd), on a database of its
                              own: started, and leading, before h_fixture_start returns */
  const char *const *env;  /* NAME=VALUE added to the coordinator's environment (may be NULL) */
} h_fixture_conf;

/* Starts the coordinator (and its etcd), makes the tenant, connects the client (conf may be
 * NULL). */
void h_fixture_start(h_fixture *f, const h_fixture_conf *conf);
/* Closes the client and stops the coordinator (SIGTERM): it must drain and exit 0 unless
 * any_exit; then its etcd, if any. */
void h_fixture_stop(h_fixture *f);

/* The default fixture H, for TestSuite(name, .init = h_setup, .fini = h_teardown): h_setup
 * starts it with no conf, h_teardown stops it (and clears the thread's idem_trace_set). A suite that needs a conf calls
 * h_fixture_start(&H, &conf) from its own .init and keeps h_teardown. */
extern h_fixture H;
void h_setup(void);
void h_teardown(void);

#endif
