/* options.c — the option table and the code that reads it (see options.h). */
#include "options.h"

#include "../slots/move_throttle.h"
#include "../util/hostport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../console/console.h"
#include "../coord/coord_policy.h"
#include "../domain/owner.h"
#include "../domain/slot.h"
#include "../slots/slotmap.h"
#include "../reaper/reaper.h"
#include "../validate/validate.h"

#include "idem_build_version.h"

#define F(field) offsetof(idem_options, field)
#define STR(v) #v
#define XSTR(v) STR(v)

/* clang-format off */
const opt_row options_table[] = {
  /* group       name               environment             type        field                  default            min max     choices      reload arg          help */
  {"serving",   "listen",          "IDEM_LISTEN",          OPT_STRING, F(listen),             "127.0.0.1:50051", 0, 0,       NULL,        false, "HOST:PORT", "address to serve gRPC on", NULL},
  {"serving",   "workers",         "IDEM_WORKERS",         OPT_INT,    F(workers),            "32",              1, 256,     NULL,        false, "N",         "worker threads = store connections for the calls that wait on the store", NULL},
  {"serving",   "insecure",        "IDEM_INSECURE",        OPT_BOOL,   F(insecure),           NULL,              0, 0,       NULL,        false, NULL,        "allow plaintext (no --tls-cert) on a non-loopback --listen address", NULL},
  {"serving",   "max-waiters",     "IDEM_MAX_WAITERS",     OPT_INT,    F(max_waiters),        "10000",           0, 1000000, NULL,        false, "N",         "BeginStep calls that may wait (wait_ms) on a step in progress at once; more are answered ABORTED at once, 0 = none waits", NULL},
  {"serving",   "drain-timeout-ms","IDEM_DRAIN_TIMEOUT_MS",OPT_INT,    F(drain_timeout_ms),   "10000",           100, 600000, NULL,       false, "MS",        "on SIGTERM: how long the drain waits for the calls in flight to be answered and the clients to close their connections; after it they are cancelled and closed (docs/internals.md)", NULL},
  {"serving",   "require-tenant",  "IDEM_REQUIRE_TENANT",  OPT_BOOL,   F(require_tenant),     NULL,              0, 0,       NULL,        false, NULL,        "refuse calls without idem-tenant metadata instead of using tenant \"default\" (without --tokens or client certificates)", NULL},
  {"store",     "pg",              "IDEM_PG",              OPT_STRING, F(pg),                 NULL,              0, 0,       NULL,        false, "URL",       "PostgreSQL connection string: the one store group \"default\" (this or --store is required)", NULL},
  {"store",     "store",           "IDEM_STORE",           OPT_LIST,   F(stores),             NULL,              0, 0,       NULL,        false, "NAME=URL",  "a store group and its PostgreSQL connection string; repeat for each group, in the same order on every node (docs/api.md §17; the environment variable holds one group per line)", NULL},
  {"store",     "slots",           "IDEM_SLOTS",           OPT_INT,    F(slots),              XSTR(SLOTS_DEFAULT), SLOTS_MIN, SLOTS_MAX, NULL, false, "N", "the cluster's slot count, fixed when the cluster is first created (docs/api.md §17)", NULL},
  {"store",     "move-max-rate",   "IDEM_MOVE_MAX_RATE",   OPT_INT,    F(move_max_rate),      XSTR(MOVE_MAX_RATE_DEFAULT), 0, 10000000, NULL, false, "ROWS/S", "how fast a slot move's initial copy may go, when MoveSlots does not say (0 = no limit; docs/scaling-out.md)", NULL},
  {"store",     "store-timeout-ms","IDEM_STORE_TIMEOUT_MS",OPT_INT,    F(store_timeout_ms),   "2000",            1, 600000,  NULL,        false, "MS",        "bound on each store call", NULL},
  {"high availability", "etcd",    "IDEM_ETCD",            OPT_STRING, F(etcd),               NULL,              0, 0,       NULL,        false, "URLS",      "etcd endpoints (http://h:p[,...]) for leader election (none: single node)", NULL},
  {"high availability", "node-id", "IDEM_NODE_ID",         OPT_STRING, F(node_id),            NULL,              0, 0,       NULL,        false, "NAME",      "this node's name (none: the --advertise address)", NULL},
  {"high availability", "advertise","IDEM_ADVERTISE",      OPT_STRING, F(advertise),          NULL,              0, 0,       NULL,        false, "HOST:PORT", "address standbys send clients to (none: --listen)", NULL},
  {"high availability", "election-prefix","IDEM_ELECTION_PREFIX",OPT_STRING,F(election_prefix),"/idem/leader",   0, 0,       NULL,        false, "PREFIX",    "etcd election key prefix", "/"},
  {"high availability", "election-ttl","IDEM_ELECTION_TTL", OPT_INT,    F(election_ttl_s),     "5",               2, 60,      NULL,        false, "S",         "election lease TTL in seconds", NULL},
  {"high availability", "take-over","IDEM_TAKE_OVER",     OPT_STRING, F(take_over),          NULL,              0, 0,       NULL,        false, "CLUSTER_ID", "take over the databases recorded for that cluster (a UUID, or standalone) on purpose: a restore, a renamed cluster; audited (docs/operations.md)", NULL},
  {"security",  "tls-cert",        "IDEM_TLS_CERT",        OPT_STRING, F(tls_cert),           NULL,              0, 0,       NULL,        false, "FILE",      "serve TLS with this PEM certificate chain (needs --tls-key)", NULL},
  {"security",  "tls-key",         "IDEM_TLS_KEY",         OPT_STRING, F(tls_key),            NULL,              0, 0,       NULL,        false, "FILE",      "the PEM private key of --tls-cert", NULL},
  {"security",  "tls-client-ca",   "IDEM_TLS_CLIENT_CA",   OPT_STRING, F(tls_client_ca),      NULL,              0, 0,       NULL,        false, "FILE",      "require client certificates signed by this CA; tenant = SAN or CN", NULL},
  {"security",  "tokens",          "IDEM_TOKENS",          OPT_STRING, F(tokens),             NULL,              0, 0,       NULL,        true,  "FILE",      "bearer tokens: TOKEN TENANT ROLE per line (README)", NULL},
  {"security",  "operators",       "IDEM_OPERATORS",       OPT_STRING, F(operators),          NULL,              0, 0,       NULL,        false, "NAME,...",  "client-certificate names (SAN or CN) whose role is operator instead of service: they may move slots (needs --tls-client-ca)", NULL},
  {"operations","config",          "IDEM_CONFIG",          OPT_STRING, F(config),             NULL,              0, 0,       NULL,        false, "FILE",      "INI file with any of these options and [policy ...] seeds (README)", NULL},
  {"operations","reaper-interval", "IDEM_REAPER_INTERVAL", OPT_INT,    F(reaper_interval_s),  XSTR(REAPER_INTERVAL_S_DEFAULT), 0, 86400, NULL, false, "S",   "seconds between reaper rounds, 0 = no reaper", NULL},
  {"operations","metrics",         "IDEM_METRICS",         OPT_STRING, F(metrics),            NULL,              0, 0,       NULL,        false, "HOST:PORT", "serve Prometheus text at http://HOST:PORT/metrics (none: off)", NULL},
  {"operations","console",         "IDEM_CONSOLE",         OPT_STRING, F(console),            NULL,              0, 0,       NULL,        false, "HOST:PORT", "serve the web console at http://HOST:PORT/ (https with --tls-cert; none: off)", NULL},
  {"operations","trace-url",       "IDEM_TRACE_URL",       OPT_STRING, F(trace_url),          NULL,              0, 0,       NULL,        false, "TEMPLATE",  "the console links trace ids to this URL, {trace_id} replaced (e.g. https://jaeger.example/trace/{trace_id})", NULL},
  {"operations","log-format",      "IDEM_LOG_FORMAT",      OPT_CHOICE, F(log_format),         "text",            0, 0,       "text|json", false, "text|json", "log line format on stderr", NULL},
  {"operations","version",         NULL,                   OPT_ACTION, 0,                     NULL,              0, 0,       NULL,        false, NULL,        "print the version and exit", NULL},
  {"operations","help",            NULL,                   OPT_ACTION, 0,                     NULL,              0, 0,       NULL,        false, NULL,        "print this help and exit", NULL},
};
/* clang-format on */
const size_t options_count = sizeof options_table / sizeof options_table[0];

