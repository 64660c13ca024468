/* sx_svc.c — see sx_svc.h. */
#include "sx_svc.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* --- command line ------------------------------------------------------------------------ */

static const char *const point_names[SX_POINTS] = {"after_begin", "after_write", "after_complete"};

static void usage(const char *prog, const char *bad) {
  if (bad) fprintf(stderr, "%s: %s\n", prog, bad);
  fprintf(stderr,
          "usage: %s --listen ADDR --pg URL --schema NAME --coordinator ADDR [--tenant T]\n"
          "       [--threads N] [--lease-ms N] [--step-deadline-ms N] [--call-deadline-ms N]\n"
          "       [--payments ADDR --inventory ADDR] [--stock sku=N,...]\n"
          "       [--crash after_begin|after_write|after_complete[:OPERATION]] [--crash-rate P]\n",
          prog);
  exit(2);
}

static long long num(const char *prog, const char *flag, const char *v, long long lo,
                     long long hi) {
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (errno || *end || end == v || n < lo || n > hi) {
    char m[128];
    snprintf(m, sizeof m, "%s: not a number in [%lld, %lld]: %s", flag, lo, hi, v);
    usage(prog, m);
  }
  return n;
}

static void set_crash(sx_opts *o, const char *prog, const char *v) {
  static char buf[128];
  snprintf(buf, sizeof buf, "%s", v);
  char *colon = strchr(buf, ':');
  if (colon) {
    *colon = '\0';
    o->crash_operation = colon + 1;
  }
  for (int i = 0; i < SX_POINTS; i++)
    if (strcmp(buf, point_names[i]) == 0) o->crash_point = i;
  if (o->crash_point < 0) usage(prog, "--crash: unknown point");
}

typedef struct flag {
  const char *name;
  const char *env;
} flag;

static const flag flags[] = {
    {"--listen", "SAGA_LISTEN"},       {"--pg", "SAGA_PG"},
    {"--schema", "SAGA_SCHEMA"},       {"--coordinator", "SAGA_COORDINATOR"},
    {"--tenant", "SAGA_TENANT"},       {"--payments", "SAGA_PAYMENTS"},
    {"--inventory", "SAGA_INVENTORY"}, {"--stock", "SAGA_STOCK"},
    {"--threads", "SAGA_THREADS"},     {"--lease-ms", "SAGA_LEASE_MS"},
    {"--crash", "SAGA_CRASH"},         {"--crash-rate", "SAGA_CRASH_RATE"},
    {"--step-deadline-ms", "SAGA_STEP_DEADLINE_MS"},
    {"--call-deadline-ms", "SAGA_CALL_DEADLINE_MS"},
};
#define N_FLAGS (sizeof flags / sizeof flags[0])

static void apply(sx_opts *o, const char *prog, size_t i, const char *v) {
  switch (i) {
    case 0: o->listen = v; break;
    case 1: o->pg = v; break;
    case 2: o->schema = v; break;
    case 3: o->coordinator = v; break;
    case 4: o->tenant = v; break;
    case 5: o->payments = v; break;
    case 6: o->inventory = v; break;
    case 7: o->stock = v; break;
    case 8: o->threads = (int)num(prog, flags[i].name, v, 1, 256); break;
    case 9: o->lease_ms = (uint32_t)num(prog, flags[i].name, v, 0, 3600000); break;
    case 10: set_crash(o, prog, v); break;
    case 11: {
      char *end;
      o->crash_rate = strtod(v, &end);
      if (*end || o->crash_rate < 0 || o->crash_rate > 1) usage(prog, "--crash-rate: 0..1");
      break;
    }
    case 12: o->step_deadline_ms = num(prog, flags[i].name, v, 1, 3600000); break;
    case 13: o->call_deadline_ms = num(prog, flags[i].name, v, 1, 3600000); break;
  }
}

