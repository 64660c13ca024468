/* auth.h — who is calling (docs/api.md §9): bearer tokens, client-certificate identities, roles.
 *
 * Plain C over OpenSSL's libcrypto: no gRPC, no libpq. rpc/ extracts the raw inputs of a call
 * (the authorization metadata, the verified certificate's names, the idem-tenant metadata) and
 * asks auth_decide for the caller's tenant and role.
 *
 * Secrets: a token is never copied into a message, a log line or an error. The table keeps
 * only SHA-256 digests of the tokens (EVP), and a lookup compares the presented token's digest
 * with every entry with CRYPTO_memcmp, whether or not an earlier entry matched.
 *
 * The tokens file (--tokens FILE): one token a line,
 *     TOKEN TENANT ROLE          # a comment
 * separated by spaces or tabs; `#` starts a comment (so a token cannot contain `#`); blank
 * lines are fine. TOKEN: 16 to 256 printable ASCII characters without spaces; TENANT: the
 * tenant rule of docs/api.md §1; ROLE: `service`, `admin` or `operator`. A token may appear
 * once.
 *
 * Roles, each with the rights of the one before: service (the Coordinator service and
 * Admin.GetStatus), admin (every Admin call of its own tenant), operator (also the calls that
 * change the whole cluster, whatever tenant its rows belong to: Admin.MoveSlots, §18).
 */
#ifndef IDEM_AUTH_H
#define IDEM_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "../domain/record.h"
#include "../util/err.h"

#define AUTH_TOKEN_MIN 16
#define AUTH_TOKEN_MAX 256
#define AUTH_LINE_MAX 1024 /* longer lines in the tokens file are refused */

typedef enum auth_role {
  AUTH_ROLE_NONE = 0,    /* not authenticated (authentication off) */
  AUTH_ROLE_SERVICE = 1, /* the Coordinator service and Admin.GetStatus */
  AUTH_ROLE_ADMIN = 2,   /* every Admin call of its tenant */
  AUTH_ROLE_OPERATOR = 3, /* everything: an admin that may also change the whole cluster */
} auth_role;

/* "service" / "admin" / "operator" / "none"; never NULL. */
const char *auth_role_name(auth_role r);

/* Whether r has the rights of min (the roles are ordered: service < admin < operator). Compare
 * roles with this, never with ==, so that a higher role passes every check of a lower one. */
static inline bool auth_role_at_least(auth_role r, auth_role min) {
  return r >= min;
}

/* --- the token table: immutable once built, shared by reference count ------------------- */

typedef struct auth_tokens auth_tokens;

/* Parses the text of a tokens file (len bytes; NUL bytes are refused). name is used in
 * messages ("tokens.txt:3: role must be service, admin or operator"); messages carry the line number,
 * never the token. On success *out owns a table with one reference (release it). */
err_code auth_tokens_parse(const char *text, size_t len, const char *name, auth_tokens **out,
                           err_t *err);

/* Reads and parses path (at most 1 MiB). ERR_INVALID for a bad file or a file that cannot be
 * read; the message names the path. */
err_code auth_tokens_load(const char *path, auth_tokens **out, err_t *err);

/* Number of tokens in t (certificate lines not counted). */
size_t auth_tokens_count(const auth_tokens *t);

/* The role a "cert NAME ROLE" line of t gives the client certificate named name[0..len): true
 * with *role filled when there is one. Names are compared whole, case-sensitive. */
bool auth_tokens_cert_role(const auth_tokens *t, const char *name, size_t len, auth_role *role);

/* Looks token[0..len) up in constant time with respect to the table's contents: true with
 * tenant (a copy, NUL-terminated) and role filled when it is one of t's tokens. */
bool auth_tokens_lookup(const auth_tokens *t, const char *token, size_t len,
                        char tenant[REC_GLOBAL_ID_MAX + 1], auth_role *role);

/* Adds / drops a reference; the last release frees the table (wiping the digests). NULL ok. */
auth_tokens *auth_tokens_ref(auth_tokens *t);
void auth_tokens_release(auth_tokens *t);

