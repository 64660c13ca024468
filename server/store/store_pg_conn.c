/* store_pg_conn.c — one libpq connection under deadlines: asynchronous connect
 * (PQconnectStartParams + PQconnectPoll), asynchronous statements (PQsendQueryParams +
 * PQconsumeInput/PQisBusy), each wait a poll() bounded by the caller's absolute monotonic
 * deadline. A timeout cancels the statement and drops the connection; a lost connection is
 * dropped; the next call reconnects. The conninfo is never logged (it may hold a password). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../metrics/metrics.h"
#include "../util/clock.h"
#include "../util/log.h"
#include "store_pg_internal.h"

/* --- parameters --- */

void pg__p_reset(pg_params *p) {
  p->n = 0;
}

void pg__p_text(pg_params *p, const char *v) {
  int i = p->n++;
  p->values[i] = v;
  p->lengths[i] = 0;
  p->formats[i] = 0;
}

void pg__p_i64(pg_params *p, int64_t v) {
  int i = p->n++;
  snprintf(p->num[i], sizeof p->num[i], "%lld", (long long)v);
  p->values[i] = p->num[i];
  p->lengths[i] = 0;
  p->formats[i] = 0;
}

void pg__p_bytes(pg_params *p, const void *v, size_t len) {
  int i = p->n++;
  p->values[i] = (len > 0 && v) ? (const char *)v : "";
  p->lengths[i] = (len > 0 && v) ? (int)len : 0;
  p->formats[i] = 1;
}

/* --- lifecycle --- */

/* Splits a comma-separated list into out (at most max, each strdup'd); the count, -1 when
 * there are more than max or an allocation failed (out is then freed). */
static int split_list(const char *v, char **out, int max) {
  int n = 0;
  for (const char *p = v;; n++) {
    size_t len = strcspn(p, ",");
    if (n == max || !(out[n] = strndup(p, len))) {
      for (int i = 0; i < n; i++) free(out[i]);
      return -1;
    }
    if (!p[len]) return n + 1;
    p += len + 1;
  }
}

/* Fills s->hosts (and s->ports when there is one per host) from a conninfo with several
 * hosts; leaves n_hosts 0 otherwise (one host, hostaddr given, lists that do not match). */
static void parse_hosts(pg_store *s) {
  PQconninfoOption *opts = PQconninfoParse(s->conninfo, NULL);
  const char *host = NULL, *port = NULL, *hostaddr = NULL, *timeout = NULL;
  for (PQconninfoOption *o = opts; o && o->keyword; o++) {
    if (!o->val || !*o->val) continue;
    if (strcmp(o->keyword, "host") == 0) host = o->val;
    if (strcmp(o->keyword, "port") == 0) port = o->val;
    if (strcmp(o->keyword, "hostaddr") == 0) hostaddr = o->val;
    if (strcmp(o->keyword, "connect_timeout") == 0) timeout = o->val;
  }
  s->host_budget_ms =
      timeout && atoi(timeout) > 0 ? (int64_t)atoi(timeout) * 1000 : PG_HOST_BUDGET_MS;
  if (host && !hostaddr && strchr(host, ',')) {
    int n = split_list(host, s->hosts, PG_MAX_HOSTS);
    int np = port && strchr(port, ',') ? split_list(port, s->ports, PG_MAX_HOSTS) : 0;
    if (n > 1 && (np == 0 || np == n)) {
      s->n_hosts = n;
    } else { /* libpq reports the mismatch itself at connect */
      for (int i = 0; i < n; i++) free(s->hosts[i]);
      for (int i = 0; i < np; i++) free(s->ports[i]);
      memset(s->hosts, 0, sizeof s->hosts);
      memset(s->ports, 0, sizeof s->ports);
    }
  }
  if (opts) PQconninfoFree(opts);
}

bool pg__init(pg_store *s, const char *conninfo) {
  memset(s, 0, sizeof *s);
  s->conninfo = strdup(conninfo ? conninfo : "");
  if (s->conninfo) parse_hosts(s);
  return s->conninfo != NULL;
}

