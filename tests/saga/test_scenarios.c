/* The order saga's duplicate scenarios, end to end: a real idem-coordinator, the three example
 * services as real processes, real Postgres. Each test has its own shop (tenant and schemas). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "shop.h"

static shop S;

static void setup(void) {
  shop_conf conf = {.stock = "widget=1000,gadget=1"};
  shop_start(&S, &conf);
}
static void teardown(void) {
  shop_stop(&S);
}

TestSuite(scenarios, .init = setup, .fini = teardown, .timeout = 120);

typedef struct placed {
  const char *key, *customer, *sku;
  int qty;
  int64_t amount;
  int rc;
  char msg[256];
  char gid[IDEM_GLOBAL_ID_MAX + 1];
  char status[32];
  char reason[32];
  bool created;
} placed;

static placed order_of(const char *key, const char *customer, const char *sku, int qty,
                       int64_t amount) {
  return (placed){.key = key, .customer = customer, .sku = sku, .qty = qty, .amount = amount};
}

static void place(placed *p) {
  Shop__V1__PlaceOrderReply *r = NULL;
  p->rc = shop_place(&S, p->key, p->customer, p->sku, p->qty, p->amount, 30000, &r, p->msg,
                     sizeof p->msg);
  if (p->rc == 0) {
    snprintf(p->gid, sizeof p->gid, "%s", r->global_id);
    snprintf(p->status, sizeof p->status, "%s", r->status);
    snprintf(p->reason, sizeof p->reason, "%s", r->reason);
    p->created = r->saga_created;
    protobuf_c_message_free_unpacked(&r->base, NULL);
  }
}

static void *place_thread(void *arg) {
  place(arg);
  return NULL;
}

static void expect_clean(const char *gid, const char *status) {
  const char *g[1] = {gid}, *st[1] = {status};
  shop_counts c = shop_check(&S, g, st, 1);
  cr_assert_eq(c.mismatches, 0, "the tables disagree (see MISMATCH lines)");
}

static Shop__V1__StepReply *charge(const char *gid, const char *customer, int64_t amount) {
  Shop__V1__ChargeRequest q = SHOP__V1__CHARGE_REQUEST__INIT;
  q.global_id = (char *)gid;
  q.customer = (char *)customer;
  q.amount_cents = amount;
  Shop__V1__StepReply *r = NULL;
  char msg[256];
  int rc = shop_step(S.pay_ch, "/shop.v1.Payments/Charge", &q.base, &r, msg, sizeof msg);
  cr_assert_eq(rc, 0, "Charge: %d %s", rc, msg);
  return r;
}

static Shop__V1__StepReply *by_gid(grpc_channel *ch, const char *path, const char *gid) {
  Shop__V1__RefundRequest q = SHOP__V1__REFUND_REQUEST__INIT; /* same shape as ReleaseRequest */
  q.global_id = (char *)gid;
  Shop__V1__StepReply *r = NULL;
  char msg[256];
  int rc = shop_step(ch, path, &q.base, &r, msg, sizeof msg);
  cr_assert_eq(rc, 0, "%s: %d %s", path, rc, msg);
  return r;
}

static Shop__V1__StepReply *reserve(const char *gid, const char *sku, int qty) {
  Shop__V1__ReserveRequest q = SHOP__V1__RESERVE_REQUEST__INIT;
  q.global_id = (char *)gid;
  q.sku = (char *)sku;
  q.qty = qty;
  Shop__V1__StepReply *r = NULL;
  char msg[256];
  int rc = shop_step(S.inv_ch, "/shop.v1.Inventory/Reserve", &q.base, &r, msg, sizeof msg);
  cr_assert_eq(rc, 0, "Reserve: %d %s", rc, msg);
  return r;
}

static void free_reply(Shop__V1__StepReply *r) {
  protobuf_c_message_free_unpacked(&r->base, NULL);
}

/* The scenario: double click, the gateway's own retry, then the payment channel's late
 * callback (the first attempt had already succeeded). One order, one charge. */
