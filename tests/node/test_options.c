/* test_options.c — the option table (server/node/options.h) is the one source of every option:
 * --help as the real binary prints it lists each row with its default, range and variable and
 * nothing else; the environment, the config file and flags land in the fields the rows name,
 * in precedence order; bad values are refused naming the option. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/options.h"
#include "spawn.h"

/* The output of `idem-coordinator --help` ($IDEM_COORDINATOR_BIN), heap-allocated. */
static char *binary_help(void) {
  const char *bin = getenv("IDEM_COORDINATOR_BIN");
  cr_assert_not_null(bin, "IDEM_COORDINATOR_BIN is not set (scripts/test sets it)");
  char log[] = "/tmp/idem-help-XXXXXX";
  int fd = mkstemp(log);
  cr_assert_geq(fd, 0);
  close(fd);
  const char *argv[] = {bin, "--help", NULL};
  cr_assert_eq(spawn_run(argv, &(spawn_opts){.out_log = log}, 10000), 0, "--help exits 0");
  FILE *f = fopen(log, "r");
  cr_assert_not_null(f);
  size_t cap = 1 << 16, n = 0, got;
  char *buf = malloc(cap);
  while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) n += got;
  buf[n] = '\0';
  fclose(f);
  unlink(log);
  return buf;
}

/* The line of help that documents --name (NULL when none does). */
static const char *line_of(const char *help, const char *name, char *out, size_t n) {
  char flag[80];
  snprintf(flag, sizeof flag, "  --%s", name);
  for (const char *p = help; (p = strstr(p, flag)) != NULL; p++) {
    char next = p[strlen(flag)];
    if (next != ' ' && next != '\n') continue; /* --tls-cert is not --tls-cert-x */
    size_t len = strcspn(p, "\n");
    snprintf(out, n, "%.*s", (int)len, p);
    return out;
  }
  return NULL;
}

Test(options, help_of_the_binary_is_the_table) {
  char *help = binary_help();
  char line[512], want[128];
  for (size_t i = 0; i < options_count; i++) {
    const opt_row *r = &options_table[i];
    cr_assert_not_null(line_of(help, r->name, line, sizeof line), "--%s missing from --help",
                       r->name);
    cr_assert(strstr(line, r->help), "--%s: help text '%s' not in: %s", r->name, r->help, line);
    if (r->def) {
      snprintf(want, sizeof want, "(default %s)", r->def);
      cr_assert(strstr(line, want), "--%s: '%s' not in: %s", r->name, want, line);
    } else {
      cr_assert_null(strstr(line, "(default"), "--%s has no default: %s", r->name, line);
    }
    if (r->env) {
      snprintf(want, sizeof want, "[%s]", r->env);
      cr_assert(strstr(line, want), "--%s: '%s' not in: %s", r->name, want, line);
    }
    if (r->type == OPT_INT) {
      snprintf(want, sizeof want, "%ld-%ld", r->min, r->max);
      cr_assert(strstr(line, want), "--%s: range '%s' not in: %s", r->name, want, line);
    }
  }
  /* and nothing but the table: every documented flag is a row */
  size_t documented = 0;
  for (const char *p = help; (p = strstr(p, "\n  --")) != NULL; p += 5) documented++;
  cr_assert_eq(documented, options_count, "--help documents %zu flags, the table has %zu",
               documented, options_count);
  free(help);
}

static const opt_row *row(const char *name) {
  for (size_t i = 0; i < options_count; i++)
    if (strcmp(options_table[i].name, name) == 0) return &options_table[i];
  cr_assert_fail("no row %s", name);
  return NULL;
}

/* Parses argv (NULL-terminated) with a clean environment for every row's variable. */
static options_result parse(idem_options *o, char *msg, size_t n, const char **args) {
  for (size_t i = 0; i < options_count; i++)
    if (options_table[i].env) unsetenv(options_table[i].env);
  char *argv[32];
  int argc = 0;
  argv[argc++] = (char *)"idem-coordinator";
  for (; args[argc - 1] && argc < 31; argc++) argv[argc] = (char *)args[argc - 1];
  argv[argc] = NULL;
  return options_parse(argc, argv, o, msg, n);
}