void pg__drop(pg_store *s) {
  if (s->conn) PQfinish(s->conn);
  s->conn = NULL;
  s->prepared = false;
  s->read_only = false;
}

void pg__fini(pg_store *s) {
  pg__drop(s);
  free(s->conninfo);
  s->conninfo = NULL;
  for (int i = 0; i < s->n_hosts; i++) {
    free(s->hosts[i]);
    free(s->ports[i]);
  }
  s->n_hosts = 0;
}

int store_pg__backend_pid(store *st) {
  pg_store *s = (pg_store *)st;
  return (s && s->conn && PQstatus(s->conn) == CONNECTION_OK) ? PQbackendPID(s->conn) : 0;
}

/* A libpq message reduced to its first line, without the "connection to server at ...
 * failed: " and "FATAL:" prefixes, lower-case first letter. */
static void short_reason(const char *msg, char *out, size_t n) {
  char line[512];
  if (!msg || !*msg) msg = "connection lost";
  size_t len = strcspn(msg, "\n");
  if (len >= sizeof line) len = sizeof line - 1;
  memcpy(line, msg, len);
  line[len] = '\0';
  const char *p = line, *f;
  while ((f = strstr(p, "failed: ")) != NULL) p = f + 8;
  static const char *const prefixes[] = {"FATAL:", "ERROR:", NULL};
  for (int i = 0; prefixes[i]; i++) {
    size_t pl = strlen(prefixes[i]);
    if (strncmp(p, prefixes[i], pl) == 0) p += pl;
  }
  while (isspace((unsigned char)*p)) p++;
  len = strlen(p);
  while (len > 0 && (isspace((unsigned char)p[len - 1]) || p[len - 1] == '.')) len--;
  if (len == 0) {
    p = "connection lost";
    len = strlen(p);
  }
  if (len >= n) len = n - 1;
  memcpy(out, p, len);
  out[len] = '\0';
  if (out[0] && !(out[1] && isupper((unsigned char)out[1])))
    out[0] = (char)tolower((unsigned char)out[0]);
}

static err_code unavailable(pg_store *s, const char *why, err_t *err) {
  char reason[160];
  short_reason(why, reason, sizeof reason);
  metrics_store_error_g(s->mgroup, "unavailable");
  log_kv(LOG_WARN, "store unavailable", "reason", reason, NULL);
  err_fail(err, ERR_UNAVAILABLE, ERR_R_STORE_UNAVAILABLE, "store unavailable: %s", reason);
  err_hint(err, "check that PostgreSQL runs and that --pg names it");
  return ERR_UNAVAILABLE;
}

/* Waits until fd is readable (or writable when wr). 1 ready, 0 deadline passed, -1 error. */
int pg__wait_fd(int fd, bool wr, int64_t deadline) {
  if (fd < 0) return -1;
  struct pollfd p = {.fd = fd, .events = (short)(wr ? POLLOUT : POLLIN)};
  for (;;) {
    int64_t left = deadline - clock_mono_ms();
    if (left <= 0) return 0;
    int r = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
    if (r > 0) return 1;
    if (r == 0) continue; /* re-check the clock */
    if (errno != EINTR) return -1;
  }
}

/* PQcancel opens a new, blocking connection to the server: run it on a detached thread so
 * that a timed-out call returns at its deadline even when the server does not answer. */
static void *cancel_thread(void *arg) {
  PGcancel *c = arg;
  char buf[256];
  (void)PQcancel(c, buf, sizeof buf);
  PQfreeCancel(c);
  return NULL;
}

static void send_cancel(PGconn *conn) {
  PGcancel *c = PQgetCancel(conn);
  if (!c) return;
  pthread_attr_t attr;
  pthread_t t;
  bool started = false;
  if (pthread_attr_init(&attr) == 0) {
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    started = pthread_create(&t, &attr, cancel_thread, c) == 0;
    pthread_attr_destroy(&attr);
  }
  if (!started) PQfreeCancel(c); /* the dropped connection ends the statement soon enough */
}

