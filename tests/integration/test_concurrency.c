/* Exactly one PROCEED per key and attempt, under real concurrency:
 *  - 100 threads over 4 connections calling BeginStep on one key;
 *  - two server processes on one database racing on 1,000 keys. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

#define THREADS 100
#define CONNS 4

typedef struct storm {
  idem_client *clients[CONNS];
  idem_step_key key;
  pthread_barrier_t go;
  atomic_int proceed, aborted, other;
} storm;

typedef struct storm_arg {
  storm *st;
  int i;
} storm_arg;

static void *storm_thread(void *p) {
  storm_arg *a = p;
  storm *st = a->st;
  pthread_barrier_wait(&st->go);
  idem_begin b = {0};
  idem_error e = {0};
  int rc = idem_step_begin(st->clients[a->i % CONNS], &st->key, NULL, 0, 10000, &b, &e);
  if (rc == IDEM_OK && b.decision == IDEM_DECISION_PROCEED && b.attempt == 1)
    atomic_fetch_add(&st->proceed, 1);
  else if (rc == IDEM_ABORTED)
    atomic_fetch_add(&st->aborted, 1);
  else {
    fprintf(stderr, "unexpected: rc=%d decision=%d %s\n", rc, b.decision, e.message);
    atomic_fetch_add(&st->other, 1);
  }
  idem_begin_clear(&b);
  return NULL;
}

Test(concurrency, hundred_callers_on_one_key_get_one_proceed, .timeout = 120) {
  srv s;
  h_srv_start(&s, NULL, NULL);
  char tenant[64], gid[96];
  h_tenant(tenant);
  h_unique("storm", gid, sizeof gid);
  storm st = {.key = {gid, "payment", "charge", IDEM_FORWARD}};
  for (int i = 0; i < CONNS; i++) st.clients[i] = h_client(&s, tenant, 10000);
  pthread_barrier_init(&st.go, NULL, THREADS);
  pthread_t th[THREADS];
  storm_arg args[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i] = (storm_arg){&st, i};
    cr_assert_eq(pthread_create(&th[i], NULL, storm_thread, &args[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  printf("storm: %d proceed, %d aborted, %d other\n", st.proceed, st.aborted, st.other);
  cr_assert_eq(st.proceed, 1);
  cr_assert_eq(st.aborted, THREADS - 1);
  cr_assert_eq(st.other, 0);
  for (int i = 0; i < CONNS; i++) idem_close(st.clients[i]);
  pthread_barrier_destroy(&st.go);
  cr_assert_eq(h_srv_stop(&s), 0);
}

#define KEYS 1000
#define RACERS 8 /* threads per server */

typedef struct race {
  idem_client *client;
  const char *prefix;
  atomic_int *proceeds; /* per key */
  atomic_int *next;     /* shared work counter per racer group */
  atomic_int errors;
} race;

static void *race_thread(void *p) {
  race *r = p;
  for (;;) {
    int k = atomic_fetch_add(r->next, 1);
    if (k >= KEYS) break;
    char gid[128];
    snprintf(gid, sizeof gid, "%s-%d", r->prefix, k);
    idem_step_key key = {gid, "inventory", "reserve", IDEM_FORWARD};
    idem_begin b = {0};
    idem_error e = {0};
    int rc = idem_step_begin(r->client, &key, NULL, 0, 30000, &b, &e);
    if (rc == IDEM_OK && b.decision == IDEM_DECISION_PROCEED)
      atomic_fetch_add(&r->proceeds[k], 1);
    else if (rc != IDEM_ABORTED)
      atomic_fetch_add(&r->errors, 1);
    idem_begin_clear(&b);
  }
  return NULL;
}

Test(concurrency, two_servers_racing_on_1000_keys_hand_out_one_proceed_each, .timeout = 300) {
  srv a, b;
  h_srv_start(&a, NULL, NULL);
  h_srv_start(&b, NULL, NULL);
  char tenant[64], prefix[96];
  h_tenant(tenant);
  h_unique("race", prefix, sizeof prefix);
  static atomic_int proceeds[KEYS];
  for (int i = 0; i < KEYS; i++) atomic_init(&proceeds[i], 0);
  atomic_int next_a, next_b;
  atomic_init(&next_a, 0);
  atomic_init(&next_b, 0);
  race ra = {h_client(&a, tenant, 10000), prefix, proceeds, &next_a, 0};
  race rb = {h_client(&b, tenant, 10000), prefix, proceeds, &next_b, 0};
  pthread_t th[2 * RACERS];
  for (int i = 0; i < RACERS; i++) {
    pthread_create(&th[2 * i], NULL, race_thread, &ra);
    pthread_create(&th[2 * i + 1], NULL, race_thread, &rb);
  }
  for (int i = 0; i < 2 * RACERS; i++) pthread_join(th[i], NULL);
  int ones = 0, zeros = 0, more = 0;
  for (int i = 0; i < KEYS; i++) {
    int n = atomic_load(&proceeds[i]);
    ones += n == 1;
    zeros += n == 0;
    more += n > 1;
  }
  printf("race: %d keys with one proceed, %d with none, %d with more; errors %d/%d\n", ones,
         zeros, more, ra.errors, rb.errors);
  cr_assert_eq(more, 0, "a key got two PROCEEDs");
  cr_assert_eq(ones, KEYS);
  cr_assert_eq(ra.errors + rb.errors, 0);
  long long rows = pgx_sql(
      NULL, "select count(*) from idem_steps where tenant = $1 and attempt = 1 and state = 1", 1,
      (const char *[]){tenant});
  cr_assert_eq(rows, KEYS);
  idem_close(ra.client);
  idem_close(rb.client);
  cr_assert_eq(h_srv_stop(&a), 0);
  cr_assert_eq(h_srv_stop(&b), 0);
}
