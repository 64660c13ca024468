package idem

// errors.go — the *Error value every call returns, and how a gRPC status becomes one.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Codes of the SDK's own errors (the others are gRPC code names: "ABORTED", "UNAVAILABLE", …).
const (
	// CodeStepFailed: Run's action reported OutcomeRetryable; the key was released (the Report
	// is still returned: the action did run).
	CodeStepFailed = "STEP_FAILED"
	// CodeStepUnknown: Run lost a try (a CANCELLED the caller did not cause, no Reason: a
	// draining node's) and its deadline passed before an answer said what the step did; it may
	// have begun, or been stored. OutcomeUnknown is set; the Report is returned when the action
	// ran. Run the step again later: the coordinator answers what it recorded (docs/api.md §20).
	CodeStepUnknown = "STEP_UNKNOWN"
	// CodeBadResponse: the coordinator's answer could not be understood.
	CodeBadResponse = "BAD_RESPONSE"
)

// Error is what every call of this package returns on failure. Decide on Code and Reason,
// never on Message (docs/api.md §5).
type Error struct {
	// Code is a gRPC code name ("INVALID_ARGUMENT", "ABORTED", "FAILED_PRECONDITION",
	// "UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED", "DATA_LOSS", …) or CodeStepFailed /
	// CodeStepUnknown / CodeBadResponse.
	Code string
	// Reason is the coordinator's idem-reason ("not-leader", "in-progress",
	// "fingerprint-mismatch", "lease-lost", "store-unavailable", …); "" when no coordinator
	// answered (connection refused, deadline) or the SDK itself refused.
	Reason string
	// Leader is the leader's host:port a standby named (idem-leader), "" otherwise.
	Leader string
	// RetryAfter is the coordinator's idem-retry-after-ms hint (ABORTED / in progress), else 0.
	RetryAfter time.Duration
	// Message is the coordinator's message, or the SDK's; it names the field at fault.
	Message string
	// Detail is the coordinator's idem-detail: more about what happened; "" when none.
	// Hint is its idem-hint: what to do about it; "" when none. Both are printable ASCII for
	// people (docs/api.md §5); decide on Code and Reason, never on them.
	Detail string
	Hint   string
	// Field names the argument refused by the SDK's own validation ("key.global_id",
	// "options.address", "result.body", …); "" for errors from the coordinator.
	Field string
	// OutcomeUnknown: the request was sent and no answer came (DEADLINE_EXCEEDED, UNAVAILABLE
	// not from a standby, or a CANCELLED the caller did not cause), or a repeat after that was
	// refused: the coordinator may have acted. Not set on a refusal that proves no try acted
	// (BeginStep fingerprint-mismatch; CompleteStep finished-differently, or lease-lost of a
	// SUCCEEDED or FAILED outcome: docs/api.md §20).
	OutcomeUnknown bool

	standby bool // idem-leader came with it: a node that is not the leader did nothing
	lost    bool // a lost try (Client.lostTry): Run retries it like UNAVAILABLE
}

func (e *Error) Error() string {
	s := "idem: " + e.Code
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Code returns the Code of err when it is (or wraps) an *Error, "OK" for nil, else "UNKNOWN".
func Code(err error) string {
	if err == nil {
		return "OK"
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return "UNKNOWN"
}

// Reason returns the Reason of err when it is (or wraps) an *Error, else "".
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// invalid is the SDK's own refusal of bad input: no call was made.
func invalid(field, format string, args ...interface{}) *Error {
	return &Error{Code: "INVALID_ARGUMENT", Field: field,
		Message: fmt.Sprintf(format, args...)}
}

// codeNames: the gRPC spelling of a code ("FAILED_PRECONDITION"); grpc-go's String() gives
// "FailedPrecondition".
var codeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
	codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
	codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
	codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
	codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
	codes.Unauthenticated: "UNAUTHENTICATED",
}

func codeName(c codes.Code) string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return "UNKNOWN"
}

// fromCall turns a failed call's error and trailers into an *Error. ctx is the call's own
// context: when it ended, the error says so (CANCELLED / DEADLINE_EXCEEDED).
func fromCall(ctx context.Context, err error, trailer metadata.MD) *Error {
	st, _ := status.FromError(err)
	e := &Error{Code: codeName(st.Code()), Message: st.Message()}
	if ctx.Err() == context.Canceled && st.Code() != codes.OK {
		e.Code = "CANCELLED"
	}
	if v := trailer.Get("idem-reason"); len(v) > 0 {
		e.Reason = v[0]
	}
	if v := trailer.Get("idem-detail"); len(v) > 0 {
		e.Detail = v[0]
	}
	if v := trailer.Get("idem-hint"); len(v) > 0 {
		e.Hint = v[0]
	}
	if v := trailer.Get("idem-leader"); len(v) > 0 {
		e.Leader = v[0]
		e.standby = true
	}
	if v := trailer.Get("idem-retry-after-ms"); len(v) > 0 {
		if ms, perr := strconv.ParseInt(v[0], 10, 64); perr == nil && ms > 0 {
			e.RetryAfter = time.Duration(ms) * time.Millisecond
		}
	}
	if e.Code == "DEADLINE_EXCEEDED" || (e.Code == "UNAVAILABLE" && !e.standby) {
		e.OutcomeUnknown = true
	}
	if e.Message == "" {
		e.Message = e.Code
	}
	return e
}
