/* node_sec.h — the node's security wiring: the TLS files and the tokens file, read and
 * checked before anything starts, what the log says about them, and the SIGHUP reload. */
#ifndef IDEM_NODE_SEC_H
#define IDEM_NODE_SEC_H

#include <stdbool.h>
#include <stddef.h>

#include "../auth/auth.h"
#include "../auth/tls_files.h"

typedef struct node_sec_paths {
  const char *tls_cert, *tls_key, *tls_client_ca, *tokens; /* NULL = not given */
} node_sec_paths;

/* Checks the flags' combinations, reads the TLS files into *tls and opens the tokens file into
 * *tokens (NULL when none). Returns 0; or -1 with msg holding the usage error, naming the flag
 * (e.g. "--tls-key /etc/idem/key.pem: cannot open: No such file or directory"; never a token),
 * and nothing left allocated. */
int node_sec_setup(const node_sec_paths *p, tls_files *tls, auth_keyring **tokens, char *msg,
                   size_t n);

/* Logs (after log_init) what is on: TLS, client certificates, how many tokens, or that
 * authentication is off; warns when tokens would cross a non-local network in plaintext, and
 * when the tokens file is open to group or others. */
void node_sec_log(const node_sec_paths *p, auth_keyring *tokens, bool local_listen);

/* SIGHUP: re-reads the tokens file; on failure the tokens in force stay, and the error (never
 * a token) is logged. tokens NULL: logs that there is nothing to reload. */
void node_sec_reload(auth_keyring *tokens);

#endif
