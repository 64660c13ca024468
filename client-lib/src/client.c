/* client.c — idem_connect and idem_close: idem_options checked and copied into the client, and
 * its parts made (the transport, the routes to the coordinators, the policy cache) or freed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem_internal.h"

#define DEFAULT_DEADLINE_MS 2000
#define DEFAULT_POLICY_REFRESH_MS 30000

const char *idem__client_tenant(const idem_client *c) {
  return c->tenant ? c->tenant : "default";
}

/* Frees the client and its parts (NULL ones skipped). The token is wiped first. */
static void free_client(idem_client *c) {
  idem__route_free(c->route); /* the channels, before the transport ends gRPC */
  idem__transport_close(c->tp);
  if (c->auth) memset(c->auth, 0, strlen(c->auth));
  free(c->auth);
  free(c->tenant);
  free(c->journal_path);
  idem__pcache_free(c->pcache);
  free(c);
}

int idem_connect(const idem_options *opt, idem_client **out, idem_error *err) {
  idem__err_reset(err);
  if (out) *out = NULL;
  if (!out) return idem__fail(err, IDEM_INVALID_ARGUMENT, "out is null");
  if (!opt || !opt->address || !*opt->address)
    return idem__fail(err, IDEM_INVALID_ARGUMENT, "address is missing");
  if (opt->deadline_ms < 0)
    return idem__fail(err, IDEM_INVALID_ARGUMENT, "deadline_ms is negative");

  idem_client *c = calloc(1, sizeof *c);
  if (!c) return idem__fail(err, IDEM_NOMEM, "out of memory");
  c->deadline_ms = opt->deadline_ms > 0 ? opt->deadline_ms : DEFAULT_DEADLINE_MS;
  if (opt->tenant && !(c->tenant = strdup(opt->tenant))) goto nomem;
  c->policy_refresh_ms =
      opt->policy_refresh_ms ? opt->policy_refresh_ms : DEFAULT_POLICY_REFRESH_MS;
  if (opt->journal_path && *opt->journal_path && !(c->journal_path = strdup(opt->journal_path)))
    goto nomem;
  if (!(c->pcache = idem__pcache_new())) goto nomem;
  if (opt->token) {
    size_t n = strlen(opt->token) + sizeof "Bearer ";
    if (!(c->auth = malloc(n))) goto nomem;
    snprintf(c->auth, n, "Bearer %s", opt->token);
  }
  int rc = idem__transport_open(opt, &c->tp, err); /* reads the TLS files */
  if (rc == IDEM_OK && !(c->route = idem__route_new(c->tp)))
    rc = idem__fail(err, IDEM_NOMEM, "out of memory");
  /* "h1:p1,h2:p2": every address gets its channel now */
  if (rc == IDEM_OK) rc = idem__route_add_list(c->route, opt->address, err);
  if (rc != IDEM_OK) {
    free_client(c);
    return rc;
  }
  *out = c;
  return IDEM_OK;

nomem:
  free_client(c);
  return idem__fail(err, IDEM_NOMEM, "out of memory");
}

void idem_close(idem_client *c) {
  if (c) free_client(c);
}
