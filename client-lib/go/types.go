package idem

// types.go — the contract's enums and values (docs/api.md §2), in Go.

import (
	"time"

	pb "idem.dev/client/idempb"
)

// Phase of a step.
type Phase int32

const (
	Forward      Phase = 1
	Compensation Phase = 2
)

var phaseWords = []string{"invalid", "forward", "compensation"}

func (p Phase) String() string { return word(phaseWords, int(p), "invalid") }

// word is words[i], or dflt when i is out of range: the String of every enum here.
func word(words []string, i int, dflt string) string {
	if i >= 0 && i < len(words) {
		return words[i]
	}
	return dflt
}

// Outcome of an action, as stored.
type Outcome int32

const (
	OutcomeUnspecified Outcome = 0
	OutcomeSucceeded   Outcome = 1
	OutcomeFailed      Outcome = 2
	OutcomeRetryable   Outcome = 3 // failed before any side effect: releases the key
	OutcomeUnknown     Outcome = 4 // may or may not have happened: kept until resolved
)

var outcomeWords = []string{"unspecified", "succeeded", "failed", "retryable", "unknown"}

// String is the contract's word ("succeeded", …; names.h).
func (o Outcome) String() string { return word(outcomeWords, int(o), "invalid") }

// ParseOutcome reads an outcome word ("succeeded", "failed", "retryable", "unknown").
func ParseOutcome(s string) (Outcome, bool) {
	for i, w := range outcomeWords {
		if i > 0 && w == s {
			return Outcome(i), true
		}
	}
	return 0, false
}

// Decision of a BeginStep.
type Decision int32

const (
	DecisionUnspecified            Decision = 0
	DecisionProceed                Decision = 1
	DecisionReplay                 Decision = 2
	DecisionSkipNullCompensation   Decision = 3
	DecisionSkipAlreadyCompensated Decision = 4
	DecisionProceedUnguarded       Decision = 5
)

var decisionNames = []string{"UNSPECIFIED", "PROCEED", "REPLAY", "SKIP_NULL_COMPENSATION",
	"SKIP_ALREADY_COMPENSATED", "PROCEED_UNGUARDED"}

// String is the proto name without its DECISION_ prefix ("PROCEED", "REPLAY", …).
func (d Decision) String() string { return word(decisionNames, int(d), "INVALID") }

// StepState of a record.
type StepState int32

const (
	StateNone       StepState = 0
	StateInProgress StepState = 1
	StateSucceeded  StepState = 2
	StateFailed     StepState = 3
	StateUnknown    StepState = 4
	StateAbandoned  StepState = 5
	StateReleased   StepState = 6
)

var stateWords = []string{"none", "in_progress", "succeeded", "failed", "unknown", "abandoned", "released"}

func (s StepState) String() string { return word(stateWords, int(s), "invalid") }

// FailureMode of a policy.
type FailureMode int32

const (
	FailClosed FailureMode = 1
	FailOpen   FailureMode = 2
)

var failureModeWords = []string{"unspecified", "fail-closed", "fail-open"}

func (m FailureMode) String() string { return word(failureModeWords, int(m), "unspecified") }

// StepKey names one step: (tenant from the client, GlobalID, Service, Operation, Phase).
// Phase 0 is taken as Forward.
type StepKey struct {
	GlobalID  string
	Service   string
	Operation string
	Phase     Phase
}

func (k StepKey) phase() Phase {
	if k.Phase == 0 {
		return Forward
	}
	return k.Phase
}

func (k StepKey) pb() *pb.StepKey {
	return &pb.StepKey{GlobalId: k.GlobalID, Service: k.Service, Operation: k.Operation,
		Phase: pb.Phase(k.phase())}
}

func keyFromPB(k *pb.StepKey) StepKey {
	return StepKey{GlobalID: k.GetGlobalId(), Service: k.GetService(), Operation: k.GetOperation(),
		Phase: Phase(k.GetPhase())}
}