Test(scenarios, triple_trigger_creates_and_charges_once) {
  placed a = order_of("pay-btn-1", "alice", "widget", 1, 1999), b = a;
  pthread_t ta, tb;
  pthread_create(&ta, NULL, place_thread, &a); /* click */
  pthread_create(&tb, NULL, place_thread, &b); /* click again while it spins */
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  cr_assert_eq(a.rc, 0, "%s", a.msg);
  cr_assert_eq(b.rc, 0, "%s", b.msg);
  /* the gateway's retry of the first request: fired once the first request was answered */
  placed g = a;
  place(&g);
  cr_assert_eq(g.rc, 0, "%s", g.msg);
  cr_assert_str_eq(a.gid, b.gid);
  cr_assert_str_eq(a.gid, g.gid);
  cr_assert_str_eq(a.status, "confirmed");
  cr_assert_str_eq(b.status, "confirmed");
  cr_assert_str_eq(g.status, "confirmed");
  cr_assert_eq((int)a.created + (int)b.created, 1, "exactly one click began the saga");
  cr_assert_not(g.created);
  /* the late callback from the payment channel delivers the charge again */
  Shop__V1__StepReply *cb = charge(a.gid, "alice", 1999);
  cr_assert_str_eq(cb->status, "charged");
  cr_assert_str_eq(cb->decision, "replay");
  cr_assert_not(cb->ran);
  free_reply(cb);

  cr_assert_eq(shop_int(&S, "SELECT count(*) FROM {o}.orders WHERE global_id = $1", a.gid), 1);
  cr_assert_eq(shop_int(&S, "SELECT count(*) FROM {p}.ledger WHERE global_id = $1", a.gid), 1);
  cr_assert_eq(shop_int(&S, "SELECT charged_cents FROM {p}.accounts WHERE customer = $1", "alice"),
               1999);
  cr_assert_eq(shop_int(&S, "SELECT available FROM {i}.stock WHERE sku = $1", "widget"), 999);
  expect_clean(a.gid, "confirmed");
}

Test(scenarios, hundred_concurrent_identical_pay_requests) {
  enum { N = 100 };
  static placed p[N];
  pthread_t t[N];
  for (int i = 0; i < N; i++) {
    p[i] = order_of("pay-storm-1", "bob", "widget", 2, 4200);
    pthread_create(&t[i], NULL, place_thread, &p[i]);
  }
  for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
  int created = 0;
  for (int i = 0; i < N; i++) {
    cr_assert_eq(p[i].rc, 0, "request %d: %s", i, p[i].msg);
    cr_assert_str_eq(p[i].gid, p[0].gid);
    cr_assert_str_eq(p[i].status, "confirmed");
    created += p[i].created;
  }
  cr_assert_eq(created, 1);
  printf("100 concurrent pay requests: 1 saga %s, 1 created\n", p[0].gid);
  cr_assert_eq(shop_int(&S, "SELECT count(*) FROM {p}.ledger", NULL), 1);
  cr_assert_eq(shop_int(&S, "SELECT charged_cents FROM {p}.accounts WHERE customer = $1", "bob"),
               4200);
  cr_assert_eq(shop_int(&S, "SELECT count(*) FROM {i}.reservations", NULL), 1);
  cr_assert_eq(shop_int(&S, "SELECT available FROM {i}.stock WHERE sku = $1", "widget"), 998);
  expect_clean(p[0].gid, "confirmed");
}

/* A queue delivers the same reserve message three times: one reservation, two replays. */
Test(scenarios, message_redelivered_three_times) {
  char gid[IDEM_GLOBAL_ID_MAX + 1];
  idem_error e;
  cr_assert_eq(idem_saga_begin(S.idem, "queue-msg-7", "order", NULL, 0, gid, NULL, NULL, &e), 0,
               "%s", e.message);
  for (int i = 0; i < 3; i++) {
    Shop__V1__StepReply *r = reserve(gid, "widget", 5);
    cr_assert_str_eq(r->status, "reserved");
    cr_assert_eq(r->ran, i == 0, "delivery %d ran=%d", i + 1, r->ran);
    cr_assert_str_eq(r->decision, i == 0 ? "proceed" : "replay");
    free_reply(r);
  }
  cr_assert_eq(shop_int(&S, "SELECT count(*) FROM {i}.reservations WHERE global_id = $1", gid), 1);
  cr_assert_eq(shop_int(&S, "SELECT available FROM {i}.stock WHERE sku = $1", "widget"), 995);
}

/* The gateway retries long after the saga finished: the same answer, nothing new happens —
 * for a confirmed saga and for one that was compensated (out of stock: refund and cancel). */
