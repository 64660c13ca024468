/* test_client_alloc.c — libidem when memory runs out, without a coordinator: for N = 1, 2, ...
 * the Nth allocation made by libidem's own code fails (support_alloc.c, -Wl,--wrap), until the
 * operation completes without reaching N. At every N: no crash, nothing left allocated once the
 * outputs are cleared, and the documented error (IDEM_NOMEM; IDEM_DATA_LOSS for the journal)
 * with the outputs zeroed.
 *
 * Covered here: idem_connect/idem_close (plaintext with every option, TLS with a CA file), the
 * fail-open journal (appending a line, and idem_journal_reconcile of lines that need no call:
 * malformed ones and another tenant's), idem_fingerprint. The calls against a real coordinator
 * are in integration/test_client_alloc.c.
 */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "idem_internal.h"

/* support_alloc.c */
void alloc_arm(long n);
bool alloc_disarm(void);
size_t alloc_live(void);
long alloc_walk(const char *name, void *ctx, void (*setup)(void *ctx), int (*run)(void *ctx),
                void (*check)(void *ctx, int rc, bool failed, long n));

/* A fresh empty file under /tmp; path receives its name. */
static void temp_file(char path[64]) {
  snprintf(path, 64, "/tmp/idem-alloc-XXXXXX");
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0, "mkstemp");
  close(fd);
}

static long file_size(const char *path) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "%s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

/* --- idem_connect / idem_close --- */

typedef struct connect_ctx {
  idem_options o;
  idem_client *c;
  idem_error e;
} connect_ctx;

static int run_connect(void *p) {
  connect_ctx *x = p;
  x->c = (idem_client *)1; /* idem_connect must set it: NULL on error */
  memset(&x->e, 0, sizeof x->e);
  return idem_connect(&x->o, &x->c, &x->e);
}

static void check_connect(void *p, int rc, bool failed, long n) {
  connect_ctx *x = p;
  if (failed) {
    cr_assert_eq(rc, IDEM_NOMEM, "N = %ld: rc %d (%s)", n, rc, x->e.message);
    cr_assert_eq(x->e.code, IDEM_NOMEM, "N = %ld", n);
    cr_assert_null(x->c, "N = %ld: a client after an error", n);
    return;
  }
  cr_assert_eq(rc, IDEM_OK, "N = %ld: rc %d (%s)", n, rc, x->e.message);
  cr_assert_not_null(x->c);
  idem_close(x->c);
}

Test(client_alloc, connect_and_close) {
  char journal[64];
  temp_file(journal);
  connect_ctx x = {.o = {.address = "127.0.0.1:1, 127.0.0.1:2,127.0.0.1:3",
                         .tenant = "t-alloc",
                         .token = "secret-token",
                         .journal_path = journal,
                         .deadline_ms = 100,
                         .tls_server_name = "localhost"}};
  long n = alloc_walk("connect", &x, NULL, run_connect, check_connect);
  cr_assert_geq(n, 8); /* client, tenant, journal, cache, token, name, 3 addresses */
  unlink(journal);
}

Test(client_alloc, connect_with_tls_files) {
  const char *ca = "/etc/ssl/certs/ca-certificates.crt";
  if (access(ca, R_OK) != 0) cr_skip_test("no CA bundle at %s", ca);
  connect_ctx x = {.o = {.address = "127.0.0.1:1", .tls_ca_file = ca, .deadline_ms = 100}};
  long n = alloc_walk("connect_tls", &x, NULL, run_connect, check_connect);
  cr_assert_geq(n, 4); /* client, cache, the CA file, the address */
}

/* --- the journal: one line appended --- */

typedef struct append_ctx {
  char path[64];
  long size_before;
  idem_step_key key;
  uint8_t fp[IDEM_FINGERPRINT_LEN];
  idem_result res;
  idem_error e;
} append_ctx;

static void setup_append(void *p) {
  append_ctx *x = p;
  x->size_before = file_size(x->path);
}

static int run_append(void *p) {
  append_ctx *x = p;
  memset(&x->e, 0, sizeof x->e);
  return idem__journal_append(x->path, "client", "t-alloc", &x->key, x->fp, sizeof x->fp, &x->res,
                              &x->e);
}

static void check_append(void *p, int rc, bool failed, long n) {
  append_ctx *x = p;
  if (failed) {
    cr_assert_eq(rc, IDEM_DATA_LOSS, "N = %ld: rc %d", n, rc); /* idem.h: the journal's error */
    cr_assert(strstr(x->e.message, "out of memory"), "N = %ld: %s", n, x->e.message);
    cr_assert_eq(file_size(x->path), x->size_before, "N = %ld: a line was written", n);
    return;
  }
  cr_assert_eq(rc, IDEM_OK, "N = %ld: rc %d (%s)", n, rc, x->e.message);
  cr_assert_gt(file_size(x->path), x->size_before);
}

