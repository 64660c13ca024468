/* main.c — idem-coordinator: flags and environment (api.md §8), schema migration, start and
 * drain of the gRPC server, signals (SIGTERM/SIGINT drain, SIGHUP reloads the tokens file).
 *
 * Exit status: 0 after a drain on SIGTERM/SIGINT, 1 when start-up fails, 2 on a usage error
 * (a bad flag, or a TLS or tokens file that cannot be read or is invalid).
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
#include <sys/resource.h>
#include <time.h>

#include "config/config_file.h"
#include "coord/coord.h"
#include "main_ha.h"
#include "main_sec.h" /* security (issue 8) */
#include "metrics/metrics.h"
#include "coord/coord_policy.h"
#include "coord/validate.h"
#include "policy/policy_cache.h"
#include "reaper/reaper.h"
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
  OPT_CONFIG,          /* policies and reaping (issue 5) */
  OPT_REAPER_INTERVAL, /* policies and reaping (issue 5) */
  OPT_METRICS,         /* incident response (issue 6) */
  OPT_VERSION,
  OPT_HELP,
  OPT_ETCD,            /* high availability (issue 4) */
  OPT_ADVERTISE,       /* high availability (issue 4) */
  OPT_ELECTION_PREFIX, /* high availability (issue 4) */
  OPT_ELECTION_TTL,    /* high availability (issue 4) */
  OPT_TLS_CERT,        /* security (issue 8) */
  OPT_TLS_KEY,         /* security (issue 8) */
  OPT_TLS_CLIENT_CA,   /* security (issue 8) */
  OPT_TOKENS,          /* security (issue 8) */
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
                      "allow plaintext (no --tls-cert) on a non-loopback --listen address"},
    [OPT_VERSION] = {"version", NULL, NULL, "print the version and exit"},
    [OPT_HELP] = {"help", NULL, NULL, "print this help and exit"},
    [OPT_ETCD] = {"etcd", "IDEM_ETCD", "URLS",
                  "etcd endpoints (http://h:p[,...]) for leader election (default: single node)"},
    [OPT_ADVERTISE] = {"advertise", "IDEM_ADVERTISE", "HOST:PORT",
                       "address standbys send clients to (default: --listen)"},
    [OPT_ELECTION_PREFIX] = {"election-prefix", "IDEM_ELECTION_PREFIX", "PREFIX",
                             "etcd election key prefix"},
    [OPT_ELECTION_TTL] = {"election-ttl", "IDEM_ELECTION_TTL", "S",
                          "election lease TTL in seconds, 2-60 (default 5)"},
    [OPT_CONFIG] = {"config", "IDEM_CONFIG", "FILE",
                    "INI file with any of these options and [policy ...] seeds (README)"},
    [OPT_METRICS] = {"metrics", "IDEM_METRICS", "HOST:PORT",
                     "serve Prometheus text at http://HOST:PORT/metrics (default: off)"},
    [OPT_REAPER_INTERVAL] = {"reaper-interval", "IDEM_REAPER_INTERVAL", "S",
                             "seconds between reaper rounds, 0 = no reaper (default 60)"},
    [OPT_TLS_CERT] = {"tls-cert", "IDEM_TLS_CERT", "FILE",
                      "serve TLS with this PEM certificate chain (needs --tls-key)"},
    [OPT_TLS_KEY] = {"tls-key", "IDEM_TLS_KEY", "FILE", "the PEM private key of --tls-cert"},
    [OPT_TLS_CLIENT_CA] = {"tls-client-ca", "IDEM_TLS_CLIENT_CA", "FILE",
                           "require client certificates signed by this CA; tenant = SAN or CN"},
    [OPT_TOKENS] = {"tokens", "IDEM_TOKENS", "FILE",
                    "bearer tokens: TOKEN TENANT ROLE per line; SIGHUP reloads (README)"},
};

typedef struct config {
  const char *listen;
  const char *pg;
  int workers;
  int64_t store_timeout_ms;
  const char *node_id;
  log_format log_fmt;
  bool insecure;
  /* high availability (issue 4) */
  const char *etcd; /* NULL: single node */
  const char *advertise;
  const char *election_prefix;
  int election_ttl_s;
  /* policies and reaping (issue 5) */
  const char *config_path;
  int reaper_interval_s;
  config_seeds seeds; /* [policy ...] sections of the config file */
  const char *metrics; /* incident response (issue 6): --metrics HOST:PORT, NULL = none */
  /* security (issue 8): file paths, NULL = not given */
  const char *tls_cert, *tls_key, *tls_client_ca, *tokens;
} config;

