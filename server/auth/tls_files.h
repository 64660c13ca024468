/* tls_files.h — the server's TLS files (--tls-cert, --tls-key, --tls-client-ca), read and
 * checked at start-up with OpenSSL so that a wrong file is a clear error naming its flag,
 * not a failed bind later. No gRPC here: rpc/ builds the credentials from the PEM text. */
#ifndef IDEM_TLS_FILES_H
#define IDEM_TLS_FILES_H

#include <stddef.h>

typedef enum tls_file_which { TLS_FILE_CERT, TLS_FILE_KEY, TLS_FILE_CLIENT_CA } tls_file_which;

typedef struct tls_files {
  char *cert_pem;      /* certificate chain, PEM; owned */
  char *key_pem;       /* private key, PEM; owned, wiped by tls_files_clear */
  char *client_ca_pem; /* NULL when no client CA was given; owned */
} tls_files;

/* Reads cert_path and key_path (both required) and client_ca_path (NULL = none). Checks that
 * the certificate and CA files hold PEM certificates, that the key file holds a PEM private
 * key, and that the key belongs to the certificate. Returns 0; or -1 with *which naming the
 * file at fault and msg (no path, e.g. "cannot open: No such file or directory"), and *out
 * left empty. */
int tls_files_load(const char *cert_path, const char *key_path, const char *client_ca_path,
                   tls_files *out, tls_file_which *which, char *msg, size_t msg_len);

/* Frees (and wipes the key of) what tls_files_load filled; safe on a zeroed struct. */
void tls_files_clear(tls_files *f);

#endif
