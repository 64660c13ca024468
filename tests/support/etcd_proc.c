/* etcd_proc.c — see etcd_proc.h. */
#include "etcd_proc.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spawn.h"
#include "testutil.h"

int etcd_free_port(void) {
  return h_free_port();
}

bool etcd_healthy(const etcd_proc *e) {
  char health[96];
  snprintf(health, sizeof health, "%s/health", e->url);
  const char *argv[] = {"curl", "-sf", "-m", "1", "-o", "/dev/null", health, NULL};
  return spawn_run(argv, &(spawn_opts){.log = "/dev/null"}, 5000) == 0;
}

/* base64 of s (the gateway's keys) into out. */
static void b64(const char *s, char *out, size_t cap) {
  static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t n = strlen(s), o = 0;
  for (size_t i = 0; i < n && o + 5 < cap; i += 3) {
    unsigned v = (unsigned char)s[i] << 16 | (i + 1 < n ? (unsigned char)s[i + 1] << 8 : 0) |
                 (i + 2 < n ? (unsigned char)s[i + 2] : 0);
    out[o++] = tbl[v >> 18 & 63];
    out[o++] = tbl[v >> 12 & 63];
    out[o++] = i + 1 < n ? tbl[v >> 6 & 63] : '=';
    out[o++] = i + 2 < n ? tbl[v & 63] : '=';
  }
  out[o] = '\0';
}

int etcd_count_prefix(const etcd_proc *e, const char *prefix) {
  char key[256], end[256], endkey[256], body[700], url[128], out[] = "/tmp/idem-etcdq-XXXXXX";
  snprintf(endkey, sizeof endkey, "%s", prefix);
  endkey[strlen(endkey) - 1]++; /* the key just past the prefix (a printable last byte) */
  b64(prefix, key, sizeof key);
  b64(endkey, end, sizeof end);
  snprintf(body, sizeof body, "{\"key\":\"%s\",\"range_end\":\"%s\",\"count_only\":true}", key,
           end);
  snprintf(url, sizeof url, "%s/v3/kv/range", e->url);
  int fd = mkstemp(out);
  cr_assert_geq(fd, 0);
  close(fd);
  const char *argv[] = {"curl", "-sf", "-m", "3", "-o", out, "-X", "POST", "-d", body, url, NULL};
  int rc = spawn_run(argv, &(spawn_opts){.log = "/dev/null"}, 10000);
  char buf[512] = "";
  FILE *f = fopen(out, "r");
  size_t got = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  buf[got] = '\0';
  if (f) fclose(f);
  unlink(out);
  if (rc != 0) return -1;
  const char *c = strstr(buf, "\"count\":\"");
  return c ? atoi(c + 9) : 0; /* zero values are omitted */
}

double etcd_metric(const etcd_proc *e, const char *name, const char *label) {
  char url[128], out[] = "/tmp/idem-etcdm-XXXXXX";
  snprintf(url, sizeof url, "%s/metrics", e->url);
  int fd = mkstemp(out);
  if (fd < 0) return -1;
  close(fd);
  const char *argv[] = {"curl", "-sf", "-m", "3", "-o", out, url, NULL};
  int rc = spawn_run(argv, &(spawn_opts){.log = "/dev/null"}, 10000);
  FILE *f = fopen(out, "r");
  double sum = rc == 0 && f ? 0 : -1;
  char line[1024];
  size_t n = strlen(name);
  while (sum >= 0 && f && fgets(line, sizeof line, f)) {
    if (strncmp(line, name, n) != 0 || (line[n] != '{' && line[n] != ' ')) continue;
    char *v = strrchr(line, ' '); /* the value, after the labels */
    if (!v) continue;
    *v = '\0';
    if (!label[0] || strstr(line, label)) sum += strtod(v + 1, NULL);
  }
  if (f) fclose(f);
  unlink(out);
  return sum;
}

bool etcd_put(const etcd_proc *e, const char *key, const char *value) {
  char k[512], v[4096], body[4700], url[128];
  b64(key, k, sizeof k);
  b64(value, v, sizeof v);
  snprintf(body, sizeof body, "{\"key\":\"%s\",\"value\":\"%s\"}", k, v);
  snprintf(url, sizeof url, "%s/v3/kv/put", e->url);
  const char *argv[] = {"curl", "-sf",  "-m", "3",  "-o", "/dev/null",
                        "-X",   "POST", "-d", body, url,  NULL};
  return spawn_run(argv, &(spawn_opts){.log = "/dev/null"}, 10000) == 0;
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
  const char *argv[] = {bin,       "--name",
                        "default", "--data-dir",
                        data,      "--listen-client-urls",
                        client,    "--advertise-client-urls",
                        client,    "--listen-peer-urls",
                        peer,      "--initial-advertise-peer-urls",
                        peer,      "--initial-cluster",
                        cluster,   "--log-level",
                        "warn",    NULL};
  pid_t pid = spawn_start(argv, &(spawn_opts){.log = log, .append = true});
  e->pid = pid;
  bool healthy, exited = false;
  H_WAITED_EVERY(50, healthy, etcd_healthy(e) || (exited = spawn_reap(pid, NULL)), 15000);
  if (exited) {
    e->pid = 0;
    cr_assert_fail("etcd exited at start (see %s)", log);
  }
  cr_assert(healthy, "etcd did not answer within 15 s (see %s)", log);
}

void etcd_start(etcd_proc *e) {
  memset(e, 0, sizeof *e);
  snprintf(e->dir, sizeof e->dir, "/tmp/idem-etcd.XXXXXX");
  cr_assert(mkdtemp(e->dir), "mkdtemp");
  e->client_port = etcd_free_port();
  do e->peer_port = etcd_free_port();
  while (e->peer_port == e->client_port);
  snprintf(e->url, sizeof e->url, "http://127.0.0.1:%d", e->client_port);
  spawn(e);
}

void etcd_restart(etcd_proc *e) {
  cr_assert_eq(e->pid, 0, "etcd is still running");
  spawn(e);
}

void etcd_kill(etcd_proc *e) {
  if (!e->pid) return;
  spawn_kill(e->pid);
  e->pid = 0;
}

void etcd_stop(etcd_proc *e) {
  if (e->pid) {
    spawn_stop(e->pid, 5000);
    e->pid = 0;
  }
  if (e->dir[0] && strncmp(e->dir, "/tmp/idem-etcd.", 15) == 0) {
    const char *argv[] = {"rm", "-rf", e->dir, NULL};
    if (spawn_run(argv, NULL, 30000) != 0) fprintf(stderr, "cannot remove %s\n", e->dir);
  }
}
