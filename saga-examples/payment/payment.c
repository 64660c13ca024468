/* saga-payment — the payment participant: Charge (FORWARD) and Refund (its COMPENSATION).
 *
 * Its own tables, in its own schema (--schema):
 *   ledger   (id, global_id, customer, kind charge|refund, amount_cents, fence, at)
 *   accounts (customer, charged_cents)   what each customer has been charged, net of refunds
 *   idem_barrier                          the dedup rows (<idem/idem_pg.h>)
 * The ledger deliberately has no unique constraint on (global_id, kind): exactly-once comes
 * from the coordinator and the barrier, and the acceptance test would see a double charge.
 *
 * Step keys: (global_id, "payment", "charge", FORWARD) and (…, COMPENSATION) for the refund.
 * A charge over DECLINE_OVER_CENTS, or for a customer named "declined…", is declined: a
 * definite FAILED, remembered by the barrier and replayed by the coordinator.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shop/v1/payments.pb-c.h"
#include "sx_svc.h"

#define DECLINE_OVER_CENTS 100000

static const char *const schema_sql =
    "CREATE TABLE IF NOT EXISTS ledger ("
    " id bigserial PRIMARY KEY, global_id text NOT NULL, customer text NOT NULL,"
    " kind text NOT NULL CHECK (kind IN ('charge', 'refund')), amount_cents bigint NOT NULL,"
    " fence bigint NOT NULL, at timestamptz NOT NULL DEFAULT now());"
    "CREATE INDEX IF NOT EXISTS ledger_global_id ON ledger (global_id);"
    "CREATE TABLE IF NOT EXISTS accounts ("
    " customer text PRIMARY KEY, charged_cents bigint NOT NULL DEFAULT 0)";

typedef struct app {
  sx_opts o;
  idem_client *idem;
} app;

static bool exec(PGconn *pg, const char *sql, int n, const char *const *p, PGresult **keep) {
  PGresult *r = PQexecParams(pg, sql, n, NULL, p, NULL, NULL, 0);
  ExecStatusType st = PQresultStatus(r);
  bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
  if (!ok) fprintf(stderr, "payment: %s", PQerrorMessage(pg));
  if (ok && keep)
    *keep = r;
  else
    PQclear(r);
  return ok;
}

static void set_out(idem_step_output *out, idem_outcome oc, int code, const char *status) {
  out->outcome = oc;
  out->code = code;
  out->body = status; /* string literals: valid after the effect returns */
  out->body_len = strlen(status);
}

typedef struct charge_arg {
  const char *global_id, *customer;
  int64_t amount;
} charge_arg;

/* Inside the barrier's transaction. */
static void charge_effect(PGconn *pg, void *arg, uint64_t attempt, idem_step_output *out) {
  const charge_arg *a = arg;
  if (a->amount > DECLINE_OVER_CENTS || strncmp(a->customer, "declined", 8) == 0) {
    set_out(out, IDEM_OUTCOME_FAILED, 402, "declined");
    return;
  }
  char amount[24], fence[24];
  snprintf(amount, sizeof amount, "%" PRId64, a->amount);
  snprintf(fence, sizeof fence, "%" PRIu64, attempt);
  const char *const p[4] = {a->global_id, a->customer, amount, fence};
  if (!exec(pg,
            "INSERT INTO ledger (global_id, customer, kind, amount_cents, fence)"
            " VALUES ($1, $2, 'charge', $3, $4)",
            4, p, NULL) ||
      !exec(pg,
            "INSERT INTO accounts (customer, charged_cents) VALUES ($1, $2)"
            " ON CONFLICT (customer) DO UPDATE"
            " SET charged_cents = accounts.charged_cents + EXCLUDED.charged_cents",
            2, p + 1, NULL)) {
    out->outcome = IDEM_OUTCOME_RETRYABLE; /* rolled back: nothing happened */
    return;
  }
  set_out(out, IDEM_OUTCOME_SUCCEEDED, 200, "charged");
}