#define USAGE_LINE "usage: idem-coordinator --pg URL [--listen HOST:PORT] [options]\n"

void options_help(FILE *f) {
  fputs(USAGE_LINE
        "\noptions (each also read from the environment variable shown and from the "
        "--config file by its name; flags win; SIGHUP re-reads those marked so):\n",
        f);
  const char *group = NULL;
  for (size_t i = 0; i < options_count; i++) {
    const opt_row *r = &options_table[i];
    if (!group || strcmp(group, r->group) != 0) fprintf(f, "\n %s:\n", group = r->group);
    char left[64];
    snprintf(left, sizeof left, "--%s%s%s", r->name, r->arg ? " " : "", r->arg ? r->arg : "");
    fprintf(f, "  %-28s %s", left, r->help);
    if (r->type == OPT_INT) fprintf(f, ", %ld-%ld", r->min, r->max);
    if (r->def) fprintf(f, " (default %s)", r->def);
    if (r->reloadable) fputs(" (SIGHUP reloads)", f);
    if (r->env) fprintf(f, " [%s]", r->env);
    fputc('\n', f);
  }
}

void options_usage_error(const char *msg) {
  fprintf(stderr,
          "idem-coordinator: %s\n" USAGE_LINE "run 'idem-coordinator --help' for every option\n",
          msg);
}

