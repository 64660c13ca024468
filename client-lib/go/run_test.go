package idem_test

// run_test.go — the SDK against a real coordinator (IDEM_COORDINATOR_BIN, IDEM_TEST_PG_URL):
// the step helper, the lease keeper, raw calls, sagas, policies, a standby's redirect,
// cancellation, and fail-open with a journal that idemctl reconciles.

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	idem "idem.dev/client"
	"idem.dev/client/internal/testcoord"
	"net"
)

func connect(t *testing.T, o idem.Options) *idem.Client {
	t.Helper()
	c, err := idem.Connect(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func succeed(body string) idem.Action {
	return func(context.Context, idem.StepContext) idem.Result {
		return idem.Result{Outcome: idem.OutcomeSucceeded, Body: []byte(body)}
	}
}

func TestRunAgainstCoordinator(t *testing.T) {
	co := testcoord.Start(t)
	c := connect(t, idem.Options{Address: co.Addr, Tenant: testcoord.Tenant("go-run")})
	ctx := context.Background()

	saga, err := c.BeginSaga(ctx, idem.SagaOptions{RequestID: "r-1", SagaType: "order", Labels: map[string]string{"k": "v"}})
	if err != nil || !saga.Created {
		t.Fatalf("BeginSaga: %+v %v", saga, err)
	}
	again, err := c.BeginSaga(ctx, idem.SagaOptions{RequestID: "r-1"})
	if err != nil || again.Created || again.GlobalID != saga.GlobalID {
		t.Fatalf("BeginSaga again: %+v %v", again, err)
	}
	key := idem.StepKey{GlobalID: saga.GlobalID, Service: "pay", Operation: "charge"}

	t.Run("replay", func(t *testing.T) {
		rep, err := c.Run(ctx, key, idem.RunOptions{Fingerprint: []byte("f1")}, succeed("one"))
		if err != nil || !rep.Ran || rep.Decision != idem.DecisionProceed || rep.Attempt != 1 || string(rep.Result.Body) != "one" {
			t.Fatalf("first run: %+v %v", rep, err)
		}
		rep, err = c.Run(ctx, key, idem.RunOptions{Fingerprint: []byte("f1")}, succeed("two"))
		if err != nil || rep.Ran || !rep.Replayed || string(rep.Result.Body) != "one" || rep.Result.CompletedUnixMs == 0 {
			t.Fatalf("second run: %+v %v", rep, err)
		}
		_, err = c.Run(ctx, key, idem.RunOptions{Fingerprint: []byte("f2")}, succeed("three"))
		if idem.Code(err) != "FAILED_PRECONDITION" || idem.Reason(err) != "fingerprint-mismatch" {
			t.Fatalf("other fingerprint: %v", err)
		}
		rec, err := c.Lookup(ctx, key)
		if err != nil || rec.State != idem.StateSucceeded || string(rec.Result.Body) != "one" {
			t.Fatalf("lookup: %+v %v", rec, err)
		}
		s, err := c.GetSaga(ctx, saga.GlobalID)
		if err != nil || s.SagaType != "order" || len(s.Steps) != 1 || s.Labels["k"] != "v" {
			t.Fatalf("GetSaga: %+v %v", s, err)
		}
	})

	t.Run("retryable", func(t *testing.T) {
		k := key
		k.Operation = "retry"
		rep, err := c.Run(ctx, k, idem.RunOptions{}, func(context.Context, idem.StepContext) idem.Result {
			return idem.Result{Outcome: idem.OutcomeRetryable, Code: 503}
		})
		var e *idem.Error
		if !errors.As(err, &e) || e.Code != idem.CodeStepFailed || rep == nil || !rep.Ran || rep.Attempt != 1 {
			t.Fatalf("retryable: %+v %v", rep, err)
		}
		rep, err = c.Run(ctx, k, idem.RunOptions{}, succeed("ok"))
		if err != nil || !rep.Ran || rep.Attempt != 2 {
			t.Fatalf("after release: %+v %v", rep, err)
		}
	})

	t.Run("lease kept while the action runs", func(t *testing.T) {
		k := key
		k.Operation = "long"
		stop := make(chan struct{})
		var tookOver atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // another caller keeps trying; it must never take the step over
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				b, err := c.BeginStep(ctx, k, idem.BeginOptions{})
				if err == nil && b.Decision == idem.DecisionProceed {
					tookOver.Store(true)
					return
				}
			}
		}()
		rep, err := c.Run(ctx, k, idem.RunOptions{Lease: 300 * time.Millisecond},
			func(ctx context.Context, s idem.StepContext) idem.Result {
				time.Sleep(1200 * time.Millisecond) // four leases
				return idem.Result{Outcome: idem.OutcomeSucceeded, Body: []byte("long")}
			})
		close(stop)
		wg.Wait()
		if tookOver.Load() {
			t.Fatal("another caller took the step over while the action ran: the lease was not extended")
		}
		if err != nil || rep.Attempt != 1 || rep.LeaseLost {
			t.Fatalf("long run: %+v %v", rep, err)
		}
	})

	t.Run("lost lease cancels the action", func(t *testing.T) {
		k := key
		k.Operation = "lost"
		var cancelled atomic.Bool
		rep, err := c.Run(ctx, k, idem.RunOptions{Lease: 2 * time.Second, ExtendEvery: 100 * time.Millisecond},
			func(actx context.Context, s idem.StepContext) idem.Result {
				// someone else settles this attempt: the next ExtendLease is refused
				if _, err := c.CompleteStep(ctx, k, s.Attempt, idem.Result{Outcome: idem.OutcomeFailed, Body: []byte("other")}); err != nil {
					t.Errorf("raw complete: %v", err)
				}
				select {
				case <-actx.Done():
					cancelled.Store(true)
				case <-time.After(5 * time.Second):
				}
				return idem.Result{Outcome: idem.OutcomeSucceeded, Body: []byte("mine")}
			})
		if !cancelled.Load() || rep == nil || !rep.LeaseLost || idem.Code(err) != "ABORTED" || idem.Reason(err) != "lease-lost" {
			t.Fatalf("lost lease: cancelled=%v %+v %v", cancelled.Load(), rep, err)
		}
		rec, err := c.Lookup(ctx, k)
		if err != nil || string(rec.Result.Body) != "other" {
			t.Fatalf("the lost run's result was stored: %+v %v", rec, err)
		}
	})

	t.Run("in progress: fail fast, then cancellation", func(t *testing.T) {
		k := key
		k.Operation = "held"
		b, err := c.BeginStep(ctx, k, idem.BeginOptions{Lease: 20 * time.Second})
		if err != nil || b.Decision != idem.DecisionProceed {
			t.Fatalf("hold: %+v %v", b, err)
		}
		_, err = c.Run(ctx, k, idem.RunOptions{InProgress: idem.FailFast}, succeed("x"))
		var e *idem.Error
		if !errors.As(err, &e) || e.Code != "ABORTED" || e.Reason != "in-progress" || e.RetryAfter <= 0 {
			t.Fatalf("fail fast: %+v", e)
		}
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(300*time.Millisecond, cancel)
		start := time.Now()
		_, err = c.Run(cctx, k, idem.RunOptions{}, succeed("x")) // waits on the coordinator
		if idem.Code(err) != "CANCELLED" || time.Since(start) > 3*time.Second {
			t.Fatalf("cancelled wait: %v after %v", err, time.Since(start))
		}
		// the waiting run returns the holder's result once it completes
		go func() {
			time.Sleep(200 * time.Millisecond)
			_, _ = c.CompleteStep(ctx, k, b.Attempt, idem.Result{Outcome: idem.OutcomeSucceeded, Body: []byte("holder")})
		}()
		rep, err := c.Run(ctx, k, idem.RunOptions{}, succeed("x"))
		if err != nil || !rep.Replayed || string(rep.Result.Body) != "holder" {
			t.Fatalf("wait: %+v %v", rep, err)
		}
	})

	t.Run("policies", func(t *testing.T) {
		p, err := c.SetPolicy(ctx, idem.Policy{Service: "pay", Operation: "*", FailureMode: idem.FailOpen, Lease: 5 * time.Second})
		if err != nil || p.FailureMode != idem.FailOpen || p.Retention != 24*time.Hour {
			t.Fatalf("SetPolicy: %+v %v", p, err)
		}
		p, err = c.GetPolicy(ctx, "pay", "anything")
		if err != nil || p.FailureMode != idem.FailOpen || p.Lease != 5*time.Second {
			t.Fatalf("GetPolicy: %+v %v", p, err)
		}
	})
}

