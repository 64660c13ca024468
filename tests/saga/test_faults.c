/* kill -9 at the three crash points of a step, restart, and the saga resumes and ends consistent.
 *
 * The service is started with --crash POINT:OPERATION, which raise(SIGKILL)s the process the
 * first time it reaches POINT in OPERATION (deterministic); the test restarts it without the
 * flag as soon as it has died. The saga then resumes through the coordinator: a takeover after
 * the 500 ms lease (after_begin, after_write) or a replay (after_complete). What each point must
 * leave behind, for the crashed step:
 *   after_begin     nothing written      → a later attempt takes over and writes (barrier fence
 *                                           >= 2; the record's attempt, 2, unless another takeover
 *                                           came: before that write (fence = attempt) or after it
 *                                           (fence below the attempt, the write kept))
 *   after_write     written, not completed → a later attempt takes over, the barrier finds the
 *                                           earlier attempt's effect and keeps it (fence below the
 *                                           record's attempt, 1 unless another takeover came): no
 *                                           second write
 *   after_complete  completed, no reply  → the retried call is a replay (attempt 1, fence 1)
 * "Another takeover": on a loaded machine the crashing service's lease keeper can be late by more
 * than the 500 ms lease, and a retry of the call takes the step over before the crash (seen once:
 * attempt 3 after after_write, the service 3.7 s from its start to the crash point), and the
 * attempt that took over after after_begin can itself be late, so that a third takes over after
 * its write and keeps it (seen once, the Java service: fence 2, attempt 3). That is the lease
 * doing its job; the fence relation and the one charge are what must hold.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "shop.h"

static shop S;

static void setup(void) {
  shop_conf conf = {.stock = "widget=100"};
  shop_start(&S, &conf);
}
static void teardown(void) {
  shop_stop(&S);
}

TestSuite(faults, .init = setup, .fini = teardown, .timeout = 120);

typedef struct client {
  const char *key;
  int rc;
  int calls;
  char msg[256];
  char gid[IDEM_GLOBAL_ID_MAX + 1];
  char status[32];
} client;

/* The client (a gateway): PlaceOrder until it gets an answer, 60 s at most. */
static void *client_main(void *arg) {
  client *c = arg;
  int64_t end = h_now_ms() + 60000;
  for (;;) {
    Shop__V1__PlaceOrderReply *r = NULL;
    c->calls++;
    c->rc = shop_place(&S, c->key, "henry", "widget", 2, 2500, 30000, &r, c->msg, sizeof c->msg);
    if (c->rc == 0) {
      snprintf(c->gid, sizeof c->gid, "%s", r->global_id);
      snprintf(c->status, sizeof c->status, "%s", r->status);
      protobuf_c_message_free_unpacked(&r->base, NULL);
      return NULL;
    }
    if (c->rc != GRPC_STATUS_UNAVAILABLE && c->rc != GRPC_STATUS_DEADLINE_EXCEEDED &&
        c->rc != GRPC_STATUS_ABORTED)
      return NULL;
    if (h_now_ms() > end) return NULL;
    h_sleep_ms(50); /* not a wait: a client's pause before it retries a failed PlaceOrder */
  }
}

/* what the crashed step's record and barrier must show (the comment at the top) */
typedef enum { WRITES_AFTER_TAKEOVER, KEPT_AFTER_TAKEOVER, REPLAYED } recovery;

