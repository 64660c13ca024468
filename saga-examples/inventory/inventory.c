/* saga-inventory — the inventory participant: Reserve (FORWARD) and Release (its COMPENSATION).
 *
 * Its own tables, in its own schema (--schema):
 *   stock        (sku, initial, available)      seeded from --stock sku=N,... (missing rows only)
 *   reservations (id, global_id, sku, qty, state reserved|released, fence, at)
 *   idem_barrier                                 the dedup rows (<idem/idem_pg.h>)
 * Conservation: for every sku, initial = available + sum(qty of reservations still reserved).
 * reservations has no unique constraint on global_id: a double reservation would be visible.
 *
 * Step keys: (global_id, "inventory", "reserve", FORWARD) and (…, COMPENSATION) for the release.
 * Not enough stock is a definite FAILED ("out_of_stock"), remembered and replayed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shop/v1/inventory.pb-c.h"
#include "sx_svc.h"

static const char *const schema_sql =
    "CREATE TABLE IF NOT EXISTS stock ("
    " sku text PRIMARY KEY, initial integer NOT NULL, available integer NOT NULL"
    " CHECK (available >= 0));"
    "CREATE TABLE IF NOT EXISTS reservations ("
    " id bigserial PRIMARY KEY, global_id text NOT NULL, sku text NOT NULL,"
    " qty integer NOT NULL, state text NOT NULL CHECK (state IN ('reserved', 'released')),"
    " fence bigint NOT NULL, at timestamptz NOT NULL DEFAULT now());"
    "CREATE INDEX IF NOT EXISTS reservations_global_id ON reservations (global_id)";

typedef struct app {
  sx_opts o;
  idem_client *idem;
} app;

static bool exec(PGconn *pg, const char *sql, int n, const char *const *p, PGresult **keep) {
  PGresult *r = PQexecParams(pg, sql, n, NULL, p, NULL, NULL, 0);
  ExecStatusType st = PQresultStatus(r);
  bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
  if (!ok) fprintf(stderr, "inventory: %s", PQerrorMessage(pg));
  if (ok && keep)
    *keep = r;
  else
    PQclear(r);
  return ok;
}

static void set_out(idem_step_output *out, idem_outcome oc, int code, const char *status) {
  out->outcome = oc;
  out->code = code;
  out->body = status;
  out->body_len = strlen(status);
}

typedef struct reserve_arg {
  const char *global_id, *sku;
  int qty;
} reserve_arg;

static void reserve_effect(PGconn *pg, void *arg, uint64_t attempt, idem_step_output *out) {
  const reserve_arg *a = arg;
  char qty[16], fence[24];
  snprintf(qty, sizeof qty, "%d", a->qty);
  snprintf(fence, sizeof fence, "%" PRIu64, attempt);
  const char *const p[4] = {a->global_id, a->sku, qty, fence};
  PGresult *r = NULL;
  if (!exec(pg,
            "UPDATE stock SET available = available - $2::integer"
            " WHERE sku = $1 AND available >= $2::integer RETURNING available",
            2, p + 1, &r)) {
    out->outcome = IDEM_OUTCOME_RETRYABLE;
    return;
  }
  int n = PQntuples(r);
  PQclear(r);
  if (n == 0) {
    set_out(out, IDEM_OUTCOME_FAILED, 409, "out_of_stock");
    return;
  }
  if (!exec(pg,
            "INSERT INTO reservations (global_id, sku, qty, state, fence)"
            " VALUES ($1, $2, $3, 'reserved', $4)",
            4, p, NULL)) {
    out->outcome = IDEM_OUTCOME_RETRYABLE;
    return;
  }
  set_out(out, IDEM_OUTCOME_SUCCEEDED, 200, "reserved");
}

/* The compensation: gives back what the saga's reservation holds. The state change is fenced
 * by the release's attempt as well as by the state. */