Test(options, defaults_come_from_the_table) {
  idem_options o;
  char msg[512] = "";
  cr_assert_eq(parse(&o, msg, sizeof msg, (const char *[]){"--pg", "x", NULL}), OPTIONS_RUN, "%s",
               msg);
  cr_assert_eq(o.workers, atoi(row("workers")->def));
  cr_assert_eq(o.store_timeout_ms, atoi(row("store-timeout-ms")->def));
  cr_assert_eq(o.election_ttl_s, atoi(row("election-ttl")->def));
  cr_assert_eq(o.drain_timeout_ms, atoi(row("drain-timeout-ms")->def));
  cr_assert_eq(o.reaper_interval_s, atoi(row("reaper-interval")->def));
  cr_assert_str_eq(o.listen, row("listen")->def);
  cr_assert_str_eq(o.election_prefix, row("election-prefix")->def);
  cr_assert_null(o.etcd);
  options_free(&o);
}

Test(options, file_then_environment_then_flags) {
  char path[] = "/tmp/idem-options-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  const char *ini = "workers = 3\nstore-timeout-ms = 111\nreaper_interval = 7\npg = from-file\n";
  cr_assert_eq(write(fd, ini, strlen(ini)), (ssize_t)strlen(ini));
  close(fd);
  idem_options o;
  char msg[512] = "";
  for (size_t i = 0; i < options_count; i++)
    if (options_table[i].env) unsetenv(options_table[i].env);
  setenv("IDEM_STORE_TIMEOUT_MS", "222", 1);
  setenv("IDEM_REAPER_INTERVAL", "8", 1);
  char *argv[] = {(char *)"idem-coordinator",  (char *)"--config", path,
                  (char *)"--reaper-interval", (char *)"9",        NULL};
  cr_assert_eq(options_parse(5, argv, &o, msg, sizeof msg), OPTIONS_RUN, "%s", msg);
  cr_assert_eq(o.workers, 3, "the file's value");
  cr_assert_eq(o.store_timeout_ms, 222, "the environment wins over the file");
  cr_assert_eq(o.reaper_interval_s, 9, "the flag wins over both");
  cr_assert_str_eq(o.pg, "from-file");
  options_free(&o);
  unsetenv("IDEM_STORE_TIMEOUT_MS");
  unsetenv("IDEM_REAPER_INTERVAL");
  unlink(path);
}

Test(options, bad_values_name_the_option_and_its_range) {
  idem_options o;
  char msg[512] = "";
  cr_assert_eq(parse(&o, msg, sizeof msg, (const char *[]){"--pg", "x", "--workers", "0", NULL}),
               OPTIONS_USAGE);
  cr_assert_str_eq(msg, "--workers: expected an integer from 1 to 256");
  options_free(&o);
  cr_assert_eq(
      parse(&o, msg, sizeof msg, (const char *[]){"--pg", "x", "--drain-timeout-ms", "50", NULL}),
      OPTIONS_USAGE);
  cr_assert_str_eq(msg, "--drain-timeout-ms: expected milliseconds from 100 to 600000");
  options_free(&o);
  cr_assert_eq(
      parse(&o, msg, sizeof msg, (const char *[]){"--pg", "x", "--log-format", "xml", NULL}),
      OPTIONS_USAGE);
  cr_assert_str_eq(msg, "--log-format: expected one of text|json");
  options_free(&o);
  cr_assert_eq(parse(&o, msg, sizeof msg, (const char *[]){NULL}), OPTIONS_USAGE);
  cr_assert_str_eq(msg, "--pg URL or --store NAME=URL is required (or IDEM_PG, IDEM_STORE)");
  options_free(&o);
  cr_assert_eq(parse(&o, msg, sizeof msg, (const char *[]){"--pg", "x", "--colour", NULL}),
               OPTIONS_USAGE);
  cr_assert(strstr(msg, "--colour"), "%s", msg);
  options_free(&o);
}

