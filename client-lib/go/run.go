package idem

// run.go — Client.Run, the step helper: BeginStep (with retries) → the action → CompleteStep,
// with idem_step_run's semantics (client-lib/include/idem/idem.h), plus a lease keeper that
// extends the lease while the action runs and cancels the action's context when it is lost.

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// InProgress says what Run does when the step is in progress under another caller's lease.
type InProgress int

const (
	// WaitOnCoordinator (default): BeginStep waits on the coordinator (wait_ms, what is left
	// of the run, at most 60 s) and answers when the step changes.
	WaitOnCoordinator InProgress = iota
	// Backoff: retry ABORTED with backoff until the deadline (libidem's no_wait).
	Backoff
	// FailFast: return the ABORTED (in-progress) error at once (the HTTP middleware's 409).
	FailFast
)

// RunOptions of Run. The zero value is fine.
type RunOptions struct {
	Fingerprint []byte        // 0–64 bytes: SHA-256 of the request's canonical bytes
	Deadline    time.Duration // the whole run, retries included; 0 = 10 s (the action is not bounded by it)
	Lease       time.Duration // 0 = the policy's
	BackoffBase time.Duration // first retry waits up to this; 0 = 50 ms
	BackoffMax  time.Duration // cap of one wait; 0 = 1 s
	InProgress  InProgress
	// ExtendEvery: how often the lease is extended while the action runs; 0 = a third of the
	// lease the coordinator granted.
	ExtendEvery time.Duration
}

// StepContext is what the action is told.
type StepContext struct {
	Key       StepKey
	Attempt   uint64 // the fencing number: pass it on to your own writes
	Takeover  bool   // an earlier attempt's lease expired: it may have partly run
	Unguarded bool   // nothing is recorded for this run (fail-open)
}

// Action runs the step and reports its result. Its ctx ends when Run's ctx does, or when the
// lease is lost (ExtendLease refused): stop then, the result will not be stored. An Outcome
// outside succeeded/failed/retryable/unknown is stored as unknown.
type Action func(ctx context.Context, s StepContext) Result

// Report says how a run was settled.
type Report struct {
	Decision     Decision // of the BeginStep that settled the run
	Attempt      uint64
	Ran          bool   // the action was called
	Takeover     bool   // it ran as a takeover of an expired lease
	Replayed     bool   // the stored result was returned instead
	Result       Result // the action's (Ran) or the stored one (Replayed)
	BeginRetries int
	Unguarded    bool // ran with nothing recorded (PROCEED_UNGUARDED, or fail-open with no coordinator)
	Journaled    bool // that run was appended to the journal
	LeaseLost    bool // ExtendLease was refused while the action ran: the result was not stored
}

const (
	defaultRunDeadline = 10 * time.Second
	defaultBackoffBase = 50 * time.Millisecond
	defaultBackoffMax  = time.Second
)

type runConf struct {
	began     time.Time // lost tries since then make a spent deadline CodeStepUnknown
	end       time.Time
	lease     time.Duration
	base, max time.Duration
	mode      InProgress
	fp        []byte
}

// Run runs one guarded step. It returns (report, nil) when the step is settled (see
// Report.Decision, Ran, Replayed, Result), or the error that stopped it: FAILED_PRECONDITION
// (fingerprint-mismatch), ABORTED (in-progress at the deadline, or lease-lost: then the report
// is returned too), UNAVAILABLE / DEADLINE_EXCEEDED, CANCELLED (ctx's), STEP_UNKNOWN. The action
// reported retryable: the key was released and the error is STEP_FAILED, with the report (the
// action ran).
//
// A lost try (a CANCELLED ctx did not cause, no Reason: a draining node's) is retried like
// UNAVAILABLE, at BeginStep and at CompleteStep, inside the deadline; the action never runs twice
// for one attempt. When the deadline passes and a try of the client was lost since the run began,
// the error is CodeStepUnknown (with the report when the action ran), and the run never goes
// unguarded (docs/api.md §20).
//
// Run opens the span idem.step (a child of ctx's span; docs/sdk-go.md) around the whole run, and
// every call it makes carries that span's traceparent, as does the action's ctx.
func (c *Client) Run(ctx context.Context, key StepKey, o RunOptions, action Action) (*Report, error) {
	ctx, span := c.startStepSpan(ctx, key)
	rep, e := c.run(ctx, key, o, action)
	endStepSpan(span, rep, e)
	if e != nil {
		return rep, e
	}
	return rep, nil
}