static void crash_and_recover(svc *v, const char *service, const char *operation, const char *point,
                              recovery want) {
  char crash[64];
  snprintf(crash, sizeof crash, "%s:%s", point, operation);
  const char *const extra[] = {"--crash", crash, NULL};
  svc_kill9(v);
  svc_start(&S, v, extra);

  client c = {.key = "crash-order-1"};
  pthread_t t;
  int64_t t0 = h_now_ms();
  pthread_create(&t, NULL, client_main, &c);
  bool died = svc_wait_exit(v, 30000);
  int64_t t_died = h_now_ms();
  if (died) svc_start(&S, v, NULL); /* restart, without the crash flag */
  pthread_join(t, NULL);
  int64_t t_done = h_now_ms();
  cr_assert(died, "saga-%s did not reach %s", v->name, crash);
  cr_assert_eq(c.rc, 0, "PlaceOrder: %d %s", c.rc, c.msg);
  cr_assert_str_eq(c.status, "confirmed");
  printf(
      "kill -9 %s at %s: died after %lld ms, saga confirmed %lld ms after the restart"
      " (%d PlaceOrder calls)\n",
      v->name, crash, (long long)(t_died - t0), (long long)(t_done - t_died), c.calls);

  idem_step_key key = {c.gid, service, operation, IDEM_FORWARD};
  idem_record rec;
  idem_error e;
  cr_assert_eq(idem_step_lookup(S.idem, &key, &rec, &e), 0, "%s", e.message);
  cr_assert_eq(rec.state, IDEM_STATE_SUCCEEDED);
  long long attempt = (long long)rec.attempt;
  idem_record_clear(&rec);
  char sql[200];
  snprintf(sql, sizeof sql,
           "SELECT fence FROM {%c}.idem_barrier WHERE global_id = $1 AND operation = '%s'"
           " AND phase = 1",
           service[0], operation);
  long long fence = shop_int(&S, sql, c.gid);
  switch (want) {
    case WRITES_AFTER_TAKEOVER:
      cr_assert_geq(attempt, 2, "a takeover: attempt %lld", attempt);
      cr_assert(fence >= 2 && fence <= attempt,
                "an attempt that took over wrote (fence >= 2), and no later one wrote again: "
                "fence %lld, attempt %lld", fence, attempt);
      break;
    case KEPT_AFTER_TAKEOVER:
      cr_assert_geq(attempt, 2, "a takeover: attempt %lld", attempt);
      cr_assert(fence >= 1 && fence < attempt,
                "an earlier attempt's write kept, none after: fence %lld, attempt %lld", fence,
                attempt);
      break;
    case REPLAYED:
      cr_assert_eq(attempt, 1, "a replay: attempt %lld", attempt);
      cr_assert_eq(fence, 1, "fence %lld", fence);
      break;
  }

  const char *g[1] = {c.gid}, *st[1] = {"confirmed"};
  shop_counts n = shop_check(&S, g, st, 1);
  cr_assert_eq(n.mismatches, 0, "the tables disagree (see MISMATCH lines)");
  cr_assert_eq(n.charges, 1);
  cr_assert_eq(n.reservations, 1);
  cr_assert_eq(shop_int(&S, "SELECT available FROM {i}.stock WHERE sku = $1", "widget"), 98);
}

Test(faults, payment_killed_after_begin_before_write) {
  crash_and_recover(&S.payment, "payment", "charge", "after_begin", WRITES_AFTER_TAKEOVER);
}
Test(faults, payment_killed_after_write_before_complete) {
  crash_and_recover(&S.payment, "payment", "charge", "after_write", KEPT_AFTER_TAKEOVER);
}
Test(faults, payment_killed_after_complete_before_reply) {
  crash_and_recover(&S.payment, "payment", "charge", "after_complete", REPLAYED);
}
Test(faults, inventory_killed_after_begin_before_write) {
  crash_and_recover(&S.inventory, "inventory", "reserve", "after_begin", WRITES_AFTER_TAKEOVER);
}
Test(faults, inventory_killed_after_write_before_complete) {
  crash_and_recover(&S.inventory, "inventory", "reserve", "after_write", KEPT_AFTER_TAKEOVER);
}
Test(faults, inventory_killed_after_complete_before_reply) {
  crash_and_recover(&S.inventory, "inventory", "reserve", "after_complete", REPLAYED);
}
/* the orchestrator itself: the client's retry re-drives the saga from the coordinator's records */
Test(faults, order_killed_after_begin_before_write) {
  crash_and_recover(&S.order, "order", "create", "after_begin", WRITES_AFTER_TAKEOVER);
}
Test(faults, order_killed_after_write_before_complete) {
  crash_and_recover(&S.order, "order", "create", "after_write", KEPT_AFTER_TAKEOVER);
}
Test(faults, order_killed_after_complete_before_reply) {
  crash_and_recover(&S.order, "order", "create", "after_complete", REPLAYED);
}