static void release_effect(PGconn *pg, void *arg, uint64_t attempt, idem_step_output *out) {
  const char *gid = arg;
  char fence[24];
  snprintf(fence, sizeof fence, "%" PRIu64, attempt);
  const char *const p[2] = {gid, fence};
  PGresult *r = NULL;
  if (!exec(pg,
            "UPDATE reservations SET state = 'released', fence = $2"
            " WHERE global_id = $1 AND state = 'reserved' RETURNING sku, qty",
            2, p, &r)) {
    out->outcome = IDEM_OUTCOME_RETRYABLE;
    return;
  }
  bool ok = true;
  for (int i = 0; i < PQntuples(r) && ok; i++) {
    const char *const q[2] = {PQgetvalue(r, i, 0), PQgetvalue(r, i, 1)};
    ok = exec(pg, "UPDATE stock SET available = available + $2::integer WHERE sku = $1", 2, q,
              NULL);
  }
  int n = PQntuples(r);
  PQclear(r);
  if (!ok)
    out->outcome = IDEM_OUTCOME_RETRYABLE;
  else
    set_out(out, IDEM_OUTCOME_SUCCEEDED, 200, n ? "released" : "nothing_reserved");
}

static int reply_step(app *a, PGconn *pg, const char *gid, idem_phase phase, const char *fp,
                      idem_pg_effect_fn effect, void *arg, sx_reply *out) {
  if (!pg || !sx_pg_ok(pg)) {
    snprintf(out->msg, sizeof out->msg, "inventory: database unavailable");
    return GRPC_STATUS_UNAVAILABLE;
  }
  sx_step s = {.o = &a->o,
               .idem = a->idem,
               .pg = pg,
               .key = {gid, "inventory", "reserve", phase},
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

static int on_reserve(void *app_, void *tls, const ProtobufCMessage *in_, sx_reply *out) {
  const Shop__V1__ReserveRequest *in = (const Shop__V1__ReserveRequest *)in_;
  if (!*in->global_id || !*in->sku || in->qty <= 0) {
    snprintf(out->msg, sizeof out->msg, "global_id, sku and a positive qty are required");
    return GRPC_STATUS_INVALID_ARGUMENT;
  }
  char fp[512];
  snprintf(fp, sizeof fp, "reserve\n%s\n%s\n%d", in->global_id, in->sku, in->qty);
  reserve_arg ra = {in->global_id, in->sku, in->qty};
  return reply_step(app_, tls, in->global_id, IDEM_FORWARD, fp, reserve_effect, &ra, out);
}

static int on_release(void *app_, void *tls, const ProtobufCMessage *in_, sx_reply *out) {
  const Shop__V1__ReleaseRequest *in = (const Shop__V1__ReleaseRequest *)in_;
  if (!*in->global_id) {
    snprintf(out->msg, sizeof out->msg, "global_id is required");
    return GRPC_STATUS_INVALID_ARGUMENT;
  }
  char fp[256];
  snprintf(fp, sizeof fp, "release\n%s", in->global_id);
  return reply_step(app_, tls, in->global_id, IDEM_COMPENSATION, fp, release_effect,
                    in->global_id, out);
}

/* --stock sku=N,sku=N: inserts the skus that are missing (a restart keeps the current stock). */
static bool seed(PGconn *pg, const char *spec) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", spec);
  char *save = NULL;
  for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (!eq) {
      fprintf(stderr, "inventory: --stock: expected sku=N, got %s\n", item);
      return false;
    }
    *eq = '\0';
    const char *const p[2] = {item, eq + 1};
    if (!exec(pg,
              "INSERT INTO stock (sku, initial, available) VALUES ($1, $2, $2)"
              " ON CONFLICT (sku) DO NOTHING",
              2, p, NULL))
      return false;
  }
  return true;
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
  bool ok = sx_pg_exec(pg, "SELECT pg_advisory_lock(7342190004)") && sx_pg_exec(pg, schema_sql);
  idem_error e;
  if (ok && idem_pg_barrier_init(pg, &e) != IDEM_OK) {
    fprintf(stderr, "inventory: %s\n", e.message);
    ok = false;
  }
  if (ok && a.o.stock) ok = seed(pg, a.o.stock);
  PQfinish(pg);
  if (!ok) return 1;
  a.idem = sx_idem_connect(&a.o);
  static const sx_method methods[] = {
      {"/shop.v1.Inventory/Reserve", &shop__v1__reserve_request__descriptor, on_reserve},
      {"/shop.v1.Inventory/Release", &shop__v1__release_request__descriptor, on_release},
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