func (c *Client) run(ctx context.Context, key StepKey, o RunOptions, action Action) (*Report, *Error) {
	if action == nil {
		return nil, invalid("action", "action is nil")
	}
	if e := checkKey(key); e != nil {
		return nil, e
	}
	if e := checkFingerprint(o.Fingerprint); e != nil {
		return nil, e
	}
	if o.Deadline < 0 || o.Lease < 0 || o.BackoffBase < 0 || o.BackoffMax < 0 || o.ExtendEvery < 0 {
		return nil, invalid("options", "durations must not be negative")
	}
	key.Phase = key.phase()
	conf := runConf{lease: o.Lease, base: o.BackoffBase, max: o.BackoffMax, mode: o.InProgress,
		fp: o.Fingerprint}
	if o.Deadline == 0 {
		o.Deadline = defaultRunDeadline
	}
	conf.began = time.Now()
	conf.end = conf.began.Add(o.Deadline)
	if conf.base == 0 {
		conf.base = defaultBackoffBase
	}
	if conf.max == 0 {
		conf.max = defaultBackoffMax
	}
	if conf.max < conf.base {
		conf.max = conf.base
	}

	// fail-open: the failure mode comes with every BeginStep answer (calls.go), so nothing is
	// called before the first try; an older coordinator's answer names none, and then the
	// policy is fetched after it

	began := time.Now()
	rep := &Report{}
	source := "server"
	b, e := c.beginWithRetries(ctx, key, &conf, &rep.BeginRetries)
	if e != nil {
		// no coordinator can decide (every known address called during this run: none
		// answered, or each said its store or election is down): a fail-open operation with a
		// journal runs anyway (docs/api.md §20)
		if ctx.Err() != nil || (e.Code != "UNAVAILABLE" && e.Code != "DEADLINE_EXCEEDED") ||
			!c.noneCouldDecide(began) || c.journal == "" ||
			c.CachedFailureMode(key.Service, key.Operation) != FailOpen {
			return nil, e
		}
		b = &Begin{Decision: DecisionProceedUnguarded}
		source = "client"
	}
	if source == "server" && c.CachedFailureMode(key.Service, key.Operation) == 0 {
		c.refreshPolicy(ctx, key.Service, key.Operation)
	}
	rep.Decision, rep.Attempt = b.Decision, b.Attempt
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(AttrDecision.String(b.Decision.String()), AttrAttempt.Int64(int64(b.Attempt)))
	switch b.Decision {
	case DecisionReplay:
		span.AddEvent(EventReplay)
		rep.Replayed = true
		if b.Result != nil {
			rep.Result = *b.Result
		}
		return rep, nil
	case DecisionSkipNullCompensation, DecisionSkipAlreadyCompensated:
		return rep, nil
	case DecisionProceed, DecisionProceedUnguarded:
	default:
		return nil, &Error{Code: CodeBadResponse, Message: "unknown decision " + b.Decision.String()}
	}

	unguarded := b.Decision == DecisionProceedUnguarded
	if b.Takeover {
		span.AddEvent(EventTakeover, trace.WithAttributes(AttrAttempt.Int64(int64(b.Attempt))))
	}
	sc := StepContext{Key: key, Attempt: b.Attempt, Takeover: b.Takeover, Unguarded: unguarded}
	rep.Ran, rep.Takeover, rep.Unguarded = true, b.Takeover, unguarded
	var lost *Error
	if unguarded {
		rep.Result = callAction(ctx, action, sc)
	} else {
		rep.Result, lost = c.runKeepingLease(ctx, key, b, o, action, sc)
	}

	if unguarded {
		if c.journal == "" {
			return rep, nil
		}
		line := JournalLine(time.Now(), source, c.Tenant(), key, o.Fingerprint, rep.Result)
		if e := appendJournal(c.journal, line); e != nil {
			return rep, e // the action did run
		}
		rep.Journaled = true
		return rep, finish(rep)
	}
	if lost != nil {
		rep.LeaseLost = true
		return rep, &Error{Code: "ABORTED", Reason: ReasonLeaseLost, Message: "the lease was lost " +
			"while the action ran (" + lost.Message + "); its result was not stored"}
	}
	var tooBig *Error
	if e := checkBody("result.body", rep.Result.Body); e != nil {
		// the action ran: store that it ran (unknown, for an operator), not nothing (which
		// would run it again after the lease)
		tooBig = e
		tooBig.Message += "; the step was completed as unknown without its body"
		rep.Result = Result{Outcome: OutcomeUnknown, Code: rep.Result.Code}
	}
	rec, e := c.completeWithRetries(ctx, key, b.Attempt, rep.Result, &conf)
	if e != nil {
		return rep, e
	}
	if rec != nil && rec.Result != nil {
		rep.Result.CompletedUnixMs = rec.Result.CompletedUnixMs
	}
	if tooBig != nil {
		return rep, tooBig
	}
	return rep, finish(rep)
}