err_code pg__timeout(pg_store *s, bool cancel, err_t *err) {
  if (cancel && s->conn) send_cancel(s->conn);
  pg__drop(s);
  metrics_store_error_g(s->mgroup, "timeout");
  log_kv(LOG_WARN, "store timeout", NULL);
  return err_fail(err, ERR_UNAVAILABLE, ERR_R_STORE_TIMEOUT, "store timeout");
}

/* Why the connected server cannot take writes (NULL: it can). PostgreSQL 14 and later report
 * both settings at connect and whenever they change (a promoted standby reports
 * in_hot_standby off); an older server reports neither, and its refusals (25006) drop the
 * connection instead. */
static const char *read_only_reason(PGconn *c) {
  const char *v = PQparameterStatus(c, "in_hot_standby");
  if (v && strcmp(v, "on") == 0) return "connected to a standby (in_hot_standby), not the primary";
  v = PQparameterStatus(c, "default_transaction_read_only");
  if (v && strcmp(v, "on") == 0)
    return "connected to a read-only server (default_transaction_read_only)";
  return NULL;
}

/* A connect failed: answer UNAVAILABLE with why, and hold off the next connect of this store
 * (PG_RECONNECT_MIN_MS doubling to PG_RECONNECT_MAX_MS, half of it jittered). */
/* The SQLSTATE of a server's refusal at start-up, from libpq's verbose message
 * ("SEVERITY:  28P01: text"; the severity word may be translated, the code never is) into
 * state (6 bytes); "" when the server did not answer (refused, silent, unresolvable). */
static void startup_sqlstate(const char *msg, char state[6]) {
  state[0] = '\0';
  const char *p = msg ? strstr(msg, ":  ") : NULL;
  if (!p) return;
  p += 3;
  for (int i = 0; i < 5; i++)
    if (!isdigit((unsigned char)p[i]) && !isupper((unsigned char)p[i])) return;
  if (p[5] != ':') return;
  memcpy(state, p, 5);
  state[5] = '\0';
}

/* Refusals no retry can fix: invalid authorization (class 28: a wrong password, no pg_hba.conf
 * entry), a database that does not exist (3D000), no CONNECT privilege (42501), a bad startup
 * option (42704: unrecognized parameter; 22023: invalid value). */
static bool sqlstate_permanent(const char *st) {
  static const char *const codes[] = {"3D000", "42501", "42704", "22023"};
  if (strncmp(st, "28", 2) == 0) return true;
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
    if (strcmp(st, codes[i]) == 0) return true;
  return false;
}

static err_code connect_failed(pg_store *s, const char *why, err_t *err) {
  char state[6];
  startup_sqlstate(why, state);
  /* the server asked for a password and none was given: no retry brings one */
  bool no_password = s->conn && PQconnectionNeedsPassword(s->conn);
  short_reason(why, s->last_failure, sizeof s->last_failure);
  int n = s->connect_failures < 8 ? s->connect_failures : 8;
  int64_t ms = (int64_t)PG_RECONNECT_MIN_MS << n;
  if (ms > PG_RECONNECT_MAX_MS) ms = PG_RECONNECT_MAX_MS;
  ms = ms / 2 + rand() % (int)(ms / 2 + 1);
  s->connect_failures++;
  s->next_connect_ms = clock_mono_ms() + ms;
  err_code rc = unavailable(s, why, err);
  if ((state[0] && sqlstate_permanent(state)) || no_password) {
    err_detail(err, "refused permanently: %s", no_password ? "no password supplied" : state);
    err_permanent(err);
  }
  pg__drop(s);
  return rc;
}

/* Waits out the reconnect backoff when it ends before deadline: true then; false when the
 * deadline comes first (the call answers with the last failure at once). */
static bool backoff_passed(const pg_store *s, int64_t deadline) {
  int64_t now = clock_mono_ms();
  if (now >= s->next_connect_ms) return true;
  if (s->next_connect_ms + 10 >= deadline) return false; /* no time left to connect after it */
  struct timespec ts = clock_span_timespec(s->next_connect_ms - now);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  return true;
}

