/* auth_decide.c — who is calling and whether the method is allowed (auth.h: auth_decide). */
#include <string.h>
#include <strings.h>

#include "../validate/validate.h"
#include "auth.h"

bool auth_enabled(const auth_config *cfg) {
  return cfg && (cfg->tokens || cfg->mtls);
}

/* "Bearer TOKEN" (the scheme is case-insensitive, RFC 7235) → the token; false when the value
 * has another form. */
static bool bearer(const char *v, size_t n, const char **tok, size_t *tok_len) {
  static const char scheme[] = "bearer";
  size_t sl = sizeof scheme - 1;
  if (n <= sl + 1 || strncasecmp(v, scheme, sl) != 0 || v[sl] != ' ') return false;
  size_t i = sl;
  while (i < n && v[i] == ' ') i++;
  size_t end = n;
  while (end > i && v[end - 1] == ' ') end--;
  if (end == i) return false;
  *tok = v + i;
  *tok_len = end - i;
  return true;
}

/* The token's identity; ERR_UNAUTHENTICATED "invalid token" whatever is wrong with it. */
static err_code by_token(auth_keyring *k, const auth_input *in, auth_identity *out, err_t *err) {
  if (in->n_authorization > 1)
    return err_set(err, ERR_UNAUTHENTICATED, "authorization metadata: given more than once");
  const char *tok;
  size_t len;
  if (!bearer(in->authorization, in->authorization_len, &tok, &len))
    return err_set(err, ERR_UNAUTHENTICATED, "invalid token: expected authorization: Bearer TOKEN");
  auth_tokens *t = auth_keyring_acquire(k);
  bool ok = len <= AUTH_TOKEN_MAX && auth_tokens_lookup(t, tok, len, out->tenant, &out->role);
  auth_tokens_release(t);
  if (!ok) return err_set(err, ERR_UNAUTHENTICATED, "invalid token");
  return ERR_OK;
}

bool auth_name_listed(const char *list, const char *name, size_t len) {
  for (const char *p = list; p && *p;) {
    size_t n = strcspn(p, ",");
    if (n == len && n > 0 && memcmp(p, name, len) == 0) return true;
    p += n;
    if (*p == ',') p++;
  }
  return false;
}

/* The client certificate's identity: the role the tokens file maps its name to, else operator
 * when operators lists its name, else service. */
static err_code by_cert(const auth_input *in, auth_keyring *tokens, const char *operators,
                        auth_identity *out, err_t *err) {
  if (!in->cert_name) return err_set(err, ERR_UNAUTHENTICATED, "missing credentials");
  err_t terr;
  err_clear(&terr);
  if (in->cert_name_len > REC_GLOBAL_ID_MAX || memchr(in->cert_name, '\0', in->cert_name_len)) {
    validate_tenant("", &terr);
  } else {
    memcpy(out->tenant, in->cert_name, in->cert_name_len);
    out->tenant[in->cert_name_len] = '\0';
    validate_tenant(out->tenant, &terr);
  }
  if (terr.code != ERR_OK)
    return err_set(err, ERR_UNAUTHENTICATED, "client certificate: %s", terr.msg);
  size_t len = strlen(out->tenant);
  auth_tokens *t = tokens ? auth_keyring_acquire(tokens) : NULL;
  bool mapped = auth_tokens_cert_role(t, out->tenant, len, &out->role);
  auth_tokens_release(t);
  if (!mapped)
    out->role = auth_name_listed(operators, out->tenant, len) ? AUTH_ROLE_OPERATOR
                                                             : AUTH_ROLE_SERVICE;
  return ERR_OK;
}

err_code auth_decide(const auth_config *cfg, auth_access access, const auth_input *in,
                     auth_identity *out, err_t *err) {
  memset(out, 0, sizeof *out);
  if (access == AUTH_ACCESS_OPEN) {
    strcpy(out->tenant, "default");
    out->role = AUTH_ROLE_NONE;
    return ERR_OK;
  }
  if (!auth_enabled(cfg)) return err_set(err, ERR_INTERNAL, "authentication is not configured");
  err_code rc;
  if (cfg->tokens && in->n_authorization > 0)
    rc = by_token(cfg->tokens, in, out, err);
  else if (cfg->mtls)
    rc = by_cert(in, cfg->tokens, cfg->operators, out, err);
  else
    rc = err_set(err, ERR_UNAUTHENTICATED, "missing credentials");
  if (rc != ERR_OK) {
    memset(out, 0, sizeof *out);
    return rc;
  }
  if (access == AUTH_ACCESS_ADMIN && !auth_role_at_least(out->role, AUTH_ROLE_ADMIN))
    return err_set(err, ERR_PERMISSION,
                   "admin role required: this call needs a token with role admin");
  if (access == AUTH_ACCESS_OPERATOR && !auth_role_at_least(out->role, AUTH_ROLE_OPERATOR))
    return err_set(err, ERR_PERMISSION,
                   "operator role required: this call changes every tenant's slots and needs a "
                   "token with role operator or a client certificate mapped to it (a tokens "
                   "file's cert line, or --operators) "
                   "(role %s)",
                   auth_role_name(out->role));
  return ERR_OK;
}
