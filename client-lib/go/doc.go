// Package idem is the Go client of the idem coordinator (idem.v1, docs/api.md; this SDK:
// docs/sdk-go.md). Import path idem.dev/client (GOPATH mode, see client-lib/go/go.sh).
//
// Connect makes a Client over one or more coordinator addresses. Client.Run is the step helper
// with libidem's idem_step_run semantics: BeginStep → the action on PROCEED → CompleteStep;
// REPLAY returns the stored result; a step in progress elsewhere is waited for (wait_ms) or
// retried with backoff; the lease is extended while the action runs; leader redirects
// (idem-leader) are followed; a fail-open operation runs unguarded and is journaled only when
// no coordinator could decide (docs/api.md §20). Raw calls (BeginStep, CompleteStep,
// ExtendLease, Lookup, BeginSaga, GetSaga, GetPolicy, SetPolicy) are there too.
//
// Every call takes a context.Context (cancellation and deadline) and returns errors as *Error
// values carrying the gRPC code name, the coordinator's idem-reason, the leader it named and its
// retry-after hint. Bad input is refused before any call with an INVALID_ARGUMENT *Error whose
// Field names what was wrong.
//
// Subpackage idemhttp is the net/http Idempotency-Key middleware (docs/http-middleware.md).
package idem