func finish(rep *Report) *Error {
	if rep.Result.Outcome == OutcomeRetryable {
		return &Error{Code: CodeStepFailed,
			Message: "the action reported a retryable failure; the key was released"}
	}
	return nil
}

func callAction(ctx context.Context, action Action, sc StepContext) Result {
	r := action(ctx, sc)
	if r.Outcome < OutcomeSucceeded || r.Outcome > OutcomeUnknown {
		r.Outcome = OutcomeUnknown // no valid outcome: it may or may not have acted
	}
	if len(r.Body) > 0 {
		r.Body = append([]byte(nil), r.Body...)
	}
	return r
}

// runKeepingLease runs the action while a goroutine extends the lease; a refused extension
// (ABORTED / NOT_FOUND: another attempt holds the step) cancels the action's context and is
// returned.
func (c *Client) runKeepingLease(ctx context.Context, key StepKey, b *Begin, o RunOptions,
	action Action, sc StepContext) (Result, *Error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var lost *Error
	var lostMu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		expires := b.LeaseExpiresUnixMs
		for {
			every := o.ExtendEvery
			if every == 0 {
				every = time.Until(time.UnixMilli(expires)) / 3
			}
			if every < 10*time.Millisecond {
				every = 10 * time.Millisecond
			}
			t := time.NewTimer(every)
			select {
			case <-done:
				t.Stop()
				return
			case <-actx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			ms, e := c.extendLease(actx, key, b.Attempt, o.Lease, 0)
			if e == nil {
				expires = ms
				trace.SpanFromContext(ctx).AddEvent(EventExtended,
					trace.WithAttributes(attribute.Int64("idem.lease_expires_unix_ms", ms)))
				continue
			}
			if e.Code == "ABORTED" || e.Code == "NOT_FOUND" {
				trace.SpanFromContext(ctx).AddEvent(EventLeaseLost,
					trace.WithAttributes(attribute.String("idem.error.reason", e.Reason)))
				lostMu.Lock()
				lost = e
				lostMu.Unlock()
				cancel()
				return
			}
			// UNAVAILABLE and the like: keep trying while the lease may still run
		}
	}()
	r := func() Result {
		defer func() { close(done); wg.Wait() }()
		return callAction(actx, action, sc)
	}()
	lostMu.Lock()
	defer lostMu.Unlock()
	return r, lost
}

