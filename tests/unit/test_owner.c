/* test_owner.c — the rule of one cluster per database (server/domain/owner.h), alone. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "domain/owner.h"

static owner_rec rec(const char *id, const char *prefix, const char *group) {
  owner_rec o;
  memset(&o, 0, sizeof o);
  snprintf(o.cluster_id, sizeof o.cluster_id, "%s", id);
  snprintf(o.prefix, sizeof o.prefix, "%s", prefix);
  snprintf(o.etcd, sizeof o.etcd, "%s", *prefix ? "http://etcd:2379" : "");
  snprintf(o.group, sizeof o.group, "%s", group);
  snprintf(o.node, sizeof o.node, "n1");
  return o;
}

#define A "0193b5c2-7e1d-7000-8000-00000000000a"
#define B "0193b5c2-7e1d-7000-8000-00000000000b"

Test(owner, ids) {
  cr_assert(owner_id_valid(A));
  cr_assert(owner_id_valid("0193B5C2-7E1D-7000-8000-00000000000A"));
  cr_assert(owner_id_valid("standalone"));
  const char *bad[] = {"", "standalone ", "0193b5c2-7e1d-7000-8000-00000000000",
                       "0193b5c2-7e1d-7000-8000-00000000000ab", "0193b5c2x7e1d-7000-8000-00000000000a",
                       "0193b5c2-7e1d-7000-8000-00000000000g", "Standalone"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_assert_not(owner_id_valid(bad[i]), "%s", bad[i]);
  cr_assert_not(owner_id_valid(NULL));
}

Test(owner, decide) {
  owner_rec a = rec(A, "/idem/leader", "g1"), b = rec(B, "/staging", "g1");
  owner_rec a2 = rec(A, "/idem/leader", "g2"), solo = rec(OWNER_STANDALONE, "", "default");
  owner_rec solo2 = rec(OWNER_STANDALONE, "", "default");
  cr_assert_eq(owner_decide(&a, NULL, NULL), OWNER_CLAIM);
  cr_assert_eq(owner_decide(&a, NULL, B), OWNER_CLAIM);
  cr_assert_eq(owner_decide(&a, &a, NULL), OWNER_SAME);
  cr_assert_eq(owner_decide(&a, &a, B), OWNER_SAME, "a flag left in place changes nothing");
  cr_assert_eq(owner_decide(&b, &a, NULL), OWNER_FOREIGN);
  cr_assert_eq(owner_decide(&b, &a, A), OWNER_TAKE_OVER);
  cr_assert_eq(owner_decide(&b, &a, B), OWNER_WRONG_TAKEOVER);
  cr_assert_eq(owner_decide(&a2, &a, NULL), OWNER_OTHER_GROUP);
  cr_assert_eq(owner_decide(&a2, &a, A), OWNER_TAKE_OVER, "a group renamed on purpose");
  cr_assert_eq(owner_decide(&solo, &solo2, NULL), OWNER_SAME, "nodes without etcd share");
  cr_assert_eq(owner_decide(&a, &solo, NULL), OWNER_FOREIGN);
  cr_assert_eq(owner_decide(&a, &solo, OWNER_STANDALONE), OWNER_TAKE_OVER);
  cr_assert_eq(owner_decide(&solo, &a, NULL), OWNER_FOREIGN);
  cr_assert_eq(owner_decide(&solo, &a, A), OWNER_TAKE_OVER);
  cr_assert(owner_refused(OWNER_FOREIGN) && owner_refused(OWNER_OTHER_GROUP) &&
            owner_refused(OWNER_WRONG_TAKEOVER));
  cr_assert_not(owner_refused(OWNER_SAME) || owner_refused(OWNER_CLAIM) ||
                owner_refused(OWNER_TAKE_OVER));
}

Test(owner, refusals_name_both_and_the_step) {
  owner_rec a = rec(A, "/idem/leader", "g1"), b = rec(B, "/staging", "g1");
  owner_rec a2 = rec(A, "/idem/leader", "g2");
  char buf[2048];
  owner_refusal(OWNER_FOREIGN, &b, &a, NULL, buf, sizeof buf);
  cr_assert(strstr(buf, "cluster " A " (etcd prefix /idem/leader at http://etcd:2379, group g1, "
                        "claimed by node n1)"), "%s", buf);
  cr_assert(strstr(buf, "this node is of cluster " B " (etcd prefix /staging"), "%s", buf);
  cr_assert(strstr(buf, "--take-over " A), "%s", buf);
  owner_refusal(OWNER_OTHER_GROUP, &a2, &a, NULL, buf, sizeof buf);
  cr_assert(strstr(buf, "the database of group g2 is this cluster's database of group g1"), "%s",
            buf);
  owner_refusal(OWNER_WRONG_TAKEOVER, &b, &a, B, buf, sizeof buf);
  cr_assert(strstr(buf, "--take-over " B ": the database of group g1 does not belong to cluster "
                        B), "%s", buf);
  cr_assert(strstr(buf, "(--take-over " A ")"), "%s", buf);
  owner_refusal(OWNER_SAME, &a, &a, NULL, buf, sizeof buf);
  cr_assert_str_eq(buf, "");
}
