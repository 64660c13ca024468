/* rpc_convert.h — protobuf <-> coord/record conversions shared by the handlers of rpc/.
 * Outgoing messages borrow strings and bodies from the record they were built from: encode
 * them before that record is cleared. */
#ifndef IDEM_RPC_CONVERT_H
#define IDEM_RPC_CONVERT_H

#include "../coord/coord.h"
#include "../coord/coord_admin.h"
#include "../domain/record.h"
#include "idem/v1/coordinator.pb-c.h"

/* A StepRecord and the submessages it points to. */
typedef struct rpc_rec_pb {
  Idem__V1__StepRecord rec;
  Idem__V1__StepKey key;
  Idem__V1__StepResult result;
} rpc_rec_pb;

/* The resolution every resolving request carries (ResolveStepRequest, ResolveStepsRequest: the
 * same field names), as designated initializers of coord_resolve_in / coord_bulk_in. */
#define RPC_RESOLUTION_FIELDS(req)                                               \
  .outcome = (int)(req)->outcome, .code = (req)->code, .body = (req)->body.data, \
  .body_len = (req)->body.len, .reason = (req)->reason, .actor = (req)->actor

/* The protobuf view of a key (strings borrowed from k). */
Idem__V1__StepKey rpc__key_to_pb(const step_key *k);
/* Fills o from r; o borrows r's strings, fingerprint and body. */
void rpc__rec_to_pb(const step_rec *r, rpc_rec_pb *o);

/* n records as protobuf, and the pointer array a response's repeated field takes (both NULL
 * when n == 0); they borrow from recs. false when out of memory. Free with rpc__recs_pb_free. */
typedef struct rpc_recs_pb {
  rpc_rec_pb *items;
  Idem__V1__StepRecord **ptrs;
} rpc_recs_pb;
bool rpc__recs_to_pb(const step_rec *recs, size_t n, rpc_recs_pb *out);
void rpc__recs_pb_free(rpc_recs_pb *p);

/* The encoded size of r as one element of a repeated StepRecord field (coord_rec_size_fn: the
 * byte bound of ListSteps and GetSaga pages). */
size_t rpc__rec_size(const step_rec *r);

/* ListStepsRequest's filters and page as coord takes them (a missing one: all zero); strings
 * borrowed from req. (rpc_admin_steps.c) */
coord_list_in rpc__list_in(const Idem__V1__ListStepsRequest *req);

/* A handler's last step when its answer is one StepRecord: on rc == ERR_OK replies with *out;
 * clears *out either way. Returns the call's code. (rpc_handlers.c) */
struct rpc_call;
err_code rpc__reply_record(struct rpc_call *c, err_code rc, step_rec *out, err_t *err);

/* A StepKey as coord takes it; a missing key reads as all-empty strings, so validation then
 * names key.global_id. Borrows k's strings. */
coord_key_in rpc__key_in(const Idem__V1__StepKey *k);

#endif
