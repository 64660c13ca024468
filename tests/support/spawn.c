/* spawn.c — see spawn.h. */
#include "spawn.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

extern char **environ;

/* Children started and not reaped yet: killed when the test process exits. */
#define MAX_LIVE 64
static pid_t live_pids[MAX_LIVE];

static void kill_live(void) {
  for (int i = 0; i < MAX_LIVE; i++) {
    if (live_pids[i] > 0 && waitpid(live_pids[i], NULL, WNOHANG) == 0) {
      kill(live_pids[i], SIGKILL);
      waitpid(live_pids[i], NULL, 0);
    }
    live_pids[i] = 0;
  }
}

static void track(pid_t pid) {
  static bool registered;
  if (!registered) {
    atexit(kill_live);
    registered = true;
  }
  for (int i = 0; i < MAX_LIVE; i++)
    if (live_pids[i] == 0) {
      live_pids[i] = pid;
      return;
    }
  cr_assert_fail("more than %d processes started and not reaped", MAX_LIVE);
}

static void untrack(pid_t pid) {
  for (int i = 0; i < MAX_LIVE; i++)
    if (live_pids[i] == pid) live_pids[i] = 0;
}

static int status_of(int wst) {
  if (WIFEXITED(wst)) return WEXITSTATUS(wst);
  if (WIFSIGNALED(wst)) return 128 + WTERMSIG(wst);
  return 128;
}

/* argv0 itself when it holds a '/', else the first executable of that name in $PATH (argv0 when
 * there is none: exec fails and the child exits 127). */
static const char *find_program(const char *argv0, char *buf, size_t cap) {
  if (strchr(argv0, '/')) return argv0;
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
  for (const char *p = path; *p;) {
    size_t len = strcspn(p, ":");
    snprintf(buf, cap, "%.*s/%s", (int)len, p, argv0);
    if (len > 0 && access(buf, X_OK) == 0) return buf;
    p += len;
    if (*p == ':') p++;
  }
  return argv0;
}

/* The environment with o->env added (a NAME= already there is replaced). Built before fork:
 * the child only calls what is safe after fork in a threaded process. */
static char **make_env(const char *const *add) {
  if (!add || !add[0]) return environ;
  size_t n = 0, k = 0;
  while (environ[n]) n++;
  while (add[k]) k++;
  char **env = calloc(n + k + 1, sizeof *env);
  cr_assert(env);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    bool replaced = false;
    for (size_t j = 0; j < k && !replaced; j++) {
      const char *eq = strchr(add[j], '=');
      size_t name_len = eq ? (size_t)(eq - add[j]) + 1 : strlen(add[j]);
      replaced = strncmp(environ[i], add[j], name_len) == 0;
    }
    if (!replaced) env[m++] = environ[i];
  }
  for (size_t j = 0; j < k; j++) env[m++] = (char *)add[j];
  env[m] = NULL;
  return env;
}

static int open_log(const char *path, bool append) {
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  cr_assert(fd >= 0, "cannot open %s: %s", path, strerror(errno));
  return fd;
}

pid_t spawn_start(const char *const *argv, const spawn_opts *o) {
  static const spawn_opts none;
  if (!o) o = &none;
  cr_assert(argv && argv[0], "spawn_start: no program");
  char found[1024];
  const char *prog = find_program(argv[0], found, sizeof found);
  char **env = make_env(o->env);
  const char *out_path = o->out_log ? o->out_log : o->log;
  const char *err_path = o->err_log ? o->err_log : o->log;
  int out = out_path ? open_log(out_path, o->append) : -1;
  int err = !err_path ? -1 : err_path == out_path ? out : open_log(err_path, o->append);

  pid_t parent = getpid();
  pid_t pid = fork();
  cr_assert(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    /* the child: die with the thread that forked us; if that already happened, go */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    if (out >= 0) dup2(out, 1);
    if (err >= 0) dup2(err, 2);
    execve(prog, (char *const *)argv, env);
    _exit(127);
  }
  if (out >= 0) close(out);
  if (err >= 0 && err != out) close(err);
  if (env != environ) free(env);
  track(pid);
  return pid;
}

bool spawn_reap(pid_t pid, int *status) {
  int wst = 0;
  pid_t r = waitpid(pid, &wst, WNOHANG);
  if (r != pid) return false;
  untrack(pid);
  if (status) *status = status_of(wst);
  return true;
}

void spawn_kill(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  untrack(pid);
}

int spawn_wait(pid_t pid, int64_t timeout_ms) {
  int st = 0;
  bool exited;
  H_WAITED_EVERY(5, exited, spawn_reap(pid, &st), timeout_ms);
  if (exited) return st;
  spawn_kill(pid);
  return -1;
}

int spawn_stop(pid_t pid, int64_t timeout_ms) {
  kill(pid, SIGTERM);
  return spawn_wait(pid, timeout_ms);
}

int spawn_run(const char *const *argv, const spawn_opts *o, int64_t timeout_ms) {
  return spawn_wait(spawn_start(argv, o), timeout_ms);
}
