/* End to end: BeginSaga idempotence, GetSaga, GetPolicy, GetStatus. */
#include <criterion/criterion.h>
#include <string.h>

#include "harness.h"

TestSuite(saga, .init = h_setup, .fini = h_teardown, .timeout = 60);

static bool is_uuidv7(const char *s) {
  if (strlen(s) != 36) return false;
  for (int i = 0; i < 36; i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-') return false;
    } else if (!strchr("0123456789abcdef", s[i])) {
      return false;
    }
  }
  return s[14] == '7' && strchr("89ab", s[19]) != NULL;
}

Test(saga, same_request_id_gives_the_same_global_id) {
  char rid[96], g1[IDEM_GLOBAL_ID_MAX + 1], g2[IDEM_GLOBAL_ID_MAX + 1];
  h_unique("order-key", rid, sizeof rid);
  bool created = false;
  int64_t at1 = 0, at2 = 0;
  idem_error e = {0};
  idem_label labels[] = {{"customer", "c-42"}, {"channel", "web"}};
  cr_assert_eq(idem_saga_begin(H.c, rid, "order", labels, 2, g1, &created, &at1, &e), IDEM_OK, "%s",
               e.message);
  cr_assert(created);
  cr_assert(is_uuidv7(g1), "not a UUIDv7: %s", g1);
  cr_assert_eq(idem_saga_begin(H.c, rid, "order", labels, 2, g2, &created, &at2, &e), IDEM_OK);
  cr_assert_not(created);
  cr_assert_str_eq(g1, g2);
  cr_assert_eq(at1, at2);

  /* another tenant with the same request id gets its own saga */
  char t2[64];
  h_tenant(t2);
  idem_client *c2 = h_client(&H.s, t2, 0);
  char g3[IDEM_GLOBAL_ID_MAX + 1];
  cr_assert_eq(idem_saga_begin(c2, rid, "order", NULL, 0, g3, &created, NULL, &e), IDEM_OK);
  cr_assert(created);
  cr_assert_str_neq(g1, g3);
  idem_close(c2);
}

Test(saga, without_request_id_every_call_is_a_new_saga) {
  char g1[IDEM_GLOBAL_ID_MAX + 1], g2[IDEM_GLOBAL_ID_MAX + 1];
  bool created = false;
  idem_error e = {0};
  cr_assert_eq(idem_saga_begin(H.c, NULL, "order", NULL, 0, g1, &created, NULL, &e), IDEM_OK);
  cr_assert(created);
  cr_assert_eq(idem_saga_begin(H.c, NULL, "order", NULL, 0, g2, &created, NULL, &e), IDEM_OK);
  cr_assert(created);
  cr_assert_str_neq(g1, g2);
}

Test(saga, get_saga_lists_its_steps_and_labels) {
  char g[IDEM_GLOBAL_ID_MAX + 1];
  idem_error e = {0};
  idem_label labels[] = {{"customer", "c-7"}};
  cr_assert_eq(idem_saga_begin(H.c, NULL, "order", labels, 1, g, NULL, NULL, &e), IDEM_OK);
  const char *ops[] = {"create", "charge", "reserve"};
  for (int i = 0; i < 3; i++) {
    idem_step_key k = {g, "svc", ops[i], IDEM_FORWARD};
    idem_begin b = {0};
    cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
    if (i < 2)
      cr_assert_eq(
          idem_step_complete(H.c, &k, b.attempt, IDEM_OUTCOME_SUCCEEDED, 0, "x", 1, NULL, &e),
          IDEM_OK);
    idem_begin_clear(&b);
  }
  idem_saga s = {0};
  cr_assert_eq(idem_saga_get(H.c, g, &s, &e), IDEM_OK, "%s", e.message);
  cr_assert_str_eq(s.global_id, g);
  cr_assert_str_eq(s.saga_type, "order");
  cr_assert_gt(s.created_unix_ms, 0);
  cr_assert_eq(s.n_steps, 3);
  int succeeded = 0, in_progress = 0;
  for (size_t i = 0; i < s.n_steps; i++) {
    succeeded += s.steps[i].state == IDEM_STATE_SUCCEEDED;
    in_progress += s.steps[i].state == IDEM_STATE_IN_PROGRESS;
  }
  cr_assert_eq(succeeded, 2);
  cr_assert_eq(in_progress, 1);
  cr_assert_eq(s.n_labels, 1);
  cr_assert_str_eq(s.labels[0].key, "customer");
  cr_assert_str_eq(s.labels[0].value, "c-7");
  idem_saga_clear(&s);
}

Test(saga, get_saga_of_steps_without_a_saga_record) {
  char g[96];
  h_unique("ext", g, sizeof g);
  idem_step_key k = {g, "svc", "op", IDEM_FORWARD};
  idem_begin b = {0};
  idem_error e = {0};
  cr_assert_eq(idem_step_begin(H.c, &k, NULL, 0, 0, &b, &e), IDEM_OK);
  idem_saga s = {0};
  cr_assert_eq(idem_saga_get(H.c, g, &s, &e), IDEM_OK, "%s", e.message);
  cr_assert_str_eq(s.saga_type, "");
  cr_assert_eq(s.n_steps, 1);
  idem_saga_clear(&s);
  idem_begin_clear(&b);
  /* unknown id, or another tenant's: not found */
  char g2[96];
  h_unique("nope", g2, sizeof g2);
  cr_assert_eq(idem_saga_get(H.c, g2, &s, &e), IDEM_NOT_FOUND);
  char t2[64];
  h_tenant(t2);
  idem_client *c2 = h_client(&H.s, t2, 0);
  cr_assert_eq(idem_saga_get(c2, g, &s, &e), IDEM_NOT_FOUND);
  idem_close(c2);
}

Test(saga, default_policy_and_status) {
  idem_policy p = {0};
  idem_error e = {0};
  cr_assert_eq(idem_policy_get(H.c, "payment", "charge", &p, &e), IDEM_OK, "%s", e.message);
  cr_assert_eq(p.failure_mode, 1, "fail-closed by default");
  cr_assert_eq(p.retention_s, 86400);
  cr_assert_eq(p.lease_ms, 30000);
  idem_status st = {0};
  cr_assert_eq(idem_get_status(H.c, &st, &e), IDEM_OK);
  cr_assert(st.leader);
  cr_assert(st.store_ok);
  cr_assert_str_neq(st.version, "");
}
