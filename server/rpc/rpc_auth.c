/* rpc_auth.c — security on the gRPC side: the server's TLS credentials and, per
 * call, the raw inputs auth_decide needs (authorization metadata, the verified client
 * certificate's name). The rules themselves live in auth/. */
#include <grpc/grpc_security.h>
#include <stdio.h>
#include <string.h>

#include "rpc_internal.h"

#define AUTHORIZATION_MD "authorization"
#define CERT_NAME_MAX 256 /* longer names are cut one past the tenant limit: refused anyway */

grpc_server_credentials *rpc__server_credentials(const rpc_config *cfg) {
  if (!cfg->tls_cert_pem) return grpc_insecure_server_credentials_create();
  grpc_ssl_pem_key_cert_pair pair = {.private_key = cfg->tls_key_pem,
                                     .cert_chain = cfg->tls_cert_pem};
  /* with a client CA: every client must present a certificate it signed; there is no mode
   * that accepts an unverified one */
  grpc_ssl_client_certificate_request_type req =
      cfg->tls_client_ca_pem ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                             : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  return grpc_ssl_server_credentials_create_ex(cfg->tls_client_ca_pem, &pair, 1, req, NULL);
}

auth_access rpc__access(const char *path) {
  if (strcmp(path, "/grpc.health.v1.Health/Check") == 0) return AUTH_ACCESS_OPEN;
  if (strcmp(path, "/idem.v1.Admin/GetStatus") == 0) return AUTH_ACCESS_SERVICE;
  /* slots serve every tenant: moving them is not a tenant's admin's call (§18) */
  if (strcmp(path, "/idem.v1.Admin/MoveSlots") == 0) return AUTH_ACCESS_OPERATOR;
  if (strncmp(path, "/idem.v1.Admin/", 15) == 0) return AUTH_ACCESS_ADMIN;
  return AUTH_ACCESS_SERVICE;
}

/* The verified client certificate's first SAN entry, else its CN, into buf; false when the
 * connection has no authenticated client certificate. */
static bool cert_name(grpc_call *call, char *buf, size_t cap, size_t *len) {
  grpc_auth_context *ctx = grpc_call_auth_context(call);
  if (!ctx) return false;
  const grpc_auth_property *p = NULL;
  if (grpc_auth_context_peer_is_authenticated(ctx)) {
    grpc_auth_property_iterator it =
        grpc_auth_context_find_properties_by_name(ctx, GRPC_X509_SAN_PROPERTY_NAME);
    p = grpc_auth_property_iterator_next(&it);
    if (!p) {
      it = grpc_auth_context_find_properties_by_name(ctx, GRPC_X509_CN_PROPERTY_NAME);
      p = grpc_auth_property_iterator_next(&it);
    }
  }
  if (p) {
    size_t n = p->value_length < cap ? p->value_length : cap;
    memcpy(buf, p->value, n);
    *len = n;
  }
  grpc_auth_context_release(ctx);
  return p != NULL;
}

err_code rpc__authenticate(rpc_call *c, char *tenant, size_t cap, err_t *err) {
  const auth_config *cfg = c->srv->auth;
  auth_input in = {0};
  for (size_t i = 0; i < c->md.count; i++) {
    if (grpc_slice_str_cmp(c->md.metadata[i].key, AUTHORIZATION_MD) != 0) continue;
    if (in.n_authorization++ == 0) {
      in.authorization = (const char *)GRPC_SLICE_START_PTR(c->md.metadata[i].value);
      in.authorization_len = GRPC_SLICE_LENGTH(c->md.metadata[i].value);
    }
  }
  char name[CERT_NAME_MAX];
  if (cfg->mtls && cert_name(c->call, name, sizeof name, &in.cert_name_len)) in.cert_name = name;
  auth_identity id;
  err_code rc = auth_decide(cfg, rpc__access(rpc__methods[c->method].path), &in, &id, err);
  if (rc == ERR_OK) snprintf(tenant, cap, "%s", id.tenant);
  return rc;
}
