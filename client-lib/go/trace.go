package idem

// trace.go — W3C trace context on every call and the idem.step span (docs/api.md §22), through
// go.opentelemetry.io/otel (Debian's golang-opentelemetry-otel-dev). Every call sends the
// traceparent (and tracestate) of the span in its context as gRPC metadata, whatever
// propagator the application installed; Run opens one span per step, a child of the caller's.

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

// TracerName is the instrumentation name of the SDK's tracer.
const TracerName = "idem.dev/client"

// StepSpanName is the name of the span Run opens for each step.
const StepSpanName = "idem.step"

// The idem.step span's attributes and events (docs/sdk-go.md).
const (
	AttrService    = attribute.Key("idem.service")
	AttrOperation  = attribute.Key("idem.operation")
	AttrGlobalID   = attribute.Key("idem.global_id")
	AttrPhase      = attribute.Key("idem.phase")
	AttrDecision   = attribute.Key("idem.decision")
	AttrAttempt    = attribute.Key("idem.attempt")
	EventReplay    = "idem.replay"
	EventTakeover  = "idem.takeover"
	EventWaiting   = "idem.waiting"
	EventExtended  = "idem.lease_extended"
	EventLeaseLost = "idem.lease_lost"
)

// traceContext is the W3C propagator: the SDK always sends traceparent/tracestate, not what
// otel.GetTextMapPropagator() happens to be (a no-op until the application sets one).
var traceContext = propagation.TraceContext{}

// mdCarrier writes the propagator's fields into outgoing gRPC metadata pairs.
type mdCarrier struct{ pairs *[]string }

func (c mdCarrier) Get(string) string { return "" }
func (c mdCarrier) Set(k, v string)   { *c.pairs = append(*c.pairs, k, v) }
func (c mdCarrier) Keys() []string    { return nil }

// headerPair is a read-only carrier of the two W3C fields.
type headerPair struct{ traceparent, tracestate string }

func (h headerPair) Get(k string) string {
	switch k {
	case "traceparent":
		return h.traceparent
	case "tracestate":
		return h.tracestate
	}
	return ""
}
func (h headerPair) Set(string, string) {}
func (h headerPair) Keys() []string     { return []string{"traceparent", "tracestate"} }

// withTraceMetadata appends the traceparent/tracestate of ctx's span (when it has a valid one)
// to the call's outgoing metadata.
func withTraceMetadata(ctx context.Context) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	var pairs []string
	traceContext.Inject(ctx, mdCarrier{&pairs})
	if len(pairs) == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, pairs...)
}

// ContextWithTraceparent returns ctx carrying the remote span context of a W3C traceparent
// (and tracestate) header value, as propagation.TraceContext reads it; a malformed traceparent
// leaves ctx as it is. The HTTP middleware uses it for a request without a span in its context.
func ContextWithTraceparent(ctx context.Context, traceparent, tracestate string) context.Context {
	return traceContext.Extract(ctx, headerPair{traceparent, tracestate})
}

// tracer is the Options' TracerProvider's, or the global one (otel.SetTracerProvider).
func (c *Client) tracer() trace.Tracer {
	tp := c.tracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(TracerName, trace.WithInstrumentationVersion(Version))
}

// startStepSpan opens idem.step under ctx's span. The returned context carries it; when the
// provider gives a span without a valid context (a no-op provider), the caller's context is
// returned instead, so that the caller's traceparent still goes out.
func (c *Client) startStepSpan(ctx context.Context, key StepKey) (context.Context, trace.Span) {
	sctx, span := c.tracer().Start(ctx, StepSpanName, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrService.String(key.Service), AttrOperation.String(key.Operation),
			AttrGlobalID.String(key.GlobalID), AttrPhase.String(key.phase().String())))
	if !span.SpanContext().IsValid() {
		return ctx, span
	}
	return sctx, span
}

// endStepSpan records how the run ended and ends the span.
func endStepSpan(span trace.Span, rep *Report, e *Error) {
	if rep != nil && rep.Decision != DecisionUnspecified {
		span.SetAttributes(AttrDecision.String(rep.Decision.String()),
			AttrAttempt.Int64(int64(rep.Attempt)))
	}
	if e != nil {
		span.SetStatus(codes.Error, e.Error())
		span.SetAttributes(attribute.String("idem.error.code", e.Code),
			attribute.String("idem.error.reason", e.Reason))
	}
	span.End()
}
