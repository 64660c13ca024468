/* values.c — names of the contract's enums, the *_clear functions, the fingerprint. */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "idem/v1/names.h"
#include "idem_internal.h"

void idem__result_clear(idem_result *r) {
  if (!r) return;
  free(r->body);
  memset(r, 0, sizeof *r);
}

/* The words are names.h's, shared with the server and idemctl. */
const char *idem_state_name(int state) {
  return idem_word_state(state);
}

const char *idem_outcome_name(int outcome) {
  return idem_word_outcome(outcome);
}

const char *idem_decision_name(int decision) {
  return idem_word_decision(decision);
}

void idem_begin_clear(idem_begin *b) {
  if (!b) return;
  idem__result_clear(&b->result);
  memset(b, 0, sizeof *b);
}

void idem_record_clear(idem_record *r) {
  if (!r) return;
  idem__result_clear(&r->result);
  memset(r, 0, sizeof *r);
}

void idem_saga_clear(idem_saga *s) {
  if (!s) return;
  free(s->saga_type);
  for (size_t i = 0; i < s->n_steps; i++) idem_record_clear(&s->steps[i]);
  free(s->steps);
  for (size_t i = 0; i < s->n_labels; i++) {
    free((char *)s->labels[i].key);
    free((char *)s->labels[i].value);
  }
  free(s->labels);
  memset(s, 0, sizeof *s);
}

void idem_run_report_clear(idem_run_report *r) {
  if (!r) return;
  idem__result_clear(&r->result);
  memset(r, 0, sizeof *r);
}

void idem_fingerprint(const void *data, size_t len, uint8_t out[IDEM_FINGERPRINT_LEN]) {
  unsigned int n = 0;
  if (!data) {
    data = "";
    len = 0;
  }
  if (!EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) || n != IDEM_FINGERPRINT_LEN)
    memset(out, 0, IDEM_FINGERPRINT_LEN); /* unreachable with a working libcrypto */
}
