/* support_decide.h — the keys, records and checks the decision tests share (test_decide.c,
 * test_decide_complete.c, test_coord_admin.c, test_store_faults.c).
 *
 * Every key is of tenant "acme", global id "g-1", operation "charge"; every record is seen at
 * the database clock SD_NOW.
 */
#ifndef IDEM_TEST_SUPPORT_DECIDE_H
#define IDEM_TEST_SUPPORT_DECIDE_H

#include <stdint.h>

#include "domain/policy.h"
#include "domain/record.h"
#include "util/err.h"

#define SD_NOW 1000000 /* the database clock of every pair */
#define SD_LEASE 5000u /* the lease a BeginStep asks for */
#define SD_RET_S 60u   /* the policy's retention */
#define SD_RET_END (SD_NOW + (int64_t)SD_RET_S * 1000)
#define SD_SERVICE "payments"

/* The key (acme, g-1, service, charge, ph). */
step_key sd_key_svc(const char *service, step_phase ph);
/* The key of service SD_SERVICE. */
step_key sd_key(step_phase ph);

/* A live record of sd_key(ph) with created/updated in the past: IN_PROGRESS with a lease
 * until SD_NOW + 1234, any other state retained until SD_NOW + 3600000; fingerprint fp (NULL:
 * none). No result. */
step_rec sd_rec(step_phase ph, step_state st, uint64_t attempt, const char *fp);

/* The body sd_with_result stores (not owned by the record). */
extern uint8_t sd_stored_body[12];

/* Gives r the result (o, code, sd_stored_body) completed at SD_NOW - 7000. */
void sd_with_result(step_rec *r, step_outcome o, int32_t code);

/* Asserts that r's fingerprint is fp. */
void sd_assert_fp(const step_rec *r, const char *fp);

/* Asserts that a decision answered want (rc and err->code) with needle in its message. */
void sd_assert_err(err_code rc, const err_t *err, err_code want, const char *needle);

/* A policy_resolve_fn: the built-in default made fail-open, for every operation. */
void sd_fail_open_policy(void *arg, const char *tenant, const char *service, const char *operation,
                         policy *out);

#endif
