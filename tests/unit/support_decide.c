/* support_decide.c — see support_decide.h. */
#include "support_decide.h"

#include <criterion/criterion.h>
#include <string.h>

uint8_t sd_stored_body[12] = "stored-body";

step_key sd_key_svc(const char *service, step_phase ph) {
  step_key k;
  memset(&k, 0, sizeof k);
  strcpy(k.tenant, "acme");
  strcpy(k.global_id, "g-1");
  strcpy(k.service, service);
  strcpy(k.operation, "charge");
  k.phase = ph;
  return k;
}

step_key sd_key(step_phase ph) {
  return sd_key_svc(SD_SERVICE, ph);
}

step_rec sd_rec(step_phase ph, step_state st, uint64_t attempt, const char *fp) {
  step_rec r;
  memset(&r, 0, sizeof r);
  r.present = true;
  r.key = sd_key(ph);
  r.state = st;
  r.attempt = attempt;
  if (fp) {
    r.fp_len = strlen(fp);
    memcpy(r.fp, fp, r.fp_len);
  }
  r.created_ms = SD_NOW - 9000;
  r.updated_ms = SD_NOW - 8000;
  if (st == STATE_IN_PROGRESS) r.lease_expires_ms = SD_NOW + 1234;
  if (st != STATE_IN_PROGRESS) r.expires_ms = SD_NOW + 3600000;
  return r;
}

void sd_with_result(step_rec *r, step_outcome o, int32_t code) {
  r->outcome = o;
  r->code = code;
  r->body = sd_stored_body;
  r->body_len = sizeof sd_stored_body - 1;
  r->completed_ms = SD_NOW - 7000;
}

void sd_assert_fp(const step_rec *r, const char *fp) {
  cr_assert_eq(r->fp_len, strlen(fp));
  cr_assert(memcmp(r->fp, fp, r->fp_len) == 0);
}

void sd_assert_err(err_code rc, const err_t *err, err_code want, const char *needle) {
  cr_assert_eq(rc, want, "rc %d (want %d): %s", rc, want, err->msg);
  cr_assert(strstr(err->msg, needle), "message \"%s\" lacks \"%s\"", err->msg, needle);
}

void sd_fail_open_policy(void *arg, const char *tenant, const char *service, const char *operation,
                         policy *out) {
  (void)arg;
  (void)tenant;
  policy_default(service, operation, out);
  out->mode = FAILURE_MODE_FAIL_OPEN;
}