static void usage(FILE *f) {
  fprintf(f,
          "usage: idem-coordinator --pg URL [--listen HOST:PORT] [options]\n\n"
          "options (each also read from the environment variable shown; flags win):\n");
  for (int i = 0; i < OPT__COUNT; i++) {
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
    case OPT_ETCD: /* high availability (issue 4) */
      c->etcd = *v ? v : NULL;
      break;
    case OPT_ADVERTISE:
      c->advertise = *v ? v : NULL;
      break;
    case OPT_ELECTION_PREFIX:
      if (v[0] != '/') usage_error("%s: expected a key prefix starting with /", src);
      c->election_prefix = v;
      break;
    case OPT_ELECTION_TTL:
      if (!parse_int(v, 2, 60, &n)) usage_error("%s: expected seconds from 2 to 60", src);
      c->election_ttl_s = (int)n;
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
    case OPT_CONFIG: /* read before everything else: see load_config_file */
      break;
    case OPT_REAPER_INTERVAL:
      if (!parse_int(v, 0, 86400, &n)) usage_error("%s: expected seconds from 0 to 86400", src);
      c->reaper_interval_s = (int)n;
      break;
    case OPT_METRICS: /* incident response (issue 6) */
      c->metrics = *v ? v : NULL;
      break;
    case OPT_TLS_CERT: /* security (issue 8): files are read once every option is known */
      c->tls_cert = *v ? v : NULL;
      break;
    case OPT_TLS_KEY:
      c->tls_key = *v ? v : NULL;
      break;
    case OPT_TLS_CLIENT_CA:
      c->tls_client_ca = *v ? v : NULL;
      break;
    case OPT_TOKENS:
      c->tokens = *v ? v : NULL;
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

/* --- the config file (policies and reaping, issue 5): lowest precedence --- */

typedef struct file_ctx {
  config *c;
  const char *path;
} file_ctx;

/* Values read from the file (options keep pointers into them) and the seeds, until exit. */
static char **file_values;
static size_t n_file_values;
static config_seeds file_seeds;

static void free_config_file(void) {
  for (size_t i = 0; i < n_file_values; i++) free(file_values[i]);
  free(file_values);
  file_values = NULL;
  n_file_values = 0;
  free(file_seeds.rows);
  memset(&file_seeds, 0, sizeof file_seeds);
}

/* One option line of the file, applied like its flag (values are kept for the process). */
static int file_option(void *arg, const char *name, const char *value) {
  file_ctx *f = arg;
  for (int i = 0; i < OPT__COUNT; i++) {
    if (strcmp(opts[i].name, name) != 0) continue;
    if (i == OPT_CONFIG || i == OPT_VERSION || i == OPT_HELP) return 1;
    char src[320];
    snprintf(src, sizeof src, "%s: %s", f->path, name);
    char *kept = strdup(value);
    char **grown = realloc(file_values, (n_file_values + 1) * sizeof *grown);
    if (!kept || !grown) usage_error("out of memory");
    file_values = grown;
    file_values[n_file_values++] = kept;
    apply(f->c, (opt_id)i, kept, src);
    return 0;
  }
  return 1;
}

/* --config FILE (or IDEM_CONFIG): found before the environment and the other flags, whose
 * values then override the file's. */
static void load_config_file(int argc, char **argv, config *c) {
  const char *path = getenv(opts[OPT_CONFIG].env);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) break;
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
      path = argv[i + 1];
    else if (strncmp(argv[i], "--config=", 9) == 0)
      path = argv[i] + 9;
  }
  if (!path || !*path) return;
  c->config_path = path;
  file_ctx f = {c, path};
  char msg[512];
  if (config_file_load(path, file_option, &f, &file_seeds, msg, sizeof msg) != 0)
    usage_error("--config %s", msg);
  c->seeds = file_seeds;
  for (size_t i = 0; i < c->seeds.n; i++) {
    err_t err;
    err_clear(&err);
    const policy_row *r = &c->seeds.rows[i];
    bool tenant_ok = strcmp(r->tenant, POLICY_ANY) == 0 || validate_tenant(r->tenant, &err) == ERR_OK;
    if (!tenant_ok || coord_policy_validate(&r->p, &err) != ERR_OK)
      usage_error("--config %s: [policy %s/%s]: %s", path, r->p.service, r->p.operation, err.msg);
  }
}