/* The compensation: refunds what the ledger says was charged for this saga. */
static void refund_effect(PGconn *pg, void *arg, uint64_t attempt, idem_step_output *out) {
  const char *gid = arg;
  const char *const p1[1] = {gid};
  PGresult *r = NULL;
  if (!exec(pg,
            "SELECT customer, amount_cents FROM ledger WHERE global_id = $1 AND kind = 'charge'"
            " ORDER BY id LIMIT 1",
            1, p1, &r)) {
    out->outcome = IDEM_OUTCOME_RETRYABLE;
    return;
  }
  if (PQntuples(r) == 0) {
    PQclear(r);
    set_out(out, IDEM_OUTCOME_SUCCEEDED, 200, "nothing_charged");
    return;
  }
  char fence[24];
  snprintf(fence, sizeof fence, "%" PRIu64, attempt);
  const char *const p[4] = {gid, PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), fence};
  bool ok = exec(pg,
                 "INSERT INTO ledger (global_id, customer, kind, amount_cents, fence)"
                 " VALUES ($1, $2, 'refund', $3, $4)",
                 4, p, NULL) &&
            exec(pg,
                 "UPDATE accounts SET charged_cents = charged_cents - $2::bigint"
                 " WHERE customer = $1",
                 2, p + 1, NULL);
  PQclear(r);
  if (!ok)
    out->outcome = IDEM_OUTCOME_RETRYABLE;
  else
    set_out(out, IDEM_OUTCOME_SUCCEEDED, 200, "refunded");
}

static int reply_step(app *a, PGconn *pg, const char *gid, idem_phase phase, const char *fp,
                      idem_pg_effect_fn effect, void *arg, sx_reply *out) {
  if (!pg || !sx_pg_ok(pg)) {
    snprintf(out->msg, sizeof out->msg, "payment: database unavailable");
    return GRPC_STATUS_UNAVAILABLE;
  }
  sx_step s = {.o = &a->o,
               .idem = a->idem,
               .pg = pg,
               .key = {gid, "payment", "charge", phase},
               .fp_data = fp,
               .fp_len = strlen(fp),
               .effect = effect,
               .arg = arg};
  Shop__V1__StepReply rep;
  char status[32];
  int rc = sx_step_run(&s, &rep, status, out);
  if (rc == GRPC_STATUS_OK) sx_reply_set(out, &rep.base);
  return rc;
}

static int on_charge(void *app_, void *tls, const ProtobufCMessage *in_, sx_reply *out) {
  const Shop__V1__ChargeRequest *in = (const Shop__V1__ChargeRequest *)in_;
  if (!*in->global_id || !*in->customer || in->amount_cents <= 0) {
    snprintf(out->msg, sizeof out->msg, "global_id, customer and a positive amount_cents are required");
    return GRPC_STATUS_INVALID_ARGUMENT;
  }
  char fp[512];
  snprintf(fp, sizeof fp, "charge\n%s\n%s\n%" PRId64, in->global_id, in->customer,
           in->amount_cents);
  charge_arg ca = {in->global_id, in->customer, in->amount_cents};
  return reply_step(app_, tls, in->global_id, IDEM_FORWARD, fp, charge_effect, &ca, out);
}

static int on_refund(void *app_, void *tls, const ProtobufCMessage *in_, sx_reply *out) {
  const Shop__V1__RefundRequest *in = (const Shop__V1__RefundRequest *)in_;
  if (!*in->global_id) {
    snprintf(out->msg, sizeof out->msg, "global_id is required");
    return GRPC_STATUS_INVALID_ARGUMENT;
  }
  char fp[256];
  snprintf(fp, sizeof fp, "refund\n%s", in->global_id);
  return reply_step(app_, tls, in->global_id, IDEM_COMPENSATION, fp, refund_effect,
                    in->global_id, out);
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
  PGconn *pg = sx_pg_connect(&a.o);
  if (!pg) return 1;
  bool ok = sx_pg_exec(pg, "SELECT pg_advisory_lock(7342190003)") && sx_pg_exec(pg, schema_sql);
  idem_error e;
  if (ok && idem_pg_barrier_init(pg, &e) != IDEM_OK) {
    fprintf(stderr, "payment: %s\n", e.message);
    ok = false;
  }
  PQfinish(pg); /* also releases the advisory lock */
  if (!ok) return 1;
  a.idem = sx_idem_connect(&a.o);
  static const sx_method methods[] = {
      {"/shop.v1.Payments/Charge", &shop__v1__charge_request__descriptor, on_charge},
      {"/shop.v1.Payments/Refund", &shop__v1__refund_request__descriptor, on_refund},
  };
  sx_server_config cfg = {.listen = a.o.listen,
                          .threads = a.o.threads,
                          .methods = methods,
                          .n_methods = 2,
                          .app = &a,
                          .thread_init = thread_init,
                          .thread_fini = thread_fini};
  int rc = sx_serve(&cfg);
  idem_close(a.idem);
  return rc;
}