Test(scenarios, gateway_retry_after_the_saga_completed) {
  placed ok = order_of("late-retry-ok", "carol", "widget", 1, 500);
  placed oos = order_of("late-retry-oos", "dave", "gadget", 2, 700); /* gadget: stock 1 */
  place(&ok);
  place(&oos);
  cr_assert_eq(ok.rc, 0, "%s", ok.msg);
  cr_assert_eq(oos.rc, 0, "%s", oos.msg);
  cr_assert_str_eq(ok.status, "confirmed");
  cr_assert_str_eq(oos.status, "cancelled");
  cr_assert_str_eq(oos.reason, "out_of_stock");
  for (int i = 0; i < 2; i++) {
    placed r1 = ok, r2 = oos;
    place(&r1);
    place(&r2);
    cr_assert_eq(r1.rc, 0, "%s", r1.msg);
    cr_assert_eq(r2.rc, 0, "%s", r2.msg);
    cr_assert_str_eq(r1.gid, ok.gid);
    cr_assert_str_eq(r1.status, "confirmed");
    cr_assert_not(r1.created);
    cr_assert_str_eq(r2.gid, oos.gid);
    cr_assert_str_eq(r2.status, "cancelled");
    cr_assert_str_eq(r2.reason, "out_of_stock");
    cr_assert_not(r2.created);
  }
  cr_assert_eq(shop_int(&S, "SELECT count(*) FROM {p}.ledger WHERE global_id = $1", oos.gid), 2,
               "one charge and one refund");
  cr_assert_eq(shop_int(&S, "SELECT charged_cents FROM {p}.accounts WHERE customer = $1", "dave"),
               0);
  cr_assert_eq(shop_int(&S, "SELECT available FROM {i}.stock WHERE sku = $1", "gadget"), 1);
  const char *g[2] = {ok.gid, oos.gid}, *st[2] = {"confirmed", "cancelled"};
  shop_counts c = shop_check(&S, g, st, 2);
  cr_assert_eq(c.mismatches, 0);
  cr_assert_eq(c.null_compensations, 1, "the release of the failed reserve is a null compensation");
}

/* A compensation that arrives before its forward action, then the forward action (hanging):
 * the refund/release are null compensations, and the late charge/reserve must not run. */
Test(scenarios, null_compensation_then_hanging_forward_is_refused) {
  char gid[IDEM_GLOBAL_ID_MAX + 1];
  idem_error e;
  cr_assert_eq(idem_saga_begin(S.idem, "hanging-1", "order", NULL, 0, gid, NULL, NULL, &e), 0,
               "%s", e.message);
  Shop__V1__StepReply *r = by_gid(S.pay_ch, "/shop.v1.Payments/Refund", gid);
  cr_assert_str_eq(r->status, "skipped");
  cr_assert_str_eq(r->decision, "skip_null_compensation");
  cr_assert_not(r->ran);
  free_reply(r);
  r = by_gid(S.inv_ch, "/shop.v1.Inventory/Release", gid);
  cr_assert_str_eq(r->decision, "skip_null_compensation");
  free_reply(r);

  r = charge(gid, "erin", 1234); /* the forward action arrives after its compensation */
  cr_assert_str_eq(r->status, "skipped");
  cr_assert_str_eq(r->decision, "skip_already_compensated");
  cr_assert_not(r->ran);
  free_reply(r);
  r = reserve(gid, "widget", 3);
  cr_assert_str_eq(r->decision, "skip_already_compensated");
  free_reply(r);

  cr_assert_eq(shop_int(&S, "SELECT count(*) FROM {p}.ledger WHERE global_id = $1", gid), 0);
  cr_assert_eq(shop_int(&S, "SELECT count(*) FROM {p}.accounts WHERE customer = $1", "erin"), 0);
  cr_assert_eq(shop_int(&S, "SELECT count(*) FROM {i}.reservations WHERE global_id = $1", gid), 0);
  cr_assert_eq(shop_int(&S, "SELECT available FROM {i}.stock WHERE sku = $1", "widget"), 1000);
  cr_assert_eq(shop_int(&S, "SELECT count(*) FROM {p}.idem_barrier WHERE global_id = $1", gid), 0,
               "nothing ran, so no barrier row");
}

Test(scenarios, declined_payment_is_compensated_without_a_refund) {
  placed p = order_of("declined-1", "declined-frank", "widget", 1, 900);
  place(&p);
  cr_assert_eq(p.rc, 0, "%s", p.msg);
  cr_assert_str_eq(p.status, "cancelled");
  cr_assert_str_eq(p.reason, "declined");
  cr_assert_eq(shop_int(&S, "SELECT count(*) FROM {p}.ledger WHERE global_id = $1", p.gid), 0);
  expect_clean(p.gid, "cancelled");
}

Test(scenarios, same_key_with_a_different_order_is_refused) {
  placed a = order_of("reused-key", "gina", "widget", 1, 100), b = order_of("reused-key", "gina", "widget", 3, 300);
  place(&a);
  cr_assert_eq(a.rc, 0, "%s", a.msg);
  place(&b);
  cr_assert_eq(b.rc, GRPC_STATUS_FAILED_PRECONDITION, "%d %s", b.rc, b.msg);
  cr_assert(strstr(b.msg, "fingerprint"), "%s", b.msg);
  cr_assert_eq(shop_int(&S, "SELECT count(*) FROM {p}.ledger", NULL), 1);
}
