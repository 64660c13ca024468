/* groups.c — see groups.h. */
#include "groups.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

uint32_t h_groups_slot_of(const char *tenant, const char *id) {
  uint64_t h = UINT64_C(14695981039346656037);
  const char *parts[] = {tenant, "", id};
  for (int p = 0; p < 3; p++) {
    size_t n = p == 1 ? 1 : strlen(parts[p]); /* the NUL between tenant and id */
    for (size_t i = 0; i < n; i++) {
      h ^= (unsigned char)parts[p][i];
      h *= UINT64_C(1099511628211);
    }
  }
  return (uint32_t)(h % H_GROUPS_SLOTS);
}

int h_groups_group_of(const char *tenant, const char *id) {
  return h_groups_slot_of(tenant, id) < H_GROUPS_SLOTS / 2 ? 0 : 1;
}

void h_groups_id_in_group(const char *tenant, int g, const char *tag, char *out, size_t cap) {
  for (int i = 0;; i++) {
    snprintf(out, cap, "%s-%d", tag, i);
    if (h_groups_group_of(tenant, out) == g) return;
  }
}

void h_groups_node_start(h_groups *cl, int i) {
  char metrics[32], slots[16], ttl[16], console[32];
  cl->mport[i] = h_free_port();
  snprintf(metrics, sizeof metrics, "127.0.0.1:%d", cl->mport[i]);
  snprintf(slots, sizeof slots, "%d", H_GROUPS_SLOTS);
  snprintf(ttl, sizeof ttl, "%d", H_GROUPS_TTL_S);
  const char *args[20] = {"--metrics",      metrics,  "--store",           cl->store[0], "--store",
                          cl->store[1],     "--etcd", cl->etcd.url,        "--slots",    slots,
                          "--election-ttl", ttl,      "--reaper-interval", "0"};
  int n = 14;
  if (cl->console) {
    cl->cport[i] = h_free_port();
    snprintf(console, sizeof console, "127.0.0.1:%d", cl->cport[i]);
    args[n++] = "--console";
    args[n++] = console;
  }
  if (cl->extra[0]) {
    args[n++] = "--store";
    args[n++] = cl->extra;
  }
  h_srv_start_env(&cl->node[i], "", args, cl->env[0] ? cl->env : NULL);
}

static void h_groups_start_with(h_groups *cl, bool console, const char *const *env,
                                const char *const *urls) {
  memset(cl, 0, sizeof *cl);
  for (int i = 0; env && env[i] && i < 3; i++) cl->env[i] = env[i];
  cl->console = console;
  etcd_start(&cl->etcd);
  for (int g = 0; g < 2; g++) {
    if (urls && urls[g]) /* the caller's database: not dropped at stop */
      snprintf(cl->url[g], sizeof cl->url[g], "%s", urls[g]);
    else
      pgx_db_create(g ? "idem_g2" : "idem_g1", cl->db[g], sizeof cl->db[g], cl->url[g],
                    sizeof cl->url[g]);
    snprintf(cl->store[g], sizeof cl->store[g], "g%d=%s", g + 1, cl->url[g]);
  }
  h_tenant(cl->t);
  h_groups_node_start(cl, 0);
  h_groups_node_start(cl, 1);
}

void h_groups_start_env(h_groups *cl, const char *const *env) {
  h_groups_start_with(cl, false, env, NULL);
}

void h_groups_start_on(h_groups *cl, const char *const *env, const char *const *urls) {
  h_groups_start_with(cl, false, env, urls);
}

void h_groups_start(h_groups *cl, bool console) {
  h_groups_start_with(cl, console, NULL, NULL);
}

void h_groups_stop(h_groups *cl) {
  for (int i = 0; i < 2; i++)
    if (cl->node[i].pid > 0) {
      int st = h_srv_stop(&cl->node[i]);
      cr_expect_eq(st, 0, "node %d drains and exits 0 on SIGTERM (status %d)", i, st);
    }
  etcd_stop(&cl->etcd);
  for (int g = 0; g < 2; g++)
    if (cl->db[g][0]) pgx_db_drop(cl->db[g]);
}

/* Whether node i says it leads group g (GetTopology's led_here). */
static bool leads(const h_groups *cl, int i, int g) {
  idem_options o = {.address = cl->node[i].addr, .tenant = cl->t, .deadline_ms = 2000};
  idem_client *c = NULL;
  idem_error e = {0};
  if (idem_connect(&o, &c, &e) != IDEM_OK) return false;
  idem_topology t;
  bool yes = false;
  if (idem_get_topology(c, &t, &e) == IDEM_OK) {
    const char *name = g ? "g2" : "g1";
    for (size_t k = 0; k < t.n_groups; k++)
      if (strcmp(t.groups[k].name, name) == 0) yes = t.groups[k].led_here;
    idem_topology_clear(&t);
  }
  idem_close(c);
  return yes;
}

int h_groups_leader_of(const h_groups *cl, int g) {
  for (int i = 0; i < 2; i++)
    if (cl->node[i].pid > 0 && leads(cl, i, g)) return i;
  return -1;
}

void h_groups_wait_balanced(const h_groups *cl, h_groups_leader_fn leader_of) {
  if (!leader_of) leader_of = h_groups_leader_of;
  int a = -1, b = -1;
  bool balanced;
  H_WAITED_EVERY(100, balanced, (a = leader_of(cl, 0)) >= 0 && (b = leader_of(cl, 1)) >= 0 && a != b,
                 4 * H_GROUPS_TTL_S * 1000 + 5000);
  if (balanced) return;
  h_srv_dump_log(&cl->node[0]);
  h_srv_dump_log(&cl->node[1]);
  cr_assert_fail("groups not balanced: g1 led by %d, g2 by %d", a, b);
}

idem_client *h_groups_client(const h_groups *cl, const char *addrs) {
  idem_options o = {.address = addrs, .tenant = cl->t, .deadline_ms = 5000};
  idem_client *c = NULL;
  idem_error e = {0};
  cr_assert_eq(idem_connect(&o, &c, &e), IDEM_OK, "%s", e.message);
  return c;
}

/* A LookupStep request for a key of group g ("probe-N"), encoded by hand: StepKey {1: global_id,
 * 2: service, 3: operation, 4: phase} inside field 1. */
static size_t probe_request(const h_groups *cl, int g, unsigned char *buf, size_t cap) {
  char gid[64];
  h_groups_id_in_group(cl->t, g, "probe", gid, sizeof gid);
  unsigned char key[128];
  size_t n = 0, gl = strlen(gid);
  key[n++] = 0x0a, key[n++] = (unsigned char)gl;
  memcpy(key + n, gid, gl), n += gl;
  memcpy(key + n, "\x12\x03svc\x1a\x02op\x20\x01", 11), n += 11;
  cr_assert_leq(n + 2, cap);
  buf[0] = 0x0a, buf[1] = (unsigned char)n;
  memcpy(buf + 2, key, n);
  return n + 2;
}

int h_groups_probe(const h_groups *cl, int i, int g, char *group, size_t cap) {
  unsigned char req[160];
  size_t n = probe_request(cl, g, req, sizeof req);
  char details[256];
  return h_raw_call_trailer(cl->node[i].addr, "/idem.v1.Coordinator/LookupStep", cl->t, req, n,
                            details, sizeof details, "idem-group", group, cap);
}

int h_groups_answering_leader(const h_groups *cl, int g) {
  char grp[32];
  for (int i = 0; i < 2; i++)
    if (cl->node[i].pid > 0 && h_groups_probe(cl, i, g, grp, sizeof grp) == 5) return i;
  return -1;
}
