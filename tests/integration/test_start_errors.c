/* test_start_errors.c — a wrong --pg at start: the coordinator names where it tried
 * (host, port, database, user; never a password), stops at once with exit 2 when no retry can
 * help (a missing database, a malformed string, an unknown option), and says how long it keeps
 * trying when Postgres may still come. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spawn.h"
#include "testutil.h"
#include "util/clock.h"

static char log_path[128];

static void setup(void) {
  char tag[64];
  h_unique("start-errors", tag, sizeof tag);
  snprintf(log_path, sizeof log_path, "/tmp/idem-%s.log", tag);
}

static void teardown(void) {
  unlink(log_path);
}

TestSuite(start_errors, .init = setup, .fini = teardown, .timeout = 60);

static void read_log(char *buf, size_t cap) {
  FILE *f = fopen(log_path, "r");
  size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
  buf[n] = '\0';
  if (f) fclose(f);
}

/* Starts the coordinator on pg; its exit status within limit_ms (-1: still running, killed). */
static int start(const char *pg, int64_t limit_ms, int64_t *took_ms) {
  const char *argv[] = {h_env("IDEM_COORDINATOR_BIN"), "--pg", pg, "--listen", "127.0.0.1:0",
                        NULL};
  int64_t t0 = clock_mono_ms();
  int status = spawn_run(argv, &(spawn_opts){.log = log_path}, limit_ms);
  *took_ms = clock_mono_ms() - t0;
  return status;
}

/* IDEM_TEST_PG_URL with its database replaced by db (the URL form scripts/test exports). */
static void url_with_db(const char *db, char *out, size_t cap) {
  const char *url = h_env("IDEM_TEST_PG_URL");
  const char *slash = strrchr(url, '/');
  cr_assert(slash && strstr(url, "://"), "IDEM_TEST_PG_URL is not a URL: %s", url);
  const char *query = strchr(slash, '?');
  snprintf(out, cap, "%.*s/%s%s", (int)(slash - url), url, db, query ? query : "");
}

Test(start_errors, missing_database_exits_2_naming_it) {
  char pg[512], text[8192];
  url_with_db("idem_no_such_db", pg, sizeof pg);
  int64_t took;
  int status = start(pg, 5000, &took);
  read_log(text, sizeof text);
  cr_assert_eq(status, 2, "exit %d after %lld ms:\n%s", status, (long long)took, text);
  cr_assert_lt(took, 5000);
  cr_assert(strstr(text, "database idem_no_such_db"), "the target is not named:\n%s", text);
  cr_assert(strstr(text, "not retrying"), "%s", text);
  cr_assert(strstr(text, "port "), "%s", text);
  cr_assert(strstr(text, " user "), "%s", text);
}

Test(start_errors, malformed_pg_exits_2_naming_the_flag) {
  const char *bad[] = {"postgres:/??", "host=127.0.0.1 bogus=1", "postgresql://h:notaport/x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[8192];
    int64_t took;
    int status = start(bad[i], 5000, &took);
    read_log(text, sizeof text);
    cr_assert_eq(status, 2, "%s: exit %d:\n%s", bad[i], status, text);
    cr_assert(strstr(text, "--pg") || strstr(text, "port notaport"), "%s:\n%s", bad[i], text);
  }
}

Test(start_errors, password_never_logged) {
  char pg[512], text[8192];
  const char *url = h_env("IDEM_TEST_PG_URL"); /* postgresql://USER@HOST:PORT/DB */
  const char *at = strchr(url, '@'), *scheme = strstr(url, "://");
  cr_assert(at && scheme, "IDEM_TEST_PG_URL has no user: %s", url);
  snprintf(pg, sizeof pg, "%.*s:s3cr3t-pw%s", (int)(at - url), url, at);
  char db_pg[600];
  snprintf(db_pg, sizeof db_pg, "%s", pg);
  char *slash = strrchr(db_pg, '/');
  snprintf(slash + 1, sizeof db_pg - (size_t)(slash + 1 - db_pg), "idem_no_such_db");
  int64_t took;
  int status = start(db_pg, 5000, &took);
  read_log(text, sizeof text);
  cr_assert_eq(status, 2, "exit %d:\n%s", status, text);
  cr_assert_null(strstr(text, "s3cr3t-pw"), "the password was logged:\n%s", text);
}

