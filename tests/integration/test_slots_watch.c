/* test_slots_watch.c — the slot map service's watch (docs/scaling-out.md, "The slot map
 * service") on a two-group cluster with a private etcd: nodes learn a newer map from the watch
 * (nothing polls), and a watch that etcd compacted past while it was lost is started again:
 *  - a map written by hand with a newer version (the same ranges) is followed by both nodes;
 *  - node 0 is stopped (SIGSTOP) while etcd restarts, two more versions are written and etcd is
 *    compacted to its latest revision; node 0 goes on (SIGCONT): its watch, lost with etcd and
 *    asked again from a compacted revision, is cancelled by etcd, so it reads the map again
 *    (logging so) and watches from the compaction; a version written after that reaches it too. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "groups.h"
#include "harness.h"
#include "idem/v1/coordinator.pb-c.h"
#include "moves.h"
#include "spawn.h"

#define MAP_KEY "/idem/leader/slotmap"

/* The cluster's map (g1 0-31, g2 32-63) at version v, written to etcd by hand. */
static void put_map(const h_groups *cl, int v) {
  char json[256];
  snprintf(json, sizeof json,
           "{\"version\":%d,\"slots\":%d,\"ranges\":[{\"from\":0,\"to\":31,\"group\":\"g1\"},"
           "{\"from\":32,\"to\":63,\"group\":\"g2\"}]}",
           v, H_GROUPS_SLOTS);
  cr_assert(etcd_put(&cl->etcd, MAP_KEY, json), "etcd took map version %d", v);
}

/* Node at's map version (0 when it does not answer). */
static uint64_t version_at(const h_groups *cl, int at) {
  Idem__V1__Topology *t = h_topology(cl, at);
  uint64_t v = t ? t->version : 0;
  if (t) idem__v1__topology__free_unpacked(t, NULL);
  return v;
}

static bool reaches(const h_groups *cl, int at, uint64_t v, int64_t ms) {
  bool reached;
  H_WAITED_EVERY(50, reached, version_at(cl, at) == v, ms);
  return reached;
}

/* etcd's latest revision, then a compaction to it. */
static void compact(const h_groups *cl) {
  char url[128], out[] = "/tmp/idem-etcdc-XXXXXX", buf[512] = "", body[96];
  int fd = mkstemp(out);
  cr_assert_geq(fd, 0);
  close(fd);
  snprintf(url, sizeof url, "%s/v3/kv/range", cl->etcd.url);
  const char *get[] = {"curl", "-sf", "-m", "3", "-o", out, "-X", "POST", "-d",
                       "{\"key\":\"AA==\"}", url, NULL};
  cr_assert_eq(spawn_run(get, &(spawn_opts){.log = "/dev/null"}, 10000), 0);
  FILE *f = fopen(out, "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  buf[n] = '\0';
  if (f) fclose(f);
  unlink(out);
  const char *r = strstr(buf, "\"revision\":\"");
  cr_assert(r, "etcd's header names its revision: %s", buf);
  long long rev = atoll(r + 12);
  snprintf(body, sizeof body, "{\"revision\":\"%lld\"}", rev);
  snprintf(url, sizeof url, "%s/v3/kv/compaction", cl->etcd.url);
  const char *cmp[] = {"curl", "-sf", "-m", "5", "-o", "/dev/null", "-X", "POST", "-d", body,
                       url, NULL};
  cr_assert_eq(spawn_run(cmp, &(spawn_opts){.log = "/dev/null"}, 10000), 0,
               "etcd compacted to %lld", rev);
}

static bool log_has(const char *path, const char *text) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, text) != NULL;
  fclose(f);
  return found;
}

Test(slots_watch, nodes_follow_the_watched_map_and_a_compacted_watch_starts_again,
     .timeout = 120) {
  h_groups cl;
  h_groups_start(&cl, false);
  h_groups_wait_balanced(&cl, NULL);
  uint64_t v0 = version_at(&cl, 0);
  cr_assert_gt(v0, 0);
  put_map(&cl, (int)v0 + 1);
  cr_expect(reaches(&cl, 0, v0 + 1, 5000) && reaches(&cl, 1, v0 + 1, 5000),
            "both nodes follow version %llu", (unsigned long long)v0 + 1);
  /* node 0 misses a restart of etcd, two versions and a compaction */
  kill(cl.node[0].pid, SIGSTOP);
  etcd_kill(&cl.etcd);
  etcd_restart(&cl.etcd);
  put_map(&cl, (int)v0 + 2);
  put_map(&cl, (int)v0 + 3);
  compact(&cl);
  kill(cl.node[0].pid, SIGCONT);
  cr_expect(reaches(&cl, 0, v0 + 3, 10000), "node 0 read the map again: version %llu",
            (unsigned long long)v0 + 3);
  H_WAIT(log_has(cl.node[0].log_path, "etcd compacted past it"), 10000,
         "node 0's watch was cancelled by the compaction and started again (%s)",
         cl.node[0].log_path);
  /* watching again: a newer version reaches both */
  put_map(&cl, (int)v0 + 4);
  cr_expect(reaches(&cl, 0, v0 + 4, 5000) && reaches(&cl, 1, v0 + 4, 5000),
            "both nodes follow version %llu after the compaction", (unsigned long long)v0 + 4);
  h_groups_stop(&cl);
}
