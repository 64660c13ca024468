/* main.c — idem-coordinator: flags and environment (api.md §8, single-node subset), schema
 * migration, start and drain of the gRPC server, signals.
 *
 * Exit status: 0 after a drain on SIGTERM/SIGINT, 1 when start-up fails, 2 on a usage error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <grpc/grpc.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "coord/coord.h"
#include "rpc/rpc.h"
#include "store/store.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/log.h"

#ifndef IDEM_VERSION
#define IDEM_VERSION "0.0.0"
#endif

#define EXIT_USAGE 2
#define MIGRATE_PATIENCE_MS 60000 /* keep trying to reach Postgres this long at start-up */
#define MIGRATE_RETRY_MS 1000

/* --- the options: one declarative table (name, environment variable, argument, help) --- */

typedef enum opt_id {
  OPT_LISTEN,
  OPT_PG,
  OPT_WORKERS,
  OPT_STORE_TIMEOUT,
  OPT_NODE_ID,
  OPT_LOG_FORMAT,
  OPT_INSECURE,
  OPT_VERSION,
  OPT_HELP,
  OPT__SUPPORTED, /* the options below are part of api.md §8 but belong to later work */
  OPT_ETCD = OPT__SUPPORTED,
  OPT_ADVERTISE,
  OPT_ELECTION_PREFIX,
  OPT_ELECTION_TTL,
  OPT_CONFIG,
  OPT_METRICS,
  OPT_REAPER_INTERVAL,
  OPT_TLS_CERT,
  OPT_TLS_KEY,
  OPT_TLS_CLIENT_CA,
  OPT_TOKENS,
  OPT__COUNT
} opt_id;

typedef struct opt_def {
  const char *name; /* long flag without "--" */
  const char *env;  /* NULL: no environment variable */
  const char *arg;  /* NULL: a switch */
  const char *help;
} opt_def;

static const opt_def opts[OPT__COUNT] = {
    [OPT_LISTEN] = {"listen", "IDEM_LISTEN", "HOST:PORT",
                    "address to serve gRPC on (default 127.0.0.1:50051)"},
    [OPT_PG] = {"pg", "IDEM_PG", "URL", "PostgreSQL connection string (required)"},
    [OPT_WORKERS] = {"workers", "IDEM_WORKERS", "N",
                     "worker threads = store connections, 1-256 (default 8)"},
    [OPT_STORE_TIMEOUT] = {"store-timeout-ms", "IDEM_STORE_TIMEOUT_MS", "MS",
                           "bound on each store call, 1-600000 (default 2000)"},
    [OPT_NODE_ID] = {"node-id", "IDEM_NODE_ID", "NAME", "this node's name (default: hostname)"},
    [OPT_LOG_FORMAT] = {"log-format", "IDEM_LOG_FORMAT", "text|json",
                        "log line format on stderr (default text)"},
    [OPT_INSECURE] = {"insecure", "IDEM_INSECURE", NULL,
                      "allow plaintext on a non-loopback --listen address"},
    [OPT_VERSION] = {"version", NULL, NULL, "print the version and exit"},
    [OPT_HELP] = {"help", NULL, NULL, "print this help and exit"},
    [OPT_ETCD] = {"etcd", "IDEM_ETCD", "URLS", "etcd endpoints for leader election"},
    [OPT_ADVERTISE] = {"advertise", "IDEM_ADVERTISE", "HOST:PORT", "address given to clients"},
    [OPT_ELECTION_PREFIX] = {"election-prefix", "IDEM_ELECTION_PREFIX", "PREFIX",
                             "etcd election key prefix"},
    [OPT_ELECTION_TTL] = {"election-ttl", "IDEM_ELECTION_TTL", "S", "election lease TTL"},
    [OPT_CONFIG] = {"config", "IDEM_CONFIG", "FILE", "configuration file"},
    [OPT_METRICS] = {"metrics", "IDEM_METRICS", "HOST:PORT", "Prometheus /metrics address"},
    [OPT_REAPER_INTERVAL] = {"reaper-interval", "IDEM_REAPER_INTERVAL", "S",
                             "expired-record reaper period"},
    [OPT_TLS_CERT] = {"tls-cert", "IDEM_TLS_CERT", "FILE", "TLS certificate"},
    [OPT_TLS_KEY] = {"tls-key", "IDEM_TLS_KEY", "FILE", "TLS private key"},
    [OPT_TLS_CLIENT_CA] = {"tls-client-ca", "IDEM_TLS_CLIENT_CA", "FILE",
                           "CA for client certificates"},
    [OPT_TOKENS] = {"tokens", "IDEM_TOKENS", "FILE", "bearer token file"},
};

typedef struct config {
  const char *listen;
  const char *pg;
  int workers;
  int64_t store_timeout_ms;
  const char *node_id;
  log_format log_fmt;
  bool insecure;
} config;

