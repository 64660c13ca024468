/* sec.h — security tests: certificates made at run time with the openssl CLI, a
 * tokens file, and coordinators started with TLS, client certificates and tokens through the
 * shared harness (tests/support/harness.h, the idem_test_harness library).
 *
 * Each test makes its own PKI in a fresh temporary directory, with tenant names unique to the
 * test, so tests share the database and run in parallel.
 */
#ifndef IDEM_TEST_SEC_H
#define IDEM_TEST_SEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

#define SEC_PATH 256

typedef struct sec_pair {
  char cert[SEC_PATH];
  char key[SEC_PATH];
} sec_pair;

typedef struct sec_pki {
  char dir[64];
  char ca[SEC_PATH];       /* the CA that signs the server and the good clients */
  char other_ca[SEC_PATH]; /* an unrelated CA */
  sec_pair server;         /* SAN IP:127.0.0.1, DNS:localhost */
  sec_pair client_san;     /* SAN DNS:<tenant_san> (CN something else) */
  sec_pair client_cn;      /* CN <tenant_cn>, no SAN */
  sec_pair client_other;   /* SAN DNS:<tenant_san>, signed by other_ca */
  char tenant_san[64];
  char tenant_cn[64];
} sec_pki;

/* Makes the temporary directory and every certificate (fails the test on error). */
void sec_pki_make(sec_pki *p);

/* Removes the directory and what is in it. */
void sec_pki_free(sec_pki *p);

/* A token of 40 random hex characters with a prefix (the prefix helps reading failures). */
void sec_token(const char *prefix, char out[64]);

/* Writes lines (NULL-terminated list) to path atomically (a temporary file, then rename). */
void sec_write_file(const char *path, const char *const *lines);

/* Client options for s: TLS verified with ca (NULL = plaintext), client pair (NULL = none),
 * token (NULL = none), idem-tenant (NULL = none). Strings are borrowed. */
idem_options sec_opts(const srv *s, const char *ca, const sec_pair *client, const char *token,
                      const char *tenant);

/* idem_connect with o (fails the test on error). */
idem_client *sec_connect(const idem_options *o);

/* Starts idem-coordinator --pg $IDEM_TEST_PG_URL args... (NULL-terminated) with its output
 * into log (spawn_start); returns the pid (spawn_stop / spawn_wait end it). */
pid_t sec_spawn(const char *const *args, const char *log);

/* Runs idem-coordinator with args (NULL-terminated, after --pg) and waits up to 20 s for it to
 * exit; returns its exit status, its stderr in out. For start-up errors. */
int sec_run_to_exit(const char *const *args, char *out, size_t out_len);

/* Whether the file at path contains needle. */
bool sec_file_contains(const char *path, const char *needle);

/* Polls the file at path until it contains needle or timeout_ms pass. */
bool sec_wait_file_contains(const char *path, const char *needle, int64_t timeout_ms);

/* BeginStep + CompleteStep(SUCCEEDED) of (global_id, "pay", "charge") through c; asserts OK. */
void sec_step_done(idem_client *c, const char *global_id);

/* LookupStep of (global_id, "pay", "charge"): the code, and the record's tenant into tenant
 * (cap >= IDEM_GLOBAL_ID_MAX + 1) on OK. */
int sec_lookup(idem_client *c, const char *global_id, char *tenant, idem_error *e);

#endif