func (c *Client) beginWithRetries(ctx context.Context, key StepKey, conf *runConf, retries *int) (*Begin, *Error) {
	var last *Error
	for n := 0; ; n++ {
		left := time.Until(conf.end)
		if left <= 0 {
			break
		}
		var wait time.Duration
		if conf.mode == WaitOnCoordinator {
			wait = left
			if wait > waitMax {
				wait = waitMax
			}
			wait = wait.Truncate(time.Millisecond)
		}
		timeout := c.deadline + wait
		if timeout > left {
			timeout = left
		}
		b, e := c.beginStep(ctx, key, BeginOptions{Fingerprint: conf.fp, Lease: conf.lease, Wait: wait}, timeout)
		if e == nil {
			return b, nil
		}
		last = e
		if ctx.Err() != nil {
			return nil, e
		}
		if e.Code == "ABORTED" && conf.mode == FailFast {
			return nil, e
		}
		// no answer in time from one of several coordinators: another may decide (§20)
		elsewhere := e.Code == "DEADLINE_EXCEEDED" && c.endpoints() > 1
		if e.Code == "DEADLINE_EXCEEDED" && !elsewhere { // after a lost try: STEP_UNKNOWN
			return nil, c.givenUp(conf, "BeginStep", e)
		}
		if e.Code != "ABORTED" && e.Code != "UNAVAILABLE" && !elsewhere && !isLost(e) {
			return nil, e
		}
		w := c.backoff(conf.base, conf.max, n)
		if e.Code == "ABORTED" && e.RetryAfter > 0 {
			floor := e.RetryAfter
			if floor > conf.max {
				floor = conf.max
			}
			if w < floor {
				w = floor
			}
		}
		if time.Now().Add(w).After(conf.end) {
			return nil, c.givenUp(conf, "BeginStep", e)
		}
		if e.Code == "ABORTED" { // in progress under another caller's lease
			trace.SpanFromContext(ctx).AddEvent(EventWaiting, trace.WithAttributes(
				attribute.String("idem.error.reason", e.Reason), attribute.Int64("idem.wait_ms", w.Milliseconds())))
		}
		if !sleep(ctx, w) {
			return nil, e
		}
		*retries++
	}
	if last == nil {
		last = &Error{Code: "DEADLINE_EXCEEDED", Message: "run deadline exceeded"}
	}
	return nil, c.givenUp(conf, "BeginStep", last)
}

// isLost: a lost try (Client.lostTry marked it): CANCELLED without Reason that neither the
// caller's ctx nor Close caused.
func isLost(e *Error) bool {
	return e.lost
}

// givenUp is the error of a run whose deadline ended the retries of call with e:
// CodeStepUnknown when a try of the client was lost since the run began (the step may have
// begun, or been stored, on it), else e.
func (c *Client) givenUp(conf *runConf, call string, e *Error) *Error {
	retried := e.Code == "UNAVAILABLE" || e.Code == "DEADLINE_EXCEEDED" || e.Code == "ABORTED"
	if !(retried || isLost(e)) || !c.lostSince(conf.began) {
		return e
	}
	last := e.Code
	if e.Reason != "" {
		last += " " + e.Reason
	}
	return &Error{Code: CodeStepUnknown, OutcomeUnknown: true, Message: call + ": a try was " +
		"lost and the run's deadline passed before an answer said what it did (last: " + last + ")"}
}

// completeWithRetries: the first Complete always gets the client's full per-call deadline
// (and is not cut short by the caller's cancellation: leaving the step in progress would make
// it run again after its lease); retries of UNAVAILABLE / DEADLINE_EXCEEDED and of lost tries
// stay inside the run's deadline.
func (c *Client) completeWithRetries(ctx context.Context, key StepKey, attempt uint64, r Result, conf *runConf) (*Record, *Error) {
	for n := 0; ; n++ {
		// not cancelled with ctx, but in its trace
		cctx := trace.ContextWithSpan(context.Background(), trace.SpanFromContext(ctx))
		timeout := c.deadline
		if n > 0 {
			cctx = ctx
			left := time.Until(conf.end)
			if left <= 0 {
				return nil, c.givenUp(conf, "CompleteStep", &Error{Code: "DEADLINE_EXCEEDED",
					Message: "run deadline exceeded before CompleteStep succeeded"})
			}
			if left < timeout {
				timeout = left
			}
		}
		rec, e := c.completeStep(cctx, key, attempt, r, timeout)
		if e == nil {
			return rec, nil
		}
		if e.Code != "UNAVAILABLE" && e.Code != "DEADLINE_EXCEEDED" && !isLost(e) {
			return nil, e
		}
		w := c.backoff(conf.base, conf.max, n)
		if time.Now().Add(w).After(conf.end) {
			return nil, c.givenUp(conf, "CompleteStep", e)
		}
		if !sleep(ctx, w) {
			return nil, e
		}
	}
}
