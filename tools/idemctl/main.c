/* main.c — idemctl: the operator's command line for idem (docs/api.md §10). One table of commands;
 * global flags (--addr, --tenant, --token, --tls*, --json, --deadline-ms) may come before or after
 * the command; every command answers --help. Flags are read by getopt_long from the tables (the
 * global flags and each command's). Exit codes: see idemctl.h. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem_build_version.h"
#include "idemctl.h"

#define GLOBAL_FLAGS \
  "addr=,tenant=,token=,json,deadline-ms=,help,version,tls,tls-ca=,tls-cert=,tls-key=,tls-server-name="

static const ctl_cmd commands[] = {
    {"status", "", "", 0, 0,
     "Leader, epoch, store and election health of the coordinator at --addr. Exits 3 when "
     "its store is unreachable.",
     cmd_status},
    {"slots", "", "", 0, 0,
     "The slot map and each group's leader, epoch, store health and slot count. Slot ranges "
     "with the group serving each (a range being moved shows its target, and a move under way "
     "its phase, rows copied and lag), as the node at --addr sees them (docs/api.md §17, §18). "
     "Exits 3 when a group has no leader or its store is unreachable from that node.",
     cmd_slots},
    {"slots move", "FROM-TO --to GROUP", "to=,dry-run,request-id=,timeout=,max-rate=", 0, 1,
     "Moves slots to another group. Slots FROM-TO (or one slot N) go from the group that "
     "serves them to --to GROUP (docs/api.md §18) with PostgreSQL's logical replication; only "
     "the final handoff pauses those slots. Waits until the move ends, up to --timeout (default "
     "600 s; 30s, 10m, 1h also do): past it the move goes on, `idemctl slots` shows its progress "
     "and the same --request-id waits for it again (a request id is made and printed unless "
     "given; a repeat answers the first result, \"(replayed)\"; the same --request-id with "
     "another range or --to is refused, request-mismatch). --dry-run checks and plans without "
     "moving anything. --max-rate N: the initial copy goes at most N rows a second on average "
     "(default: the server's --move-max-rate). Needs the operator role (slots serve every tenant): a token with role "
     "operator, or a client certificate the server names in --operators; a tenant's admin is "
     "refused, permission-denied.",
     cmd_slots_move},
    {"step", "GLOBAL_ID SERVICE OPERATION", "compensation", 3, 3,
     "Everything stored for one step (the forward phase, or --compensation), with the trace ids "
     "of the calls that began and finished it.",
     cmd_step},
    {"saga", "GLOBAL_ID", "", 1, 1, "All steps of a saga, as a table, oldest first.", cmd_saga},
    {"steps", "", "state=,service=,operation=,global-id=,trace-id=,older-than=,stuck,limit=", 0, 0,
     "Steps of the tenant in key order. --state in_progress|succeeded|failed|unknown|abandoned|"
     "released; --older-than 5m = not updated for 5 minutes; --stuck = in progress with an "
     "expired lease, or unknown; --trace-id ID = begun or finished by a call of that W3C trace "
     "(32 hex); --limit N rows (default 100, 0 = all).",
     cmd_steps},
    {"resolve", "GLOBAL_ID SERVICE OPERATION | --where FILTERS",
     "outcome=,code=,body-file=,body=,reason=,actor=,compensation,where,state=,service=,"
     "operation=,global-id=,older-than=,stuck,max=,dry-run,yes,request-id=",
     0, 3,
     "Settles an in-progress or unknown step by hand: --outcome succeeded|failed (stored and "
     "replayed) or retryable (releases the key: the next BeginStep runs the step again). "
     "--reason is required and kept in the audit trail with --actor (default $USER, else the "
     "server records the tenant's name). --code N and --body-file F (or --body TEXT) give the "
     "result replayed to callers. With --where instead of a step: every step the filters of "
     "`steps` select (--state in_progress|unknown, --service, --operation, --global-id, "
     "--older-than D, or --stuck), at most --max N (default 1000, up to 10000); --dry-run shows "
     "the count and a sample; without --yes on a terminal it shows them and asks. Repeat-safe: "
     "the request id is printed, --request-id R repeats it.",
     cmd_resolve},
    {"policy list", "", "", 0, 0, "The tenant's stored policies.", cmd_policy_list},
    {"policy get", "SERVICE OPERATION", "", 2, 2, "The effective policy of an operation.",
     cmd_policy_get},
    {"policy set", "SERVICE OPERATION", "fail-open,fail-closed,retention=,key-retention=,lease=", 2,
     2,
     "Stores a policy (SERVICE/OPERATION may be *): --fail-open or --fail-closed (default), "
     "--retention 24h (how long results are kept), --key-retention 365d (how long keys are "
     "kept: 0 = as long as results, else retention to 400d), --lease 30s.",
     cmd_policy_set},
    {"policy delete", "SERVICE OPERATION", "", 2, 2, "Deletes a stored policy.", cmd_policy_delete},
    {"audit", "[GLOBAL_ID]", "limit=", 0, 1,
     "The audit trail (who resolved what, why), newest first; --limit N (default 100).", cmd_audit},
    {"http-key", "KEY", "scope=", 1, 1,
     "The step global id an HTTP Idempotency-Key names: \"k-\" + the hex SHA-256 of the scope, "
     "a 0x1F byte and KEY (the key text as the middleware received it, unquoted). --scope TEXT "
     "is the middleware's scope for the caller; by default the middleware uses the hex SHA-256 "
     "of the request's Authorization header (`printf %s \"$AUTH\" | sha256sum`), and \"\" "
     "without one. Computed here; no coordinator is asked (docs/http-middleware.md).",
     cmd_http_key},
    {"reconcile", "JOURNAL_FILE", "", 1, 1,
     "Replays a client's unguarded-execution journal into the coordinator. Exits 1 when a line "
     "ran twice, was invalid or was refused.",
     cmd_reconcile},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
  fputs(
      "usage: idemctl [--addr HOST:PORT] [--tenant T] [--token T] [--json] COMMAND [ARGS]\n\n"
      "commands:\n",
      f);
  for (size_t i = 0; i < N_COMMANDS; i++) {
    char left[64];
    snprintf(left, sizeof left, "%s %s", commands[i].name, commands[i].args);
    /* the description column: the help's first sentence, up to a colon */
    const char *h = commands[i].help, *stop = strstr(h, ". ");
    int len = stop ? (int)(stop - h) : (int)strlen(h);
    int colon = (int)strcspn(h, ":");
    if (colon < len) len = colon;
    if (len > 0 && h[len - 1] == '.') len--;
    fprintf(f, "  %-36s %.*s\n", left, len, h);
  }
  fputs(
      "\nglobal flags (before or after the command):\n"
      "  --addr HOST:PORT   the coordinator (default $IDEM_ADDRESS, else $IDEM_ADDR, else\n"
      "                     127.0.0.1:50051)\n"
      "  --tenant T         tenant (default $IDEM_TENANT, else the server's default)\n"
      "  --token T          bearer token sent as authorization (default $IDEM_TOKEN)\n"
      "  --tls-ca F         TLS: verify the coordinator with this CA (default $IDEM_TLS_CA)\n"
      "  --tls-cert F       TLS: client certificate for mTLS ($IDEM_TLS_CLIENT_CERT)\n"
      "  --tls-key F        TLS: its private key ($IDEM_TLS_CLIENT_KEY)\n"
      "  --tls-server-name N  TLS: name expected in the server's certificate\n"
      "                     (default: the host of --addr; $IDEM_TLS_SERVER_NAME)\n"
      "  --tls              TLS with the system's roots (implied by the --tls-* files)\n"
      "  --json             machine-readable output\n"
      "  --deadline-ms N    per call (default 5000)\n"
      "  --version          idemctl's version, and libidem's\n\n"
      "exit status: 0 ok, 1 not found or refused, 2 usage, 3 unavailable\n"
      "'idemctl COMMAND --help' describes a command\n",
      f);
}

