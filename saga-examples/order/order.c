/* saga-order — the front door and the orchestrator of the order saga.
 *
 * PlaceOrder(request_key, customer, sku, qty, amount):
 *   1. BeginSaga(request_id = request_key): every duplicate of the request gets the same
 *      global id (double click, gateway retry, a retry long after the saga finished).
 *   2. order.create      FORWARD, local: an orders row, status pending
 *   3. payment.charge    FORWARD, Payments.Charge   → charged | declined
 *   4. inventory.reserve FORWARD, Inventory.Reserve → reserved | out_of_stock
 *   5. order.confirm     FORWARD, local: status confirmed
 *   On a definite failure (declined, out_of_stock, or a step already compensated by a concurrent
 *   duplicate) the compensations run, in reverse order, as COMPENSATION steps:
 *   inventory.reserve (release), payment.charge (refund), order.create (cancel: status
 *   cancelled). A compensation of a step that never ran is a null compensation (skipped, and a
 *   late forward is then refused by the coordinator: hanging protection).
 *   Every step replays once done, so a duplicate PlaceOrder walks the same path and returns the
 *   same answer; concurrent duplicates wait for each other (ABORTED → backoff → REPLAY).
 *   A participant that does not answer (down, restarting) is retried with backoff up to
 *   --call-deadline-ms; past that PlaceOrder answers UNAVAILABLE and the saga stays where it is
 *   until the client retries (it never compensates on "unknown").
 *
 * Its own table, in its own schema: orders (id, global_id, request_key, customer, sku, qty,
 * amount_cents, status pending|confirmed|cancelled, reason, fence, created_at) and idem_barrier.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shop/v1/inventory.pb-c.h"
#include "shop/v1/orders.pb-c.h"
#include "shop/v1/payments.pb-c.h"
#include "sx_svc.h"

static const char *const schema_sql =
    "CREATE TABLE IF NOT EXISTS orders ("
    " id bigserial PRIMARY KEY, global_id text NOT NULL, request_key text NOT NULL,"
    " customer text NOT NULL, sku text NOT NULL, qty integer NOT NULL,"
    " amount_cents bigint NOT NULL,"
    " status text NOT NULL CHECK (status IN ('pending', 'confirmed', 'cancelled')),"
    " reason text,"
    " fence bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now());"
    "CREATE INDEX IF NOT EXISTS orders_global_id ON orders (global_id)";

typedef struct app {
  sx_opts o;
  idem_client *idem;
  grpc_channel *payments;
  grpc_channel *inventory;
} app;

/* --- local steps --------------------------------------------------------------------------- */

static bool exec(PGconn *pg, const char *sql, int n, const char *const *p, int *rows) {
  PGresult *r = PQexecParams(pg, sql, n, NULL, p, NULL, NULL, 0);
  ExecStatusType st = PQresultStatus(r);
  bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
  if (!ok) fprintf(stderr, "order: %s", PQerrorMessage(pg));
  if (ok && rows) *rows = atoi(PQcmdTuples(r));
  PQclear(r);
  return ok;
}

static void set_out(idem_step_output *out, idem_outcome oc, int code, const char *status) {
  out->outcome = oc;
  out->code = code;
  out->body = status;
  out->body_len = strlen(status);
}

typedef struct order_arg {
  const char *global_id;
  const Shop__V1__PlaceOrderRequest *in;
  const char *reason; /* cancel: why */
  char body[32];      /* cancel: "cancelled:<reason>", the step's stored result */
} order_arg;

