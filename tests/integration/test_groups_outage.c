/* test_groups_outage.c — one group's Postgres stopped under load (docs/api.md §17): a node with
 * two store groups, g1 on the test Postgres and g2 on a Postgres of this test's own (initdb'd
 * and started here, stopped with pg_ctl mid-run). While g2's Postgres is down its sagas fail
 * closed (a fail-open operation runs unguarded, by its policy) and g1's keep succeeding: at least
 * 95 % of g1's pairs OK and their p99 within 2x of before (plus 10 ms of scheduling noise on a
 * shared machine). The figures are printed. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "groups.h"
#include "harness.h"

enum { PHASE_BEFORE = 0, PHASE_DURING = 1, PHASES = 2, MAX_SAMPLES = 200000, THREADS = 2 };

typedef struct series {
  pthread_mutex_t mu;
  int64_t *us[PHASES]; /* latencies of OK pairs */
  int n[PHASES];
  long ok[PHASES], failed[PHASES];
} series;

typedef struct run {
  char addr[64], t[64];
  char tag[16];
  int group; /* 0 g1, 1 g2 */
  atomic_int phase;
  atomic_bool stop;
  atomic_int next;
  series s;
} run;

/* A load thread (it asserts nothing: criterion's asserts belong to the test's own thread). */
static void *pairs(void *arg) {
  run *r = arg;
  idem_options o = {.address = r->addr, .tenant = r->t, .deadline_ms = 3000};
  idem_client *c = NULL;
  idem_error e = {0};
  if (idem_connect(&o, &c, &e) != IDEM_OK) return NULL; /* no pairs: the test's checks fail */
  while (!atomic_load(&r->stop)) {
    char tag[48], gid[64];
    snprintf(tag, sizeof tag, "%s%d", r->tag, atomic_fetch_add(&r->next, 1));
    h_groups_id_in_group(r->t, r->group, tag, gid, sizeof gid);
    idem_step_key k = {gid, "pay", "charge", IDEM_FORWARD};
    int phase = atomic_load(&r->phase);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    idem_begin bg = {0};
    bool ok = idem_step_begin(c, &k, NULL, 0, 0, &bg, &e) == IDEM_OK &&
              bg.decision == IDEM_DECISION_PROCEED &&
              idem_step_complete(c, &k, bg.attempt, IDEM_OUTCOME_SUCCEEDED, 200, "ok", 2, NULL,
                                 &e) == IDEM_OK;
    idem_begin_clear(&bg);
    clock_gettime(CLOCK_MONOTONIC, &b);
    int64_t us = (b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000;
    pthread_mutex_lock(&r->s.mu);
    if (ok) {
      r->s.ok[phase]++;
      if (r->s.n[phase] < MAX_SAMPLES) r->s.us[phase][r->s.n[phase]++] = us;
    } else {
      r->s.failed[phase]++;
    }
    pthread_mutex_unlock(&r->s.mu);
    if (!ok) h_sleep_ms(5); /* a refused call answers at once: do not spin */
  }
  idem_close(c);
  return NULL;
}

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static double p99_ms(series *s, int phase) {
  if (s->n[phase] == 0) return 0;
  qsort(s->us[phase], (size_t)s->n[phase], sizeof(int64_t), cmp64);
  return s->us[phase][(size_t)(s->n[phase] - 1) * 99 / 100] / 1000.0;
}

/* Runs `. scripts/lib/pg.sh; CMD` with bash; its exit status. */
static int pg_sh(const char *cmd) {
  char script[1024];
  snprintf(script, sizeof script, ". '%s/scripts/lib/pg.sh' && %s", h_env("IDEM_SOURCE_DIR"), cmd);
  const char *argv[] = {"bash", "-c", script, NULL};
  return spawn_run(argv, &(spawn_opts){.log = "/dev/null"}, 120000);
}

/* g2: a Postgres of this test's own, stopped and removed by the suite's fini whatever happens */
static char dir[] = "/tmp/idem-g2pg-XXXXXX";
static char url2[160];

static void g2_start(void) {
  char cmd[512];
  cr_assert(mkdtemp(dir));
  int port = h_free_port();
  snprintf(cmd, sizeof cmd, "pg_init '%s' && pg_start '%s' %d && pg_createdb %d g2", dir, dir, port,
           port);
  cr_assert_eq(pg_sh(cmd), 0, "a Postgres for g2 in %s", dir);
  snprintf(url2, sizeof url2, "postgresql://postgres@127.0.0.1:%d/g2", port);
}

static void g2_remove(void) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "pg_stop '%s'; rm -rf '%s'", dir, dir);
  pg_sh(cmd);
}

TestSuite(groups_outage, .init = g2_start, .fini = g2_remove);

