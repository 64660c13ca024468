/* rpc_status.c — the one table from err_code to gRPC status code (house style). */
#include "rpc_internal.h"

static const grpc_status_code status_of[] = {
    [ERR_OK] = GRPC_STATUS_OK,
    [ERR_INVALID] = GRPC_STATUS_INVALID_ARGUMENT,
    [ERR_PRECONDITION] = GRPC_STATUS_FAILED_PRECONDITION,
    [ERR_ABORTED] = GRPC_STATUS_ABORTED,
    [ERR_NOT_FOUND] = GRPC_STATUS_NOT_FOUND,
    [ERR_UNAVAILABLE] = GRPC_STATUS_UNAVAILABLE,
    [ERR_DEADLINE] = GRPC_STATUS_DEADLINE_EXCEEDED,
    [ERR_INTERNAL] = GRPC_STATUS_INTERNAL,
    [ERR_UNAUTHENTICATED] = GRPC_STATUS_UNAUTHENTICATED,
    [ERR_PERMISSION] = GRPC_STATUS_PERMISSION_DENIED,
    [ERR_UNIMPLEMENTED] = GRPC_STATUS_UNIMPLEMENTED,
    [ERR_RESOURCE] = GRPC_STATUS_RESOURCE_EXHAUSTED,
};

/* A new err_code must get a row here: the table has exactly one entry per code. */
_Static_assert(sizeof status_of / sizeof status_of[0] == ERR__COUNT,
               "rpc_status.c: one row per err_code");

grpc_status_code rpc__status(err_code code) {
  if ((int)code < 0 || code >= ERR__COUNT) return GRPC_STATUS_INTERNAL;
  /* a code left out of the table would read as OK: never let an error look like success */
  if (code != ERR_OK && status_of[code] == GRPC_STATUS_OK) return GRPC_STATUS_INTERNAL;
  return status_of[code];
}