static void cmd_help(const ctl_cmd *cmd) {
  printf("usage: idemctl %s %s", cmd->name, cmd->args);
  const char *p = cmd->flags;
  while (*p) {
    size_t n = strcspn(p, ",");
    bool val = n > 0 && p[n - 1] == '=';
    printf(" [--%.*s%s]", (int)(val ? n - 1 : n), p, val ? " X" : "");
    p += n;
    if (*p == ',') p++;
  }
  printf(
      "\n\n%s\n\nglobal flags: --addr --tenant --token --tls* --json --deadline-ms (see "
      "idemctl --help)\n",
      cmd->help);
}

/* Whether name is in the spec list; *val says whether it takes a value. */
static bool in_spec(const char *spec, const char *name, size_t len, bool *val) {
  const char *p = spec;
  while (*p) {
    size_t n = strcspn(p, ",");
    bool v = n > 0 && p[n - 1] == '=';
    size_t nl = v ? n - 1 : n;
    if (nl == len && strncmp(p, name, len) == 0) {
      *val = v;
      return true;
    }
    p += n;
    if (*p == ',') p++;
  }
  return false;
}

const char *ctl_flag_value(const ctl *c, const char *name) {
  for (int i = c->nflags - 1; i >= 0; i--)
    if (strcmp(c->flags[i].name, name) == 0) return c->flags[i].value;
  return NULL;
}

