/* rpc_methods.c — the method table: every method the server registers, with its request
 * message and handler. Paths are "/package.Service/Method" (docs/api.md §2). The reads whose
 * replies run to megabytes are marked `bulky` (rpc_internal.h: RPC_REPLY_BUFFER_MAX). */
#include "grpc/health/v1/health.pb-c.h"
#include "idem/v1/coordinator.pb-c.h"
#include "rpc_internal.h"

#define COORD "/idem.v1.Coordinator/"
#define ADMIN "/idem.v1.Admin/"

const rpc_method rpc__methods[] = {
    {COORD "BeginSaga", &idem__v1__begin_saga_request__descriptor, rpc__begin_saga, NULL, false},
    /* with submit_steps, no worker (replays from the cache on the cq thread) */
    {COORD "BeginStep", &idem__v1__begin_step_request__descriptor, rpc__begin_step,
     rpc__begin_step_async, false},
    {COORD "CompleteStep", &idem__v1__complete_step_request__descriptor, rpc__complete_step,
     rpc__complete_step_async, false},
    {COORD "ExtendLease", &idem__v1__extend_lease_request__descriptor, rpc__extend_lease, NULL,
     false},
    {COORD "LookupStep", &idem__v1__lookup_step_request__descriptor, rpc__lookup_step, NULL, false},
    {COORD "GetSaga", &idem__v1__get_saga_request__descriptor, rpc__get_saga, NULL, true},
    {COORD "GetPolicy", &idem__v1__get_policy_request__descriptor, rpc__get_policy, NULL, false},

    {ADMIN "ListSteps", &idem__v1__list_steps_request__descriptor, rpc__list_steps, NULL, true},
    {ADMIN "ResolveStep", &idem__v1__resolve_step_request__descriptor, rpc__resolve_step, NULL,
     false},
    {ADMIN "SetPolicy", &idem__v1__policy__descriptor, rpc__set_policy, NULL, false},
    {ADMIN "DeletePolicy", &idem__v1__delete_policy_request__descriptor, rpc__delete_policy, NULL,
     false},
    {ADMIN "ListPolicies", &idem__v1__list_policies_request__descriptor, rpc__list_policies, NULL,
     false},
    {ADMIN "ListAudit", &idem__v1__list_audit_request__descriptor, rpc__list_audit, NULL, true},
    {ADMIN "GetStatus", &idem__v1__get_status_request__descriptor, rpc__get_status, NULL, false},
    {ADMIN "ResolveSteps", &idem__v1__resolve_steps_request__descriptor, rpc__resolve_steps, NULL,
     false},

    {"/grpc.health.v1.Health/Check", &grpc__health__v1__health_check_request__descriptor,
     rpc__health_check, NULL, false},
};

#define N_METHODS (sizeof rpc__methods / sizeof rpc__methods[0])
_Static_assert(N_METHODS <= RPC_MAX_METHODS, "raise RPC_MAX_METHODS");

const size_t rpc__n_methods = N_METHODS;