// A standby stand-in: answers every call UNAVAILABLE with idem-reason not-leader and
// idem-leader naming the real coordinator, as a standby does (docs/api.md §7); counts calls.
func fakeStandby(t *testing.T, leader string, calls *atomic.Int64) string {
	return fakeNode(t, func(_ interface{}, stream grpc.ServerStream) error {
		calls.Add(1)
		stream.SetTrailer(metadata.Pairs("idem-leader", leader, "idem-reason", "not-leader"))
		return status.Error(codes.Unavailable, "not the leader")
	})
}

// fakeNode serves every method with h on a free loopback port until the test ends.
func fakeNode(t *testing.T, h grpc.StreamHandler) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(h))
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().String()
}

func TestRedirectToTheNamedLeader(t *testing.T) {
	co := testcoord.Start(t)
	var calls atomic.Int64
	standby := fakeStandby(t, co.Addr, &calls)
	c := connect(t, idem.Options{Address: standby, Tenant: testcoord.Tenant("go-redirect")})
	ctx := context.Background()
	key := idem.StepKey{GlobalID: "redirect-1", Service: "pay", Operation: "charge"}
	rep, err := c.Run(ctx, key, idem.RunOptions{}, succeed("via leader"))
	if err != nil || !rep.Ran || calls.Load() == 0 {
		t.Fatalf("run via standby: %+v %v (standby calls %d)", rep, err, calls.Load())
	}
	n := calls.Load()
	rep, err = c.Run(ctx, key, idem.RunOptions{}, succeed("again"))
	if err != nil || !rep.Replayed || string(rep.Result.Body) != "via leader" {
		t.Fatalf("second run: %+v %v", rep, err)
	}
	if calls.Load() != n {
		t.Fatalf("the client went back to the standby (%d calls, was %d)", calls.Load(), n)
	}
}