bool ctl_has(const ctl *c, const char *name) {
  for (int i = 0; i < c->nflags; i++)
    if (strcmp(c->flags[i].name, name) == 0) return true;
  return false;
}

int ctl_usage_error(const ctl *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("idemctl: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  if (c && c->cmd)
    fprintf(stderr, "usage: idemctl %s %s (see 'idemctl %s --help')\n", c->cmd->name, c->cmd->args,
            c->cmd->name);
  else
    fputs("run 'idemctl --help' for the commands\n", stderr);
  return EXIT_USAGE;
}

int ctl_exit_code(int code) {
  switch (code) {
    case IDEM_OK:
      return EXIT_OK;
    case IDEM_INVALID_ARGUMENT:
    case IDEM_OUT_OF_RANGE:
      return EXIT_USAGE;
    case IDEM_UNAVAILABLE:
    case IDEM_DEADLINE_EXCEEDED:
    case IDEM_CANCELLED:
    case IDEM_INTERNAL:
    case IDEM_UNKNOWN:
    case IDEM_RESOURCE_EXHAUSTED:
    case IDEM_DATA_LOSS:
    case IDEM_NOMEM:
    case IDEM_BAD_RESPONSE:
      return EXIT_UNAVAILABLE;
    /* UNIMPLEMENTED: a server without the call (older than idemctl) refuses it; trying again
     * later does not help, so it is a refusal, not "unavailable" */
    default: /* NOT_FOUND, FAILED_PRECONDITION, ABORTED, PERMISSION_DENIED, UNIMPLEMENTED, ... */
      return EXIT_REFUSED;
  }
}

int ctl_fail(const char *what, const idem_error *e) {
  fprintf(stderr, "idemctl: %s: %s%s%s\n", what, idem_strerror(e->code), e->message[0] ? ": " : "",
          e->message);
  /* the coordinator's detail and hint (docs/api.md §5), PostgreSQL's way */
  const char *detail = idem_error_detail(e), *hint = idem_error_hint(e);
  if (detail[0]) fprintf(stderr, "DETAIL:  %s\n", detail);
  if (hint[0]) fprintf(stderr, "HINT:  %s\n", hint);
  /* a try whose answer never came (libidem's outcome_unknown, docs/api.md §20): the coordinator
   * may have acted on it, and libidem did not repeat it where a repeat could do harm */
  if (e->outcome_unknown)
    fprintf(stderr, "OUTCOME:  unknown: the coordinator may have acted on this request before its "
                    "answer was lost; look (idemctl step, saga, audit) before sending it again\n");
  return ctl_exit_code(e->code);
}

idem_options ctl_options(const ctl *c, const char *addr) {
  return (idem_options){.address = addr,
                        .tenant = c->tenant,
                        .token = c->token,
                        .deadline_ms = c->deadline_ms,
                        .tls = c->tls,
                        .tls_ca_file = c->tls_ca,
                        .tls_cert_file = c->tls_cert,
                        .tls_key_file = c->tls_key,
                        .tls_server_name = c->tls_server_name};
}

idem_client *ctl_client(ctl *c) {
  if (c->client) return c->client;
  idem_options o = ctl_options(c, c->addr);
  idem_error e = {0};
  if (idem_connect(&o, &c->client, &e) != IDEM_OK) exit(ctl_fail("connect", &e));
  return c->client;
}

static const char *env_or(const char *name, const char *dflt) {
  const char *v = getenv(name);
  return v && *v ? v : dflt;
}

/* A flag's value, else the environment variable's (when set and not empty), else NULL. */
static const char *flag_or_env(const ctl *c, const char *flag, const char *env) {
  const char *v = ctl_flag_value(c, flag);
  return v ? v : env_or(env, NULL);
}

static const ctl_cmd *find_cmd(const char *w1, const char *w2, int *words) {
  char two[64];
  snprintf(two, sizeof two, "%s %s", w1, w2 ? w2 : "");
  /* two words first: "slots move" before "slots" with an argument "move" */
  for (size_t i = 0; w2 && i < N_COMMANDS; i++)
    if (strcmp(commands[i].name, two) == 0) {
      *words = 2;
      return &commands[i];
    }
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (strcmp(commands[i].name, w1) == 0) {
      *words = 1;
      return &commands[i];
    }
  return NULL;
}

/* Every flag idemctl knows, as getopt_long options: the global ones and each command's (one
 * name never takes a value in one command and none in another). opts has room for
 * CTL_MAX_OPTIONS + 1 (the terminator). */
#define CTL_MAX_OPTIONS 64
static void add_options(const char *spec, struct option *opts, int *n) {
  for (const char *p = spec; *p;) {
    size_t len = strcspn(p, ",");
    bool val = len > 0 && p[len - 1] == '=';
    size_t nl = val ? len - 1 : len;
    bool seen = false;
    for (int k = 0; k < *n && !seen; k++)
      seen = strlen(opts[k].name) == nl && strncmp(opts[k].name, p, nl) == 0;
    if (!seen && *n < CTL_MAX_OPTIONS) {
      opts[*n] = (struct option){strndup(p, nl), val ? required_argument : no_argument, NULL, 0};
      if (opts[*n].name) ++*n;
    }
    p += len;
    if (*p == ',') p++;
  }
}

static void free_options(struct option *opts, int n) {
  for (int k = 0; k < n; k++) free((char *)opts[k].name);
}

/* getopt_long over argv (permuting: flags may stand before or after the command and its
 * arguments; "--" ends them): every flag into c->flags, the words left in argv[*first..argc). */
static int parse_flags(ctl *c, int argc, char **argv, const struct option *opts, int *first) {
  opterr = 0;
  optind = 1;
  int idx = -1, ch;
  while ((ch = getopt_long(argc, argv, ":", opts, &idx)) != -1) {
    const char *arg = argv[optind - 1];
    if (ch == '?' || ch == ':' || idx < 0) {
      const char *eq = strchr(arg, '=');
      int len = eq ? (int)(eq - arg) : (int)strlen(arg);
      if (ch == ':') return ctl_usage_error(c, "%s needs a value", arg);
      for (int k = 0; eq && opts[k].name; k++)
        if ((int)strlen(opts[k].name) == len - 2 &&
            strncmp(opts[k].name, arg + 2, (size_t)len - 2) == 0)
          return ctl_usage_error(c, "%.*s takes no value", len, arg);
      return ctl_usage_error(c, "unknown flag %.*s", len, arg);
    }
    if (c->nflags >= CTL_MAX_FLAGS) return ctl_usage_error(c, "too many flags");
    c->flags[c->nflags++] = (ctl_flag){opts[idx].name, opts[idx].has_arg ? optarg : NULL};
    idx = -1;
  }
  *first = optind;
  return EXIT_OK;
}

/* Whether every flag given is global or the command's. */
static int check_flags(ctl *c) {
  for (int k = 0; k < c->nflags; k++) {
    bool val;
    const char *n = c->flags[k].name;
    if (!in_spec(GLOBAL_FLAGS, n, strlen(n), &val) && !in_spec(c->cmd->flags, n, strlen(n), &val))
      return ctl_usage_error(c, "unknown flag --%s", n);
  }
  return EXIT_OK;
}

/* Everything but the clean-up, which main does whatever the outcome. */
static int run(ctl *c, int argc, char **argv, struct option *opts, int *n_opts) {
  add_options(GLOBAL_FLAGS, opts, n_opts);
  for (size_t k = 0; k < N_COMMANDS; k++) add_options(commands[k].flags, opts, n_opts);
  int i = argc, rc;
  if ((rc = parse_flags(c, argc, argv, opts, &i)) != EXIT_OK) return rc;
  if (ctl_has(c, "version")) { /* the project's version; libidem's is the same build's */
    printf("idemctl %s (libidem %s)\n", IDEM_VERSION, idem_version());
    return EXIT_OK;
  }
  if (i >= argc) {
    if (ctl_has(c, "help")) {
      usage(stdout);
      return EXIT_OK;
    }
    usage(stderr);
    return EXIT_USAGE;
  }
  int words = 0;
  c->cmd = find_cmd(argv[i], i + 1 < argc ? argv[i + 1] : NULL, &words);
  if (!c->cmd) {
    if (strcmp(argv[i], "policy") == 0)
      return ctl_usage_error(NULL, "policy: expected list, get, set or delete");
    return ctl_usage_error(NULL, "unknown command %s", argv[i]);
  }
  for (i += words; i < argc; i++) {
    if (c->npos >= CTL_MAX_POS) return ctl_usage_error(c, "too many arguments");
    c->pos[c->npos++] = argv[i];
  }
  if ((rc = check_flags(c)) != EXIT_OK) return rc;
  if (ctl_has(c, "help")) {
    cmd_help(c->cmd);
    return EXIT_OK;
  }
  if (c->npos < c->cmd->min_pos) return ctl_usage_error(c, "missing arguments");
  if (c->npos > c->cmd->max_pos)
    return ctl_usage_error(c, "unexpected argument %s", c->pos[c->npos - 1]);

  c->json = ctl_has(c, "json");
  c->addr = ctl_flag_value(c, "addr");
  /* IDEM_ADDRESS, as the examples and client libraries read it; IDEM_ADDR, as idemctl did */
  if (!c->addr) c->addr = env_or("IDEM_ADDRESS", env_or("IDEM_ADDR", "127.0.0.1:50051"));
  c->tenant = ctl_flag_value(c, "tenant");
  if (!c->tenant) c->tenant = env_or("IDEM_TENANT", NULL);
  c->token = ctl_flag_value(c, "token");
  if (!c->token) c->token = env_or("IDEM_TOKEN", NULL);
  /* TLS: the client's own variable names, apart from the server's IDEM_TLS_* */
  c->tls_ca = flag_or_env(c, "tls-ca", "IDEM_TLS_CA");
  c->tls_cert = flag_or_env(c, "tls-cert", "IDEM_TLS_CLIENT_CERT");
  c->tls_key = flag_or_env(c, "tls-key", "IDEM_TLS_CLIENT_KEY");
  c->tls_server_name = flag_or_env(c, "tls-server-name", "IDEM_TLS_SERVER_NAME");
  c->tls = ctl_has(c, "tls");
  if (!c->tls_cert != !c->tls_key)
    return ctl_usage_error(c, "--tls-cert and --tls-key go together");
  c->deadline_ms = 5000;
  const char *dl = ctl_flag_value(c, "deadline-ms");
  if (dl) {
    char *end;
    errno = 0;
    long long v = strtoll(dl, &end, 10);
    if (errno || *end || v < 1 || v > 600000)
      return ctl_usage_error(c, "--deadline-ms: expected 1 to 600000");
    c->deadline_ms = v;
  }
  return c->cmd->fn(c);
}

int main(int argc, char **argv) {
  ctl c;
  memset(&c, 0, sizeof c);
  struct option opts[CTL_MAX_OPTIONS + 1] = {{0}};
  int n_opts = 0;
  int rc = run(&c, argc, argv, opts, &n_opts);
  idem_close(c.client);
  free_options(opts, n_opts);
  return rc;
}

void ctl_print_none(const ctl *c, const char *what) {
  if (c->token || c->tls_cert)
    printf("(no %s in the tenant of your credentials)\n", what);
  else if (c->tenant && *c->tenant)
    printf("(no %s in tenant %s)\n", what, c->tenant);
  else
    printf("(no %s in the server's default tenant: pass --tenant T or set IDEM_TENANT; the\n"
           " examples and scripts/quickstart's hints use tenant shop)\n",
           what);
}