/* Server notices ("relation already exists, skipping") go to the debug log, not stderr. */
static void on_notice(void *arg, const PGresult *r) {
  (void)arg;
  const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
  log_kv(LOG_DEBUG, "store notice", "message", msg ? msg : "", NULL);
}

/* The host and port lists of s, rotated to begin at host start ("h2,h3,h1"). */
static void host_lists(const pg_store *s, int start, char *hosts, size_t hn, char *ports,
                       size_t pn) {
  size_t hl = 0, pl = 0;
  hosts[0] = ports[0] = '\0';
  for (int i = 0; i < s->n_hosts; i++) {
    int k = (start + i) % s->n_hosts;
    hl += (size_t)snprintf(hosts + hl, hl < hn ? hn - hl : 0, "%s%s", i ? "," : "", s->hosts[k]);
    if (s->ports[k])
      pl += (size_t)snprintf(ports + pl, pl < pn ? pn - pl : 0, "%s%s", i ? "," : "", s->ports[k]);
  }
}

/* Which host of the rotated order (from start) libpq is trying now; prev when unknown. */
static int host_pos(const pg_store *s, PGconn *c, int start, int prev) {
  const char *h = PQhost(c), *p = PQport(c);
  for (int i = 0; h && i < s->n_hosts; i++) {
    int k = (start + i) % s->n_hosts;
    if (strcmp(s->hosts[k], h) == 0 && (!s->ports[k] || (p && strcmp(s->ports[k], p) == 0)))
      return i;
  }
  return prev;
}

err_code pg__connect(pg_store *s, int64_t deadline, err_t *err) {
  if (s->connect_failures > 0 && !backoff_passed(s, deadline)) {
    /* the failure logged already: answer with it, without a log line per call */
    metrics_store_error_g(s->mgroup, "unavailable");
    err_fail(err, ERR_UNAVAILABLE, ERR_R_STORE_UNAVAILABLE, "store unavailable: %s",
             s->last_failure);
    err_detail(err, "reconnecting after %d failed attempts", s->connect_failures);
    err_hint(err, "check that PostgreSQL runs and that --pg names it");
    return ERR_UNAVAILABLE;
  }
  /* fencing: a fenced store's connections carry idem.epoch from their first
   * statement on, so no write can run on a connection without it */
  char fence_opt[1024] = "";
  if (s->epoch_src) {
    s->epoch_sent = atomic_load(s->epoch_src);
    /* "options" given here replaces the conninfo's own: keep those in front of ours */
    const char *own = "";
    PQconninfoOption *parsed = PQconninfoParse(s->conninfo, NULL);
    for (PQconninfoOption *o = parsed; o && o->keyword; o++)
      if (strcmp(o->keyword, "options") == 0 && o->val) own = o->val;
    snprintf(fence_opt, sizeof fence_opt, "%s%s-c idem.epoch=%llu", own, *own ? " " : "",
             (unsigned long long)s->epoch_sent);
    if (parsed) PQconninfoFree(parsed);
  }
  bool rotate = s->n_hosts > 1;
  int start = rotate ? s->host_first : 0, tried = 0;
  char hosts[1024], ports[256];
  for (;;) { /* one libpq connect per try; a new try starts after a silent host */
    const char *keys[6] = {"dbname", "application_name"}, *vals[6] = {s->conninfo,
                                                                   s->app_name ? s->app_name : PG_APP_NAME};
    int nk = 2;
    if (s->epoch_src) keys[nk] = "options", vals[nk++] = fence_opt;
    if (rotate) {
      host_lists(s, start, hosts, sizeof hosts, ports, sizeof ports);
      keys[nk] = "host", vals[nk++] = hosts;
      if (ports[0]) keys[nk] = "port", vals[nk++] = ports;
    }
    keys[nk] = vals[nk] = NULL;
    PGconn *c = PQconnectStartParams(keys, vals, 1);
    if (!c) return err_oom(err);
    s->conn = c;
    PQsetNoticeReceiver(c, on_notice, NULL);
    /* a refusal at start-up then carries its SQLSTATE in the message (startup_sqlstate); the
     * default verbosity comes back once connected */
    PQsetErrorVerbosity(c, PQERRORS_VERBOSE);
    if (PQstatus(c) == CONNECTION_BAD) return connect_failed(s, PQerrorMessage(c), err);
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    int pos = 0;
    int64_t host_t0 = clock_mono_ms();
    bool next_try = false;
    while (st != PGRES_POLLING_OK) {
      if (st == PGRES_POLLING_FAILED) return connect_failed(s, PQerrorMessage(c), err);
      int now_pos = rotate ? host_pos(s, c, start, pos) : 0;
      if (now_pos != pos) pos = now_pos, host_t0 = clock_mono_ms(); /* libpq moved on */
      int64_t until = deadline;
      if (rotate && host_t0 + s->host_budget_ms < until) until = host_t0 + s->host_budget_ms;
      int w = pg__wait_fd(PQsocket(c), st == PGRES_POLLING_WRITING, until);
      if (w == 0 && until < deadline && tried + pos + 1 < s->n_hosts) {
        log_kv(LOG_WARN, "store: a host does not answer, trying the next", "host", PQhost(c),
               "port", PQport(c), NULL);
        tried += pos + 1;
        start = (start + pos + 1) % s->n_hosts;
        pg__drop(s);
        next_try = true;
        break;
      }
      if (w == 0) {
        err_code rc = pg__timeout(s, false, err);
        connect_failed(s, "connect timeout", NULL); /* a silent host: back off too */
        return rc;
      }
      if (w < 0) return connect_failed(s, "cannot wait on the connection socket", err);
      st = PQconnectPoll(c);
    }
    if (next_try) continue;
    if (rotate) s->host_first = (start + host_pos(s, c, start, pos)) % s->n_hosts;
    break;
  }
  PGconn *c = s->conn;
  const char *ro = read_only_reason(c);
  if (ro) {
    err_code rc = connect_failed(s, ro, err);
    err_hint(err, "name every node in --pg with target_session_attrs=read-write");
    return rc;
  }
  if (PQsetnonblocking(c, 1) != 0) return connect_failed(s, PQerrorMessage(c), err);
  PQsetErrorVerbosity(c, PQERRORS_DEFAULT);
  s->connect_failures = 0;
  metrics_store_connected();
  return ERR_OK;
}

