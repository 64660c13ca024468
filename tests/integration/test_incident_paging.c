/* test_incident_paging.c — Admin.ListSteps keyset pagination under change: 10,000 steps are
 * listed in pages of 100 while another client inserts new steps (keys sorting before, among
 * and after the existing ones) and completes existing ones. No step may be listed twice, and
 * every one of the 10,000 must be listed. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define N_EXISTING 10000
#define PAGE 100

static void setup(void) {
  h_fixture_start(&H, &(h_fixture_conf){.no_client = true, .any_exit = true});
}

TestSuite(paging, .init = setup, .fini = h_teardown, .timeout = 300);

typedef struct churn {
  atomic_bool stop;
  atomic_int inserted, completed;
} churn;

static void *churn_main(void *arg) {
  churn *ch = arg;
  idem_client *c = h_client(&H.s, H.t, 5000);
  static const char *const prefixes[] = {"a", "g-05", "z"}; /* before, among, after */
  for (int i = 0; !atomic_load(&ch->stop); i++) {
    char gid[96];
    h_unique(prefixes[i % 3], gid, sizeof gid);
    idem_step_key k = {gid, "svc", "op", IDEM_FORWARD};
    idem_begin b;
    idem_error e = {0};
    if (idem_step_begin(c, &k, NULL, 0, 0, &b, &e) == IDEM_OK) atomic_fetch_add(&ch->inserted, 1);
    idem_begin_clear(&b);
    /* and change an existing row (its updated_ms and state move; its key does not) */
    char old[32];
    snprintf(old, sizeof old, "g-%05d", (i * 37) % N_EXISTING);
    idem_step_key ko = {old, "svc", "op", IDEM_FORWARD};
    if (idem_step_complete(c, &ko, 1, IDEM_OUTCOME_SUCCEEDED, 200, NULL, 0, NULL, &e) == IDEM_OK)
      atomic_fetch_add(&ch->completed, 1);
  }
  idem_close(c);
  return NULL;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

Test(paging, ten_thousand_in_pages_of_100_while_rows_change) {
  char n[16];
  snprintf(n, sizeof n, "%d", N_EXISTING);
  const char *p[] = {H.t, n};
  pgx_sql(NULL,
          "INSERT INTO idem_steps (tenant, global_id, service, operation, phase, state, attempt,"
          " created_ms, updated_ms, lease_expires_ms, expires_ms)"
          " SELECT $1, 'g-' || lpad(i::text, 5, '0'), 'svc', 'op', 1, 1, 1,"
          " (extract(epoch from now()) * 1000)::bigint, (extract(epoch from now()) * 1000)::bigint,"
          " (extract(epoch from now()) * 1000)::bigint + 3600000, 0"
          " FROM generate_series(0, $2::int - 1) i",
          2, p);

  churn ch = {0};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, churn_main, &ch), 0);
  H_WAIT(atomic_load(&ch.inserted) >= 20, 10000, "the churn inserted 20 steps");

  idem_client *c = h_client(&H.s, H.t, 5000);
  size_t cap = 16384, got = 0;
  char **keys = calloc(cap, sizeof *keys);
  char *token = NULL;
  int pages = 0;
  for (;;) {
    idem_steps_filter f = {.page_size = PAGE, .page_token = token};
    idem_step_page pg;
    idem_error e = {0};
    cr_assert_eq(idem_steps_list(c, &f, &pg, &e), IDEM_OK, "page %d: %s", pages, e.message);
    cr_assert_leq(pg.n_steps, PAGE);
    pages++;
    for (size_t i = 0; i < pg.n_steps; i++) {
      if (got == cap) keys = realloc(keys, (cap *= 2) * sizeof *keys);
      keys[got++] = strdup(pg.steps[i].global_id);
    }
    free(token);
    token = *pg.next_page_token ? strdup(pg.next_page_token) : NULL;
    idem_step_page_clear(&pg);
    if (!token) break;
    h_sleep_ms(1); /* not a wait: a pause between pages, for the churn to interleave */
  }
  atomic_store(&ch.stop, true);
  pthread_join(t, NULL);
  idem_close(c);

  cr_log_info("%d pages, %zu rows listed; meanwhile %d steps inserted, %d completed", pages, got,
              atomic_load(&ch.inserted), atomic_load(&ch.completed));
  cr_assert_gt(atomic_load(&ch.inserted), 20);
  cr_assert_gt(atomic_load(&ch.completed), 20);
  cr_assert_geq(pages, N_EXISTING / PAGE);
  qsort(keys, got, sizeof *keys, cmp_str);
  for (size_t i = 1; i < got; i++)
    cr_assert(strcmp(keys[i - 1], keys[i]) != 0, "listed twice: %s", keys[i]);
  int found = 0;
  for (int i = 0; i < N_EXISTING; i++) {
    char want[32], *w = want;
    snprintf(want, sizeof want, "g-%05d", i);
    if (bsearch(&w, keys, got, sizeof *keys, cmp_str)) found++;
  }
  cr_assert_eq(found, N_EXISTING, "pre-existing steps missed: %d", N_EXISTING - found);
  for (size_t i = 0; i < got; i++) free(keys[i]);
  free(keys);
}

Test(paging, token_bound_to_filters) {
  idem_client *c = h_client(&H.s, H.t, 0);
  for (int i = 0; i < 3; i++) {
    char gid[64];
    h_unique("g", gid, sizeof gid);
    idem_step_key k = {gid, "svc", "op", IDEM_FORWARD};
    idem_begin b;
    idem_error e = {0};
    cr_assert_eq(idem_step_begin(c, &k, NULL, 0, 0, &b, &e), IDEM_OK);
    idem_begin_clear(&b);
  }
  idem_steps_filter f = {.state = IDEM_STATE_IN_PROGRESS, .page_size = 2};
  idem_step_page pg;
  idem_error e = {0};
  cr_assert_eq(idem_steps_list(c, &f, &pg, &e), IDEM_OK);
  cr_assert_eq(pg.n_steps, 2);
  cr_assert(*pg.next_page_token);
  idem_steps_filter other = {.state = IDEM_STATE_UNKNOWN, .page_token = pg.next_page_token};
  idem_step_page pg2;
  cr_assert_eq(idem_steps_list(c, &other, &pg2, &e), IDEM_INVALID_ARGUMENT);
  cr_assert(strstr(e.message, "page_token"), "%s", e.message);
  f.page_token = pg.next_page_token;
  cr_assert_eq(idem_steps_list(c, &f, &pg2, &e), IDEM_OK);
  cr_assert_eq(pg2.n_steps, 1);
  cr_assert_str_eq(pg2.next_page_token, "");
  idem_step_page_clear(&pg2);
  idem_step_page_clear(&pg);
  /* lease_expired_only with another state is refused */
  idem_steps_filter bad = {.state = IDEM_STATE_UNKNOWN, .lease_expired_only = true};
  cr_assert_eq(idem_steps_list(c, &bad, &pg, &e), IDEM_INVALID_ARGUMENT);
  idem_close(c);
}
