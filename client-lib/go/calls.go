package idem

// calls.go — one RPC each: BeginSaga, GetSaga, BeginStep, CompleteStep, ExtendLease, Lookup,
// GetPolicy, SetPolicy. Arguments are validated first (no call on bad input).

import (
	"context"
	"time"

	pb "idem.dev/client/idempb"
)

const (
	coordPrefix = "/idem.v1.Coordinator/"
	adminPrefix = "/idem.v1.Admin/"
	waitMax     = 60 * time.Second
)

// SagaOptions of BeginSaga.
type SagaOptions struct {
	// RequestID makes BeginSaga idempotent: the same id within retention answers the same
	// global id (Created false). "" = none (then a call with an unknown outcome is not repeated).
	RequestID string
	SagaType  string
	Labels    map[string]string
}

// BeginSaga issues a global id (a UUIDv7) for a new saga.
func (c *Client) BeginSaga(ctx context.Context, o SagaOptions) (*SagaStart, error) {
	if o.RequestID != "" {
		if len(o.RequestID) > 255 {
			return nil, invalid("request_id", "request_id is longer than 255 characters")
		}
		for i := 0; i < len(o.RequestID); i++ {
			if o.RequestID[i] < ' ' || o.RequestID[i] > '~' {
				return nil, invalid("request_id", "request_id has a character outside printable ASCII")
			}
		}
	}
	req := &pb.BeginSagaRequest{RequestId: o.RequestID, SagaType: o.SagaType, Labels: o.Labels}
	resp := &pb.BeginSagaResponse{}
	if e := c.invoke(ctx, coordPrefix+"BeginSaga", req, resp, 0, o.RequestID != ""); e != nil {
		return nil, e
	}
	return &SagaStart{GlobalID: resp.GlobalId, Created: resp.Created,
		CreatedUnixMs: resp.CreatedUnixMs}, nil
}

// GetSaga returns the saga and all its steps (following the server's pages, §16).
func (c *Client) GetSaga(ctx context.Context, globalID string) (*Saga, error) {
	if e := checkGlobalID("global_id", globalID); e != nil {
		return nil, e
	}
	s := &Saga{}
	token := ""
	for page := 0; ; page++ {
		resp := &pb.GetSagaResponse{}
		req := &pb.GetSagaRequest{GlobalId: globalID, PageToken: token}
		if e := c.invoke(ctx, coordPrefix+"GetSaga", req, resp, 0, true); e != nil {
			return nil, e
		}
		s.GlobalID, s.SagaType, s.CreatedUnixMs, s.Labels = resp.GlobalId, resp.SagaType,
			resp.CreatedUnixMs, resp.Labels
		for _, r := range resp.Steps {
			s.Steps = append(s.Steps, recordFromPB(r))
		}
		if resp.NextPageToken == "" || resp.NextPageToken == token {
			return s, nil
		}
		token = resp.NextPageToken
	}
}

// BeginOptions of BeginStep.
type BeginOptions struct {
	Fingerprint []byte        // 0–64 bytes; nil = none
	Lease       time.Duration // 0 = the policy's
	// Wait (0–60 s): where the answer would be ABORTED because the step is in progress, the
	// coordinator holds the call up to this long and answers when the step changes (§12).
	// The call's deadline is the client's per-call deadline plus Wait.
	Wait time.Duration
}

func leaseMs(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	ms := d.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	if ms > 1<<31 {
		ms = 1 << 31
	}
	return uint32(ms)
}

// BeginStep asks whether to run the step (the decision table, docs/api.md §3).
func (c *Client) BeginStep(ctx context.Context, key StepKey, o BeginOptions) (*Begin, error) {
	b, e := c.beginStep(ctx, key, o, 0)
	if e != nil {
		return nil, e
	}
	return b, nil
}

func (c *Client) beginStep(ctx context.Context, key StepKey, o BeginOptions, timeout time.Duration) (*Begin, *Error) {
	if e := checkKey(key); e != nil {
		return nil, e
	}
	if e := checkFingerprint(o.Fingerprint); e != nil {
		return nil, e
	}
	if o.Wait < 0 || o.Wait > waitMax {
		return nil, invalid("wait", "wait must be 0 to 60 s")
	}
	if o.Lease < 0 {
		return nil, invalid("lease", "lease is negative")
	}
	if timeout <= 0 {
		timeout = c.deadline + o.Wait
	}
	req := &pb.BeginStepRequest{Key: key.pb(), Fingerprint: o.Fingerprint,
		LeaseMs: leaseMs(o.Lease), WaitMs: uint32(o.Wait.Milliseconds())}
	resp := &pb.BeginStepResponse{}
	if e := c.invoke(ctx, coordPrefix+"BeginStep", req, resp, timeout, true); e != nil {
		return nil, e
	}
	// every answer names the operation's failure mode (0 from an older coordinator)
	if m := FailureMode(resp.FailureMode); m == FailClosed || m == FailOpen {
		c.notePolicy(key.Service, key.Operation, m)
	}
	return beginFromPB(resp), nil
}

// CompleteStep stores the result of the attempt (a repeated identical Complete is harmless).
func (c *Client) CompleteStep(ctx context.Context, key StepKey, attempt uint64, r Result) (*Record, error) {
	rec, e := c.completeStep(ctx, key, attempt, r, 0)
	if e != nil {
		return nil, e
	}
	return rec, nil
}