static void usage(FILE *f) {
  fprintf(f,
          "usage: idem-coordinator --pg URL [--listen HOST:PORT] [options]\n\n"
          "options (each also read from the environment variable shown; flags win):\n");
  for (int i = 0; i < OPT__COUNT; i++) {
    if (i == OPT__SUPPORTED)
      fprintf(f,
              "\nnot supported yet (refused with exit status 2; they come with HA, TLS,\n"
              "authentication and metrics):\n");
    char left[64];
    snprintf(left, sizeof left, "--%s%s%s", opts[i].name, opts[i].arg ? " " : "",
             opts[i].arg ? opts[i].arg : "");
    fprintf(f, "  %-28s %s", left, opts[i].help);
    if (opts[i].env) fprintf(f, " [%s]", opts[i].env);
    fputc('\n', f);
  }
}

static _Noreturn void __attribute__((format(printf, 1, 2))) usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("idem-coordinator: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fputs(
      "usage: idem-coordinator --pg URL [--listen HOST:PORT] [options]\n"
      "run 'idem-coordinator --help' for every option\n",
      stderr);
  exit(EXIT_USAGE);
}

static bool parse_int(const char *v, long min, long max, long *out) {
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (errno || end == v || *end || n < min || n > max) return false;
  *out = n;
  return true;
}