/* The server refuses with a SQLSTATE no retry changes (28000: the role does not exist): the
 * decision is taken on the code, not on the server's (translatable) text. */
Test(start_errors, unknown_role_exits_2_on_its_sqlstate) {
  const char *url = h_env("IDEM_TEST_PG_URL"); /* postgresql://USER@HOST:PORT/DB */
  const char *at = strchr(url, '@'), *scheme = strstr(url, "://");
  cr_assert(at && scheme, "IDEM_TEST_PG_URL has no user: %s", url);
  char pg[512], text[8192];
  snprintf(pg, sizeof pg, "%.*sidem_no_such_role%s", (int)(scheme + 3 - url), url, at);
  int64_t took;
  int status = start(pg, 5000, &took);
  read_log(text, sizeof text);
  cr_assert_eq(status, 2, "exit %d after %lld ms:\n%s", status, (long long)took, text);
  cr_assert(strstr(text, "not retrying"), "%s", text);
  cr_assert(strstr(text, "28000"), "the SQLSTATE is not shown:\n%s", text);
  cr_assert(strstr(text, "user idem_no_such_role"), "%s", text);
}

/* A host name that does not exist (the resolver says so, not a temporary failure): exit 2
 * naming it, before any connection. */
Test(start_errors, unresolvable_host_exits_2_naming_it) {
  char text[8192];
  int64_t took;
  int status = start("postgresql://postgres@idem-no-such-host.invalid:5432/idem", 5000, &took);
  read_log(text, sizeof text);
  cr_assert_eq(status, 2, "exit %d:\n%s", status, text);
  cr_assert(strstr(text, "host idem-no-such-host.invalid does not resolve"), "%s", text);
}

/* Nothing listens: Postgres may still come, so the coordinator retries and says for how long;
 * SIGTERM during the retries stops it cleanly. */
Test(start_errors, unreachable_retries_saying_how_long) {
  const char *argv[] = {h_env("IDEM_COORDINATOR_BIN"), "--pg", "postgresql://127.0.0.1:1/idem",
                        "--listen", "127.0.0.1:0", NULL};
  pid_t pid = spawn_start(argv, &(spawn_opts){.log = log_path});
  char text[8192] = "";
  H_WAIT_EVERY(50, (read_log(text, sizeof text), strstr(text, "retrying_for=") != NULL), 10000,
               "a retry line (retrying_for=) in the log:\n%s", text);
  cr_assert(strstr(text, "host 127.0.0.1 port 1 database idem"), "%s", text);
  cr_assert_eq(spawn_stop(pid, 10000), 0, "SIGTERM during the retries:\n%s", text);
}

/* An address another process holds: the reason and what to change, in one line. */
Test(start_errors, address_in_use_names_the_reason) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0);
  socklen_t len = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &len);
  char listen_addr[64], text[16384];
  snprintf(listen_addr, sizeof listen_addr, "127.0.0.1:%d", ntohs(a.sin_port));
  const char *argv[] = {h_env("IDEM_COORDINATOR_BIN"), "--pg", h_env("IDEM_TEST_PG_URL"),
                        "--listen", listen_addr, NULL};
  int status = spawn_run(argv, &(spawn_opts){.log = log_path}, 20000);
  close(fd);
  read_log(text, sizeof text);
  cr_assert_eq(status, 1, "exit %d:\n%s", status, text);
  char want[128];
  snprintf(want, sizeof want, "cannot listen on %s: Address already in use", listen_addr);
  cr_assert(strstr(text, want), "%s", text);
  cr_assert(strstr(text, "IDEM_LISTEN"), "%s", text);
}
