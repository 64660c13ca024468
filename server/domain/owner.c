/* owner.c — see owner.h. */
#include "owner.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

bool owner_id_valid(const char *v) {
  if (!v) return false;
  if (strcmp(v, OWNER_STANDALONE) == 0) return true;
  static const int dash[] = {8, 13, 18, 23};
  if (strlen(v) != 36) return false;
  for (int i = 0, d = 0; i < 36; i++) {
    if (d < 4 && i == dash[d]) {
      if (v[i] != '-') return false;
      d++;
    } else if (!isxdigit((unsigned char)v[i])) {
      return false;
    }
  }
  return true;
}

static bool standalone(const owner_rec *o) {
  return strcmp(o->cluster_id, OWNER_STANDALONE) == 0;
}

owner_verdict owner_decide(const owner_rec *mine, const owner_rec *recorded,
                           const char *take_over) {
  if (!recorded) return OWNER_CLAIM;
  bool same_cluster = strcmp(mine->cluster_id, recorded->cluster_id) == 0;
  if (same_cluster && strcmp(mine->group, recorded->group) == 0) return OWNER_SAME;
  if (take_over)
    return strcmp(take_over, recorded->cluster_id) == 0 ? OWNER_TAKE_OVER : OWNER_WRONG_TAKEOVER;
  return same_cluster ? OWNER_OTHER_GROUP : OWNER_FOREIGN;
}

bool owner_refused(owner_verdict v) {
  return v == OWNER_FOREIGN || v == OWNER_OTHER_GROUP || v == OWNER_WRONG_TAKEOVER;
}

void owner_describe(const owner_rec *o, bool with_node, char *buf, size_t cap) {
  int n = standalone(o)
              ? snprintf(buf, cap, "standalone nodes (no etcd, group %s", o->group)
              : snprintf(buf, cap, "cluster %s (etcd prefix %s at %s, group %s", o->cluster_id,
                         o->prefix, o->etcd[0] ? o->etcd : "?", o->group);
  if (n < 0 || (size_t)n >= cap) return;
  if (with_node && o->node[0])
    snprintf(buf + n, cap - (size_t)n, ", claimed by node %s)", o->node);
  else
    snprintf(buf + n, cap - (size_t)n, ")");
}

void owner_refusal(owner_verdict v, const owner_rec *mine, const owner_rec *recorded,
                   const char *take_over, char *buf, size_t cap) {
  char theirs[1024], ours[1024];
  if (cap) buf[0] = '\0';
  if (!owner_refused(v) || !recorded) return;
  owner_describe(recorded, true, theirs, sizeof theirs);
  owner_describe(mine, false, ours, sizeof ours);
  switch (v) {
    case OWNER_FOREIGN:
      snprintf(buf, cap,
               "the database of group %s belongs to another cluster: it records %s; this node "
               "is of %s. One database serves one cluster (a second cluster's leader would end "
               "the owner's transactions): point --pg/--store at this cluster's own database; "
               "or, to take this one over on purpose (a restore, a renamed cluster), stop every "
               "node of the owner and start one node of this cluster with --take-over %s "
               "(docs/operations.md)",
               mine->group, theirs, ours, recorded->cluster_id);
      return;
    case OWNER_OTHER_GROUP:
      snprintf(buf, cap,
               "the database of group %s is this cluster's database of group %s: it records %s; "
               "each group needs a database of its own: check the --store names (the same on "
               "every node); or, if group %s was renamed %s on purpose, start one node with "
               "--take-over %s (docs/operations.md)",
               mine->group, recorded->group, theirs, recorded->group, mine->group,
               recorded->cluster_id);
      return;
    case OWNER_WRONG_TAKEOVER:
      snprintf(buf, cap,
               "--take-over %s: the database of group %s does not belong to cluster %s: it "
               "records %s; this node is of %s. Name the id it records (--take-over %s) or leave "
               "--take-over out",
               take_over ? take_over : "", mine->group, take_over ? take_over : "", theirs, ours,
               recorded->cluster_id);
      return;
    default:
      return;
  }
}