static bool parse_bool(const char *v, bool *out) {
  static const char *const yes[] = {"1", "true", "yes", "on"};
  static const char *const no[] = {"", "0", "false", "no", "off"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
    if (strcasecmp(v, yes[i]) == 0) return *out = true, true;
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
    if (strcasecmp(v, no[i]) == 0) return *out = false, true;
  return false;
}

/* Applies one option's value; `src` names where it came from ("--workers" or "IDEM_WORKERS"). */
static void apply(config *c, opt_id id, const char *v, const char *src) {
  long n;
  if (id >= OPT__SUPPORTED) usage_error("%s: not supported yet", src);
  switch (id) {
    case OPT_LISTEN:
      c->listen = v;
      break;
    case OPT_PG:
      c->pg = v;
      break;
    case OPT_WORKERS:
      if (!parse_int(v, 1, 256, &n)) usage_error("%s: expected an integer from 1 to 256", src);
      c->workers = (int)n;
      break;
    case OPT_STORE_TIMEOUT:
      if (!parse_int(v, 1, 600000, &n))
        usage_error("%s: expected milliseconds from 1 to 600000", src);
      c->store_timeout_ms = n;
      break;
    case OPT_NODE_ID:
      c->node_id = v;
      break;
    case OPT_LOG_FORMAT:
      if (strcmp(v, "text") == 0)
        c->log_fmt = LOG_TEXT;
      else if (strcmp(v, "json") == 0)
        c->log_fmt = LOG_JSON;
      else
        usage_error("%s: expected text or json", src);
      break;
    case OPT_INSECURE:
      if (!parse_bool(v, &c->insecure)) usage_error("%s: expected true or false", src);
      break;
    case OPT_VERSION:
      printf("idem-coordinator %s\n", IDEM_VERSION);
      exit(0);
    case OPT_HELP:
      usage(stdout);
      exit(0);
    default:
      usage_error("%s: unknown option", src);
  }
}

static void parse(int argc, char **argv, config *c) {
  *c = (config){
      .listen = "127.0.0.1:50051", .workers = 8, .store_timeout_ms = 2000, .log_fmt = LOG_TEXT};
  for (int i = 0; i < OPT__COUNT; i++) {
    const char *v = opts[i].env ? getenv(opts[i].env) : NULL;
    if (!v) continue;
    if (i >= OPT__SUPPORTED && !*v) continue; /* set but empty: nothing asked for */
    apply(c, (opt_id)i, v, opts[i].env);
  }
  struct option lopts[OPT__COUNT + 1];
  for (int i = 0; i < OPT__COUNT; i++)
    lopts[i] = (struct option){opts[i].name, opts[i].arg ? required_argument : no_argument, NULL,
                               1000 + i};
  lopts[OPT__COUNT] = (struct option){0, 0, 0, 0};
  int ch;
  while ((ch = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
    if (ch < 1000 || ch >= 1000 + OPT__COUNT) usage_error("bad command line");
    opt_id id = (opt_id)(ch - 1000);
    char src[64];
    snprintf(src, sizeof src, "--%s", opts[id].name);
    apply(c, id, id == OPT_INSECURE ? "true" : optarg, src);
  }
  if (optind < argc) usage_error("unexpected argument: %s", argv[optind]);
  if (!c->pg || !*c->pg) usage_error("--pg is required (or IDEM_PG)");
}

/* --- --listen --- */

/* Whether a --listen address only accepts local connections (loopback or a unix socket). */
static bool listen_is_local(const char *listen, bool *bad_form) {
  *bad_form = false;
  if (strncmp(listen, "unix:", 5) == 0 || strncmp(listen, "unix-abstract:", 14) == 0) return true;
  char host[256];
  const char *colon;
  if (listen[0] == '[') {
    const char *close = strchr(listen, ']');
    if (!close || close[1] != ':' || (size_t)(close - listen - 1) >= sizeof host) {
      *bad_form = true;
      return false;
    }
    snprintf(host, sizeof host, "%.*s", (int)(close - listen - 1), listen + 1);
  } else {
    colon = strrchr(listen, ':');
    if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof host) {
      *bad_form = true;
      return false;
    }
    snprintf(host, sizeof host, "%.*s", (int)(colon - listen), listen);
  }
  if (strcasecmp(host, "localhost") == 0) return true;
  struct in_addr a4;
  if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  struct in6_addr a6;
  if (inet_pton(AF_INET6, host, &a6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) return a6.s6_addr[12] == 127;
  }
  return false;
}

/* --- start-up --- */

static store *open_pg(void *arg) {
  return store_pg_open(arg);
}

/* Waits up to ms for one of the blocked signals; true when one came (the caller stops). */
static bool signalled_within(const sigset_t *set, int64_t ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  for (;;) {
    int sig = sigtimedwait(set, NULL, &ts);
    if (sig == SIGPIPE) continue;
    if (sig > 0) return true;
    if (errno == EINTR) continue;
    return false; /* EAGAIN: the time is up */
  }
}

/* Creates or migrates the schema, retrying until Postgres answers. 0 ok, 1 gave up, -1 signal. */
static int migrate(const config *c, const sigset_t *sigs) {
  int64_t give_up = clock_mono_ms() + MIGRATE_PATIENCE_MS;
  for (int attempt = 1;; attempt++) {
    err_t err;
    err_clear(&err);
    int64_t deadline = clock_mono_ms() + c->store_timeout_ms;
    if (deadline > give_up) deadline = give_up;
    if (store_pg_migrate(c->pg, deadline, &err) == ERR_OK) return 0;
    char num[16];
    snprintf(num, sizeof num, "%d", attempt);
    int64_t left = give_up - clock_mono_ms();
    log_kv(LOG_WARN,
           left > 0 ? "cannot migrate the schema, will retry" : "cannot migrate the schema",
           "attempt", num, "error", err.msg, (const char *)NULL);
    if (left <= 0) return 1;
    if (signalled_within(sigs, left < MIGRATE_RETRY_MS ? left : MIGRATE_RETRY_MS)) return -1;
  }
}

int main(int argc, char **argv) {
  config cfg;
  parse(argc, argv, &cfg);
  bool bad_form;
  bool local = listen_is_local(cfg.listen, &bad_form);
  if (bad_form) usage_error("--listen: expected HOST:PORT, got %s", cfg.listen);
  if (!local && !cfg.insecure)
    usage_error(
        "--listen %s is not a loopback address: without TLS, pass --insecure to serve "
        "plaintext on it",
        cfg.listen);

  log_init(cfg.log_fmt, LOG_INFO);

  /* Before any thread exists (grpc_init starts some): every thread inherits the mask, and only
   * sigwait below receives these. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);

  int m = migrate(&cfg, &sigs);
  if (m > 0) {
    log_kv(LOG_ERROR, "postgres did not answer, giving up", (const char *)NULL);
    return 1;
  }
  if (m < 0) {
    log_kv(LOG_INFO, "stopped before start-up finished", (const char *)NULL);
    return 0;
  }
  if (!local)
    log_kv(LOG_WARN, "serving plaintext on a non-loopback address", "address", cfg.listen,
           (const char *)NULL);

  grpc_init();
  coord_ctx coord;
  coord_ctx_init(&coord);
  coord.store_timeout_ms = cfg.store_timeout_ms;
  rpc_config rc = {
      .listen = cfg.listen,
      .workers = cfg.workers,
      .coord = &coord,
      .open_store = open_pg,
      .open_store_arg = (void *)cfg.pg,
      .node_id = cfg.node_id,
      .max_recv_bytes = 256 * 1024,
      .default_deadline_ms = 2000,
  };
  err_t err;
  err_clear(&err);
  rpc_server *srv = rpc_server_start(&rc, &err);
  if (!srv) {
    log_kv(LOG_ERROR, "cannot start the server", "error", err.msg, (const char *)NULL);
    grpc_shutdown();
    return 1;
  }
  char port[16], workers[16];
  snprintf(port, sizeof port, "%d", rpc_server_port(srv));
  snprintf(workers, sizeof workers, "%d", cfg.workers);
  log_kv(LOG_INFO, "listening", "address", cfg.listen, "port", port, "workers", workers, "version",
         IDEM_VERSION, (const char *)NULL);

  for (;;) {
    int sig = 0;
    if (sigwait(&sigs, &sig) != 0) continue;
    if (sig == SIGTERM || sig == SIGINT) {
      log_kv(LOG_INFO, "draining", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT",
             (const char *)NULL);
      break;
    }
  }
  rpc_server_stop(srv);
  rpc_server_free(srv);
  grpc_shutdown();
  log_kv(LOG_INFO, "stopped", (const char *)NULL);
  return 0;
}
