// Command step is your first guarded step from Go (idem.dev/client, the Go SDK), the same flow
// and the same printed lines as ../c/step.c.
//
// A shop charges a card for an order; the double-click sends the same request twice; idem runs
// the charge once and answers the second request with the first one's result.
//
//	client-lib/examples/go/run.sh ORDER-ID
//
// run.sh builds this file offline in GOPATH mode (client-lib/go/go.sh over Debian's grpc-go; the
// build cache outside the checkout) and runs it. IDEM_ADDRESS: the coordinator (default
// 127.0.0.1:50051); IDEM_TENANT: your tenant (default "shop"); the order id defaults to
// order-go-1 and the step's service is payment-go, so it runs beside the C, Python, Node and
// Java examples without sharing their sagas. Exit status: 0 when the charge ran at most once, 1
// otherwise.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"

	idem "idem.dev/client"
)

// gateway is a pretend payment gateway that counts its charges.
type gateway struct{ charges int }

func (g *gateway) charge(orderID string, fencingToken uint64) (int32, []byte) {
	g.charges++
	return 200, []byte(fmt.Sprintf("receipt for %s, attempt %d", orderID, fencingToken))
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// pay is one request to pay for the order: what each of the duplicates runs.
func pay(ctx context.Context, c *idem.Client, gid, orderID string, amountCents int64,
	gw *gateway) (*idem.Report, error) {
	// the request's identity: a different amount under the same key is refused
	fp := sha256.Sum256([]byte(fmt.Sprintf("order=%s;amount=%d", orderID, amountCents)))
	key := idem.StepKey{GlobalID: gid, Service: "payment-go", Operation: "charge"}
	rep, err := c.Run(ctx, key, idem.RunOptions{Fingerprint: fp[:]},
		func(ctx context.Context, s idem.StepContext) idem.Result {
			code, body := gw.charge(orderID, s.Attempt) // pass the attempt on as a fencing token
			return idem.Result{Outcome: idem.OutcomeSucceeded, Code: code, Body: body}
		})
	if err != nil {
		return nil, err
	}
	if !rep.Ran && !rep.Replayed {
		fmt.Println("skipped: nothing to run")
		return rep, nil
	}
	how := "ran: the gateway was called"
	if rep.Replayed {
		how = "replayed: the stored result"
	}
	fmt.Printf("%s, outcome %s, code %d, body \"%s\"\n", how, rep.Result.Outcome, rep.Result.Code,
		rep.Result.Body)
	return rep, nil
}

func run() int {
	orderID := "order-go-1"
	if len(os.Args) > 1 {
		orderID = os.Args[1]
	}
	c, err := idem.Connect(idem.Options{Address: env("IDEM_ADDRESS", "127.0.0.1:50051"),
		Tenant: env("IDEM_TENANT", "shop")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		return 1
	}
	defer c.Close()
	ctx := context.Background()

	// One saga per order: the order id is the saga's request id, so a retried checkout finds the
	// same global id instead of starting a second saga.
	saga, err := c.BeginSaga(ctx, idem.SagaOptions{RequestID: orderID, SagaType: "order"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "begin saga:", err)
		return 1
	}
	state := "the order's existing saga"
	if saga.Created {
		state = "new"
	}
	fmt.Printf("saga %s (%s)\n", saga.GlobalID, state)

	gw := &gateway{}
	first, err := pay(ctx, c, saga.GlobalID, orderID, 4200, gw) // the first click
	if err != nil {
		fmt.Fprintln(os.Stderr, "pay:", err)
		return 1
	}
	second, err := pay(ctx, c, saga.GlobalID, orderID, 4200, gw) // the double-click
	if err != nil {
		fmt.Fprintln(os.Stderr, "pay:", err)
		return 1
	}
	if gw.charges > 1 {
		fmt.Fprintf(os.Stderr, "the gateway was called %d times\n", gw.charges)
		return 1
	}
	if !second.Replayed || !bytes.Equal(second.Result.Body, first.Result.Body) {
		fmt.Fprintln(os.Stderr, "the second request did not replay the first one's result")
		return 1
	}
	fmt.Printf("charged %d time(s) for two requests\n", gw.charges)
	return 0
}

func main() { os.Exit(run()) }
