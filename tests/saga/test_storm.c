/* 1,000 sagas with random duplicates and random kills, then the cross-check of the four tables.
 *
 * Clients: WORKERS threads place SAGAS orders (random customer, sku, qty, amount; a few declined
 * customers; stock runs out, so many sagas are compensated). Each saga also gets, at random: a
 * concurrent duplicate (double click), a retry after it completed (gateway), a redelivered
 * Charge (the payment channel's callback) and a redelivered Reserve (a queue). Every answer for a
 * saga must name the same global id and status.
 * Faults: every service runs with --crash-rate (SIGKILL at any of the three crash points), and
 * the main thread kill -9s a random service every KILL_EVERY finished sagas; it restarts
 * whatever died.
 * Then shop_check: every saga fully done or fully compensated, no double charge or reservation,
 * stock conserved, accounts = ledger, every coordinator step matches the participant's rows.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "shop.h"

#define SAGAS 1000
#define WORKERS 16
#define SKUS 4
#define KILL_EVERY 50 /* finished sagas between two external kill -9 */

static shop S;
static const char *const sku_names[SKUS] = {"sku-a", "sku-b", "sku-c", "sku-d"};

typedef struct saga_run {
  char key[64], customer[32];
  const char *sku;
  int qty;
  int64_t amount;
  char gid[IDEM_GLOBAL_ID_MAX + 1];
  char status[16];
  const char *gid_p, *status_p; /* for shop_check; NULL until answered */
} saga_run;

static saga_run runs[SAGAS];
static atomic_int next_saga, done_workers, done_sagas;
static atomic_long n_calls, n_dup_concurrent, n_dup_late, n_callbacks, n_redeliveries, n_disagree,
    n_retries;

static uint32_t rnd(void) {
  static _Thread_local uint64_t st;
  if (!st && getrandom(&st, sizeof st, 0) != (ssize_t)sizeof st) st = 88172645463325252ULL;
  st ^= st << 13;
  st ^= st >> 7;
  st ^= st << 17;
  return (uint32_t)(st >> 32);
}

static bool transient(int rc) {
  return rc == GRPC_STATUS_UNAVAILABLE || rc == GRPC_STATUS_DEADLINE_EXCEEDED ||
         rc == GRPC_STATUS_ABORTED || rc == GRPC_STATUS_CANCELLED || rc == GRPC_STATUS_UNKNOWN ||
         rc == GRPC_STATUS_INTERNAL;
}

/* PlaceOrder until answered (120 s at most); records or compares the answer. */
static void place(saga_run *r) {
  int64_t end = h_now_ms() + 120000;
  for (;;) {
    Shop__V1__PlaceOrderReply *rep = NULL;
    char msg[256];
    atomic_fetch_add(&n_calls, 1);
    int rc = shop_place(&S, r->key, r->customer, r->sku, r->qty, r->amount, 30000, &rep, msg,
                        sizeof msg);
    if (rc == 0) {
      /* the first answer is recorded; every later one must agree */
      static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
      pthread_mutex_lock(&mu);
      if (!r->gid_p) {
        snprintf(r->gid, sizeof r->gid, "%s", rep->global_id);
        snprintf(r->status, sizeof r->status, "%s", rep->status);
        r->gid_p = r->gid;
        r->status_p = r->status;
      } else if (strcmp(r->gid, rep->global_id) != 0 || strcmp(r->status, rep->status) != 0) {
        fprintf(stderr, "MISMATCH %s: answers disagree: %s %s vs %s %s\n", r->key, r->gid,
                r->status, rep->global_id, rep->status);
        atomic_fetch_add(&n_disagree, 1);
      }
      pthread_mutex_unlock(&mu);
      protobuf_c_message_free_unpacked(&rep->base, NULL);
      return;
    }
    if (!transient(rc) || h_now_ms() > end) {
      fprintf(stderr, "saga %s: PlaceOrder failed: %d %s\n", r->key, rc, msg);
      return;
    }
    atomic_fetch_add(&n_retries, 1);
    h_sleep_ms(20 + rnd() % 80); /* not a wait: a client's jittered pause before its retry */
  }
}

static void *dup_thread(void *arg) {
  place(arg);
  return NULL;
}

/* A redelivered participant message: must be answered without a new effect. */
static void redeliver(saga_run *r, bool charge) {
  int64_t end = h_now_ms() + 60000;
  for (;;) {
    Shop__V1__StepReply *rep = NULL;
    char msg[256];
    int rc;
    if (charge) {
      Shop__V1__ChargeRequest q = SHOP__V1__CHARGE_REQUEST__INIT;
      q.global_id = r->gid;
      q.customer = r->customer;
      q.amount_cents = r->amount;
      rc = shop_step(S.pay_ch, "/shop.v1.Payments/Charge", &q.base, &rep, msg, sizeof msg);
    } else {
      Shop__V1__ReserveRequest q = SHOP__V1__RESERVE_REQUEST__INIT;
      q.global_id = r->gid;
      q.sku = (char *)r->sku;
      q.qty = r->qty;
      rc = shop_step(S.inv_ch, "/shop.v1.Inventory/Reserve", &q.base, &rep, msg, sizeof msg);
    }
    if (rc == 0) {
      if (rep->ran) {
        fprintf(stderr, "MISMATCH %s: a redelivered %s ran again\n", r->key,
                charge ? "charge" : "reserve");
        atomic_fetch_add(&n_disagree, 1);
      }
      protobuf_c_message_free_unpacked(&rep->base, NULL);
      return;
    }
    if (!transient(rc) || h_now_ms() > end) {
      fprintf(stderr, "saga %s: redelivery failed: %d %s\n", r->key, rc, msg);
      atomic_fetch_add(&n_disagree, 1);
      return;
    }
    h_sleep_ms(20 + rnd() % 80); /* not a wait: a client's jittered pause before its retry */
  }
}

