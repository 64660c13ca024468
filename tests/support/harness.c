#include "harness.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *h_env(const char *name) {
  const char *v = getenv(name);
  cr_assert(v && *v, "environment variable %s is not set: run the tests through scripts/test",
            name);
  return v;
}

int64_t h_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void h_sleep_ms(int64_t ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int h_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
  socklen_t len = sizeof a;
  cr_assert(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
  close(fd);
  return ntohs(a.sin_port);
}

bool h_port_open(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  close(fd);
  return ok;
}

void h_unique(const char *prefix, char *out, size_t n) {
  static atomic_int counter;
  uint32_t r = 0;
  cr_assert(getrandom(&r, sizeof r, 0) == sizeof r);
  snprintf(out, n, "%s-%d-%d-%08x", prefix, (int)getpid(), atomic_fetch_add(&counter, 1), r);
}

void h_tenant(char out[64]) { h_unique("t", out, 64); }

idem_client *h_client(const srv *s, const char *tenant, int64_t deadline_ms) {
  idem_options o = {.address = s->addr, .tenant = tenant, .deadline_ms = deadline_ms};
  idem_client *c = NULL;
  idem_error e = {0};
  int rc = idem_connect(&o, &c, &e);
  cr_assert_eq(rc, IDEM_OK, "idem_connect: %s", e.message);
  return c;
}

void h_dump_log(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[1024];
  fprintf(stderr, "--- %s\n", path);
  while (fgets(line, sizeof line, f)) fputs(line, stderr);
  fclose(f);
}

void h_srv_dump_log(const srv *s) { h_dump_log(s->log_path); }

/* Servers still running when the test process exits (a failed assertion skips h_srv_stop) are
 * killed then, so a failing test leaves no coordinator behind. */
#define MAX_LIVE 16
static pid_t live_pids[MAX_LIVE];

static void kill_live(void) {
  for (int i = 0; i < MAX_LIVE; i++) {
    /* only a child that is still running (a pid reaped elsewhere is not ours any more) */
    if (live_pids[i] > 0 && waitpid(live_pids[i], NULL, WNOHANG) == 0) {
      kill(live_pids[i], SIGKILL);
      waitpid(live_pids[i], NULL, 0);
    }
    live_pids[i] = 0;
  }
}

static void track(pid_t pid, bool add) {
  static bool registered;
  if (!registered) {
    atexit(kill_live);
    registered = true;
  }
  for (int i = 0; i < MAX_LIVE; i++)
    if (add ? live_pids[i] == 0 : live_pids[i] == pid) {
      live_pids[i] = add ? pid : 0;
      return;
    }
}

void h_srv_start(srv *s, const char *pg_url, const char *const *extra_args) {
  h_srv_start_probe(s, pg_url, extra_args, NULL);
}

int h_log_count(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[2048];
  int n = 0;
  while (fgets(line, sizeof line, f)) n += strstr(line, needle) != NULL;
  fclose(f);
  return n;
}

/* Forks and execs the coordinator with its output in s->log_path; sets s->pid. */
static void spawn(srv *s, const char *bin, const char *const *argv) {
  pid_t pid = fork();
  cr_assert(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    int fd = open(s->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execv(bin, (char *const *)argv);
    _exit(127);
  }
  s->pid = pid;
  track(pid, true);
}

bool h_wait_listening(pid_t pid, const char *log, int port, int listened, int refused,
                      const char *what) {
  /* polling the port as well keeps a client's channel out of gRPC's reconnect backoff */
  int64_t deadline = h_now_ms() + 30000;
  while (!(h_log_count(log, "listening") > listened && h_port_open(port))) {
    int wst;
    if (waitpid(pid, &wst, WNOHANG) == pid) {
      track(pid, false);
      if (h_log_count(log, "cannot listen") > refused) return false;
      h_dump_log(log);
      cr_assert_fail("%s exited during start-up", what);
    }
    if (h_now_ms() > deadline) {
      h_dump_log(log);
      cr_assert_fail("%s did not listen within 30 s", what);
    }
    h_sleep_ms(5);
  }
  return true;
}

/* Ready = this coordinator logged "listening", then Admin.GetStatus answers; on another port
 * when the one chosen was taken (h_wait_listening). */
void h_srv_start_probe(srv *s, const char *pg_url, const char *const *extra_args,
                       const idem_options *probe) {
  const char *bin = h_env("IDEM_COORDINATOR_BIN");
  if (!pg_url) pg_url = h_env("IDEM_TEST_PG_URL");
  memset(s, 0, sizeof *s);
  char tag[64];
  h_unique("srv", tag, sizeof tag);
  snprintf(s->log_path, sizeof s->log_path, "/tmp/idem-%s.log", tag);
  for (int attempt = 1;; attempt++) {
    s->port = h_free_port();
    snprintf(s->addr, sizeof s->addr, "127.0.0.1:%d", s->port);
    const char *argv[32];
    int argc = 0;
    argv[argc++] = bin;
    argv[argc++] = "--listen";
    argv[argc++] = s->addr;
    argv[argc++] = "--pg";
    argv[argc++] = pg_url;
    for (int i = 0; extra_args && extra_args[i] && argc < 30; i++) argv[argc++] = extra_args[i];
    argv[argc] = NULL;
    spawn(s, bin, argv);
    if (h_wait_listening(s->pid, s->log_path, s->port, 0, 0, "idem-coordinator")) break;
    s->pid = 0;
    if (attempt == H_START_TRIES) {
      h_srv_dump_log(s);
      cr_assert_fail("idem-coordinator found no free port in %d tries", H_START_TRIES);
    }
  }
  idem_options o = {.tenant = "default", .deadline_ms = 2000};
  if (probe) o = *probe;
  o.address = s->addr;
  idem_client *c = NULL;
  idem_error ce = {0};
  int crc = idem_connect(&o, &c, &ce);
  cr_assert_eq(crc, IDEM_OK, "idem_connect: %s", ce.message);
  idem_status st;
  idem_error e = {0};
  int rc = idem_get_status(c, &st, &e);
  idem_close(c);
  if (rc != IDEM_OK) h_srv_dump_log(s);
  cr_assert_eq(rc, IDEM_OK, "GetStatus after start-up: %s", e.message);
}

int h_srv_stop(srv *s) {
  if (s->pid <= 0) return -1;
  track(s->pid, false);
  kill(s->pid, SIGTERM);
  int64_t deadline = h_now_ms() + 20000;
  int wst = 0;
  for (;;) {
    pid_t r = waitpid(s->pid, &wst, WNOHANG);
    if (r == s->pid) break;
    if (h_now_ms() > deadline) {
      kill(s->pid, SIGKILL);
      waitpid(s->pid, &wst, 0);
      s->pid = 0;
      return -1;
    }
    h_sleep_ms(10);
  }
  s->pid = 0;
  if (WIFEXITED(wst)) {
    if (WEXITSTATUS(wst) == 0 && !s->keep_log) unlink(s->log_path);
    return WEXITSTATUS(wst);
  }
  return 128 + (WIFSIGNALED(wst) ? WTERMSIG(wst) : 0);
}

long long h_sql_int(const char *sql, int nparams, const char *const *params) {
  PGconn *conn = PQconnectdb(h_env("IDEM_TEST_PG_URL"));
  cr_assert(PQstatus(conn) == CONNECTION_OK, "connect: %s", PQerrorMessage(conn));
  PGresult *r = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
  cr_assert(PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK,
            "sql %s: %s", sql, PQerrorMessage(conn));
  long long v = -1;
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
    v = atoll(PQgetvalue(r, 0, 0));
  PQclear(r);
  PQfinish(conn);
  return v;
}

int h_raw_call(const char *addr, const char *method, const char *tenant, const void *req,
               size_t req_len, char *details, size_t details_len) {
  grpc_init();
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  grpc_channel *ch = grpc_channel_create(addr, creds, NULL);
  grpc_channel_credentials_release(creds);
  grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
  gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                                       gpr_time_from_millis(5000, GPR_TIMESPAN));
  grpc_slice mslice = grpc_slice_from_copied_string(method);
  grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, mslice, NULL,
                                             deadline, NULL);
  grpc_slice_unref(mslice);

  grpc_metadata md = {0};
  md.key = grpc_slice_from_static_string("idem-tenant");
  md.value = grpc_slice_from_copied_string(tenant ? tenant : "default");
  grpc_slice payload = grpc_slice_from_copied_buffer(req, req_len);
  grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&payload, 1);
  grpc_slice_unref(payload);
  grpc_byte_buffer *recv = NULL;
  grpc_metadata_array init_md, trail_md;
  grpc_metadata_array_init(&init_md);
  grpc_metadata_array_init(&trail_md);
  grpc_status_code status = GRPC_STATUS_UNKNOWN;
  grpc_slice status_details = grpc_empty_slice();

  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].data.send_initial_metadata.count = 1;
  ops[0].data.send_initial_metadata.metadata = &md;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &init_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &recv;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &trail_md;
  ops[5].data.recv_status_on_client.status = &status;
  ops[5].data.recv_status_on_client.status_details = &status_details;
  int tag = 1;
  cr_assert_eq(grpc_call_start_batch(call, ops, 6, &tag, NULL), GRPC_CALL_OK);
  grpc_event ev = grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  cr_assert_eq(ev.type, GRPC_OP_COMPLETE);

  if (details && details_len) {
    size_t n = GRPC_SLICE_LENGTH(status_details);
    if (n >= details_len) n = details_len - 1;
    memcpy(details, GRPC_SLICE_START_PTR(status_details), n);
    details[n] = '\0';
  }
  grpc_slice_unref(status_details);
  grpc_slice_unref(md.value);
  grpc_metadata_array_destroy(&init_md);
  grpc_metadata_array_destroy(&trail_md);
  grpc_byte_buffer_destroy(send);
  if (recv) grpc_byte_buffer_destroy(recv);
  grpc_call_unref(call);
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
  grpc_channel_destroy(ch);
  grpc_shutdown();
  return (int)status;
}

/* A fingerprint of everything tenant t has stored: rows and a hash of every column. */
long long h_tenant_hash(const char *t) {
  const char *p[] = {t};
  return h_sql_int(
      "select (select count(*) + coalesce(sum(hashtext(s::text)::bigint), 0) from idem_steps s"
      " where tenant = $1)"
      " + (select count(*) + coalesce(sum(hashtext(g::text)::bigint), 0) from idem_sagas g"
      " where tenant = $1)"
      " + (select count(*) + coalesce(sum(hashtext(l::text)::bigint), 0) from idem_saga_labels l"
      " where tenant = $1)"
      " + (select count(*) + coalesce(sum(hashtext(p::text)::bigint), 0) from idem_policies p"
      " where tenant = $1)"
      " + (select count(*) + coalesce(sum(hashtext(a::text)::bigint), 0) from idem_audit a"
      " where tenant = $1)",
      1, p);
}