/* The connection's idem.epoch setting follows the store's epoch source (fencing, see
 * store_pg_fence.c). */
static const char SQL_SET_EPOCH[] = "SELECT set_config('idem.epoch', $1, false)";

/* Brings the connection's idem.epoch setting up to *s->epoch_src (no-op when unfenced or
 * already there). Called by pg__call_start once connected. */
static err_code pg__fence_sync(pg_store *s, int64_t deadline, err_t *err) {
  if (!s->epoch_src || !s->conn) return ERR_OK;
  uint64_t want = atomic_load(s->epoch_src);
  if (want == s->epoch_sent) return ERR_OK;
  char num[24];
  snprintf(num, sizeof num, "%" PRIu64, want);
  pg_params p;
  pg__p_reset(&p);
  pg__p_text(&p, num);
  int stmts = s->call_stmts;
  err_code rc = pg__exec(s, SQL_SET_EPOCH, &p, deadline, NULL, err);
  s->call_stmts = stmts; /* not a statement of the caller's (stale-connection retry rule) */
  if (rc == ERR_OK) s->epoch_sent = want;
  return rc;
}

err_code pg__call_start(pg_store *s, int64_t deadline, err_t *err) {
  s->call_stmts = 0;
  s->retry = PG_RETRY_NONE;
  s->sqlstate[0] = '\0';
  if (s->conn &&
      (PQstatus(s->conn) != CONNECTION_OK || PQtransactionStatus(s->conn) != PQTRANS_IDLE ||
       s->read_only || read_only_reason(s->conn)))
    pg__drop(s); /* never write through a standby, nor a demoted primary */
  if (clock_mono_ms() >= deadline)
    return err_fail(err, ERR_UNAVAILABLE, ERR_R_STORE_TIMEOUT, "store timeout");
  if (s->conn) {
    s->conn_reused = true;
    return pg__fence_sync(s, deadline, err); /* a new epoch since the last call */
  }
  s->conn_reused = false;
  return pg__connect(s, deadline, err);
}