static void parse(int argc, char **argv, config *c) {
  *c = (config){.listen = "127.0.0.1:50051",
                .workers = 32,
                .store_timeout_ms = 2000,
                .log_fmt = LOG_TEXT,
                .reaper_interval_s = REAPER_INTERVAL_S_DEFAULT};
  load_config_file(argc, argv, c);
  for (int i = 0; i < OPT__COUNT; i++) {
    const char *v = opts[i].env ? getenv(opts[i].env) : NULL;
    if (!v) continue;
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

/* --- security (issue 8): main_sec.c --- */

/* The tokens file, reloaded on SIGHUP (from the signal-waiting loops below); NULL = none. */
static auth_keyring *tokens_keyring;
/* The TLS files' text from start-up until the server has its credentials (then wiped). */
static tls_files server_tls;

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
    if (sig == SIGHUP) { /* issue 8 */
      sec_reload(tokens_keyring);
      continue;
    }
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

/* --- policies and the reaper (issue 5) --- */

/* Seeds the config file's policies (a row already stored is kept: changes made with
 * Admin.SetPolicy survive restarts), loads every row, starts the refresh thread. */
static policy_cache *start_policies(const config *c) {
  policy_cache *pc = policy_cache_new();
  store *st = pc ? store_pg_open(c->pg) : NULL;
  if (!st) {
    log_kv(LOG_ERROR, "out of memory", (const char *)NULL);
    policy_cache_free(pc);
    return NULL;
  }
  err_t err;
  err_clear(&err);
  for (size_t i = 0; i < c->seeds.n; i++) {
    const policy_row *r = &c->seeds.rows[i];
    bool written = false;
    if (store_policy_put(st, r->tenant, &r->p, true, clock_mono_ms() + c->store_timeout_ms,
                         &written, NULL, &err) != ERR_OK) {
      log_kv(LOG_ERROR, "cannot seed a policy from the config file", "service", r->p.service,
             "operation", r->p.operation, "error", err.msg, (const char *)NULL);
      store_close(st);
      policy_cache_free(pc);
      return NULL;
    }
    log_kv(LOG_INFO, written ? "policy seeded from the config file"
                             : "policy in the config file already stored, kept the stored one",
           "tenant", r->tenant, "service", r->p.service, "operation", r->p.operation, "mode",
           policy_mode_name(r->p.mode), (const char *)NULL);
  }
  if (policy_cache_reload(pc, st, clock_mono_ms() + c->store_timeout_ms, &err) != ERR_OK)
    log_kv(LOG_WARN, "cannot load policies yet, will retry", "error", err.msg, (const char *)NULL);
  store_close(st);
  if (!policy_cache_start(pc, open_pg, (void *)c->pg, POLICY_CACHE_REFRESH_MS_DEFAULT,
                          c->store_timeout_ms)) {
    log_kv(LOG_ERROR, "cannot start the policy refresh", (const char *)NULL);
    policy_cache_free(pc);
    return NULL;
  }
  return pc;
}

/* Only the leader reaps (issue 4: ha_is_leader), through a fenced store. */
static reaper *start_reaper(const config *c, ha *h) {
  if (c->reaper_interval_s <= 0) {
    log_kv(LOG_INFO, "reaper disabled (--reaper-interval 0)", (const char *)NULL);
    return NULL;
  }
  reaper_config rc = {
      .open_store = ha_open_store,
      .open_store_arg = h,
      .interval_ms = (int64_t)c->reaper_interval_s * 1000,
      .batch = REAPER_BATCH_DEFAULT,
      .pause_ms = 0,
      .store_timeout_ms = c->store_timeout_ms,
      .is_leader = ha_is_leader,
      .is_leader_arg = h,
  };
  reaper *r = reaper_start(&rc);
  if (!r) log_kv(LOG_ERROR, "cannot start the reaper", (const char *)NULL);
  return r;
}

/* --- /metrics (incident response, issue 6) --- */

/* The step gauges read through a store of their own, from the HTTP thread. */
typedef struct metrics_src {
  pthread_mutex_t mu;
  store *st;
  int64_t timeout_ms;
} metrics_src;

static bool metrics_counts(void *arg, uint64_t *in_progress, uint64_t *unknown) {
  metrics_src *m = arg;
  step_counts n;
  err_t err;
  pthread_mutex_lock(&m->mu);
  err_code rc = store_count_steps(m->st, clock_mono_ms() + m->timeout_ms, &n, &err);
  pthread_mutex_unlock(&m->mu);
  if (rc != ERR_OK) return false;
  *in_progress = n.in_progress;
  *unknown = n.unknown;
  return true;
}

/* Starts the endpoint when --metrics was given; false (logged) when it cannot listen. */
static bool start_metrics(const config *c, metrics_src *src, metrics_http **http) {
  *http = NULL;
  metrics_set_leader(true, 0); /* single node */
  if (!c->metrics) return true;
  pthread_mutex_init(&src->mu, NULL);
  src->st = store_pg_open(c->pg);
  src->timeout_ms = c->store_timeout_ms < 1000 ? c->store_timeout_ms : 1000;
  if (!src->st) return false;
  metrics_set_counts_fn(metrics_counts, src);
  char why[160], port[16];
  int bound = 0;
  *http = metrics_http_start(c->metrics, &bound, why, sizeof why);
  if (!*http) {
    metrics_set_counts_fn(NULL, NULL);
    store_close(src->st);
    log_kv(LOG_ERROR, "cannot serve /metrics", "address", c->metrics, "error", why,
           (const char *)NULL);
    return false;
  }
  snprintf(port, sizeof port, "%d", bound);
  log_kv(LOG_INFO, "serving /metrics", "address", c->metrics, "port", port, (const char *)NULL);
  return true;
}

static void stop_metrics(const config *c, metrics_src *src, metrics_http *http) {
  if (!c->metrics) return;
  metrics_http_stop(http);
  metrics_set_counts_fn(NULL, NULL);
  store_close(src->st);
  pthread_mutex_destroy(&src->mu);
}

/* Every client connection holds a descriptor: lift the soft limit to the hard one so that a
 * thousand idle connections cannot starve the listener of accept() (api.md §9, limits). */
static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max) return;
  rl.rlim_cur = rl.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
    log_kv(LOG_WARN, "cannot raise the open-files limit", "error", strerror(errno),
           (const char *)NULL);
}