static options_result usage(char *msg, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static options_result usage(char *msg, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, n, fmt, ap);
  va_end(ap);
  return OPTIONS_USAGE;
}

static bool parse_long(const char *v, long min, long max, long *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < min || x > max) return false;
  *out = x;
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

/* The index of v among "a|b|c", or -1. */
static int choice_index(const char *choices, const char *v) {
  int i = 0;
  for (const char *p = choices; *p; i++) {
    size_t len = strcspn(p, "|");
    if (strlen(v) == len && strncmp(p, v, len) == 0) return i;
    p += len;
    if (*p == '|') p++;
  }
  return -1;
}

/* Stores one value of row r into o; src names where it came from ("--workers", "IDEM_WORKERS",
 * "idem.ini: workers"). */
static options_result apply(idem_options *o, const opt_row *r, const char *v, const char *src,
                            char *msg, size_t n) {
  void *field = (char *)o + r->offset;
  long x;
  bool b;
  switch (r->type) {
    case OPT_STRING:
      if (!*v && strncmp(src, "--", 2) == 0 && strcmp(r->name, "take-over") == 0)
        return usage(msg, n,
                     "%s: expected the id of the cluster a database is recorded for (a UUID, or "
                     "standalone), got an empty value",
                     src);
      if (r->prefix && *v && strncmp(v, r->prefix, strlen(r->prefix)) != 0)
        return usage(msg, n, "%s: expected a value starting with %s", src, r->prefix);
      *(const char **)field = *v ? v : NULL;
      return OPTIONS_RUN;
    case OPT_INT:
      if (!parse_long(v, r->min, r->max, &x)) {
        const char *unit = strcmp(r->arg, "S") == 0    ? "seconds"
                           : strcmp(r->arg, "MS") == 0 ? "milliseconds"
                                                       : "an integer";
        return usage(msg, n, "%s: expected %s from %ld to %ld", src, unit, r->min, r->max);
      }
      *(int *)field = (int)x;
      return OPTIONS_RUN;
    case OPT_BOOL:
      if (!parse_bool(v, &b)) return usage(msg, n, "%s: expected true or false", src);
      *(bool *)field = b;
      return OPTIONS_RUN;
    case OPT_CHOICE: {
      int i = choice_index(r->choices, v);
      if (i < 0) return usage(msg, n, "%s: expected one of %s", src, r->choices);
      *(int *)field = i;
      return OPTIONS_RUN;
    }
    case OPT_LIST: {
      opt_list *l = field;
      int source = strncmp(src, "--", 2) == 0 ? 3 : r->env && strcmp(src, r->env) == 0 ? 2 : 1;
      if (source != l->source) l->n = 0; /* a later source replaces the list */
      l->source = source;
      if (l->n >= OPT_LIST_MAX) return usage(msg, n, "%s: at most %d values", src, OPT_LIST_MAX);
      if (*v) l->v[l->n++] = v;
      return OPTIONS_RUN;
    }
    case OPT_ACTION:
      if (strcmp(r->name, "version") == 0)
        printf("idem-coordinator %s\n", IDEM_VERSION);
      else
        options_help(stdout);
      return OPTIONS_EXIT;
  }
  return usage(msg, n, "%s: unknown option", src);
}

