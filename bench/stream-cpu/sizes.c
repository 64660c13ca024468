/* sizes.c — the packed sizes of one typical step's four messages, from real idem.v1 messages
 * packed with protobuf-c. The step is saga-examples/payment's charge, as libidem sends it:
 * a UUIDv7 global id (what BeginSaga hands out), service "payment", operation "charge", the
 * forward phase, a 32-byte fingerprint (idem_fingerprint, SHA-256), a 30 s lease; the first
 * attempt proceeds, then completes SUCCEEDED with code 200 and a 64-byte JSON body, and
 * CompleteStep answers the whole record (key, state, fingerprint, result with its body, times,
 * tenant) as the coordinator does. Times are 13-digit Unix milliseconds. */
#include "stream_cpu.h"

#include <string.h>

#include "idem/v1/coordinator.pb-c.h"

#define GID "01938f3a-6b2c-7d4e-9f10-2a3b4c5d6e7f"
#define NOW_MS 1764943019123LL
#define BODY "{\"charge_id\":\"ch_01JE8X3K4T\",\"amount_cents\":4200,\"status\":\"ok\"}"

static size_t packed(const ProtobufCMessage *m) {
  return protobuf_c_message_get_packed_size(m);
}

void sc_step_sizes(sc_sizes *out) {
  uint8_t fp[32];
  memset(fp, 0xa7, sizeof fp);
  Idem__V1__StepKey key = IDEM__V1__STEP_KEY__INIT;
  key.global_id = GID;
  key.service = "payment";
  key.operation = "charge";
  key.phase = IDEM__V1__PHASE__PHASE_FORWARD;

  Idem__V1__BeginStepRequest breq = IDEM__V1__BEGIN_STEP_REQUEST__INIT;
  breq.key = &key;
  breq.fingerprint.data = fp;
  breq.fingerprint.len = sizeof fp;
  breq.lease_ms = 30000;
  Idem__V1__BeginStepResponse bresp = IDEM__V1__BEGIN_STEP_RESPONSE__INIT;
  bresp.decision = IDEM__V1__DECISION__DECISION_PROCEED;
  bresp.attempt = 1;
  bresp.lease_expires_unix_ms = NOW_MS + 30000;
  bresp.expires_unix_ms = NOW_MS + 7LL * 24 * 3600 * 1000;

  Idem__V1__CompleteStepRequest creq = IDEM__V1__COMPLETE_STEP_REQUEST__INIT;
  creq.key = &key;
  creq.attempt = 1;
  creq.outcome = IDEM__V1__OUTCOME__OUTCOME_SUCCEEDED;
  creq.code = 200;
  creq.body.data = (uint8_t *)BODY;
  creq.body.len = strlen(BODY);
  Idem__V1__StepResult res = IDEM__V1__STEP_RESULT__INIT;
  res.outcome = IDEM__V1__OUTCOME__OUTCOME_SUCCEEDED;
  res.code = 200;
  res.body = creq.body;
  res.completed_unix_ms = NOW_MS + 41;
  Idem__V1__StepRecord rec = IDEM__V1__STEP_RECORD__INIT;
  rec.key = &key;
  rec.state = IDEM__V1__STEP_STATE__STEP_STATE_SUCCEEDED;
  rec.attempt = 1;
  rec.fingerprint = breq.fingerprint;
  rec.result = &res;
  rec.created_unix_ms = NOW_MS;
  rec.updated_unix_ms = NOW_MS + 41;
  rec.expires_unix_ms = bresp.expires_unix_ms;
  rec.tenant = "shop";
  Idem__V1__CompleteStepResponse cresp = IDEM__V1__COMPLETE_STEP_RESPONSE__INIT;
  cresp.record = &rec;

  out->size[SC_BEGIN][0] = packed(&breq.base);
  out->size[SC_BEGIN][1] = packed(&bresp.base);
  out->size[SC_COMPLETE][0] = packed(&creq.base);
  out->size[SC_COMPLETE][1] = packed(&cresp.base);
}