static void create_effect(PGconn *pg, void *arg, uint64_t attempt, idem_step_output *out) {
  const order_arg *a = arg;
  char qty[16], amount[24], fence[24];
  snprintf(qty, sizeof qty, "%d", a->in->qty);
  snprintf(amount, sizeof amount, "%" PRId64, a->in->amount_cents);
  snprintf(fence, sizeof fence, "%" PRIu64, attempt);
  const char *const p[7] = {a->global_id, a->in->request_key, a->in->customer, a->in->sku,
                            qty,          amount,             fence};
  if (!exec(pg,
            "INSERT INTO orders (global_id, request_key, customer, sku, qty, amount_cents,"
            " status, fence) VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7)",
            7, p, NULL))
    out->outcome = IDEM_OUTCOME_RETRYABLE;
  else
    set_out(out, IDEM_OUTCOME_SUCCEEDED, 201, "created");
}

/* The compensation of create. Its result ("cancelled:<reason>") is replayed to every later
 * duplicate, which can no longer tell the reason from the forward steps (they answer
 * skip_already_compensated once compensated). */
static void cancel_effect(PGconn *pg, void *arg, uint64_t attempt, idem_step_output *out) {
  order_arg *a = arg;
  char fence[24];
  snprintf(fence, sizeof fence, "%" PRIu64, attempt);
  const char *const p[3] = {a->global_id, fence, a->reason};
  int n = 0;
  if (!exec(pg,
            "UPDATE orders SET status = 'cancelled', reason = $3, fence = $2"
            " WHERE global_id = $1 AND status = 'pending'",
            3, p, &n)) {
    out->outcome = IDEM_OUTCOME_RETRYABLE;
    return;
  }
  snprintf(a->body, sizeof a->body, "cancelled:%s", n ? a->reason : "nothing_to_cancel");
  set_out(out, IDEM_OUTCOME_SUCCEEDED, 200, a->body);
}

static void confirm_effect(PGconn *pg, void *arg, uint64_t attempt, idem_step_output *out) {
  const order_arg *a = arg;
  const char *const p[1] = {a->global_id};
  int n = 0;
  if (!exec(pg,
            "UPDATE orders SET status = 'confirmed' WHERE global_id = $1 AND status = 'pending'",
            1, p, &n))
    out->outcome = IDEM_OUTCOME_RETRYABLE;
  else if (n == 0)
    set_out(out, IDEM_OUTCOME_FAILED, 409, "not_pending");
  else
    set_out(out, IDEM_OUTCOME_SUCCEEDED, 200, "confirmed");
}

static int local_step(app *a, PGconn *pg, const char *operation, idem_phase phase,
                      const char *fp, idem_pg_effect_fn effect, order_arg *arg,
                      char status[32], sx_reply *out) {
  if (!pg || !sx_pg_ok(pg)) {
    snprintf(out->msg, sizeof out->msg, "order: database unavailable");
    return GRPC_STATUS_UNAVAILABLE;
  }
  sx_step s = {.o = &a->o,
               .idem = a->idem,
               .pg = pg,
               .key = {arg->global_id, "order", operation, phase},
               .fp_data = fp,
               .fp_len = strlen(fp),
               .effect = effect,
               .arg = arg};
  Shop__V1__StepReply rep;
  return sx_step_run(&s, &rep, status, out);
}

/* --- calls to the participants ------------------------------------------------------------- */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static bool retryable(int rc) {
  return rc == GRPC_STATUS_UNAVAILABLE || rc == GRPC_STATUS_DEADLINE_EXCEEDED ||
         rc == GRPC_STATUS_ABORTED || rc == GRPC_STATUS_CANCELLED || rc == GRPC_STATUS_INTERNAL ||
         rc == GRPC_STATUS_UNKNOWN;
}

/* Calls a participant until it answers (retrying what may be transient, with a growing,
 * jittered wait) or --call-deadline-ms passes. Copies the reply's status word. */
