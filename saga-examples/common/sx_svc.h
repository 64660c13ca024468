/* sx_svc.h — what the three example services share: command line, Postgres connection, crash
 * points for fault injection, and the guarded participant step (idem_step_run around the
 * idem_pg barrier).
 */
#ifndef SX_SVC_H
#define SX_SVC_H

#include <idem/idem.h>
#include <idem/idem_pg.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "shop/v1/step.pb-c.h"
#include "sx_rpc.h"

typedef enum sx_point { SX_AFTER_BEGIN, SX_AFTER_WRITE, SX_AFTER_COMPLETE, SX_POINTS } sx_point;

typedef struct sx_opts {
  const char *listen;      /* --listen 127.0.0.1:7001 */
  const char *pg;          /* --pg postgresql://… (the service's own database) */
  const char *schema;      /* --schema NAME: the service's tables live there (created) */
  const char *coordinator; /* --coordinator 127.0.0.1:50051 */
  const char *tenant;      /* --tenant shop */
  const char *payments;    /* --payments ADDR (order service) */
  const char *inventory;   /* --inventory ADDR (order service) */
  const char *stock;       /* --stock sku=N,sku=N (inventory: seeds missing rows) */
  int threads;             /* --threads 8 */
  uint32_t lease_ms;       /* --lease-ms N: lease asked for every step (0 = policy's) */
  int64_t step_deadline_ms; /* --step-deadline-ms: idem_step_run's deadline (10000) */
  int64_t call_deadline_ms; /* --call-deadline-ms: order → participant retries (20000) */
  /* --crash POINT[:OPERATION]: raise(SIGKILL) the first time POINT is reached (for OPERATION
   * only, when given). POINT: after_begin (BeginStep said PROCEED, nothing written yet),
   * after_write (the barrier transaction committed, CompleteStep not sent), after_complete
   * (CompleteStep acknowledged, the reply not sent). */
  int crash_point;             /* -1 = none */
  const char *crash_operation; /* NULL = any */
  double crash_rate;           /* --crash-rate P: at every point, SIGKILL with probability P */
} sx_opts;

/* Parses argv (flags above, each also from SAGA_<FLAG> in the environment, flag wins). Prints
 * usage and exits 2 on a bad flag. */
void sx_opts_parse(int argc, char **argv, sx_opts *o);

/* Connects to o->pg with search_path = o->schema (created if missing). NULL after printing the
 * error. */
PGconn *sx_pg_connect(const sx_opts *o);

/* Makes sure conn is usable (PQreset after a lost connection). */
bool sx_pg_ok(PGconn *conn);

/* Runs sql (no parameters, DDL); false after printing the error. */
bool sx_pg_exec(PGconn *conn, const char *sql);

/* A shared client of the coordinator (o->coordinator, o->tenant); exits 1 if it cannot. */
idem_client *sx_idem_connect(const sx_opts *o);

/* Fault injection: SIGKILLs this process at point p when --crash or --crash-rate says so. */
void sx_crash_point(const sx_opts *o, sx_point p, const char *operation);

/* One guarded step of a participant: idem_step_run (BeginStep … CompleteStep) whose action is
 * idem_pg_barrier_run(effect) on pg. The effect's result body is its status word. */
typedef struct sx_step {
  const sx_opts *o;
  idem_client *idem;
  PGconn *pg;
  idem_step_key key;
  const void *fp_data; /* the canonical request, fingerprinted */
  size_t fp_len;
  idem_pg_effect_fn effect;
  void *arg;
} sx_step;

/* Runs s and fills reply (status points into status_buf, decision to a static string).
 * Returns GRPC_STATUS_OK, or an error code with a message in out->msg: FAILED_PRECONDITION
 * (same key, different request), UNAVAILABLE / ABORTED (try again: nothing or the same thing
 * will happen). */
int sx_step_run(const sx_step *s, Shop__V1__StepReply *reply, char status_buf[32], sx_reply *out);

/* Copies a result body (a status word) into buf; "" when empty. */
void sx_status_of(const idem_result *r, char buf[32]);

#endif
