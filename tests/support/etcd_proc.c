#include "etcd_proc.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int etcd_free_port(void) {
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

bool etcd_healthy(const etcd_proc *e) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "curl -sf -m 1 -o /dev/null %s/health", e->url);
  return system(cmd) == 0;
}

static void spawn(etcd_proc *e) {
  const char *bin = getenv("IDEM_TEST_ETCD");
  if (!bin || !*bin) bin = "/usr/bin/etcd";
  char client[64], peer[64], cluster[96], data[160], log[160];
  snprintf(client, sizeof client, "http://127.0.0.1:%d", e->client_port);
  snprintf(peer, sizeof peer, "http://127.0.0.1:%d", e->peer_port);
  snprintf(cluster, sizeof cluster, "default=%s", peer);
  snprintf(data, sizeof data, "%s/data", e->dir);
  snprintf(log, sizeof log, "%s/etcd.log", e->dir);
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execl(bin, bin, "--name", "default", "--data-dir", data, "--listen-client-urls", client,
          "--advertise-client-urls", client, "--listen-peer-urls", peer,
          "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster,
          "--log-level", "warn", (char *)NULL);
    _exit(127);
  }
  e->pid = pid;
  long long until = now_ms() + 15000;
  while (!etcd_healthy(e)) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      e->pid = 0;
      cr_assert_fail("etcd exited at start (see %s)", log);
    }
    cr_assert_lt(now_ms(), until, "etcd did not answer within 15 s (see %s)", log);
    nap(50);
  }
}

void etcd_start(etcd_proc *e) {
  memset(e, 0, sizeof *e);
  snprintf(e->dir, sizeof e->dir, "/tmp/idem-etcd.XXXXXX");
  cr_assert(mkdtemp(e->dir), "mkdtemp");
  e->client_port = etcd_free_port();
  do e->peer_port = etcd_free_port(); while (e->peer_port == e->client_port);
  snprintf(e->url, sizeof e->url, "http://127.0.0.1:%d", e->client_port);
  spawn(e);
}

void etcd_restart(etcd_proc *e) {
  cr_assert_eq(e->pid, 0, "etcd is still running");
  spawn(e);
}

void etcd_kill(etcd_proc *e) {
  if (!e->pid) return;
  kill(e->pid, SIGKILL);
  waitpid(e->pid, NULL, 0);
  e->pid = 0;
}

void etcd_stop(etcd_proc *e) {
  if (e->pid) {
    kill(e->pid, SIGTERM);
    long long until = now_ms() + 5000;
    for (;;) {
      if (waitpid(e->pid, NULL, WNOHANG) == e->pid) break;
      if (now_ms() > until) {
        kill(e->pid, SIGKILL);
        waitpid(e->pid, NULL, 0);
        break;
      }
      nap(20);
    }
    e->pid = 0;
  }
  if (e->dir[0] && strncmp(e->dir, "/tmp/idem-etcd.", 15) == 0) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", e->dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", e->dir);
  }
}