static int call_participant(app *a, grpc_channel *ch, const char *path,
                            const ProtobufCMessage *req, char status[32], sx_reply *out) {
  int64_t end = now_ms() + a->o.call_deadline_ms;
  for (int n = 0;; n++) {
    int64_t left = end - now_ms();
    ProtobufCMessage *resp = NULL;
    char msg[200];
    int rc = sx_call(ch, path, req, &shop__v1__step_reply__descriptor, left < 3000 ? left : 3000,
                     &resp, msg, sizeof msg);
    if (rc == GRPC_STATUS_OK) {
      snprintf(status, 32, "%s", ((Shop__V1__StepReply *)resp)->status);
      protobuf_c_message_free_unpacked(resp, NULL);
      return GRPC_STATUS_OK;
    }
    int64_t wait = 20 + (n < 5 ? 20 << n : 400) * (rand() % 100) / 100;
    if (!retryable(rc) || now_ms() + wait >= end) {
      snprintf(out->msg, sizeof out->msg, "%s: %s", path, msg);
      return retryable(rc) ? GRPC_STATUS_UNAVAILABLE : rc;
    }
    sleep_ms(wait);
  }
}

/* --- the saga -------------------------------------------------------------------------------- */

/* Runs the compensations; on OK, reason receives the cancel's stored reason. */
static int compensate(app *a, PGconn *pg, order_arg *oa, const char *fp, char reason[32],
                      sx_reply *out) {
  char st[32];
  Shop__V1__ReleaseRequest rel = SHOP__V1__RELEASE_REQUEST__INIT;
  rel.global_id = (char *)oa->global_id;
  int rc = call_participant(a, a->inventory, "/shop.v1.Inventory/Release", &rel.base, st, out);
  if (rc != GRPC_STATUS_OK) return rc;
  Shop__V1__RefundRequest ref = SHOP__V1__REFUND_REQUEST__INIT;
  ref.global_id = (char *)oa->global_id;
  rc = call_participant(a, a->payments, "/shop.v1.Payments/Refund", &ref.base, st, out);
  if (rc != GRPC_STATUS_OK) return rc;
  rc = local_step(a, pg, "create", IDEM_COMPENSATION, fp, cancel_effect, oa, st, out);
  if (rc != GRPC_STATUS_OK) return rc;
  const char *colon = strchr(st, ':');
  snprintf(reason, 32, "%s", colon ? colon + 1 : oa->reason);
  return GRPC_STATUS_OK;
}

