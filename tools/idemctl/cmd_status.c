/* cmd_status.c — `idemctl status`: each node's health and version (docs/api.md §10, §23).
 *
 * The nodes asked: every address of --addr (a list "h1:p1,h2:p2" names each node), then every
 * leader those nodes name (the election's, and each slot group's) that is not among them yet.
 * One row a node; a node that does not answer gets a row saying so. While the answering nodes
 * run more than one version (a rolling upgrade under way, docs/upgrading.md) a warning naming
 * each version goes to stderr. The exit status is the first node's, as before: 3 when its store
 * is unreachable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idemctl.h"

#define STATUS_NODES_MAX 32

typedef struct node_row {
  char addr[128];
  bool ok;
  idem_status st;
  idem_status_schema schema;
  idem_error err;
} node_row;

typedef struct nodes {
  node_row row[STATUS_NODES_MAX];
  int n;
} nodes;

static void add_addr(nodes *ns, const char *addr, size_t len) {
  if (len == 0 || len >= sizeof ns->row[0].addr || ns->n >= STATUS_NODES_MAX) return;
  for (int i = 0; i < ns->n; i++)
    if (strlen(ns->row[i].addr) == len && strncmp(ns->row[i].addr, addr, len) == 0) return;
  memset(&ns->row[ns->n], 0, sizeof ns->row[ns->n]);
  memcpy(ns->row[ns->n].addr, addr, len);
  ns->n++;
}

/* A client of one node: the options of --addr but the address. */
static idem_client *connect_to(const ctl *c, const char *addr, idem_error *err) {
  idem_options o = ctl_options(c, addr);
  idem_client *cl = NULL;
  return idem_connect(&o, &cl, err) == IDEM_OK ? cl : NULL;
}

static void ask(const ctl *c, node_row *r) {
  idem_client *cl = connect_to(c, r->addr, &r->err);
  if (!cl) return;
  r->ok = idem_get_status_schema(cl, &r->st, &r->schema, &r->err) == IDEM_OK;
  idem_close(cl);
}

/* The leaders a node names, the slot groups' included (a node without groups answers
 * GetTopology all the same: one group). */
static void add_leaders(const ctl *c, nodes *ns, const node_row *r) {
  add_addr(ns, r->st.leader_address, strlen(r->st.leader_address));
  idem_error e = {0};
  idem_client *cl = connect_to(c, r->addr, &e);
  if (!cl) return;
  idem_topology t;
  if (idem_get_topology(cl, &t, &e) == IDEM_OK) {
    for (size_t i = 0; i < t.n_groups; i++)
      add_addr(ns, t.groups[i].leader_address, strlen(t.groups[i].leader_address));
    idem_topology_clear(&t);
  }
  idem_close(cl);
}

/* "0.1.0 (a, b), 0.2.0 (c)" into buf; false when every answering node runs one version. */
static bool versions_mixed(const nodes *ns, char *buf, size_t n) {
  const char *first = NULL;
  bool mixed = false;
  for (int i = 0; i < ns->n; i++) {
    if (!ns->row[i].ok) continue;
    if (!first) first = ns->row[i].st.version;
    else if (strcmp(first, ns->row[i].st.version) != 0) mixed = true;
  }
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; mixed && i < ns->n; i++) {
    const node_row *r = &ns->row[i];
    bool seen = !r->ok;
    for (int j = 0; !seen && j < i; j++)
      seen = ns->row[j].ok && strcmp(ns->row[j].st.version, r->st.version) == 0;
    if (seen) continue;
    len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%s (", len ? ", " : "",
                            r->st.version[0] ? r->st.version : "unknown");
    bool one = false;
    for (int j = i; j < ns->n; j++) {
      if (!ns->row[j].ok || strcmp(ns->row[j].st.version, r->st.version) != 0) continue;
      len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%s", one ? ", " : "",
                              ns->row[j].addr);
      one = true;
    }
    len += (size_t)snprintf(buf + len, len < n ? n - len : 0, ")");
  }
  return mixed;
}

/* Where a node says the leader is, for the table. */
static const char *leader_at(const idem_status *st) {
  if (st->leader_address[0]) return st->leader_address;
  return st->election_ok ? "-" : "unknown";
}

/* One warning for each node that answered but cannot reach its election backend: it knows no
 * leader and refuses steps with no-leader (docs/api.md §7). */
static void warn_election(const nodes *ns) {
  for (int i = 0; i < ns->n; i++) {
    const node_row *r = &ns->row[i];
    if (r->ok && !r->st.election_ok && !r->st.leader)
      fprintf(stderr,
              "warning: %s (%s): its election backend (etcd) has not answered for a lease TTL: "
              "it knows no leader and refuses steps (no-leader); check etcd (docs/ha.md)\n",
              r->st.node_id, r->addr);
  }
}

