/* store_pg_bulk.c — ResolveSteps' answers by request id (schema version 6, idem_bulk): one row
 * per (tenant, request_id), written once; the sample as "gid/service/operation/phase" words
 * separated by spaces (neither character can appear in a key). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_pg_internal.h"

static const char SQL_BULK_GET[] =
    "SELECT batch_id, matched, resolved, sample FROM idem_bulk"
    " WHERE tenant = $1 AND request_id = $2";

static const char SQL_BULK_PUT[] =
    "INSERT INTO idem_bulk (tenant, request_id, batch_id, matched, resolved, sample, created_ms,"
    " expires_ms) VALUES ($1, $2, $3, $4, $5, $6, " PG_NOW_MS ", " PG_NOW_MS
    " + $7::bigint * 1000) ON CONFLICT DO NOTHING";

/* The sample's words into out->sample (a word that does not parse is skipped). */
static void sample_parse(const char *text, bulk_rec *out) {
  char words[BULK_SAMPLE_MAX * (REC_GLOBAL_ID_MAX + 2 * REC_NAME_MAX + 8)];
  snprintf(words, sizeof words, "%s", text);
  char *save = NULL;
  for (char *w = strtok_r(words, " ", &save); w && out->n_sample < BULK_SAMPLE_MAX;
       w = strtok_r(NULL, " ", &save)) {
    char *svc = strchr(w, '/'), *op = svc ? strchr(svc + 1, '/') : NULL;
    char *ph = op ? strchr(op + 1, '/') : NULL;
    if (!ph) continue;
    *svc++ = '\0';
    *op++ = '\0';
    *ph++ = '\0';
    step_key *k = &out->sample[out->n_sample++];
    memset(k, 0, sizeof *k);
    snprintf(k->global_id, sizeof k->global_id, "%s", w);
    snprintf(k->service, sizeof k->service, "%s", svc);
    snprintf(k->operation, sizeof k->operation, "%s", op);
    k->phase = ph[0] == '2' ? PHASE_COMPENSATION : PHASE_FORWARD;
  }
}

static void row_to_bulk(const PGresult *r, const char *tenant, const char *request_id,
                        bulk_rec *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->tenant, sizeof out->tenant, "%s", tenant);
  snprintf(out->request_id, sizeof out->request_id, "%s", request_id);
  snprintf(out->batch_id, sizeof out->batch_id, "%s", pg__str(r, 0, 0));
  out->matched = (uint32_t)pg__int(r, 0, 1);
  out->resolved = (uint32_t)pg__int(r, 0, 2);
  sample_parse(pg__str(r, 0, 3), out);
}

err_code pg__bulk_get(store *st, const char *tenant, const char *request_id, int64_t deadline,
                      bulk_rec *out, bool *found, err_t *err) {
  pg_store *s = (pg_store *)st;
  *found = false;
  pg_params p;
  pg__p_reset(&p);
  pg__p_text(&p, tenant);
  pg__p_text(&p, request_id);
  PGresult *res = NULL;
  err_code rc = pg__exec_call(s, SQL_BULK_GET, &p, deadline, &res, err);
  if (rc != ERR_OK) return rc;
  if (PQntuples(res) > 0) {
    row_to_bulk(res, tenant, request_id, out);
    *found = true;
  }
  PQclear(res);
  err_clear(err);
  return ERR_OK;
}

err_code pg__bulk_put(store *st, const bulk_rec *in, uint32_t keep_s, int64_t deadline,
                      bulk_rec *out, bool *stored, err_t *err) {
  *stored = false;
  char sample[BULK_SAMPLE_MAX * (REC_GLOBAL_ID_MAX + 2 * REC_NAME_MAX + 8)];
  size_t len = 0;
  sample[0] = '\0';
  for (size_t i = 0; i < in->n_sample && len < sizeof sample; i++) {
    const step_key *k = &in->sample[i];
    int n = snprintf(sample + len, sizeof sample - len, "%s%s/%s/%s/%d", i ? " " : "", k->global_id,
                     k->service, k->operation, (int)k->phase);
    len += n > 0 ? (size_t)n : 0;
  }
  pg_params p;
  pg__p_reset(&p);
  pg__p_text(&p, in->tenant);
  pg__p_text(&p, in->request_id);
  pg__p_text(&p, in->batch_id);
  pg__p_i64(&p, in->matched);
  pg__p_i64(&p, in->resolved);
  pg__p_text(&p, sample);
  pg__p_i64(&p, keep_s);
  err_code rc = pg__exec_call((pg_store *)st, SQL_BULK_PUT, &p, deadline, NULL, err);
  if (rc != ERR_OK) return rc;
  bool found = false;
  /* ON CONFLICT DO NOTHING wrote nothing when a twin stored first: read back what is there */
  rc = pg__bulk_get(st, in->tenant, in->request_id, deadline, out, &found, err);
  if (rc != ERR_OK) return rc;
  if (!found) return err_set(err, ERR_INTERNAL, "bulk answer not found after insert");
  *stored = strcmp(out->batch_id, in->batch_id) == 0;
  return ERR_OK;
}
