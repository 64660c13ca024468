/* testutil.c — see testutil.h. */
#include "testutil.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "spawn.h"

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

int64_t h_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void h_sleep_ms(int64_t ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

bool h_wait_tick_(int64_t until, int64_t poll_ms) {
  if (h_now_ms() >= until) return false;
  h_sleep_ms(poll_ms);
  return true;
}

const char *h_wait_msg_(const char *fmt, ...) {
  static _Thread_local char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return msg;
}

bool h_timing_asserted(void) {
  const char *v = getenv("IDEM_TEST_TIMING");
  return v && strcmp(v, "1") == 0;
}

/* The kernel may hand the same port to two binds in a row once the first socket is closed: a
 * node's --metrics and --console once got the same one, and every retry kept both. So a port
 * this process was given in its last H_RECENT picks is never given again. */
#define H_RECENT 64
int h_free_port(void) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static int recent[H_RECENT];
  static unsigned next;
  pthread_mutex_lock(&mu);
  int port = 0;
  for (int tries = 0; tries < 100 && !port; tries++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    socklen_t len = sizeof a;
    cr_assert(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    port = ntohs(a.sin_port);
    for (int i = 0; i < H_RECENT; i++)
      if (recent[i] == port) port = 0;
  }
  cr_assert(port, "no port free that this test has not been given already");
  recent[next++ % H_RECENT] = port;
  pthread_mutex_unlock(&mu);
  return port;
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

void h_tenant(char out[64]) {
  h_unique("t", out, 64);
}

int h_line_count(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int n = 0;
  for (int ch; (ch = fgetc(f)) != EOF;) n += ch == '\n';
  fclose(f);
  return n;
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

void h_dump_log(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[1024];
  fprintf(stderr, "--- %s\n", path);
  while (fgets(line, sizeof line, f)) fputs(line, stderr);
  fclose(f);
}

bool h_wait_listening(pid_t pid, const char *log, int port, int listened, int refused,
                      const char *what) {
  /* polling the port as well keeps a client's channel out of gRPC's reconnect backoff */
  int64_t deadline = h_now_ms() + 30000;
  while (!(h_log_count(log, "listening") > listened && h_port_open(port))) {
    if (spawn_reap(pid, NULL)) {
      if (h_log_count(log, "cannot listen") > refused) return false;
      h_dump_log(log);
      cr_assert_fail("%s exited during start-up", what);
    }
    if (h_now_ms() > deadline) {
      h_dump_log(log);
      cr_assert_fail("%s did not listen within 30 s", what);
    }
    h_sleep_ms(5); /* the next poll of the log, the port and the process */
  }
  return true;
}