// Result of a step: what its action reported, or what is stored.
type Result struct {
	Outcome         Outcome
	Code            int32
	Body            []byte
	CompletedUnixMs int64
}

func resultFromPB(r *pb.StepResult) Result {
	if r == nil {
		return Result{}
	}
	return Result{Outcome: Outcome(r.Outcome), Code: r.Code, Body: r.Body,
		CompletedUnixMs: r.CompletedUnixMs}
}

// Begin is a BeginStep answer.
type Begin struct {
	Decision           Decision
	Attempt            uint64
	LeaseExpiresUnixMs int64
	Takeover           bool
	ExpiresUnixMs      int64
	Result             *Result // REPLAY
	// ResultExpired: a REPLAY past the policy's retention_s: outcome and code, no body (§12).
	ResultExpired       bool
	ResultExpiresUnixMs int64
}

func beginFromPB(r *pb.BeginStepResponse) *Begin {
	b := &Begin{Decision: Decision(r.Decision), Attempt: r.Attempt,
		LeaseExpiresUnixMs: r.LeaseExpiresUnixMs, Takeover: r.Takeover,
		ExpiresUnixMs: r.ExpiresUnixMs, ResultExpired: r.ResultExpired,
		ResultExpiresUnixMs: r.ResultExpiresUnixMs}
	if r.Result != nil {
		res := resultFromPB(r.Result)
		b.Result = &res
	}
	return b
}

// Record is a stored step (LookupStep, CompleteStep, GetSaga).
type Record struct {
	Tenant             string
	Key                StepKey
	State              StepState
	Attempt            uint64
	Fingerprint        []byte
	Result             *Result
	CreatedUnixMs      int64
	UpdatedUnixMs      int64
	LeaseExpiresUnixMs int64
	ExpiresUnixMs      int64
	ResultExpired      bool
	// BeginTraceID is the trace id (32 lower-case hex) of the BeginStep that began the current
	// attempt, CompleteTraceID of the call (or reaper action) that finished it; "" = none (§22).
	BeginTraceID    string
	CompleteTraceID string
}

func recordFromPB(r *pb.StepRecord) *Record {
	if r == nil {
		return nil
	}
	rec := &Record{Tenant: r.Tenant, Key: keyFromPB(r.Key), State: StepState(r.State),
		Attempt: r.Attempt, Fingerprint: r.Fingerprint, CreatedUnixMs: r.CreatedUnixMs,
		UpdatedUnixMs: r.UpdatedUnixMs, LeaseExpiresUnixMs: r.LeaseExpiresUnixMs,
		ExpiresUnixMs: r.ExpiresUnixMs, ResultExpired: r.ResultExpired,
		BeginTraceID: r.BeginTraceId, CompleteTraceID: r.CompleteTraceId}
	if r.Result != nil {
		res := resultFromPB(r.Result)
		rec.Result = &res
	}
	return rec
}

// Policy of a (service, operation) (docs/api.md §6, §12).
type Policy struct {
	Service       string
	Operation     string
	FailureMode   FailureMode
	Retention     time.Duration // whole seconds
	Lease         time.Duration // whole milliseconds
	KeyRetention  time.Duration // whole seconds; 0 = Retention
	UpdatedUnixMs int64
}

func policyFromPB(p *pb.Policy) *Policy {
	return &Policy{Service: p.Service, Operation: p.Operation,
		FailureMode:   FailureMode(p.FailureMode),
		Retention:     time.Duration(p.RetentionS) * time.Second,
		Lease:         time.Duration(p.LeaseMs) * time.Millisecond,
		KeyRetention:  time.Duration(p.KeyRetentionS) * time.Second,
		UpdatedUnixMs: p.UpdatedUnixMs}
}

// Saga is a GetSaga answer (every page followed).
type Saga struct {
	GlobalID      string
	SagaType      string
	CreatedUnixMs int64
	Labels        map[string]string
	Steps         []*Record
}

// SagaStart is a BeginSaga answer.
type SagaStart struct {
	GlobalID      string
	Created       bool
	CreatedUnixMs int64
}