int main(int argc, char **argv) {
  config cfg;
  parse(argc, argv, &cfg);
  bool bad_form;
  bool local = listen_is_local(cfg.listen, &bad_form);
  if (bad_form) usage_error("--listen: expected HOST:PORT, got %s", cfg.listen);
  /* security (issue 8): the files are read and checked before anything starts */
  sec_paths sec = {cfg.tls_cert, cfg.tls_key, cfg.tls_client_ca, cfg.tokens};
  char sec_msg[512];
  if (sec_setup(&sec, &server_tls, &tokens_keyring, sec_msg, sizeof sec_msg) != 0)
    usage_error("%s", sec_msg);
  if (!local && !cfg.insecure && !cfg.tls_cert)
    usage_error(
        "--listen %s is not a loopback address: without TLS (--tls-cert, --tls-key), pass "
        "--insecure to serve plaintext on it",
        cfg.listen);

  log_init(cfg.log_fmt, LOG_INFO);
  sec_log(&sec, tokens_keyring, local);
  raise_fd_limit();

  /* Before any thread exists (grpc_init starts some): every thread inherits the mask, and only
   * sigwait below receives these. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGPIPE);
  sigaddset(&sigs, SIGHUP); /* issue 8: reload the tokens file */
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
  if (!local && !cfg.tls_cert)
    log_kv(LOG_WARN, "serving plaintext on a non-loopback address", "address", cfg.listen,
           (const char *)NULL);

  /* policies (issue 5): seed, load, keep fresh; the resolver never waits on the store */
  policy_cache *policies = start_policies(&cfg);
  if (!policies) return 1;

  /* high availability (issue 4): the elector and the fenced stores */
  char advertise[256];
  snprintf(advertise, sizeof advertise, "%s", cfg.advertise ? cfg.advertise : cfg.listen);
  if (cfg.etcd && !cfg.advertise && strlen(advertise) > 2 &&
      strcmp(advertise + strlen(advertise) - 2, ":0") == 0)
    usage_error("--etcd with --listen on port 0 needs --advertise HOST:PORT");
  ha_config hc = {.pg = cfg.pg,
                  .etcd = cfg.etcd,
                  .node_id = cfg.node_id ? cfg.node_id : advertise,
                  .advertise = advertise,
                  .prefix = cfg.election_prefix,
                  .ttl_s = cfg.election_ttl_s,
                  .store_timeout_ms = cfg.store_timeout_ms};
  err_t herr;
  err_clear(&herr);
  ha *ha_node = ha_new(&hc, &herr);
  if (!ha_node) {
    log_kv(LOG_ERROR, "cannot set up leader election", "error", herr.msg, (const char *)NULL);
    policy_cache_free(policies);
    return 1;
  }

  grpc_init();
  auth_config auth = {.tokens = tokens_keyring, .mtls = cfg.tls_client_ca != NULL};
  coord_ctx coord;
  coord_ctx_init(&coord);
  coord.store_timeout_ms = cfg.store_timeout_ms;
  coord.resolve_policy = policy_cache_resolve;
  coord.resolve_arg = policies;
  coord.policies_changed = policy_cache_changed;
  coord.cache = ha_replay_cache(ha_node); /* issue 7 */
  rpc_config rc = {
      .listen = cfg.listen,
      .workers = cfg.workers,
      .coord = &coord,
      .open_store = ha_open_store, /* issue 4: fenced stores */
      .open_store_arg = ha_node,
      .submit_steps = true, /* issue 7: BeginStep and CompleteStep answered by the batcher */
      .node_id = cfg.node_id,
      .max_recv_bytes = 256 * 1024,
      .default_deadline_ms = 2000,
      .elector = ha_elector(ha_node),
      .tls_cert_pem = server_tls.cert_pem, /* issue 8 */
      .tls_key_pem = server_tls.key_pem,
      .tls_client_ca_pem = server_tls.client_ca_pem,
      .auth = &auth,
  };
  err_t err;
  err_clear(&err);
  rpc_server *srv = rpc_server_start(&rc, &err);
  tls_files_clear(&server_tls); /* grpc keeps its own copy; wipe ours of the key */
  if (!srv) {
    log_kv(LOG_ERROR, "cannot start the server", "error", err.msg, (const char *)NULL);
    policy_cache_free(policies);
    ha_free(ha_node);
    grpc_shutdown();
    return 1;
  }
  if (ha_start(ha_node, &err) != ERR_OK) { /* issue 4: campaign once the port is bound */
    log_kv(LOG_ERROR, "cannot start leader election", "error", err.msg, (const char *)NULL);
    rpc_server_stop(srv);
    rpc_server_free(srv);
    policy_cache_free(policies);
    ha_free(ha_node);
    grpc_shutdown();
    return 1;
  }
  reaper *reap = start_reaper(&cfg, ha_node);
  metrics_src msrc;
  metrics_http *mhttp = NULL;
  if (!start_metrics(&cfg, &msrc, &mhttp)) {
    reaper_stop(reap);
    ha_resign(ha_node);
    rpc_server_stop(srv);
    rpc_server_free(srv);
    policy_cache_free(policies);
    ha_free(ha_node);
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
    if (sig == SIGHUP) sec_reload(tokens_keyring); /* issue 8 */
    if (sig == SIGTERM || sig == SIGINT) {
      log_kv(LOG_INFO, "draining", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT",
             (const char *)NULL);
      break;
    }
  }
  ha_resign(ha_node); /* issue 4: stop serving and hand over at once; then drain */
  reaper_stop(reap);
  rpc_server_stop(srv);
  stop_metrics(&cfg, &msrc, mhttp);
  rpc_server_free(srv);
  policy_cache_free(policies);
  ha_free(ha_node);
  grpc_shutdown();
  free_config_file();
  auth_keyring_free(tokens_keyring);
  tokens_keyring = NULL;
  log_kv(LOG_INFO, "stopped", (const char *)NULL);
  return 0;
}
