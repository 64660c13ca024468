/* rpc_methods.c — the method table: every method the server registers, with its request
 * message and handler. Paths are "/package.Service/Method" (docs/api.md §2). The reads whose
 * replies run to megabytes are marked `bulky` (rpc_internal.h: RPC_REPLY_BUFFER_MAX). */
#include "grpc/health/v1/health.pb-c.h"
#include "idem/v1/coordinator.pb-c.h"
#include "rpc_internal.h"

/* --- routes (docs/api.md §17): the saga a request names --- */

static const char *key_id(const Idem__V1__StepKey *k) {
  return k && k->global_id ? k->global_id : "";
}
static const char *saga_request(const ProtobufCMessage *in) {
  const char *r = ((const Idem__V1__BeginSagaRequest *)in)->request_id;
  return r ? r : "";
}
static const char *begin_step(const ProtobufCMessage *in) {
  return key_id(((const Idem__V1__BeginStepRequest *)in)->key);
}
static const char *complete_step(const ProtobufCMessage *in) {
  return key_id(((const Idem__V1__CompleteStepRequest *)in)->key);
}
static const char *extend_lease(const ProtobufCMessage *in) {
  return key_id(((const Idem__V1__ExtendLeaseRequest *)in)->key);
}
static const char *lookup_step(const ProtobufCMessage *in) {
  return key_id(((const Idem__V1__LookupStepRequest *)in)->key);
}
static const char *resolve_step(const ProtobufCMessage *in) {
  return key_id(((const Idem__V1__ResolveStepRequest *)in)->key);
}
static const char *get_saga(const ProtobufCMessage *in) {
  const char *g = ((const Idem__V1__GetSagaRequest *)in)->global_id;
  return g ? g : "";
}
/* a list of one saga's steps or audit goes to its group; without one: not routed */
static const char *list_steps(const ProtobufCMessage *in) {
  const char *g = ((const Idem__V1__ListStepsRequest *)in)->global_id;
  return g ? g : "";
}
static const char *list_audit(const ProtobufCMessage *in) {
  const char *g = ((const Idem__V1__ListAuditRequest *)in)->global_id;
  return g ? g : "";
}

#define COORD "/idem.v1.Coordinator/"
#define ADMIN "/idem.v1.Admin/"

const rpc_method rpc__methods[] = {
    {COORD "BeginSaga", &idem__v1__begin_saga_request__descriptor, rpc__begin_saga, NULL, false,
     saga_request, true, false},
    /* with submit_steps, no worker (replays from the cache on the cq thread) */
    {COORD "BeginStep", &idem__v1__begin_step_request__descriptor, rpc__begin_step,
     rpc__begin_step_async, false, begin_step, false, false},
    {COORD "CompleteStep", &idem__v1__complete_step_request__descriptor, rpc__complete_step,
     rpc__complete_step_async, false, complete_step, false, false},
    {COORD "ExtendLease", &idem__v1__extend_lease_request__descriptor, rpc__extend_lease, NULL,
     false, extend_lease, false, false},
    {COORD "LookupStep", &idem__v1__lookup_step_request__descriptor, rpc__lookup_step, NULL, false,
     lookup_step, false, false},
    {COORD "GetSaga", &idem__v1__get_saga_request__descriptor, rpc__get_saga, NULL, true, get_saga,
     false, false},
    {COORD "GetPolicy", &idem__v1__get_policy_request__descriptor, rpc__get_policy, NULL, false,
     NULL, false, false},
    {COORD "GetTopology", &idem__v1__get_topology_request__descriptor, rpc__get_topology, NULL,
     false, NULL, false, false},

    {ADMIN "ListSteps", &idem__v1__list_steps_request__descriptor, rpc__list_steps, NULL, true,
     list_steps, false, false},
    {ADMIN "ResolveStep", &idem__v1__resolve_step_request__descriptor, rpc__resolve_step, NULL,
     false, resolve_step, false, false},
    {ADMIN "SetPolicy", &idem__v1__policy__descriptor, rpc__set_policy, NULL, false, NULL, false,
     false},
    {ADMIN "DeletePolicy", &idem__v1__delete_policy_request__descriptor, rpc__delete_policy, NULL,
     false, NULL, false, false},
    {ADMIN "ListPolicies", &idem__v1__list_policies_request__descriptor, rpc__list_policies, NULL,
     false, NULL, false, false},
    {ADMIN "ListAudit", &idem__v1__list_audit_request__descriptor, rpc__list_audit, NULL, true,
     list_audit, false, false},
    {ADMIN "GetStatus", &idem__v1__get_status_request__descriptor, rpc__get_status, NULL, false,
     NULL, false, false},
    {ADMIN "ResolveSteps", &idem__v1__resolve_steps_request__descriptor, rpc__resolve_steps, NULL,
     false, NULL, false, true},
    {ADMIN "MoveSlots", &idem__v1__move_slots_request__descriptor, rpc__move_slots, NULL, false,
     NULL, false, false},

    {"/grpc.health.v1.Health/Check", &grpc__health__v1__health_check_request__descriptor,
     rpc__health_check, NULL, false, NULL, false, false},
};

#define N_METHODS (sizeof rpc__methods / sizeof rpc__methods[0])
_Static_assert(N_METHODS <= RPC_MAX_METHODS, "raise RPC_MAX_METHODS");

const size_t rpc__n_methods = N_METHODS;