void sx_opts_parse(int argc, char **argv, sx_opts *o) {
  memset(o, 0, sizeof *o);
  o->tenant = "shop";
  o->threads = 8;
  o->step_deadline_ms = 10000;
  o->call_deadline_ms = 20000;
  o->crash_point = -1;
  for (size_t i = 0; i < N_FLAGS; i++) {
    const char *v = getenv(flags[i].env);
    if (v && *v) apply(o, argv[0], i, v);
  }
  for (int a = 1; a < argc; a++) {
    if (strcmp(argv[a], "--help") == 0) usage(argv[0], NULL);
    size_t i = 0;
    while (i < N_FLAGS && strcmp(argv[a], flags[i].name) != 0) i++;
    if (i == N_FLAGS) usage(argv[0], "unknown flag");
    if (a + 1 >= argc) usage(argv[0], "missing value");
    apply(o, argv[0], i, argv[++a]);
  }
  if (!o->listen || !o->pg || !o->schema || !o->coordinator)
    usage(argv[0], "--listen, --pg, --schema and --coordinator are required");
  size_t n = strlen(o->schema);
  if (n == 0 || n > 63 || strspn(o->schema, "abcdefghijklmnopqrstuvwxyz0123456789_") != n)
    usage(argv[0], "--schema: 1-63 characters of [a-z0-9_]");
}

/* --- Postgres ------------------------------------------------------------------------------ */

bool sx_pg_exec(PGconn *conn, const char *sql) {
  PGresult *r = PQexec(conn, sql);
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
  if (!ok) fprintf(stderr, "sql failed: %s: %s", sql, PQerrorMessage(conn));
  PQclear(r);
  return ok;
}

PGconn *sx_pg_connect(const sx_opts *o) {
  /* search_path goes into the connection's options, so PQreset keeps it */
  char opt[160];
  snprintf(opt, sizeof opt, "-c search_path=%s -c client_min_messages=warning", o->schema);
  const char *const kw[] = {"dbname", "options", NULL};
  const char *const val[] = {o->pg, opt, NULL};
  PGconn *c = PQconnectdbParams(kw, val, 1);
  if (PQstatus(c) != CONNECTION_OK) {
    fprintf(stderr, "cannot connect to postgres: %s", PQerrorMessage(c));
    PQfinish(c);
    return NULL;
  }
  /* CREATE SCHEMA IF NOT EXISTS races on the catalog between processes: serialize. */
  char sql[160];
  snprintf(sql, sizeof sql, "CREATE SCHEMA IF NOT EXISTS %s", o->schema);
  bool ok = sx_pg_exec(c, "BEGIN") && sx_pg_exec(c, "SELECT pg_advisory_xact_lock(7342190002)") &&
            sx_pg_exec(c, sql);
  ok = sx_pg_exec(c, ok ? "COMMIT" : "ROLLBACK") && ok;
  if (!ok) {
    fprintf(stderr, "cannot set up schema %s\n", o->schema);
    PQfinish(c);
    return NULL;
  }
  return c;
}

bool sx_pg_ok(PGconn *conn) {
  if (PQstatus(conn) == CONNECTION_OK) return true;
  PQreset(conn); /* same parameters, search_path included */
  return PQstatus(conn) == CONNECTION_OK;
}

idem_client *sx_idem_connect(const sx_opts *o) {
  idem_options io = {.address = o->coordinator, .tenant = o->tenant, .deadline_ms = 3000};
  idem_client *c = NULL;
  idem_error e;
  if (idem_connect(&io, &c, &e) != IDEM_OK) {
    fprintf(stderr, "cannot create the coordinator client: %s\n", e.message);
    exit(1);
  }
  return c;
}

/* --- crash points -------------------------------------------------------------------------- */

static _Thread_local uint64_t rng;

static double rand01(void) {
  if (!rng && getrandom(&rng, sizeof rng, 0) != (ssize_t)sizeof rng) rng = (uint64_t)getpid();
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / (double)(1ULL << 53);
}

void sx_crash_point(const sx_opts *o, sx_point p, const char *operation) {
  bool die = false;
  if (o->crash_point == (int)p &&
      (!o->crash_operation || strcmp(o->crash_operation, operation) == 0))
    die = true;
  if (o->crash_rate > 0 && rand01() < o->crash_rate) die = true;
  if (!die) return;
  fprintf(stderr, "fault injection: SIGKILL at %s of %s\n", point_names[p], operation);
  fflush(stderr);
  raise(SIGKILL);
}