/* --- the keyring: the current table of a tokens file, reloadable -------------------------- */

typedef struct auth_keyring auth_keyring;

/* Loads path; NULL with err filled when the file is unreadable or invalid. path is copied. */
auth_keyring *auth_keyring_open(const char *path, err_t *err);

/* Re-reads the file (SIGHUP). On success the new table replaces the old one atomically: calls
 * already holding the old table finish with it. On failure the old table stays in force and
 * err says why (no token in it). Thread-safe, also against auth_keyring_acquire. */
err_code auth_keyring_reload(auth_keyring *k, err_t *err);

/* The current table with a reference the caller releases (auth_tokens_release). Thread-safe. */
auth_tokens *auth_keyring_acquire(auth_keyring *k);

/* The file's path (as given). */
const char *auth_keyring_path(const auth_keyring *k);

/* Frees the keyring (tables still referenced live until released). NULL ok. */
void auth_keyring_free(auth_keyring *k);

/* --- the per-call decision ---------------------------------------------------------------- */

/* What a method needs. */
typedef enum auth_access {
  AUTH_ACCESS_OPEN,    /* grpc.health.v1.Health/Check: no credentials, ever */
  AUTH_ACCESS_SERVICE, /* idem.v1.Coordinator/ *, idem.v1.Admin/GetStatus: any role */
  AUTH_ACCESS_ADMIN,   /* every other idem.v1.Admin method: the admin role or above */
  AUTH_ACCESS_OPERATOR, /* idem.v1.Admin/MoveSlots: the operator role */
} auth_access;

/* The server's authentication setup. Both off = authentication off: then the tenant is the
 * idem-tenant metadata and every method is allowed (rpc/ handles that without auth_decide). */
typedef struct auth_config {
  auth_keyring *tokens; /* --tokens; NULL = none. Borrowed. */
  bool mtls;            /* --tls-client-ca: every connection carries a verified client cert */
  const char *operators; /* --operators NAME,...: client-certificate names with role operator
                            (compared whole, case-sensitive); NULL = none. Borrowed. */
} auth_config;

/* Whether name[0..len) is one of the comma-separated names of list (NULL: none is). */
bool auth_name_listed(const char *list, const char *name, size_t len);

/* Whether any authentication is configured (cfg may be NULL: off). */
bool auth_enabled(const auth_config *cfg);

/* The raw inputs of one call; strings are borrowed and need not be NUL-terminated. The
 * idem-tenant metadata is not among them: with authentication on it is ignored. */
typedef struct auth_input {
  int n_authorization;       /* how many authorization metadata entries came */
  const char *authorization; /* the first one's value, when n_authorization > 0 */
  size_t authorization_len;
  const char *cert_name; /* the verified client certificate's first SAN entry, else its CN;
                            NULL when the connection has no client certificate */
  size_t cert_name_len;
} auth_input;

typedef struct auth_identity {
  char tenant[REC_GLOBAL_ID_MAX + 1]; /* a valid tenant name */
  auth_role role;
} auth_identity;

/* Decides who is calling, for a server with authentication on (README "Security"):
 *  - a bearer token ("authorization: Bearer TOKEN"), when tokens are configured: its tenant and
 *    role; a wrong or malformed token is UNAUTHENTICATED "invalid token", never replaced by the
 *    certificate; more than one authorization entry is refused too;
 *  - no authorization, with mTLS: the certificate's name as the tenant (it must pass the tenant
 *    rule), with the role the tokens file's "cert NAME ROLE" line gives that name, else operator
 *    when cfg->operators lists the name, else service;
 *  - otherwise UNAUTHENTICATED "missing credentials".
 * Then ERR_PERMISSION (reason permission-denied) when the role is below what access needs
 * (ADMIN: admin or operator; OPERATOR: operator), the message naming the role needed.
 * AUTH_ACCESS_OPEN answers
 * ERR_OK with tenant "default" and role NONE whatever came. Messages never contain the token. */
err_code auth_decide(const auth_config *cfg, auth_access access, const auth_input *in,
                     auth_identity *out, err_t *err);

#endif
