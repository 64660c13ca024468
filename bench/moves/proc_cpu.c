/* proc_cpu.c — see proc_cpu.h. */
#include "proc_cpu.h"

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

cpu_mark cpu_now(void) {
  cpu_mark m = {0};
  FILE *f = fopen("/proc/stat", "r");
  unsigned long long v[8] = {0};
  if (f && fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                  &v[4], &v[5], &v[6], &v[7]) == 8) {
    for (int i = 0; i < 8; i++) m.total += v[i];
    m.busy = m.total - v[3] - v[4]; /* idle, iowait */
  }
  if (f) fclose(f);
  return m;
}

double busy_share(cpu_mark a, cpu_mark b) {
  return b.total > a.total ? (double)(b.busy - a.busy) / (double)(b.total - a.total) : 0;
}

/* A process's utime + stime in clock ticks; false when it is gone. */
static bool proc_ticks(int pid, unsigned long long *ticks) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = 0;
  char *p = strrchr(buf, ')'); /* the fields after the command name: utime is the 14th */
  unsigned long long ut = 0, st = 0;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
    return false;
  *ticks = ut + st;
  return true;
}

/* A process's command line, its arguments joined by spaces; a PostgreSQL backend's title without
 * the activity at its end (the same process throughout). False when it is gone. */
static bool proc_cmdline(int pid, char *out, size_t cap) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t got = fread(out, 1, cap - 1, f);
  fclose(f);
  out[got] = 0;
  for (size_t j = 0; j < got; j++)
    if (!out[j]) out[j] = ' ';
  char *act = strncmp(out, "postgres: ", 10) == 0 ? strchr(out, ')') : NULL;
  if (act) act[1] = 0;
  return true;
}

/* Calls fn for every process. */
static void each_pid(void (*fn)(int pid, void *arg), void *arg) {
  DIR *d = opendir("/proc");
  if (!d) return;
  for (struct dirent *de; (de = readdir(d));) {
    int pid = atoi(de->d_name);
    if (pid > 0) fn(pid, arg);
  }
  closedir(d);
}

/* The replication processes' CPU: the last utime + stime seen per PID, by kind. */
#define REPL_PIDS 64
static struct {
  int pid[REPL_PIDS], kind[REPL_PIDS];
  unsigned long long ticks[REPL_PIDS];
  int n;
} repl;
static pthread_mutex_t repl_mu = PTHREAD_MUTEX_INITIALIZER;

static void repl_one(int pid, void *arg) {
  (void)arg;
  char cmd[256];
  unsigned long long t;
  if (!proc_cmdline(pid, cmd, sizeof cmd)) return;
  int kind = strncmp(cmd, "postgres: walsender", 19) == 0 ? REPL_WALSENDER
             : strncmp(cmd, "postgres: logical replication ", 30) == 0 && !strstr(cmd, "launcher")
                 ? REPL_WORKER
                 : -1;
  if (kind < 0 || !proc_ticks(pid, &t)) return;
  int i = 0;
  while (i < repl.n && repl.pid[i] != pid) i++;
  if (i == repl.n) {
    if (repl.n == REPL_PIDS) return;
    repl.n++, repl.pid[i] = pid, repl.kind[i] = kind;
  }
  repl.ticks[i] = t;
}

void repl_sample(void) {
  pthread_mutex_lock(&repl_mu);
  each_pid(repl_one, NULL);
  pthread_mutex_unlock(&repl_mu);
}

double repl_seconds(int kind) {
  unsigned long long t = 0;
  pthread_mutex_lock(&repl_mu);
  for (int i = 0; i < repl.n; i++)
    if (repl.kind[i] == kind) t += repl.ticks[i];
  pthread_mutex_unlock(&repl_mu);
  return (double)t / (double)sysconf(_SC_CLK_TCK);
}

static void snap_one(int pid, void *arg) {
  snap *sn = arg;
  if (sn->n == SNAP_MAX) return;
  int i = sn->n;
  if (!proc_ticks(pid, &sn->ticks[i])) return;
  if (!proc_cmdline(pid, sn->cmd[i], sizeof sn->cmd[i])) sn->cmd[i][0] = 0;
  sn->pid[i] = pid;
  sn->n++;
}

void take_snap(snap *sn) {
  sn->n = 0;
  each_pid(snap_one, sn);
}

static unsigned long long ticks_of(const snap *sn, int pid) {
  for (int i = 0; i < sn->n; i++)
    if (sn->pid[i] == pid) return sn->ticks[i];
  return 0;
}

void print_cpu_top(FILE *out, const snap *a0, const snap *a1, double sa, const snap *b0,
                   const snap *b1, double sb) {
  static char name[SNAP_MAX][48];
  static double ra[SNAP_MAX], rb[SNAP_MAX];
  int n = 0;
  double hz = (double)sysconf(_SC_CLK_TCK);
  for (int pass = 0; pass < 2; pass++) {
    const snap *s0 = pass ? b0 : a0, *s1 = pass ? b1 : a1;
    double secs = pass ? sb : sa;
    for (int i = 0; i < s1->n; i++) {
      unsigned long long before = ticks_of(s0, s1->pid[i]);
      if (s1->ticks[i] < before || secs <= 0) continue;
      int k = 0;
      while (k < n && strcmp(name[k], s1->cmd[i])) k++;
      if (k == n) {
        if (n == SNAP_MAX) continue;
        snprintf(name[n], sizeof name[n], "%s", s1->cmd[i]);
        ra[n] = rb[n] = 0, n++;
      }
      (pass ? rb : ra)[k] += (double)(s1->ticks[i] - before) / hz / secs;
    }
  }
  fprintf(out, "CPU by command, cores (before2 -> during), the 10 that rose most:\n");
  for (int shown = 0; shown < 10; shown++) {
    int best = -1;
    for (int k = 0; k < n; k++)
      if (ra[k] >= 0 && (best < 0 || rb[k] - ra[k] > rb[best] - ra[best])) best = k;
    if (best < 0) break;
    fprintf(out, "  %5.2f -> %5.2f  %s\n", ra[best], rb[best], name[best]);
    ra[best] = -1;
  }
}
