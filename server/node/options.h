/* options.h — idem-coordinator's options (docs/api.md §8): one declarative table.
 *
 * Each row names an option once: its flag, environment variable, config-file key, type,
 * default, range, whether SIGHUP reloads it, and its help line. Parsing the command line, the
 * environment and the --config file, `--help`, and the test that checks `--help` all read the
 * rows (pgbouncer's config table, PostgreSQL's guc_tables.c); nothing else knows an option.
 *
 * Precedence, lowest first: the table's default, the --config file, the environment, flags.
 */
#ifndef IDEM_NODE_OPTIONS_H
#define IDEM_NODE_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../config/config_file.h"

#define OPT_LIST_MAX 64 /* values of a repeatable option (SLOTMAP_GROUPS_MAX) */

/* A repeatable option's values, in the order given. Values from a later source (the
 * environment, then flags) replace an earlier source's list rather than add to it. */
typedef struct opt_list {
  const char *v[OPT_LIST_MAX];
  size_t n;
  int source; /* 0 none, 1 the config file, 2 the environment, 3 flags */
} opt_list;

/* One store group (docs/api.md §17): --store NAME=CONNSTRING, or --pg URL as group "default". */
typedef struct idem_group_opt {
  char name[64];
  const char *conninfo; /* points into the option's value */
} idem_group_opt;

/* Every option's value after parsing. Strings point into argv, the environment or the
 * config file's values (owned by the options until options_free); NULL = not given. */
typedef struct idem_options {
  /* serving */
  const char *listen;
  int workers;
  int max_waiters; /* BeginStep calls that may wait on a step in progress at once; 0 = none */
  bool insecure;
  bool require_tenant;
  int drain_timeout_ms; /* --drain-timeout-ms: bound on the drain after SIGTERM */
  /* the store */
  const char *pg;  /* with --store: the first group's connection string (the node-wide stores) */
  opt_list stores; /* --store NAME=CONNSTRING, repeated */
  int slots;       /* --slots: the cluster's slot count */
  int move_max_rate; /* --move-max-rate: rows/s of a move's initial copy, 0 = no limit */
  /* the groups, checked: --store in order, or --pg alone as "default" (groups_from_pg) */
  idem_group_opt groups[OPT_LIST_MAX];
  size_t n_groups;
  bool groups_from_pg;
  int store_timeout_ms;
  /* high availability */
  const char *etcd; /* NULL: single node */
  const char *node_id;
  const char *advertise;
  const char *election_prefix;
  int election_ttl_s;
  const char *take_over; /* --take-over CLUSTER_ID: take the databases that cluster owns over */
  /* security */
  const char *tls_cert, *tls_key, *tls_client_ca, *tokens;
  const char *operators; /* --operators NAME,...: certificate names with role operator */
  /* operations */
  const char *config;
  int reaper_interval_s;
  const char *metrics;
  const char *console; /* the web console's HOST:PORT; NULL: off */
  const char *trace_url; /* the console links trace ids there ({trace_id}); NULL: as text */
  int log_format;      /* log_format: LOG_TEXT, LOG_JSON */
  /* the config file's [policy ...] seeds and the strings its options point into */
  config_seeds seeds;
  char **file_values;
  size_t n_file_values;
} idem_options;

typedef enum opt_type {
  OPT_STRING, /* const char *; "" reads as not given */
  OPT_INT,    /* int in [min, max] */
  OPT_BOOL,   /* bool: 1/true/yes/on, 0/false/no/off; as a flag it takes no value */
  OPT_CHOICE, /* int: the index of the value in choices ("text|json") */
  OPT_ACTION, /* --help, --version: a flag only */
  OPT_LIST,   /* opt_list: a string option that may be given many times */
} opt_type;

typedef struct opt_row {
  const char *group; /* the heading it is listed under in --help */
  const char *name;  /* the flag without "--"; also the config-file key */
  const char *env;   /* environment variable, NULL = none */
  opt_type type;
  size_t offset;       /* of the field in idem_options */
  const char *def;     /* the default as text, NULL = none */
  long min, max;       /* OPT_INT */
  const char *choices; /* OPT_CHOICE: "a|b" */
  bool reloadable;     /* SIGHUP re-reads what it names */
  const char *arg;     /* the value's placeholder in --help ("HOST:PORT") */
  const char *help;    /* one line */
  const char *prefix;  /* OPT_STRING: a value must start with it (NULL: any) */
} opt_row;

extern const opt_row options_table[];
extern const size_t options_count;

/* What options_parse decided. */
typedef enum options_result {
  OPTIONS_RUN = 0,   /* start the node */
  OPTIONS_EXIT = 1,  /* --help or --version printed: exit 0 */
  OPTIONS_USAGE = 2, /* msg holds the usage error: exit 2 */
} options_result;

/* Fills o from the defaults, the config file, the environment and argv, then checks the
 * combinations (a --listen that is not loopback needs TLS or --insecure, --pg is required, ...).
 * On OPTIONS_USAGE, msg names the option and its source ("--workers: expected an integer from
 * 1 to 256"). o must be freed with options_free whatever the result. */
options_result options_parse(int argc, char **argv, idem_options *o, char *msg, size_t n);

/* Frees what the config file left in o. */
void options_free(idem_options *o);

/* Prints --help: every row of the table, grouped, with its default and variable. */
void options_help(FILE *f);

/* Prints a usage error (msg, then a pointer to --help) to stderr. */
void options_usage_error(const char *msg);

/* Whether --listen only accepts local connections (loopback or a unix socket); *bad_form when
 * it is not HOST:PORT. */
bool options_listen_is_local(const char *listen, bool *bad_form);

#endif