/* The connection broke during a statement: drop it, and say whether the call may re-run. */
err_code pg__lost(pg_store *s, err_t *err) {
  if (s->conn_reused && s->call_stmts == 1) s->retry = PG_RETRY_STALE;
  err_code rc = unavailable(s, s->conn ? PQerrorMessage(s->conn) : NULL, err);
  pg__drop(s);
  return rc;
}

static bool sqlstate_is(const char *st, const char *want) {
  return strcmp(st, want) == 0;
}

/* Maps an SQL error result to an err_t; the connection stays (unless it broke). */
err_code pg__sql_error(pg_store *s, const PGresult *r, err_t *err) {
  const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
  if (!msg) msg = PQresultErrorMessage(r);
  snprintf(s->sqlstate, sizeof s->sqlstate, "%s", st ? st : "");
  if (!st || PQstatus(s->conn) != CONNECTION_OK || strncmp(st, "08", 2) == 0 ||
      strncmp(st, "57P", 3) == 0)
    return pg__lost(s, err);
  if (sqlstate_is(st, "40001") || sqlstate_is(st, "40P01") || sqlstate_is(st, "23505")) {
    s->retry = PG_RETRY_SERIAL;
    return err_fail(err, ERR_UNAVAILABLE, ERR_R_STORE_CONFLICT, "store conflict: too many retries");
  }
  if (sqlstate_is(st, PG_FENCED_SQLSTATE)) { /* a newer leader raised the fence */
    err_fail(err, ERR_UNAVAILABLE, ERR_R_FENCED, "not the leader (fenced)");
    err_detail(err, "a newer leader raised the fence: nothing of this call was committed");
    return ERR_UNAVAILABLE;
  }
  if (sqlstate_is(st, PG_SLOT_BLOCKED_SQLSTATE)) { /* docs/api.md §18: a moved or moving slot */
    /* group commit reads which slots are blocked from idem_slot_blocks (never from this
     * message), answers their writes and runs the others of its batch again */
    err_fail(err, ERR_UNAVAILABLE, ERR_R_SLOT_MOVING, "slot moving: this group's store refuses it");
    err_detail(err, "%s", msg);
    err->retry_after_ms = PG_SLOT_BLOCKED_RETRY_MS;
    return ERR_UNAVAILABLE;
  }
  if (sqlstate_is(st, "25006")) { /* read_only_sql_transaction: a standby, a demoted primary */
    s->read_only = true;          /* dropped at the next start, after the rollback */
    s->retry = PG_RETRY_STALE;    /* refused, so nothing committed: once more elsewhere */
    metrics_store_error_g(s->mgroup, "unavailable");
    log_kv(LOG_WARN, "store unavailable", "sqlstate", st, "reason", "the server is read-only",
           NULL);
    err_fail(err, ERR_UNAVAILABLE, ERR_R_STORE_UNAVAILABLE,
             "store unavailable: the server is read-only (a standby)");
    err_hint(err, "name every node in --pg with target_session_attrs=read-write");
    return ERR_UNAVAILABLE;
  }
  /* too many connections, system errors */
  bool down = strncmp(st, "53", 2) == 0 || strncmp(st, "58", 2) == 0;
  char reason[160];
  short_reason(msg, reason, sizeof reason);
  const char *what = down ? "store unavailable" : "store error";
  metrics_store_error_g(s->mgroup, down ? "unavailable" : "error");
  log_kv(down ? LOG_WARN : LOG_ERROR, what, "sqlstate", st, "reason", reason, NULL);
  err_fail(err, down ? ERR_UNAVAILABLE : ERR_INTERNAL,
           down ? ERR_R_STORE_UNAVAILABLE : ERR_R_STORE_ERROR, "%s: %s", what, reason);
  err_detail(err, "sqlstate %s", st);
  return err->code;
}