/* --- the guarded step ---------------------------------------------------------------------- */

typedef struct action_state {
  const sx_step *s;
  bool applied_earlier;
  char body[32];
} action_state;

void sx_status_of(const idem_result *r, char buf[32]) {
  size_t n = r->body_len < 31 ? r->body_len : 31;
  if (n) memcpy(buf, r->body, n);
  buf[n] = '\0';
}

/* The idem_step_fn: the barrier transaction between two crash points. */
static void action(void *arg, const idem_step_ctx *ctx, idem_step_output *out) {
  action_state *st = arg;
  const sx_step *s = st->s;
  sx_crash_point(s->o, SX_AFTER_BEGIN, s->key.operation);
  if (!sx_pg_ok(s->pg)) {
    out->outcome = IDEM_OUTCOME_RETRYABLE; /* nothing written */
    return;
  }
  idem_pg_report rep;
  idem_error e;
  int rc = idem_pg_barrier_run(s->pg, ctx->key, ctx->attempt, s->effect, s->arg, &rep, &e);
  if (rc != IDEM_OK) {
    fprintf(stderr, "barrier: %s\n", e.message);
    /* a failed COMMIT may have committed: say so; anything else rolled back */
    out->outcome = e.outcome_unknown ? IDEM_OUTCOME_UNKNOWN : IDEM_OUTCOME_RETRYABLE;
    return;
  }
  if (rep.rolled_back) {
    out->outcome = IDEM_OUTCOME_RETRYABLE;
  } else {
    out->outcome = rep.result.outcome;
    out->code = rep.result.code;
    sx_status_of(&rep.result, st->body);
    out->body = st->body;
    out->body_len = strlen(st->body);
    st->applied_earlier = rep.applied_earlier;
  }
  idem_pg_report_clear(&rep);
  sx_crash_point(s->o, SX_AFTER_WRITE, s->key.operation);
}

int sx_step_run(const sx_step *s, Shop__V1__StepReply *reply, char status_buf[32],
                sx_reply *out) {
  Shop__V1__StepReply init = SHOP__V1__STEP_REPLY__INIT;
  *reply = init;
  uint8_t fp[IDEM_FINGERPRINT_LEN];
  idem_fingerprint(s->fp_data, s->fp_len, fp);
  idem_run_options ro = {.deadline_ms = s->o->step_deadline_ms,
                         .lease_ms = s->o->lease_ms,
                         .backoff_base_ms = 20,
                         .backoff_max_ms = 200};
  action_state st = {.s = s};
  idem_run_report rep;
  idem_error e;
  int rc = idem_step_run(s->idem, &s->key, fp, sizeof fp, action, &st, &ro, &rep, &e);
  if (rc == IDEM_STEP_FAILED) { /* RETRYABLE: nothing happened, the key was released */
    idem_run_report_clear(&rep);
    snprintf(out->msg, sizeof out->msg, "%s %s: not done, try again", s->key.service,
             s->key.operation);
    return GRPC_STATUS_UNAVAILABLE;
  }
  if (rc != IDEM_OK) {
    snprintf(out->msg, sizeof out->msg, "%s %s: %.200s", s->key.service, s->key.operation,
             e.message);
    if (rc == IDEM_FAILED_PRECONDITION || rc == IDEM_INVALID_ARGUMENT) return rc;
    return rc == IDEM_ABORTED ? GRPC_STATUS_ABORTED : GRPC_STATUS_UNAVAILABLE;
  }
  if (rep.ran) sx_crash_point(s->o, SX_AFTER_COMPLETE, s->key.operation);
  if (rep.decision == IDEM_DECISION_SKIP_NULL_COMPENSATION ||
      rep.decision == IDEM_DECISION_SKIP_ALREADY_COMPENSATED)
    snprintf(status_buf, 32, "skipped");
  else
    sx_status_of(&rep.result, status_buf);
  reply->status = status_buf;
  reply->decision = (char *)idem_decision_name(rep.decision);
  reply->attempt = rep.attempt;
  reply->takeover = rep.takeover;
  reply->ran = rep.ran;
  reply->applied_earlier = st.applied_earlier;
  idem_run_report_clear(&rep);
  return GRPC_STATUS_OK;
}
