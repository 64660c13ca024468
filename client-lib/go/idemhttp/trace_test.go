package idemhttp_test

// trace_test.go — a request with a W3C traceparent through the middleware, over real HTTP on
// loopback against a real coordinator: its trace id ends on the step (LookupStep, docs/api.md
// §22); a malformed traceparent is ignored, not an error.

import (
	"context"
	"testing"

	idem "idem.dev/client"
	"idem.dev/client/idemhttp"
)

func TestTraceparentEndsOnTheStep(t *testing.T) {
	r := newRig(t, nil, "")
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	body := "{}"
	for _, c := range []struct{ key, traceparent, want string }{
		{"traced-1", "00-" + tid + "-00f067aa0ba902b7-01", tid},
		{"traced-2", "00-not-a-trace-01", ""},
	} {
		key := c.key
		a := send(t, r.addr, specRequest{Key: &key, Body: &body, Headers: map[string]string{"traceparent": c.traceparent}})
		if a.status != 201 {
			t.Fatalf("%s: %d %q", key, a.status, a.body)
		}
		sk := idem.StepKey{GlobalID: idemhttp.GlobalID("", key), Service: "go-mw", Operation: idemhttp.Operation("POST", "/echo")}
		rec, err := r.client.Lookup(context.Background(), sk)
		if err != nil {
			t.Fatalf("%s: LookupStep: %v", key, err)
		}
		if rec.BeginTraceID != c.want || rec.CompleteTraceID != c.want {
			t.Fatalf("%s (traceparent %q): begin_trace_id %q complete_trace_id %q, want %q", key, c.traceparent,
				rec.BeginTraceID, rec.CompleteTraceID, c.want)
		}
	}
}
