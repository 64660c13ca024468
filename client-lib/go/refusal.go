package idem

// refusal.go — which refusals of a repeated request prove that no earlier try of it acted
// (docs/api.md §20, "A refusal that proves the lost try did nothing"). The same rule as
// libidem's refusal_settles (client-lib/src/route.c).

import (
	"google.golang.org/protobuf/proto"

	pb "idem.dev/client/idempb"
)

// refusalSettles reports whether e, the coordinator's refusal of req, proves that no earlier
// try of this request acted: had one acted, this repeat of it would have been answered
// otherwise. Then the refusal is the call's answer, its outcome known. BeginStep
// fingerprint-mismatch: a try that acted left the record with this request's fingerprint, which
// nothing changes. CompleteStep finished-differently (not UNKNOWN: an operator may settle that
// one): a try that acted stored this result under this attempt, for good. CompleteStep
// lease-lost, SUCCEEDED or FAILED only: such a step is never begun again nor abandoned. Every
// other refusal proves nothing.
func refusalSettles(req proto.Message, e *Error) bool {
	switch r := req.(type) {
	case *pb.BeginStepRequest:
		return e.Reason == ReasonFingerprintMismatch
	case *pb.CompleteStepRequest:
		o := r.GetOutcome()
		final := o == pb.Outcome_OUTCOME_SUCCEEDED || o == pb.Outcome_OUTCOME_FAILED
		switch e.Reason {
		case ReasonFinishedDifferently:
			return final || o == pb.Outcome_OUTCOME_RETRYABLE
		case ReasonLeaseLost:
			return final
		}
	}
	return false
}