// A draining node stand-in: gRPC core of a node whose shutdown has begun kills every call that
// reaches it with CANCELLED, no idem-reason (docs/upgrading.md); counts calls.
func fakeDraining(t *testing.T, calls *atomic.Int64) string {
	return fakeNode(t, func(interface{}, grpc.ServerStream) error {
		calls.Add(1)
		return status.Error(codes.Canceled, "server is shutting down")
	})
}

// A CANCELLED the caller did not cause is a lost try: repeated on the next node when the call
// is repeatable, else returned with its outcome unknown; the caller's own cancellation is final.
func TestCancelledByADrainingNodeIsALostTry(t *testing.T) {
	co := testcoord.Start(t)
	var calls atomic.Int64
	draining := fakeDraining(t, &calls)
	tenant := testcoord.Tenant("go-lost-try")
	ctx := context.Background()

	c := connect(t, idem.Options{Address: draining + "," + co.Addr, Tenant: tenant})
	key := idem.StepKey{GlobalID: "lost-try-1", Service: "pay", Operation: "charge"}
	rep, err := c.Run(ctx, key, idem.RunOptions{}, succeed("on the next node"))
	if err != nil || !rep.Ran || calls.Load() == 0 {
		t.Fatalf("run past a draining node: %+v %v (draining node's calls %d)", rep, err, calls.Load())
	}

	// BeginSaga without a request id is not repeatable: its lost try is the answer
	c2 := connect(t, idem.Options{Address: draining + "," + co.Addr, Tenant: tenant})
	n := calls.Load()
	_, err = c2.BeginSaga(ctx, idem.SagaOptions{SagaType: "order"})
	var e *idem.Error
	if !errors.As(err, &e) || e.Code != "CANCELLED" || !e.OutcomeUnknown || e.Reason != "" {
		t.Fatalf("BeginSaga on a draining node: want CANCELLED with outcome unknown, got %+v", err)
	}
	if calls.Load() != n+1 {
		t.Fatalf("BeginSaga went to the draining node %d times, want once", calls.Load()-n)
	}

	// the caller's own cancellation: CANCELLED, final, nothing unknown about it
	hang := make(chan struct{}, 1)
	slow := fakeNode(t, func(_ interface{}, stream grpc.ServerStream) error {
		select {
		case hang <- struct{}{}:
		default:
		}
		<-stream.Context().Done()
		return stream.Context().Err()
	})
	c3 := connect(t, idem.Options{Address: slow + "," + co.Addr, Tenant: tenant})
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-hang:
		case <-time.After(10 * time.Second):
		}
		cancel()
	}()
	_, err = c3.Lookup(cctx, idem.StepKey{GlobalID: "lost-try-2", Service: "pay", Operation: "charge"})
	cancel()
	if !errors.As(err, &e) || e.Code != "CANCELLED" || e.OutcomeUnknown {
		t.Fatalf("a call the caller cancelled: want CANCELLED, outcome known, got %+v", err)
	}
}