static const opt_row *row_named(const char *name) {
  for (size_t i = 0; i < options_count; i++)
    if (strcmp(options_table[i].name, name) == 0) return &options_table[i];
  return NULL;
}

/* Keeps a copy of a value until options_free; NULL when out of memory. */
static const char *keep(idem_options *o, const char *v, size_t len) {
  char *kept = strndup(v, len);
  char **grown = realloc(o->file_values, (o->n_file_values + 1) * sizeof *grown);
  if (grown) o->file_values = grown;
  if (!kept || !grown) {
    free(kept);
    return NULL;
  }
  o->file_values[o->n_file_values++] = kept;
  return kept;
}

/* A repeatable option's environment variable: one value per line. */
static options_result apply_lines(idem_options *o, const opt_row *r, const char *v, char *msg,
                                  size_t n) {
  while (*v) {
    size_t len = strcspn(v, "\n");
    const char *line = len ? keep(o, v, len) : NULL;
    if (len && !line) return usage(msg, n, "out of memory");
    if (line) {
      options_result rc = apply(o, r, line, r->env, msg, n);
      if (rc != OPTIONS_RUN) return rc;
    }
    v += len;
    if (*v) v++;
  }
  return OPTIONS_RUN;
}

/* --- the config file --- */

typedef struct file_ctx {
  idem_options *o;
  const char *path;
  char *msg;
  size_t n;
  options_result rc;
} file_ctx;

/* One option line of the file, applied like its flag (its value kept until options_free). */
static int file_option(void *arg, const char *name, const char *value) {
  file_ctx *f = arg;
  const opt_row *r = row_named(name);
  if (!r) return 1;
  if (r->type == OPT_ACTION || strcmp(r->name, "config") == 0 || f->rc != OPTIONS_RUN) return 1;
  const char *kept = keep(f->o, value, strlen(value));
  if (!kept) {
    f->rc = usage(f->msg, f->n, "out of memory");
    return 0;
  }
  char src[320];
  snprintf(src, sizeof src, "%s: %s", f->path, name);
  f->rc = apply(f->o, r, kept, src, f->msg, f->n);
  return 0;
}

/* --config FILE (or IDEM_CONFIG) is found before the environment and the other flags, whose
 * values then override the file's. */
static options_result load_config_file(int argc, char **argv, idem_options *o, char *msg,
                                       size_t n) {
  const char *path = getenv(row_named("config")->env);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) break;
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
      path = argv[i + 1];
    else if (strncmp(argv[i], "--config=", 9) == 0)
      path = argv[i] + 9;
  }
  if (!path || !*path) return OPTIONS_RUN;
  o->config = path;
  file_ctx f = {o, path, msg, n, OPTIONS_RUN};
  char why[512];
  if (config_file_load(path, file_option, &f, &o->seeds, why, sizeof why) != 0)
    return f.rc != OPTIONS_RUN ? f.rc : usage(msg, n, "--config %s", why);
  if (f.rc != OPTIONS_RUN) return f.rc;
  for (size_t i = 0; i < o->seeds.n; i++) {
    err_t err;
    err_clear(&err);
    const policy_row *r = &o->seeds.rows[i];
    bool tenant_ok =
        strcmp(r->tenant, POLICY_ANY) == 0 || validate_tenant(r->tenant, &err) == ERR_OK;
    if (!tenant_ok || coord_policy_validate(&r->p, &err) != ERR_OK)
      return usage(msg, n, "--config %s: [policy %s/%s]: %s", path, r->p.service, r->p.operation,
                   err.msg);
  }
  return OPTIONS_RUN;
}

