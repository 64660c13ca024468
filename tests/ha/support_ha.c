/* support_ha.c — the cluster of ha.h: etcd, the Patroni pair, the coordinators. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "ha.h"

static const char *const NODE[HA_NODES] = {"pg1", "pg2"};

static ha_cluster *live; /* stopped by ha_fini when a test ends early */

static void read_file(const char *path, char *out, size_t n) {
  out[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  size_t len = fread(out, 1, n - 1, f);
  fclose(f);
  out[len] = '\0';
  while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' ')) out[--len] = '\0';
}

int ha_lib(ha_cluster *cl, char *out, size_t n, int64_t timeout_ms, const char *fn,
           const char *arg) {
  char lib[512], call[256], out_path[192], log[192];
  snprintf(lib, sizeof lib, "%s/scripts/lib/patroni.sh", h_env("IDEM_SOURCE_DIR"));
  snprintf(call, sizeof call, "patroni_%s", fn);
  snprintf(out_path, sizeof out_path, "%s/lib.out", cl->dir);
  snprintf(log, sizeof log, "%s/lib.log", cl->dir);
  /* $1 the library, $2 the function, $3 the directory, $4 the argument (may be empty) */
  const char *argv[] = {
      "bash",         "-c", ". \"$1\" && \"$2\" \"$3\" ${4:+\"$4\"}", "ha", lib, call, cl->dir,
      arg ? arg : "", NULL};
  int st = spawn_run(argv, &(spawn_opts){.out_log = out_path, .err_log = log}, timeout_ms);
  if (out) read_file(out_path, out, n);
  return st;
}

static int http_status(int port, const char *path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  struct timeval tv = {.tv_sec = 2};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int status = 0;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
    char req[128], buf[64];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
    if (write(fd, req, (size_t)n) == n) {
      ssize_t r = read(fd, buf, sizeof buf - 1);
      if (r > 0) {
        buf[r] = '\0';
        if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) status = 0;
      }
    }
  }
  close(fd);
  return status;
}

int ha_primary(ha_cluster *cl) {
  for (int i = 0; i < HA_NODES; i++)
    if (http_status(cl->api_port[i], "/primary") == 200) return i;
  return -1;
}

pid_t ha_agent_pid(ha_cluster *cl, int node) {
  char path[192], buf[32];
  snprintf(path, sizeof path, "%s/%s/agent.pid", cl->dir, NODE[node]);
  read_file(path, buf, sizeof buf);
  pid_t pid = (pid_t)atoi(buf);
  return pid > 0 && kill(pid, 0) == 0 ? pid : 0;
}

pid_t ha_postmaster_pid(ha_cluster *cl, int node) {
  char path[192], buf[512];
  snprintf(path, sizeof path, "%s/%s/data/postmaster.pid", cl->dir, NODE[node]);
  read_file(path, buf, sizeof buf);
  pid_t pid = (pid_t)atoi(buf); /* line 1 */
  return pid > 0 && kill(pid, 0) == 0 ? pid : 0;
}

void ha_kill(pid_t pid) {
  if (pid > 0) kill(pid, SIGKILL);
}

/* The PIDs whose parent is ppid (from /proc), at most n. */
static int children(pid_t ppid, pid_t *out, int n) {
  DIR *d = opendir("/proc");
  int k = 0;
  struct dirent *de;
  while (d && (de = readdir(d)) != NULL && k < n) {
    pid_t pid = (pid_t)atoi(de->d_name);
    if (pid <= 0) continue;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    read_file(path, buf, sizeof buf);
    const char *rp = strrchr(buf, ')'); /* "pid (comm) state ppid ..." */
    int parent = 0;
    if (rp && sscanf(rp + 1, " %*c %d", &parent) == 1 && parent == ppid) out[k++] = pid;
  }
  if (d) closedir(d);
  return k;
}

void ha_kill_host(ha_cluster *cl, int node, pid_t *agent_out, pid_t *pm_out) {
  pid_t agent = ha_agent_pid(cl, node), pm = ha_postmaster_pid(cl, node);
  cr_assert(agent > 0 && pm > 0, "pg%d: agent %d, postmaster %d", node + 1, (int)agent, (int)pm);
  ha_kill(agent);
  kill(pm, SIGSTOP); /* forks no more: its children are all there to be found */
  pid_t kids[512];
  int n = children(pm, kids, 512);
  for (int i = 0; i < n; i++) kill(kids[i], SIGKILL);
  ha_kill(pm);
  *agent_out = agent;
  *pm_out = pm;
}

/* Whether Patroni's API says node is primary, its postmaster other than not_pid (0: any). */
static bool is_primary(ha_cluster *cl, int node, pid_t not_pid) {
  if (http_status(cl->api_port[node], "/primary") != 200) return false;
  pid_t pm = ha_postmaster_pid(cl, node);
  return not_pid <= 0 || (pm > 0 && pm != not_pid);
}

int64_t ha_wait_primary(ha_cluster *cl, int node, pid_t not_pid, int64_t within_ms) {
  int64_t t0 = h_now_ms();
  bool primary;
  H_WAITED_EVERY(50, primary, is_primary(cl, node, not_pid), within_ms);
  return primary ? h_now_ms() - t0 : -1;
}

static int env_int(const char *text, const char *key) {
  const char *p = strstr(text, key);
  return p ? atoi(p + strlen(key)) : 0;
}

void ha_print_settings(const ha_cluster *cl, const char *scenario) {
  printf(
      "%s: Patroni ttl %d s, loop_wait %d s, retry_timeout %d s, synchronous_mode on (not "
      "strict); host-loss bound ttl + loop_wait + 3 s = %d s\n",
      scenario, cl->ttl, cl->loop_wait, cl->retry_timeout, cl->ttl + cl->loop_wait + 3);
  fflush(stdout);
}