func (c *Client) completeStep(ctx context.Context, key StepKey, attempt uint64, r Result, timeout time.Duration) (*Record, *Error) {
	if e := checkKey(key); e != nil {
		return nil, e
	}
	if e := checkOutcome("result.outcome", r.Outcome); e != nil {
		return nil, e
	}
	if e := checkBody("result.body", r.Body); e != nil {
		return nil, e
	}
	if attempt == 0 {
		return nil, invalid("attempt", "attempt is 0")
	}
	req := &pb.CompleteStepRequest{Key: key.pb(), Attempt: attempt, Outcome: pb.Outcome(r.Outcome),
		Code: r.Code, Body: r.Body}
	resp := &pb.CompleteStepResponse{}
	if e := c.invoke(ctx, coordPrefix+"CompleteStep", req, resp, timeout, true); e != nil {
		return nil, e
	}
	return recordFromPB(resp.Record), nil
}

// ExtendLease pushes the lease of the caller's attempt forward; lease 0 = the policy's. It
// answers the new expiry (Unix ms). ABORTED (lease-lost): the attempt no longer holds the step.
func (c *Client) ExtendLease(ctx context.Context, key StepKey, attempt uint64, lease time.Duration) (int64, error) {
	ms, e := c.extendLease(ctx, key, attempt, lease, 0)
	if e != nil {
		return 0, e
	}
	return ms, nil
}

func (c *Client) extendLease(ctx context.Context, key StepKey, attempt uint64, lease time.Duration, timeout time.Duration) (int64, *Error) {
	if e := checkKey(key); e != nil {
		return 0, e
	}
	if attempt == 0 {
		return 0, invalid("attempt", "attempt is 0")
	}
	if lease < 0 {
		return 0, invalid("lease", "lease is negative")
	}
	req := &pb.ExtendLeaseRequest{Key: key.pb(), Attempt: attempt, LeaseMs: leaseMs(lease)}
	resp := &pb.ExtendLeaseResponse{}
	if e := c.invoke(ctx, coordPrefix+"ExtendLease", req, resp, timeout, true); e != nil {
		return 0, e
	}
	return resp.LeaseExpiresUnixMs, nil
}

// Lookup returns the step's record (NOT_FOUND when there is none).
func (c *Client) Lookup(ctx context.Context, key StepKey) (*Record, error) {
	if e := checkKey(key); e != nil {
		return nil, e
	}
	resp := &pb.StepRecord{}
	if e := c.invoke(ctx, coordPrefix+"LookupStep", &pb.LookupStepRequest{Key: key.pb()}, resp, 0, true); e != nil {
		return nil, e
	}
	return recordFromPB(resp), nil
}

// GetPolicy returns the effective policy of (service, operation).
func (c *Client) GetPolicy(ctx context.Context, service, operation string) (*Policy, error) {
	p, e := c.getPolicy(ctx, service, operation, 0)
	if e != nil {
		return nil, e
	}
	return p, nil
}

func (c *Client) getPolicy(ctx context.Context, service, operation string, timeout time.Duration) (*Policy, *Error) {
	if e := checkName("service", service, false); e != nil {
		return nil, e
	}
	if e := checkName("operation", operation, false); e != nil {
		return nil, e
	}
	resp := &pb.Policy{}
	req := &pb.GetPolicyRequest{Service: service, Operation: operation}
	if e := c.invoke(ctx, coordPrefix+"GetPolicy", req, resp, timeout, true); e != nil {
		return nil, e
	}
	return policyFromPB(resp), nil
}

// SetPolicy stores a policy (Admin; service and operation may be "*"). A zero Retention or
// Lease takes the built-in default (24 h, 30 s); KeyRetention 0 = Retention. It answers the
// stored row.
func (c *Client) SetPolicy(ctx context.Context, p Policy) (*Policy, error) {
	if e := checkName("policy.service", p.Service, true); e != nil {
		return nil, e
	}
	if e := checkName("policy.operation", p.Operation, true); e != nil {
		return nil, e
	}
	if p.Service == "*" && p.Operation != "*" {
		return nil, invalid("policy.operation", "service \"*\" needs operation \"*\"")
	}
	if p.FailureMode != FailClosed && p.FailureMode != FailOpen {
		return nil, invalid("policy.failure_mode", "failure_mode must be fail-closed or fail-open")
	}
	if p.Retention < 0 || p.Lease < 0 || p.KeyRetention < 0 {
		return nil, invalid("policy.retention", "durations must not be negative")
	}
	if p.Retention == 0 {
		p.Retention = 24 * time.Hour
	}
	if p.Lease == 0 {
		p.Lease = 30 * time.Second
	}
	req := &pb.Policy{Service: p.Service, Operation: p.Operation,
		FailureMode: pb.FailureMode(p.FailureMode), RetentionS: uint32(p.Retention / time.Second),
		LeaseMs: leaseMs(p.Lease), KeyRetentionS: uint32(p.KeyRetention / time.Second)}
	resp := &pb.Policy{}
	if e := c.invoke(ctx, adminPrefix+"SetPolicy", req, resp, 0, true); e != nil {
		return nil, e
	}
	return policyFromPB(resp), nil
}