static cJSON *row_json(const node_row *r) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "address", r->addr);
  cJSON_AddBoolToObject(o, "answered", r->ok);
  if (!r->ok) {
    cJSON_AddStringToObject(o, "error", r->err.message);
    return o;
  }
  cJSON_AddStringToObject(o, "node_id", r->st.node_id);
  cJSON_AddBoolToObject(o, "leader", r->st.leader);
  cJSON_AddStringToObject(o, "leader_address", r->st.leader_address);
  cJSON_AddNumberToObject(o, "epoch", (double)r->st.epoch);
  cJSON_AddBoolToObject(o, "store_ok", r->st.store_ok);
  cJSON_AddBoolToObject(o, "election_ok", r->st.election_ok);
  cJSON_AddStringToObject(o, "version", r->st.version);
  cJSON_AddNumberToObject(o, "schema_version", r->schema.version);
  cJSON_AddNumberToObject(o, "schema_newest", r->schema.newest);
  cJSON_AddNumberToObject(o, "started_unix_ms", (double)r->st.started_unix_ms);
  return o;
}

int cmd_status(ctl *c) {
  static nodes ns; /* one command a process */
  ns.n = 0;
  for (const char *p = c->addr; *p;) {
    size_t len = strcspn(p, ",");
    add_addr(&ns, p, len);
    p += len;
    if (*p == ',') p++;
  }
  if (ns.n == 0) return ctl_usage_error(c, "--addr: no address");
  int asked = ns.n;
  for (int i = 0; i < ns.n; i++) { /* ns.n grows as leaders are named */
    ask(c, &ns.row[i]);
    if (ns.row[i].ok && i < asked) add_leaders(c, &ns, &ns.row[i]);
  }
  const node_row *first = &ns.row[0];
  if (!first->ok && ns.n == 1) return ctl_fail("status", &first->err);
  char mixed[1024];
  bool is_mixed = versions_mixed(&ns, mixed, sizeof mixed);
  if (c->json) {
    cJSON *o = row_json(first); /* the first node's fields at the top, as before */
    cJSON *arr = cJSON_AddArrayToObject(o, "nodes");
    for (int i = 0; i < ns.n; i++) cJSON_AddItemToArray(arr, row_json(&ns.row[i]));
    cJSON_AddBoolToObject(o, "mixed_versions", is_mixed);
    json_print(o);
  } else {
    /* ADDRESS is the node asked; LEADER AT is where it says the leader is (itself, on the
     * leader; "-" while none is elected; "unknown" while its election backend does not answer,
     * docs/api.md §7); SCHEMA is the version it runs on / the newest it knows */
    const char *hdr[] = {"NODE",  "ADDRESS",  "LEADER",  "LEADER AT", "EPOCH",
                         "STORE", "ELECTION", "VERSION", "SCHEMA",    "STARTED"};
    table *t = table_new(10, hdr);
    for (int i = 0; i < ns.n; i++) {
      const node_row *r = &ns.row[i];
      char age[32], epoch[24], schema[32];
      if (!r->ok) {
        const char *row[] = {"-", r->addr, "-", "-", "-", "-", "-", "-", "-", "no answer"};
        table_row(t, row);
        continue;
      }
      snprintf(epoch, sizeof epoch, "%llu", (unsigned long long)r->st.epoch);
      if (r->schema.newest)
        snprintf(schema, sizeof schema, "%u/%u", r->schema.version, r->schema.newest);
      else
        snprintf(schema, sizeof schema, "-"); /* a node older than 0.2.0 does not say */
      const char *row[] = {r->st.node_id,
                           r->addr,
                           r->st.leader ? "yes" : "no",
                           leader_at(&r->st),
                           epoch,
                           r->st.store_ok ? "ok" : "unreachable",
                           r->st.election_ok ? "ok" : "failing",
                           r->st.version,
                           schema,
                           fmt_age(r->st.started_unix_ms, age, sizeof age)};
      table_row(t, row);
    }
    table_print(t);
    table_free(t);
  }
  warn_election(&ns);
  if (is_mixed)
    fprintf(stderr,
            "warning: the cluster runs mixed versions: %s; finish the rolling upgrade (or the "
            "rollback) before anything else (docs/upgrading.md)\n",
            mixed);
  if (!first->ok) return ctl_fail("status", &first->err);
  return first->st.store_ok ? EXIT_OK : EXIT_UNAVAILABLE;
}