static void *worker_main(void *arg) {
  (void)arg;
  for (;;) {
    int i = atomic_fetch_add(&next_saga, 1);
    if (i >= SAGAS) break;
    saga_run *r = &runs[i];
    snprintf(r->key, sizeof r->key, "storm-%d", i);
    if (rnd() % 100 < 4)
      snprintf(r->customer, sizeof r->customer, "declined-%d", i % 7);
    else
      snprintf(r->customer, sizeof r->customer, "cust-%d", (int)(rnd() % 40));
    r->sku = sku_names[rnd() % SKUS];
    r->qty = 1 + (int)(rnd() % 3);
    r->amount = 100 + (int64_t)(rnd() % 20000);

    pthread_t dup;
    bool concurrent = rnd() % 100 < 30;
    if (concurrent) {
      atomic_fetch_add(&n_dup_concurrent, 1);
      pthread_create(&dup, NULL, dup_thread, r);
    }
    place(r);
    if (concurrent) pthread_join(dup, NULL);
    atomic_fetch_add(&done_sagas, 1);
    if (!r->gid_p) continue;
    if (rnd() % 100 < 15) {
      atomic_fetch_add(&n_dup_late, 1);
      place(r);
    }
    if (rnd() % 100 < 15) {
      atomic_fetch_add(&n_callbacks, 1);
      redeliver(r, true);
    }
    if (rnd() % 100 < 10) {
      atomic_fetch_add(&n_redeliveries, 1);
      redeliver(r, false);
    }
  }
  atomic_fetch_add(&done_workers, 1);
  return NULL;
}

static void setup(void) {
  shop_conf conf = {.stock = "sku-a=400,sku-b=400,sku-c=400,sku-d=150",
                    .threads = 12,
                    .crash_rate = "0.001"};
  shop_start(&S, &conf);
}
static void teardown(void) {
  shop_stop(&S);
}

TestSuite(storm, .init = setup, .fini = teardown, .timeout = 480);

Test(storm, thousand_sagas_with_random_duplicates_and_kills) {
  pthread_t t[WORKERS];
  int64_t t0 = h_now_ms();
  for (int i = 0; i < WORKERS; i++) pthread_create(&t[i], NULL, worker_main, NULL);

  /* the supervisor: restart what died; kill -9 a random service every KILL_EVERY sagas */
  svc *all[3] = {&S.order, &S.payment, &S.inventory};
  int crashes = 0, kills = 0;
  int next_kill = KILL_EVERY / 2;
  while (atomic_load(&done_workers) < WORKERS) {
    for (int k = 0; k < 3; k++)
      if (svc_exited(all[k])) {
        crashes++;
        svc_start(&S, all[k], NULL);
      }
    if (atomic_load(&done_sagas) >= next_kill) {
      next_kill += KILL_EVERY;
      svc *v = all[rnd() % 3];
      svc_kill9(v);
      kills++;
      svc_start(&S, v, NULL);
    }
    cr_assert(h_now_ms() - t0 < 420000, "the storm did not finish in 7 minutes");
    h_sleep_ms(10); /* the supervisor's next look: a wait for the workers, with its deadline */
  }
  for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
  int64_t elapsed = h_now_ms() - t0;
  /* a crash point may still have fired in the last moments: bring everything back up */
  for (int k = 0; k < 3; k++)
    if (svc_exited(all[k])) {
      crashes++;
      svc_start(&S, all[k], NULL);
    }

  printf("storm: %d sagas in %lld ms with %d workers; PlaceOrder calls=%ld (retries=%ld)\n"
         "  duplicates: concurrent=%ld after-completion=%ld charge-callbacks=%ld"
         " reserve-redeliveries=%ld\n"
         "  faults: crash-point SIGKILLs=%d external kill -9=%d (restarts order=%d payment=%d"
         " inventory=%d)\n",
         SAGAS, (long long)elapsed, WORKERS, atomic_load(&n_calls), atomic_load(&n_retries),
         atomic_load(&n_dup_concurrent), atomic_load(&n_dup_late), atomic_load(&n_callbacks),
         atomic_load(&n_redeliveries), crashes, kills, S.order.starts - 1, S.payment.starts - 1,
         S.inventory.starts - 1);
  fflush(stdout);

  static const char *gids[SAGAS], *status[SAGAS];
  for (int i = 0; i < SAGAS; i++) {
    gids[i] = runs[i].gid_p;
    status[i] = runs[i].status_p;
  }
  shop_counts c = shop_check(&S, gids, status, SAGAS);
  cr_expect_eq(atomic_load(&n_disagree), 0, "duplicates got different answers or ran again");
  cr_expect_eq(c.mismatches, 0, "the tables disagree (see MISMATCH lines)");
  cr_expect_eq(c.confirmed + c.cancelled, SAGAS, "every saga fully done or fully compensated");
  cr_expect_gt(c.confirmed, 0);
  cr_expect_gt(c.out_of_stock, 0, "the run should exercise compensation");
  cr_expect_gt(crashes + kills, 0, "the run should have killed something");
  /* the duplicates the storm counts it sent: each kind was sent at least once */
  cr_expect_gt(atomic_load(&n_dup_concurrent), 0, "the run should send concurrent duplicates");
  cr_expect_gt(atomic_load(&n_dup_late), 0, "the run should repeat completed sagas");
  cr_expect_gt(atomic_load(&n_callbacks), 0, "the run should redeliver charge callbacks");
  cr_expect_gt(atomic_load(&n_redeliveries), 0, "the run should redeliver reservations");
}