Test(groups_outage, one_groups_postgres_stopped_under_load, .timeout = 300) {
  char cmd[512];
  char db1[64], url1[256], s1[300], s2[300];
  pgx_db_create("idem_out", db1, sizeof db1, url1, sizeof url1);
  snprintf(s1, sizeof s1, "g1=%s", url1);
  snprintf(s2, sizeof s2, "g2=%s", url2);
  srv node;
  const char *args[] = {"--store",           s1,  "--store", s2, "--slots", "64",
                        "--reaper-interval", "0", NULL};
  h_srv_start(&node, "", args);
  run r[2];
  memset(r, 0, sizeof r);
  char t[64];
  h_tenant(t);
  /* fail-open for (pay, open): by its policy, it runs unguarded while its group is down */
  idem_options o = {.address = node.addr, .tenant = t, .deadline_ms = 3000};
  idem_client *c = NULL;
  idem_error e = {0};
  cr_assert_eq(idem_connect(&o, &c, &e), IDEM_OK);
  idem_policy pol = {.service = "pay",
                     .operation = "open",
                     .failure_mode = 2,
                     .retention_s = 3600,
                     .lease_ms = 5000};
  idem_policy out;
  cr_assert_eq(idem_policy_set(c, &pol, &out, &e), IDEM_OK, "%s", e.message);
  pthread_t th[2][THREADS];
  for (int g = 0; g < 2; g++) {
    snprintf(r[g].addr, sizeof r[g].addr, "%s", node.addr);
    snprintf(r[g].t, sizeof r[g].t, "%s", t);
    snprintf(r[g].tag, sizeof r[g].tag, "o%d-", g);
    r[g].group = g;
    pthread_mutex_init(&r[g].s.mu, NULL);
    for (int p = 0; p < PHASES; p++) r[g].s.us[p] = calloc(MAX_SAMPLES, sizeof(int64_t));
    for (int i = 0; i < THREADS; i++) pthread_create(&th[g][i], NULL, pairs, &r[g]);
  }
  h_sleep_ms(4000); /* the figure before: a fixed span of load, not a wait for a condition */
  snprintf(cmd, sizeof cmd, "pg_stop '%s'", dir);
  cr_assert_eq(pg_sh(cmd), 0);
  for (int g = 0; g < 2; g++) atomic_store(&r[g].phase, PHASE_DURING);
  h_sleep_ms(5000); /* the figure during: a fixed span of load, not a wait for a condition */
  for (int g = 0; g < 2; g++) atomic_store(&r[g].stop, true);
  for (int g = 0; g < 2; g++)
    for (int i = 0; i < THREADS; i++) pthread_join(th[g][i], NULL);
  /* the fail-open operation of g2 runs unguarded; its fail-closed ones were refused */
  char gid[64];
  h_groups_id_in_group(t, 1, "open", gid, sizeof gid);
  idem_step_key k = {gid, "pay", "open", IDEM_FORWARD};
  idem_begin b = {0};
  cr_expect_eq(idem_step_begin(c, &k, NULL, 0, 0, &b, &e), IDEM_OK, "%s", e.message);
  cr_expect_eq(b.decision, IDEM_DECISION_PROCEED_UNGUARDED);
  idem_begin_clear(&b);
  h_groups_id_in_group(t, 1, "closed", gid, sizeof gid);
  idem_step_key kc = {gid, "pay", "charge", IDEM_FORWARD};
  cr_expect_eq(idem_step_begin(c, &kc, NULL, 0, 0, &b, &e), IDEM_UNAVAILABLE);
  idem_begin_clear(&b);
  idem_close(c);
  double before = p99_ms(&r[0].s, PHASE_BEFORE), during = p99_ms(&r[0].s, PHASE_DURING);
  long ok1 = r[0].s.ok[PHASE_DURING], all1 = ok1 + r[0].s.failed[PHASE_DURING];
  double ratio = all1 ? 100.0 * (double)ok1 / (double)all1 : 0;
  fprintf(stderr,
          "groups outage: g1 before %ld pairs OK, p99 %.2f ms; with g2's Postgres stopped %ld of "
          "%ld OK (%.1f %%), p99 %.2f ms (%.2fx); g2 before %ld OK, during %ld OK, %ld refused\n",
          r[0].s.ok[PHASE_BEFORE], before, ok1, all1, ratio, during,
          before > 0 ? during / before : 0, r[1].s.ok[PHASE_BEFORE], r[1].s.ok[PHASE_DURING],
          r[1].s.failed[PHASE_DURING]);
  cr_expect_gt(r[1].s.ok[PHASE_BEFORE], 50, "g2 served before");
  cr_expect_gt(r[1].s.failed[PHASE_DURING], 0, "g2's calls failed closed");
  cr_expect_eq(r[1].s.ok[PHASE_DURING], 0, "no g2 pair completed while its Postgres was down");
  cr_expect_geq(ratio, 95.0, "g1 kept succeeding");
  cr_expect_leq(during, 2 * before + 10, "g1's p99 within 2x of before (+10 ms)");
  h_srv_stop(&node);
  pgx_db_drop(db1);
  for (int g = 0; g < 2; g++)
    for (int p = 0; p < PHASES; p++) free(r[g].s.us[p]);
}