/* Patroni missing: the test is skipped, except under CI=true, where a skipped HA suite would
 * pass unseen: there it fails. The path is scripts/lib/patroni.sh's (/usr/bin/patroni), or
 * $IDEM_PATRONI_BIN, which only this check reads (tests/ha/ci_skip_test.sh sets it to a path
 * that does not exist, to test the rule without uninstalling Patroni). */
static void require_patroni(void) {
  const char *bin = getenv("IDEM_PATRONI_BIN");
  if (!bin || !*bin) bin = "/usr/bin/patroni";
  if (access(bin, X_OK) == 0) return;
  const char *ci = getenv("CI");
  if (ci && strcmp(ci, "true") == 0)
    cr_assert_fail("%s is not installed and CI=true: the HA tests must run in CI, not skip "
             "(apt-get install patroni; scripts/test installs it)",
             bin);
  cr_skip_test("%s is not installed (apt-get install patroni; scripts/test installs it)", bin);
}

void ha_start(ha_cluster *cl) {
  require_patroni();
  char lib[512], owner[16], log[192];
  snprintf(lib, sizeof lib, "%s/scripts/lib/patroni.sh", h_env("IDEM_SOURCE_DIR"));
  (void)h_env("IDEM_COORDINATOR_BIN"); /* both checked before anything starts */
  memset(cl, 0, sizeof *cl);
  live = cl;
  etcd_start(&cl->etcd);
  snprintf(cl->dir, sizeof cl->dir, "/tmp/idem-ha.XXXXXX");
  cr_assert(mkdtemp(cl->dir), "mkdtemp");
  /* patroni_start with this process as the owner: its watcher stops the pair if we die */
  snprintf(owner, sizeof owner, "%d", (int)getpid());
  snprintf(log, sizeof log, "%s/start.log", cl->dir);
  const char *argv[] = {"bash",
                        "-c",
                        ". \"$1\" && patroni_start \"$2\" \"$3\" \"$4\" && "
                        "patroni_createdb \"$2\" idem && patroni_env \"$2\"",
                        "ha",
                        lib,
                        cl->dir,
                        cl->etcd.url,
                        owner,
                        NULL};
  int64_t t = h_now_ms();
  int st = spawn_run(argv, &(spawn_opts){.log = log}, 150000);
  if (st != 0) h_dump_log(log);
  cr_assert_eq(st, 0, "the Patroni pair did not start (status %d, log above)", st);
  char env[2048];
  read_file(log, env, sizeof env);
  cl->ttl = env_int(env, "PATRONI_TTL=");
  cl->loop_wait = env_int(env, "PATRONI_LOOP_WAIT=");
  cl->retry_timeout = env_int(env, "PATRONI_RETRY_TIMEOUT=");
  cl->pg_port[0] = env_int(env, "pg1_PG_PORT=");
  cl->pg_port[1] = env_int(env, "pg2_PG_PORT=");
  cl->api_port[0] = env_int(env, "pg1_API_PORT=");
  cl->api_port[1] = env_int(env, "pg2_API_PORT=");
  cr_assert(cl->ttl > 0 && cl->pg_port[0] > 0 && cl->pg_port[1] > 0 && cl->api_port[1] > 0,
            "cannot read patroni_env's output:\n%s", env);
  printf(
      "patroni pair up in %lld ms: pg1 127.0.0.1:%d (REST %d), pg2 127.0.0.1:%d (REST %d), "
      "primary pg%d\n",
      (long long)(h_now_ms() - t), cl->pg_port[0], cl->api_port[0], cl->pg_port[1], cl->api_port[1],
      ha_primary(cl) + 1);
  snprintf(cl->pg_url, sizeof cl->pg_url,
           "postgresql://postgres@127.0.0.1:%d,127.0.0.1:%d/idem?target_session_attrs=read-write",
           cl->pg_port[0], cl->pg_port[1]);
  for (int i = 0; i < HA_COORDS; i++) {
    char name[16];
    snprintf(name, sizeof name, "c%d", i + 1);
    const char *args[] = {"--etcd",
                          cl->etcd.url,
                          "--node-id",
                          name,
                          "--election-ttl",
                          "2",
                          "--election-prefix",
                          "/idem-ha/leader",
                          "--reaper-interval",
                          "0",
                          NULL};
    h_srv_start(&cl->coords[i], cl->pg_url, args);
    cl->coords[i].keep_log = true;
    size_t len = strlen(cl->addrs);
    snprintf(cl->addrs + len, sizeof cl->addrs - len, "%s%s", i ? "," : "", cl->coords[i].addr);
  }
}

void ha_stop(ha_cluster *cl) {
  live = NULL;
  for (int i = 0; i < HA_COORDS; i++)
    if (cl->coords[i].pid > 0) {
      int st = h_srv_stop(&cl->coords[i]);
      if (st == 0) unlink(cl->coords[i].log_path);
      /* a sanitizer's report or a failed drain shows here (the rest is still stopped) */
      cr_expect_eq(st, 0, "coordinator c%d exited with status %d (log kept: %s)", i + 1, st,
                   cl->coords[i].log_path);
    }
  if (cl->dir[0]) {
    ha_lib(cl, NULL, 0, 90000, "stop", NULL);
    const char *rm[] = {"rm", "-rf", cl->dir, NULL};
    spawn_run(rm, NULL, 60000);
    cl->dir[0] = '\0';
  }
  etcd_stop(&cl->etcd);
}

void ha_fini(void) {
  if (live) ha_stop(live);
}

int ha_coord_log_count(const ha_cluster *cl, const char *needle) {
  int n = 0;
  for (int i = 0; i < HA_COORDS; i++) n += h_log_count(cl->coords[i].log_path, needle);
  return n;
}