Test(client_alloc, journal_append) {
  append_ctx x = {.key = {"g-alloc-1", "mail", "send", IDEM_COMPENSATION},
                  .res = {.outcome = IDEM_OUTCOME_RETRYABLE,
                          .code = 503,
                          .body = (uint8_t *)"try later %",
                          .body_len = 11}};
  temp_file(x.path);
  idem_fingerprint("request", 7, x.fp);
  long n = alloc_walk("journal_append", &x, setup_append, run_append, check_append);
  cr_assert_eq(n, 2); /* one buffer */

  FILE *f = fopen(x.path, "r");
  char line[1024];
  cr_assert_not_null(fgets(line, sizeof line, f));
  fclose(f);
  cr_assert(strstr(line, " t-alloc g-alloc-1 mail send compensation retryable 503 "), "%s", line);
  cr_assert(strstr(line, " try%20later%20%25\n"), "%s", line);
  unlink(x.path);
}

/* --- the journal: idem_journal_reconcile of lines that need no call --- */

typedef struct reconcile_ctx {
  char path[64];
  idem_client *c;
  idem_reconcile_report rep;
  idem_error e;
} reconcile_ctx;

static int run_reconcile(void *p) {
  reconcile_ctx *x = p;
  memset(&x->e, 0, sizeof x->e);
  return idem_journal_reconcile(x->c, x->path, &x->rep, &x->e);
}

static void check_reconcile(void *p, int rc, bool failed, long n) {
  reconcile_ctx *x = p;
  if (failed) {
    cr_assert_eq(rc, IDEM_NOMEM, "N = %ld: rc %d (%s), %zu lines read", n, rc, x->e.message,
                 x->rep.lines);
    cr_assert_eq(x->e.code, IDEM_NOMEM, "N = %ld", n);
    cr_assert(x->rep.lines == 0 && x->rep.items == NULL && x->rep.n_items == 0,
              "N = %ld: the report holds something after an error", n);
    return;
  }
  cr_assert_eq(rc, IDEM_OK, "N = %ld: rc %d (%s)", n, rc, x->e.message);
  cr_assert_eq(x->rep.lines, 4);
  cr_assert_eq(x->rep.invalid, 2);
  cr_assert_eq(x->rep.skipped, 2);
  cr_assert_eq(x->rep.n_items, 4);
  /* another tenant's lines are parsed: the phase and outcome words read back */
  const idem_reconcile_line *it = &x->rep.items[1];
  cr_assert_eq(it->status, IDEM_RECONCILE_SKIPPED);
  cr_assert_str_eq(it->global_id, "g-alloc-1");
  cr_assert_eq(it->phase, IDEM_COMPENSATION);
  cr_assert_eq(it->outcome, IDEM_OUTCOME_RETRYABLE);
  it = &x->rep.items[3];
  cr_assert_eq(it->status, IDEM_RECONCILE_SKIPPED);
  cr_assert_eq(it->phase, IDEM_FORWARD);
  cr_assert_eq(it->outcome, IDEM_OUTCOME_UNKNOWN); /* outcome 0 is journaled as unknown */
  idem_reconcile_report_clear(&x->rep);
}

Test(client_alloc, journal_reconcile_without_calls) {
  reconcile_ctx x;
  memset(&x, 0, sizeof x);
  temp_file(x.path);
  FILE *f = fopen(x.path, "w");
  fputs("idem1 not a journal line\n", f);
  fclose(f);
  idem_step_key k1 = {"g-alloc-1", "mail", "send", IDEM_COMPENSATION};
  idem_step_key k2 = {"g-alloc-2", "mail", "send", IDEM_FORWARD};
  idem_result r1 = {.outcome = IDEM_OUTCOME_RETRYABLE, .code = 1};
  idem_result r2 = {.outcome = IDEM_OUTCOME_UNSPECIFIED, .code = 2};
  idem_error e = {0};
  cr_assert_eq(idem__journal_append(x.path, "client", "t-other", &k1, NULL, 0, &r1, &e), IDEM_OK);
  f = fopen(x.path, "a");
  fputs("\nidem1 1 client t-other g forward succeeded 1 - -\n", f); /* blank, then 10 fields */
  fclose(f);
  cr_assert_eq(idem__journal_append(x.path, "server", "t-other", &k2, NULL, 0, &r2, &e), IDEM_OK);

  idem_options o = {.address = "127.0.0.1:1", .tenant = "t-alloc", .deadline_ms = 100};
  cr_assert_eq(idem_connect(&o, &x.c, &e), IDEM_OK, "%s", e.message);
  long n = alloc_walk("journal_reconcile", &x, NULL, run_reconcile, check_reconcile);
  cr_assert_geq(n, 10); /* 6 getline calls (EOF included), 4 items */
  idem_close(x.c);
  unlink(x.path);
}

/* --- idem_fingerprint: allocates nothing --- */

static int run_fingerprint(void *p) {
  idem_fingerprint("abc", 3, p);
  return IDEM_OK;
}

static void check_fingerprint(void *p, int rc, bool failed, long n) {
  static const uint8_t want[4] = {0xba, 0x78, 0x16, 0xbf}; /* SHA-256("abc") */
  cr_assert_not(failed, "N = %ld: idem_fingerprint allocated", n);
  cr_assert_eq(memcmp(p, want, sizeof want), 0);
}

Test(client_alloc, fingerprint) {
  uint8_t fp[IDEM_FINGERPRINT_LEN];
  cr_assert_eq(alloc_walk("fingerprint", fp, NULL, run_fingerprint, check_fingerprint), 1);
}