err_code pg__round_trip_start(pg_store *s, int64_t deadline, err_t *err) {
  s->retry = PG_RETRY_NONE;
  s->sqlstate[0] = '\0';
  if (!s->conn) {
    /* dropped earlier in this call (e.g. by a failed rollback): reconnect */
    s->conn_reused = false;
    err_code rc = pg__connect(s, deadline, err);
    if (rc != ERR_OK) return rc;
  }
  if (clock_mono_ms() >= deadline) {
    if (PQtransactionStatus(s->conn) == PQTRANS_IDLE)
      return err_fail(err, ERR_UNAVAILABLE, ERR_R_STORE_TIMEOUT, "store timeout");
    return pg__timeout(s, false, err); /* dropping the connection rolls the transaction back */
  }
  s->call_stmts++;
  return ERR_OK;
}

err_code pg__flush(pg_store *s, int64_t deadline, err_t *err) {
  PGconn *c = s->conn;
  for (;;) {
    int f = PQflush(c);
    if (f == 0) return ERR_OK;
    if (f < 0) return pg__lost(s, err);
    int w = pg__wait_fd(PQsocket(c), true, deadline);
    if (w == 0) return pg__timeout(s, true, err);
    if (w < 0 || !PQconsumeInput(c)) return pg__lost(s, err);
  }
}

err_code pg__await(pg_store *s, int64_t deadline, err_t *err) {
  PGconn *c = s->conn;
  while (PQisBusy(c)) {
    int w = pg__wait_fd(PQsocket(c), false, deadline);
    if (w == 0) return pg__timeout(s, true, err);
    if (w < 0 || !PQconsumeInput(c)) return pg__lost(s, err);
  }
  return ERR_OK;
}

err_code pg__exec(pg_store *s, const char *sql, const pg_params *p, int64_t deadline,
                  PGresult **out, err_t *err) {
  if (out) *out = NULL;
  err_code rc = pg__round_trip_start(s, deadline, err);
  if (rc != ERR_OK) return rc;
  PGconn *c = s->conn;
  int n = p ? p->n : 0;
  if (!PQsendQueryParams(c, sql, n, NULL, p ? p->values : NULL, p ? p->lengths : NULL,
                         p ? p->formats : NULL, 1))
    return pg__lost(s, err);
  if ((rc = pg__flush(s, deadline, err)) != ERR_OK) return rc;
  PGresult *ok = NULL, *bad = NULL;
  for (;;) {
    if ((rc = pg__await(s, deadline, err)) != ERR_OK) {
      PQclear(ok);
      PQclear(bad);
      return rc;
    }
    PGresult *r = PQgetResult(c);
    if (!r) break;
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
      if (!ok)
        ok = r;
      else
        PQclear(r);
    } else {
      if (!bad)
        bad = r;
      else
        PQclear(r);
    }
  }
  if (bad || !ok) {
    rc = bad ? pg__sql_error(s, bad, err) : pg__lost(s, err);
    PQclear(ok);
    PQclear(bad);
    return rc;
  }
  if (out)
    *out = ok;
  else
    PQclear(ok);
  return ERR_OK;
}

void pg__rollback(pg_store *s, int64_t deadline) {
  if (!s->conn) return;
  if (PQstatus(s->conn) != CONNECTION_OK) {
    pg__drop(s);
    return;
  }
  if (PQtransactionStatus(s->conn) == PQTRANS_IDLE) return;
  pg_retry keep_retry = s->retry;
  char keep_state[6];
  memcpy(keep_state, s->sqlstate, sizeof keep_state);
  err_t e;
  /* a rollback is short: give it a little time even when the caller's deadline is near */
  int64_t d = deadline;
  int64_t min = clock_mono_ms() + 200;
  if (d < min) d = min;
  int saved = s->call_stmts;
  if (pg__exec(s, "ROLLBACK", NULL, d, NULL, &e) != ERR_OK) pg__drop(s);
  s->call_stmts = saved;
  s->retry = keep_retry;
  memcpy(s->sqlstate, keep_state, sizeof keep_state);
}