/* --- --listen --- */

bool options_listen_is_local(const char *listen, bool *bad_form) {
  hostport hp;
  *bad_form = !hostport_parse(listen, 0, &hp);
  return !*bad_form && hostport_is_local(&hp);
}

/* --pg, or the --store groups: each NAME=CONNSTRING with a group name (the tenant rule), no
 * name twice, no more groups than slots. */
static options_result check_groups(idem_options *o, char *msg, size_t n) {
  if (o->pg && o->stores.n)
    return usage(msg, n,
                 "--pg and --store do not go together: --pg URL is the one group "
                 "\"default\"; with several groups name each with --store NAME=URL");
  if (!o->pg && !o->stores.n)
    return usage(msg, n, "--pg URL or --store NAME=URL is required (or IDEM_PG, IDEM_STORE)");
  if (o->pg) {
    snprintf(o->groups[0].name, sizeof o->groups[0].name, "default");
    o->groups[0].conninfo = o->pg;
    o->n_groups = 1;
    o->groups_from_pg = true;
    return OPTIONS_RUN;
  }
  for (size_t i = 0; i < o->stores.n; i++) {
    const char *v = o->stores.v[i], *eq = strchr(v, '=');
    char name[SLOTMAP_NAME_MAX + 8], why[160];
    size_t len = eq ? (size_t)(eq - v) : strlen(v);
    snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name - 1 ? len : sizeof name - 1), v);
    if (!eq) return usage(msg, n, "--store %s: expected NAME=CONNSTRING", name);
    if (len >= SLOTMAP_NAME_MAX || !slotmap_name_ok(name, why, sizeof why))
      return usage(msg, n, "--store %s: %s", name,
                   len >= SLOTMAP_NAME_MAX ? "a group name is at most 63 bytes" : why);
    if (!eq[1]) return usage(msg, n, "--store %s: the connection string is empty", name);
    for (size_t j = 0; j < i; j++)
      if (strcmp(o->groups[j].name, name) == 0)
        return usage(msg, n, "--store %s: the group is named twice", name);
    memcpy(o->groups[i].name, name, len + 1); /* len < SLOTMAP_NAME_MAX: checked above */
    o->groups[i].conninfo = eq + 1;
  }
  o->n_groups = o->stores.n;
  if (o->n_groups > (size_t)o->slots)
    return usage(msg, n, "--store: %zu groups but --slots %d: each group needs a slot", o->n_groups,
                 o->slots);
  o->pg = o->groups[0].conninfo;
  return OPTIONS_RUN;
}