func TestFailOpenJournalsAndIdemctlReconciles(t *testing.T) {
	co := testcoord.Start(t)
	tenant := testcoord.Tenant("go-open")
	journal := filepath.Join(t.TempDir(), "journal")
	c := connect(t, idem.Options{Address: co.Addr, Tenant: tenant, JournalPath: journal, Deadline: 500 * time.Millisecond})
	ctx := context.Background()
	if _, err := c.SetPolicy(ctx, idem.Policy{Service: "open", Operation: "*", FailureMode: idem.FailOpen}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"open", "closed"} {
		if err := c.PrefetchPolicy(ctx, s, "pay"); err != nil {
			t.Fatal(err)
		}
	}
	co.Stop()
	key := idem.StepKey{GlobalID: "fo-1", Service: "open", Operation: "pay"}
	rep, err := c.Run(ctx, key, idem.RunOptions{Deadline: 1500 * time.Millisecond, Fingerprint: []byte{1, 2}}, succeed("paid"))
	if err != nil || !rep.Ran || !rep.Unguarded || !rep.Journaled || rep.Decision != idem.DecisionProceedUnguarded {
		t.Fatalf("fail-open run: %+v %v", rep, err)
	}
	ran := false
	_, err = c.Run(ctx, idem.StepKey{GlobalID: "fo-1", Service: "closed", Operation: "pay"}, idem.RunOptions{Deadline: 1500 * time.Millisecond},
		func(context.Context, idem.StepContext) idem.Result {
			ran = true
			return idem.Result{Outcome: idem.OutcomeSucceeded}
		})
	if ran || (idem.Code(err) != "UNAVAILABLE" && idem.Code(err) != "DEADLINE_EXCEEDED") {
		t.Fatalf("fail-closed run: ran=%v %v", ran, err)
	}
	b, _ := os.ReadFile(journal)
	if lines := strings.Count(string(b), "\n"); lines != 1 {
		t.Fatalf("journal has %d lines:\n%s", lines, b)
	}

	// the journal is libidem's format: idemctl reconcile records it
	idemctl := os.Getenv("IDEM_IDEMCTL_BIN")
	if idemctl == "" {
		t.Log("IDEM_IDEMCTL_BIN not set: reconcile not checked")
		return
	}
	co2 := testcoord.Start(t)
	out, err := exec.Command(idemctl, "--addr", co2.Addr, "--tenant", tenant, "reconcile", journal).CombinedOutput()
	if err != nil {
		t.Fatalf("idemctl reconcile: %v\n%s", err, out)
	}
	c2 := connect(t, idem.Options{Address: co2.Addr, Tenant: tenant})
	rec, err := c2.Lookup(ctx, key)
	if err != nil || rec.State != idem.StateSucceeded || string(rec.Result.Body) != "paid" || string(rec.Fingerprint) != "\x01\x02" {
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			t.Log(sc.Text())
		}
		t.Fatalf("after reconcile: %+v %v", rec, err)
	}
}
