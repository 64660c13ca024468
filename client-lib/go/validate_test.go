package idem_test

// validate_test.go — bad input is refused before any call, with an *Error naming the field;
// the journal line matches libidem's format.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	idem "idem.dev/client"
	"idem.dev/client/internal/testcoord"
)

func wantInvalid(t *testing.T, what string, err error, field string) {
	t.Helper()
	var e *idem.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: want an *idem.Error, got %v", what, err)
	}
	if e.Code != "INVALID_ARGUMENT" || e.Field != field || !strings.Contains(e.Message, field[strings.LastIndex(field, ".")+1:]) {
		t.Fatalf("%s: want INVALID_ARGUMENT naming %s, got code %s field %q message %q", what, field, e.Code, e.Field, e.Message)
	}
}

func TestConnectRefusesMalformedAddresses(t *testing.T) {
	for _, a := range []string{"", " , ", "localhost", "127.0.0.1:", ":50051", "127.0.0.1:0", "127.0.0.1:99999", "h:p", "127.0.0.1:50051,nope"} {
		c, err := idem.Connect(idem.Options{Address: a})
		if c != nil {
			t.Fatalf("address %q: got a client", a)
		}
		wantInvalid(t, "address "+a, err, "options.address")
	}
	_, err := idem.Connect(idem.Options{Address: "127.0.0.1:1", Tenant: "bad tenant"})
	wantInvalid(t, "tenant", err, "options.tenant")
	_, err = idem.Connect(idem.Options{Address: "127.0.0.1:1", TLSRootFile: "/nonexistent/ca.pem"})
	wantInvalid(t, "tls root", err, "options.tls_root_file")
}

func TestBadInputMakesNoCall(t *testing.T) {
	// a coordinator that does not exist: any call would come back UNAVAILABLE or
	// DEADLINE_EXCEEDED after a while, not INVALID_ARGUMENT at once
	c, err := idem.Connect(idem.Options{Address: testcoord.FreePort(t), Deadline: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	good := idem.StepKey{GlobalID: "g1", Service: "svc", Operation: "op"}
	start := time.Now()
	cases := []struct {
		field string
		call  func() error
	}{
		{"key.global_id", func() error {
			_, e := c.BeginStep(ctx, idem.StepKey{Service: "s", Operation: "o"}, idem.BeginOptions{})
			return e
		}},
		{"key.global_id", func() error {
			_, e := c.BeginStep(ctx, idem.StepKey{GlobalID: "a/b", Service: "s", Operation: "o"}, idem.BeginOptions{})
			return e
		}},
		{"key.service", func() error { _, e := c.Lookup(ctx, idem.StepKey{GlobalID: "g", Operation: "o"}); return e }},
		{"key.operation", func() error {
			_, e := c.Run(ctx, idem.StepKey{GlobalID: "g", Service: "s"}, idem.RunOptions{},
				func(context.Context, idem.StepContext) idem.Result { t.Fatal("action ran"); return idem.Result{} })
			return e
		}},
		{"key.service", func() error {
			_, e := c.Run(ctx, idem.StepKey{GlobalID: "g", Service: "Upper", Operation: "o"}, idem.RunOptions{},
				func(context.Context, idem.StepContext) idem.Result { t.Fatal("action ran"); return idem.Result{} })
			return e
		}},
		{"key.phase", func() error {
			_, e := c.Lookup(ctx, idem.StepKey{GlobalID: "g", Service: "s", Operation: "o", Phase: 7})
			return e
		}},
		{"fingerprint", func() error {
			_, e := c.BeginStep(ctx, good, idem.BeginOptions{Fingerprint: make([]byte, 65)})
			return e
		}},
		{"result.body", func() error {
			_, e := c.CompleteStep(ctx, good, 1, idem.Result{Outcome: idem.OutcomeSucceeded, Body: make([]byte, 64*1024+1)})
			return e
		}},
		{"result.outcome", func() error { _, e := c.CompleteStep(ctx, good, 1, idem.Result{}); return e }},
		{"attempt", func() error { _, e := c.ExtendLease(ctx, good, 0, 0); return e }},
		{"wait", func() error { _, e := c.BeginStep(ctx, good, idem.BeginOptions{Wait: 61 * time.Second}); return e }},
		{"global_id", func() error { _, e := c.GetSaga(ctx, ""); return e }},
		{"request_id", func() error { _, e := c.BeginSaga(ctx, idem.SagaOptions{RequestID: "a\nb"}); return e }},
		{"policy.failure_mode", func() error { _, e := c.SetPolicy(ctx, idem.Policy{Service: "s", Operation: "o"}); return e }},
		{"policy.operation", func() error {
			_, e := c.SetPolicy(ctx, idem.Policy{Service: "*", Operation: "o", FailureMode: idem.FailOpen})
			return e
		}},
		{"operation", func() error { _, e := c.GetPolicy(ctx, "s", ""); return e }},
	}
	for i, tc := range cases {
		wantInvalid(t, tc.field+" case "+string(rune('a'+i)), tc.call(), tc.field)
	}
	// 64 KiB exactly is fine: it goes out and fails as the dead address does
	_, err = c.CompleteStep(ctx, good, 1, idem.Result{Outcome: idem.OutcomeSucceeded, Body: make([]byte, 64*1024)})
	if idem.Code(err) == "INVALID_ARGUMENT" {
		t.Fatalf("a 64 KiB body was refused: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second+time.Second {
		t.Fatalf("validation took %v", d)
	}
}

func TestJournalLineFormat(t *testing.T) {
	at := time.UnixMilli(1700000000123)
	k := idem.StepKey{GlobalID: "g:1", Service: "pay", Operation: "charge", Phase: idem.Compensation}
	got := idem.JournalLine(at, "client", "default", k, []byte{0xab, 0x01}, idem.Result{Outcome: idem.OutcomeSucceeded, Code: 201, Body: []byte("a b/%é")})
	want := "idem1 1700000000123 client default g:1 pay charge compensation succeeded 201 ab01 a%20b/%25%C3%A9\n"
	if got != want {
		t.Fatalf("journal line\n got %q\nwant %q", got, want)
	}
	got = idem.JournalLine(at, "server", "t", idem.StepKey{GlobalID: "g", Service: "s", Operation: "o"}, nil, idem.Result{Outcome: 9, Body: []byte("-")})
	want = "idem1 1700000000123 server t g s o forward unknown 0 - %2D\n"
	if got != want {
		t.Fatalf("journal line\n got %q\nwant %q", got, want)
	}
}