/* The combinations no single row can check. */
static options_result check(idem_options *o, char *msg, size_t n) {
  options_result grc = check_groups(o, msg, n);
  if (grc != OPTIONS_RUN) return grc;
  if (!o->listen) return usage(msg, n, "--listen: expected HOST:PORT, got an empty value");
  bool bad_form;
  bool local = options_listen_is_local(o->listen, &bad_form);
  if (bad_form) return usage(msg, n, "--listen: expected HOST:PORT, got %s", o->listen);
  if (!o->tls_cert != !o->tls_key) return usage(msg, n, "--tls-cert and --tls-key go together");
  if (o->tls_client_ca && !o->tls_cert)
    return usage(msg, n, "--tls-client-ca needs --tls-cert and --tls-key");
  if (o->operators && !o->tls_client_ca)
    return usage(msg, n, "--operators names client certificates: it needs --tls-client-ca");
  for (const char *p = o->operators; p && *p;) {
    size_t len = strcspn(p, ",");
    char name[REC_GLOBAL_ID_MAX + 2];
    err_t terr;
    err_clear(&terr);
    snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name - 1 ? len : sizeof name - 1), p);
    if (len >= sizeof name - 1 || validate_tenant(name, &terr) != ERR_OK)
      return usage(msg, n, "--operators: \"%s\" is not a certificate name a client can have: %s",
                   name, len >= sizeof name - 1 ? "longer than 128 bytes" : terr.msg);
    p += len;
    if (*p == ',') p++;
  }
  if (!local && !o->insecure && !o->tls_cert)
    return usage(msg, n,
                 "--listen %s is not a loopback address: without TLS (--tls-cert, --tls-key), "
                 "pass --insecure to serve plaintext on it",
                 o->listen);
  char why[160];
  if (!console_trace_url_check(o->trace_url, why, sizeof why)) return usage(msg, n, "%s", why);
  bool console_local = o->console && options_listen_is_local(o->console, &bad_form);
  if (o->console && bad_form)
    return usage(msg, n, "--console: expected HOST:PORT, got %s", o->console);
  if (o->console && !console_local && !o->insecure && !o->tls_cert)
    return usage(msg, n,
                 "--console %s is not a loopback address: without TLS (--tls-cert, --tls-key), "
                 "pass --insecure to serve plaintext on it",
                 o->console);
  if (o->console && !console_local && !o->tokens) /* development mode: everyone an admin */
    return usage(msg, n,
                 "--console %s is not a loopback address: it needs --tokens (without them the "
                 "console is in development mode and every visitor is an admin)",
                 o->console);
  if (o->take_over && !owner_id_valid(o->take_over))
    return usage(msg, n,
                 "--take-over %s: expected the id of the cluster a database is recorded for: a "
                 "UUID (8-4-4-4-12 hexadecimal digits, as the refusing node's error names it) "
                 "or standalone",
                 o->take_over);
  size_t len = strlen(o->listen);
  if (o->etcd && !o->advertise && len > 2 && strcmp(o->listen + len - 2, ":0") == 0)
    return usage(msg, n, "--etcd with --listen on port 0 needs --advertise HOST:PORT");
  return OPTIONS_RUN;
}

options_result options_parse(int argc, char **argv, idem_options *o, char *msg, size_t n) {
  memset(o, 0, sizeof *o);
  options_result rc = OPTIONS_RUN;
  for (size_t i = 0; i < options_count && rc == OPTIONS_RUN; i++) {
    const opt_row *r = &options_table[i];
    if (r->def) rc = apply(o, r, r->def, "default", msg, n);
  }
  if (rc == OPTIONS_RUN) rc = load_config_file(argc, argv, o, msg, n);
  for (size_t i = 0; i < options_count && rc == OPTIONS_RUN; i++) {
    const opt_row *r = &options_table[i];
    const char *v = r->env ? getenv(r->env) : NULL;
    if (v && r->type == OPT_LIST)
      rc = apply_lines(o, r, v, msg, n);
    else if (v && strcmp(r->name, "config") != 0)
      rc = apply(o, r, v, r->env, msg, n);
  }
  if (rc != OPTIONS_RUN) return rc;

  struct option lopts[64];
  size_t k = 0;
  for (; k < options_count && k < 63; k++) {
    const opt_row *r = &options_table[k];
    bool flag_only = r->type == OPT_BOOL || r->type == OPT_ACTION;
    lopts[k] =
        (struct option){r->name, flag_only ? no_argument : required_argument, NULL, 1000 + (int)k};
  }
  lopts[k] = (struct option){0, 0, 0, 0};
  optind = 1;
  opterr = 0;
  int ch;
  while ((ch = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
    if (ch < 1000 || ch >= 1000 + (int)options_count) {
      const char *bad = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
      return usage(msg, n, "%s: unknown option or missing value", bad);
    }
    const opt_row *r = &options_table[ch - 1000];
    char src[64];
    snprintf(src, sizeof src, "--%s", r->name);
    if (strcmp(r->name, "config") == 0) continue; /* read first, above */
    rc = apply(o, r, r->type == OPT_BOOL ? "true" : optarg, src, msg, n);
    if (rc != OPTIONS_RUN) return rc;
  }
  if (optind < argc) return usage(msg, n, "unexpected argument: %s", argv[optind]);
  return check(o, msg, n);
}

void options_free(idem_options *o) {
  for (size_t i = 0; i < o->n_file_values; i++) free(o->file_values[i]);
  free(o->file_values);
  free(o->seeds.rows);
  memset(o, 0, sizeof *o);
}