/* docs/api.md §17: --pg is the one group "default"; --store NAME=URL names each group. */
Test(options, groups_from_pg_or_store) {
  idem_options o;
  char msg[512] = "";
  unsetenv("IDEM_STORE");
  unsetenv("IDEM_PG");
  cr_assert_eq(parse(&o, msg, sizeof msg, (const char *[]){"--pg", "x", NULL}), OPTIONS_RUN);
  cr_assert_eq(o.n_groups, 1);
  cr_assert_str_eq(o.groups[0].name, "default");
  cr_assert_str_eq(o.groups[0].conninfo, "x");
  cr_assert(o.groups_from_pg);
  cr_assert_eq(o.slots, 256);
  options_free(&o);
  cr_assert_eq(parse(&o, msg, sizeof msg,
                     (const char *[]){"--store", "g1=host=a dbname=x", "--store",
                                      "g2=postgres://b/y", "--slots", "16", NULL}),
               OPTIONS_RUN, "%s", msg);
  cr_assert_eq(o.n_groups, 2);
  cr_assert_str_eq(o.groups[0].name, "g1");
  cr_assert_str_eq(o.groups[0].conninfo, "host=a dbname=x");
  cr_assert_str_eq(o.groups[1].name, "g2");
  cr_assert_str_eq(o.groups[1].conninfo, "postgres://b/y");
  cr_assert_str_eq(o.pg, "host=a dbname=x", "the node-wide stores use the first group");
  cr_assert_eq(o.slots, 16);
  cr_assert_not(o.groups_from_pg);
  options_free(&o);
  /* the environment: one group per line; flags replace the environment's list */
  setenv("IDEM_STORE", "e1=dbname=a\ne2=dbname=b\n", 1);
  char *argv0[] = {(char *)"idem-coordinator", NULL};
  cr_assert_eq(options_parse(1, argv0, &o, msg, sizeof msg), OPTIONS_RUN, "%s", msg);
  cr_assert_eq(o.n_groups, 2);
  cr_assert_str_eq(o.groups[1].conninfo, "dbname=b");
  options_free(&o);
  char *argv1[] = {(char *)"idem-coordinator", (char *)"--store", (char *)"f=dbname=c", NULL};
  cr_assert_eq(options_parse(3, argv1, &o, msg, sizeof msg), OPTIONS_RUN, "%s", msg);
  cr_assert_eq(o.n_groups, 1);
  cr_assert_str_eq(o.groups[0].name, "f");
  options_free(&o);
  unsetenv("IDEM_STORE");
}

Test(options, bad_groups_are_refused_naming_the_group) {
  static const struct {
    const char *argv[8];
    const char *want;
  } cases[] = {
      {{"--pg", "x", "--store", "g=y", NULL}, "--pg and --store do not go together"},
      {{"--store", "g1", NULL}, "--store g1: expected NAME=CONNSTRING"},
      {{"--store", "g 1=x", NULL}, "--store g 1: group name 'g 1': byte 2"},
      {{"--store", "=x", NULL}, "--store : a group name must not be empty"},
      {{"--store", "g1=", NULL}, "--store g1: the connection string is empty"},
      {{"--store", "g1=a", "--store", "g1=b", NULL}, "--store g1: the group is named twice"},
      {{"--store", "g1=a", "--store", "g2=b", "--slots", "1", NULL},
       "--store: 2 groups but --slots 1"},
      {{"--pg", "x", "--slots", "65537", NULL}, "--slots: expected an integer from 1 to 65536"},
  };
  unsetenv("IDEM_STORE");
  unsetenv("IDEM_PG");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    idem_options o;
    char msg[512] = "";
    const char *argv[8];
    memcpy(argv, cases[i].argv, sizeof argv);
    cr_expect_eq(parse(&o, msg, sizeof msg, argv), OPTIONS_USAGE, "case %zu", i);
    cr_expect(strstr(msg, cases[i].want) == msg, "case %zu: got '%s', want '%s…'", i, msg,
              cases[i].want);
    options_free(&o);
  }
}
