package idemhttp_test

// findings_test.go — the findings (docs/api.md §19) against the net/http middleware, each over real HTTP on
// loopback against a real coordinator (docs/api.md §19):
//   - one key under two spellings of a route ran twice (the operation came from the escaped path);
//   - a replay sent whatever was stored (a CRLF in a header value, any header name, a 101);
//   - a valid tracestate of about 8 KB made the coordinator refuse the call: 503, handler not run;
//   - two traceparent lines continued the first trace;
//   - a 48-64 KiB answer lost its Content-Type on replay.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	idem "idem.dev/client"
	"idem.dev/client/idemhttp"
)

func TestFindingOneKeyTwoSpellingsRunsOnce(t *testing.T) {
	r := newRig(t, nil, "")
	body := `{"amount":1}`
	for i, path := range []string{"/echo", "/%65cho", "/echo/", "/%65cho/"} {
		key := "spelling-1"
		a := send(t, r.addr, specRequest{Key: &key, Path: path, Body: &body})
		replayed := a.header.Get("Idempotent-Replayed") == "true"
		if a.status != 201 || replayed != (i > 0) {
			t.Fatalf("%s: %d replayed=%v %q (want 201, replayed after the first)", path, a.status, replayed, a.body)
		}
	}
	if n := r.app.executions.Load(); n != 1 {
		t.Fatalf("one key under four spellings of /echo ran %d times, want once", n)
	}
}

// plant stores doc (and code) as the answer of key's POST /echo with body, as another
// middleware (or a corrupted row) might have.
func plant(t *testing.T, r *rig, key, body string, code int32, doc []byte) {
	t.Helper()
	sk := idem.StepKey{GlobalID: idemhttp.GlobalID("", key), Service: "go-mw", Operation: "post--echo", Phase: idem.Forward}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := r.client.BeginStep(ctx, sk, idem.BeginOptions{Fingerprint: idemhttp.Fingerprint("POST", "/echo", []byte(body))})
	if err != nil {
		t.Fatalf("plant %s: BeginStep: %v", key, err)
	}
	if _, err := r.client.CompleteStep(ctx, sk, b.Attempt, idem.Result{Outcome: idem.OutcomeSucceeded, Code: code, Body: doc}); err != nil {
		t.Fatalf("plant %s: CompleteStep: %v", key, err)
	}
}

func TestFindingReplayValidatesTheStoredAnswer(t *testing.T) {
	s := loadSpec(t)
	rules := loadRules(t)
	r := newRig(t, nil, "")
	body := "{}"
	for i, v := range rules.StoredAnswerVectors {
		if v.Doc == "" { // an empty body is what retention leaves; CompleteStep cannot plant it
			continue
		}
		key := fmt.Sprintf("stored-%d", i)
		plant(t, r, key, body, v.Code, []byte(v.Doc))
		a := send(t, r.addr, specRequest{Key: &key, Body: &body})
		if v.Problem != "" {
			checkProblem(t, s, v.About, a, v.Problem, &key)
			for name := range a.header {
				if strings.EqualFold(name, "Set-Cookie") {
					t.Fatalf("%s: Set-Cookie went out: %v", v.About, a.header)
				}
			}
			if r.logs.count("stored-answer-invalid") == 0 {
				t.Fatalf("%s: not logged", v.About)
			}
			continue
		}
		if a.status != v.Status || a.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s: %d %v %q, want %d replayed", v.About, a.status, a.header, a.body, v.Status)
		}
		for _, h := range v.Headers {
			if a.header.Get(h[0]) != h[1] {
				t.Fatalf("%s: header %s %q, want %q", v.About, h[0], a.header.Get(h[0]), h[1])
			}
		}
	}
	if r.app.executions.Load() != 0 {
		t.Fatal("the handler ran for a stored answer")
	}
}

func TestFindingLargeTracestateIsDroppedNotAnError(t *testing.T) {
	r := newRig(t, nil, "")
	body := "{}"
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	key := "big-tracestate-1"
	members := make([]string, 32) // W3C's largest: 32 list members, about 8 KB
	for i := range members {
		members[i] = fmt.Sprintf("k%d=%s", i, strings.Repeat("x", 250))
	}
	a := send(t, r.addr, specRequest{Key: &key, Body: &body, Lines: []string{
		"traceparent: 00-" + tid + "-00f067aa0ba902b7-01", "tracestate: " + strings.Join(members, ",")}})
	if a.status != 201 || r.app.executions.Load() != 1 {
		t.Fatalf("a valid 8 KB tracestate: %d %q, executions %d (want 201, run once)", a.status, a.body, r.app.executions.Load())
	}
	rec, err := r.client.Lookup(context.Background(), idem.StepKey{GlobalID: idemhttp.GlobalID("", key), Service: "go-mw", Operation: "post--echo"})
	if err != nil || rec.BeginTraceID != tid {
		t.Fatalf("the traceparent beside a dropped tracestate: begin_trace_id %q (%v), want %s", rec.BeginTraceID, err, tid)
	}
}

func TestFindingTwoTraceparentsAreNoTraceContext(t *testing.T) {
	r := newRig(t, nil, "")
	body := "{}"
	key := "two-traceparents-1"
	a := send(t, r.addr, specRequest{Key: &key, Body: &body, Lines: []string{
		"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
	if a.status != 201 {
		t.Fatalf("two traceparents: %d %q", a.status, a.body)
	}
	rec, err := r.client.Lookup(context.Background(), idem.StepKey{GlobalID: idemhttp.GlobalID("", key), Service: "go-mw", Operation: "post--echo"})
	if err != nil || rec.BeginTraceID != "" {
		t.Fatalf("two traceparent lines: begin_trace_id %q (%v), want none", rec.BeginTraceID, err)
	}
}

func TestFindingLargeAnswerKeepsContentTypeOnReplay(t *testing.T) {
	r := newRig(t, nil, "")
	body := "{}"
	for _, n := range []string{"49152", "60000", "65536"} {
		key := "ct-" + n
		first := send(t, r.addr, specRequest{Key: &key, Body: &body, Headers: map[string]string{"Response-Bytes": n}})
		again := send(t, r.addr, specRequest{Key: &key, Body: &body, Headers: map[string]string{"Response-Bytes": n}})
		if first.status != 200 || again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s bytes: %d then %d %v", n, first.status, again.status, again.header)
		}
		if ct := again.header.Get("Content-Type"); ct != "application/octet-stream" {
			t.Fatalf("a %s-byte answer replayed with Content-Type %q, want application/octet-stream (kept beside the omitted body)", n, ct)
		}
	}
}
