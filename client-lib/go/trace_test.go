package idem_test

// trace_test.go — trace context against a real coordinator (docs/api.md §22): a parent span, a
// step run under it, the idem.step span found as its child in an in-memory exporter, and the
// parent's trace id on the step (LookupStep and `idemctl step`); the events for replay, lease
// extension, waiting and takeover; and a remote traceparent carried with no tracer provider.

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	idem "idem.dev/client"
	"idem.dev/client/internal/testcoord"
)

// stepSpans are the ended idem.step spans of the exporter, oldest first.
func stepSpans(exp *tracetest.InMemoryExporter) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == idem.StepSpanName {
			out = append(out, s)
		}
	}
	return out
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func hasEvent(s tracetest.SpanStub, name string) bool {
	for _, e := range s.Events {
		if e.Name == name {
			return true
		}
	}
	return false
}

func TestStepSpanAndTraceIDOnTheStep(t *testing.T) {
	co := testcoord.Start(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tenant := testcoord.Tenant("go-trace")
	c := connect(t, idem.Options{Address: co.Addr, Tenant: tenant, TracerProvider: tp})
	ctx := context.Background()
	saga, err := c.BeginSaga(ctx, idem.SagaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := idem.StepKey{GlobalID: saga.GlobalID, Service: "pay", Operation: "charge"}

	pctx, parent := tp.Tracer("test").Start(ctx, "checkout")
	var actionSpan trace.SpanContext
	rep, err := c.Run(pctx, key, idem.RunOptions{Lease: 3 * time.Second, ExtendEvery: 100 * time.Millisecond},
		func(ctx context.Context, s idem.StepContext) idem.Result {
			actionSpan = trace.SpanContextFromContext(ctx)
			time.Sleep(500 * time.Millisecond) // a few lease extensions
			return idem.Result{Outcome: idem.OutcomeSucceeded, Body: []byte("ok")}
		})
	parent.End()
	if err != nil || !rep.Ran {
		t.Fatalf("run: %+v %v", rep, err)
	}
	tid := parent.SpanContext().TraceID().String()

	steps := stepSpans(exp)
	if len(steps) != 1 {
		t.Fatalf("want 1 idem.step span, have %d (all: %d)", len(steps), len(exp.GetSpans()))
	}
	st := steps[0]
	if st.Parent.SpanID() != parent.SpanContext().SpanID() || st.SpanContext.TraceID().String() != tid {
		t.Fatalf("idem.step is not the parent's child: parent %s/%s, step's parent %s, trace %s",
			tid, parent.SpanContext().SpanID(), st.Parent.SpanID(), st.SpanContext.TraceID())
	}
	if actionSpan.SpanID() != st.SpanContext.SpanID() {
		t.Fatalf("the action's ctx carries span %s, not idem.step's %s", actionSpan.SpanID(), st.SpanContext.SpanID())
	}
	a := attrs(st)
	want := map[string]string{"idem.service": "pay", "idem.operation": "charge",
		"idem.global_id": saga.GlobalID, "idem.decision": "PROCEED"}
	for k, v := range want {
		if a[attribute.Key(k)].AsString() != v {
			t.Errorf("attribute %s = %q, want %q", k, a[attribute.Key(k)].Emit(), v)
		}
	}
	if a["idem.attempt"].AsInt64() != 1 {
		t.Errorf("idem.attempt = %s, want 1", a["idem.attempt"].Emit())
	}
	if !hasEvent(st, idem.EventExtended) {
		t.Errorf("no %s event in %+v", idem.EventExtended, st.Events)
	}

	// the coordinator stored the parent's trace id for the Begin and the Complete
	rec, err := c.Lookup(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if rec.BeginTraceID != tid || rec.CompleteTraceID != tid {
		t.Fatalf("LookupStep: begin_trace_id %q complete_trace_id %q, want %s", rec.BeginTraceID, rec.CompleteTraceID, tid)
	}
	idemctl := os.Getenv("IDEM_IDEMCTL_BIN")
	if idemctl == "" {
		t.Fatal("IDEM_IDEMCTL_BIN is not set (tests.cmake sets it)")
	}
	out, err := exec.Command(idemctl, "--addr", co.Addr, "--tenant", tenant, "step", saga.GlobalID, "pay", "charge").CombinedOutput()
	if err != nil || !strings.Contains(string(out), tid) {
		t.Fatalf("idemctl step (%v) does not print the trace id %s:\n%s", err, tid, out)
	}

	// the same step again: a replay, in its own span with the event
	pctx2, parent2 := tp.Tracer("test").Start(ctx, "retry")
	rep, err = c.Run(pctx2, key, idem.RunOptions{}, succeed("again"))
	parent2.End()
	if err != nil || !rep.Replayed {
		t.Fatalf("replay: %+v %v", rep, err)
	}
	steps = stepSpans(exp)
	if len(steps) != 2 || !hasEvent(steps[1], idem.EventReplay) || attrs(steps[1])["idem.decision"].AsString() != "REPLAY" ||
		steps[1].Parent.SpanID() != parent2.SpanContext().SpanID() {
		t.Fatalf("replay span: %+v", steps[len(steps)-1])
	}
}

func TestStepSpanWaitingAndTakeover(t *testing.T) {
	co := testcoord.Start(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	c := connect(t, idem.Options{Address: co.Addr, Tenant: testcoord.Tenant("go-trace-wait"), TracerProvider: tp})
	ctx := context.Background()
	saga, err := c.BeginSaga(ctx, idem.SagaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := idem.StepKey{GlobalID: saga.GlobalID, Service: "pay", Operation: "hold"}
	// an attempt that never completes: its lease runs out, and the next run takes over (a lease
	// long enough that the run surely finds it in progress first, even on a busy machine)
	if b, err := c.BeginStep(ctx, key, idem.BeginOptions{Lease: 1500 * time.Millisecond}); err != nil || b.Decision != idem.DecisionProceed {
		t.Fatalf("BeginStep: %+v %v", b, err)
	}
	pctx, parent := tp.Tracer("test").Start(ctx, "parent")
	rep, err := c.Run(pctx, key, idem.RunOptions{InProgress: idem.Backoff, Deadline: 15 * time.Second,
		BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond}, succeed("took over"))
	parent.End()
	if err != nil || !rep.Takeover || rep.Attempt != 2 {
		t.Fatalf("run: %+v %v", rep, err)
	}
	steps := stepSpans(exp)
	if len(steps) != 1 || !hasEvent(steps[0], idem.EventWaiting) || !hasEvent(steps[0], idem.EventTakeover) ||
		attrs(steps[0])["idem.attempt"].AsInt64() != 2 {
		t.Fatalf("want one idem.step with %s and %s events, attempt 2: %+v", idem.EventWaiting, idem.EventTakeover, steps)
	}
}

// Without a tracer provider (otel's global no-op), the caller's remote span context still goes
// out as traceparent: its trace id ends on the step.
func TestRemoteTraceparentWithoutProvider(t *testing.T) {
	co := testcoord.Start(t)
	c := connect(t, idem.Options{Address: co.Addr, Tenant: testcoord.Tenant("go-trace-remote")})
	ctx := context.Background()
	saga, err := c.BeginSaga(ctx, idem.SagaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := idem.StepKey{GlobalID: saga.GlobalID, Service: "pay", Operation: "remote"}
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	rctx := idem.ContextWithTraceparent(ctx, "00-"+tid+"-00f067aa0ba902b7-01", "vendor=x")
	if !trace.SpanContextFromContext(rctx).IsValid() {
		t.Fatal("ContextWithTraceparent: no valid span context")
	}
	if _, err := c.Run(rctx, key, idem.RunOptions{}, succeed("ok")); err != nil {
		t.Fatal(err)
	}
	rec, err := c.Lookup(ctx, key)
	if err != nil || rec.BeginTraceID != tid || rec.CompleteTraceID != tid {
		t.Fatalf("LookupStep: %+v %v, want trace %s", rec, err, tid)
	}
	// a malformed traceparent is no trace context, not an error
	if trace.SpanContextFromContext(idem.ContextWithTraceparent(ctx, "00-zz-01", "")).IsValid() {
		t.Fatal("a malformed traceparent gave a valid span context")
	}
}