void pg__backoff(int attempt, int64_t deadline) {
  int64_t ms = (int64_t)1 << (attempt < 6 ? attempt : 6); /* 2, 4, ... 64 ms */
  ms = ms / 2 + (rand() % (int)(ms / 2 + 1));
  int64_t left = deadline - clock_mono_ms() - 1;
  if (ms > left) ms = left;
  if (ms <= 0) return;
  struct timespec ts = clock_span_timespec(ms);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* --- binary result decoding --- */

bool pg__isnull(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) != 0;
}

int64_t pg__int(const PGresult *r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  const unsigned char *v = (const unsigned char *)PQgetvalue(r, row, col);
  int len = PQgetlength(r, row, col);
  uint64_t u = 0;
  for (int i = 0; i < len && i < 8; i++) u = (u << 8) | v[i];
  switch (len) {
    case 2:
      return (int16_t)(uint16_t)u;
    case 4:
      return (int32_t)(uint32_t)u;
    case 8:
      return (int64_t)u;
    default:
      return 0;
  }
}

const char *pg__str(const PGresult *r, int row, int col) {
  if (PQgetisnull(r, row, col)) return "";
  return PQgetvalue(r, row, col); /* libpq NUL-terminates binary values too */
}

bool pg__row_step(const PGresult *r, int row, int col, bool own, step_rec *rec) {
  rec->present = true;
  rec->key.phase = (step_phase)pg__int(r, row, col + 0);
  rec->state = (step_state)pg__int(r, row, col + 1);
  rec->attempt = (uint64_t)pg__int(r, row, col + 2);
  size_t fl = (size_t)PQgetlength(r, row, col + 3);
  if (fl > REC_FP_MAX) fl = REC_FP_MAX;
  memcpy(rec->fp, PQgetvalue(r, row, col + 3), fl);
  rec->fp_len = fl;
  rec->outcome = (step_outcome)pg__int(r, row, col + 4);
  rec->code = (int32_t)pg__int(r, row, col + 5);
  rec->result_expires_ms = pg__int(r, row, col + 12);
  snprintf(rec->begin_trace_id, sizeof rec->begin_trace_id, "%s", pg__str(r, row, col + 14));
  snprintf(rec->complete_trace_id, sizeof rec->complete_trace_id, "%s",
           pg__str(r, row, col + 15));
  rec->result_expired = !PQgetisnull(r, row, col + 13) && PQgetlength(r, row, col + 13) == 1 &&
                        PQgetvalue(r, row, col + 13)[0] != 0; /* binary bool */
  size_t bl = rec->result_expired ? 0 : (size_t)PQgetlength(r, row, col + 6);
  rec->body_len = bl;
  rec->body = NULL;
  if (bl > 0) {
    if (own) {
      rec->body = malloc(bl);
      if (!rec->body) {
        rec->body_len = 0;
        return false;
      }
      memcpy(rec->body, PQgetvalue(r, row, col + 6), bl);
    } else {
      rec->body = (uint8_t *)PQgetvalue(r, row, col + 6);
    }
  }
  rec->completed_ms = pg__int(r, row, col + 7);
  rec->created_ms = pg__int(r, row, col + 8);
  rec->updated_ms = pg__int(r, row, col + 9);
  rec->lease_expires_ms = pg__int(r, row, col + 10);
  rec->expires_ms = pg__int(r, row, col + 11);
  return true;
}

err_code pg__exec_call(pg_store *s, const char *sql, const pg_params *p, int64_t deadline,
                       PGresult **res, err_t *err) {
  err_code rc = ERR_OK;
  for (int tries = 0; tries < 2; tries++) {
    rc = pg__call_start(s, deadline, err);
    if (rc == ERR_OK) rc = pg__exec(s, sql, p, deadline, res, err);
    if (rc == ERR_OK || s->retry != PG_RETRY_STALE) break;
  }
  if (rc == ERR_OK) err_clear(err);
  return rc;
}