static int on_place(void *app_, void *tls, const ProtobufCMessage *in_, sx_reply *out) {
  app *a = app_;
  PGconn *pg = tls;
  const Shop__V1__PlaceOrderRequest *in = (const Shop__V1__PlaceOrderRequest *)in_;
  if (!*in->request_key || !*in->customer || !*in->sku || in->qty <= 0 ||
      in->amount_cents <= 0) {
    snprintf(out->msg, sizeof out->msg,
             "request_key, customer, sku, a positive qty and amount_cents are required");
    return GRPC_STATUS_INVALID_ARGUMENT;
  }
  char gid[IDEM_GLOBAL_ID_MAX + 1];
  bool created = false;
  idem_error e;
  idem_label labels[] = {{"customer", in->customer}};
  int rc = idem_saga_begin(a->idem, in->request_key, "order", labels, 1, gid, &created, NULL, &e);
  if (rc != IDEM_OK) {
    snprintf(out->msg, sizeof out->msg, "begin saga: %.200s", e.message);
    return rc == IDEM_INVALID_ARGUMENT ? rc : GRPC_STATUS_UNAVAILABLE;
  }

  /* the order's canonical form: the same key with a different order is refused */
  char fp[512];
  snprintf(fp, sizeof fp, "order\n%s\n%s\n%d\n%" PRId64, in->customer, in->sku, in->qty,
           in->amount_cents);
  order_arg oa = {.global_id = gid, .in = in};
  char st[32];
  const char *reason = "";
  rc = local_step(a, pg, "create", IDEM_FORWARD, fp, create_effect, &oa, st, out);
  if (rc != GRPC_STATUS_OK) return rc;
  if (strcmp(st, "created") != 0) {
    reason = "compensated";
    goto compensate;
  }

  Shop__V1__ChargeRequest ch = SHOP__V1__CHARGE_REQUEST__INIT;
  ch.global_id = gid;
  ch.customer = in->customer;
  ch.amount_cents = in->amount_cents;
  rc = call_participant(a, a->payments, "/shop.v1.Payments/Charge", &ch.base, st, out);
  if (rc != GRPC_STATUS_OK) return rc;
  if (strcmp(st, "charged") != 0) {
    reason = strcmp(st, "declined") == 0 ? "declined" : "compensated";
    goto compensate;
  }

  Shop__V1__ReserveRequest rs = SHOP__V1__RESERVE_REQUEST__INIT;
  rs.global_id = gid;
  rs.sku = in->sku;
  rs.qty = in->qty;
  rc = call_participant(a, a->inventory, "/shop.v1.Inventory/Reserve", &rs.base, st, out);
  if (rc != GRPC_STATUS_OK) return rc;
  if (strcmp(st, "reserved") != 0) {
    reason = strcmp(st, "out_of_stock") == 0 ? "out_of_stock" : "compensated";
    goto compensate;
  }

  rc = local_step(a, pg, "confirm", IDEM_FORWARD, fp, confirm_effect, &oa, st, out);
  if (rc != GRPC_STATUS_OK) return rc;
  if (strcmp(st, "confirmed") != 0) {
    snprintf(out->msg, sizeof out->msg, "confirm: %s", st);
    return GRPC_STATUS_INTERNAL;
  }
  Shop__V1__PlaceOrderReply rep = SHOP__V1__PLACE_ORDER_REPLY__INIT;
  rep.global_id = gid;
  rep.status = "confirmed";
  rep.reason = "";
  rep.saga_created = created;
  sx_reply_set(out, &rep.base);
  return GRPC_STATUS_OK;

compensate:
  oa.reason = reason;
  char final_reason[32];
  rc = compensate(a, pg, &oa, fp, final_reason, out);
  if (rc != GRPC_STATUS_OK) return rc;
  Shop__V1__PlaceOrderReply crep = SHOP__V1__PLACE_ORDER_REPLY__INIT;
  crep.global_id = gid;
  crep.status = "cancelled";
  crep.reason = final_reason;
  crep.saga_created = created;
  sx_reply_set(out, &crep.base);
  return GRPC_STATUS_OK;
}

static void *thread_init(void *app_) {
  app *a = app_;
  return sx_pg_connect(&a->o);
}

static void thread_fini(void *tls) {
  if (tls) PQfinish(tls);
}

int main(int argc, char **argv) {
  app a;
  sx_opts_parse(argc, argv, &a.o);
  if (!a.o.payments || !a.o.inventory) {
    fprintf(stderr, "%s: --payments and --inventory are required\n", argv[0]);
    return 2;
  }
  PGconn *pg = sx_pg_connect(&a.o);
  if (!pg) return 1;
  bool ok = sx_pg_exec(pg, "SELECT pg_advisory_lock(7342190005)") && sx_pg_exec(pg, schema_sql);
  idem_error e;
  if (ok && idem_pg_barrier_init(pg, &e) != IDEM_OK) {
    fprintf(stderr, "order: %s\n", e.message);
    ok = false;
  }
  PQfinish(pg);
  if (!ok) return 1;
  srand((unsigned)now_ms());
  a.idem = sx_idem_connect(&a.o);
  a.payments = sx_channel(a.o.payments);
  a.inventory = sx_channel(a.o.inventory);
  static const sx_method methods[] = {
      {"/shop.v1.Orders/PlaceOrder", &shop__v1__place_order_request__descriptor, on_place},
  };
  sx_server_config cfg = {.listen = a.o.listen,
                          .threads = a.o.threads,
                          .methods = methods,
                          .n_methods = 1,
                          .app = &a,
                          .thread_init = thread_init,
                          .thread_fini = thread_fini};
  int rc = sx_serve(&cfg);
  sx_channel_close(a.payments);
  sx_channel_close(a.inventory);
  idem_close(a.idem);
  return rc;
}
