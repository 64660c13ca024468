package main

// payment.go — the two calls, their effects (inside the barrier's transaction) and the guarded
// step around them: what payment.c and sx_step_run do, through the Go SDK's step helper.

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	idem "idem.dev/client"
	"idem.dev/saga-payment/shoppb"
)

const declineOverCents = 100000

type payments struct {
	shoppb.UnimplementedPaymentsServer
	o    *opts
	db   *sql.DB
	idem *idem.Client
}

func result(o idem.Outcome, code int32, st string) idem.Result {
	return idem.Result{Outcome: o, Code: code, Body: []byte(st)}
}

func retryable(what string, err error) idem.Result {
	fmt.Fprintf(os.Stderr, "payment: %s: %v\n", what, err)
	return idem.Result{Outcome: idem.OutcomeRetryable} // rolled back: nothing happened
}

func chargeEffect(gid, customer string, amount int64) effect {
	return func(ctx context.Context, tx *sql.Tx, attempt uint64) idem.Result {
		if amount > declineOverCents || strings.HasPrefix(customer, "declined") {
			return result(idem.OutcomeFailed, 402, "declined")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger (global_id, customer, kind,
 amount_cents, fence) VALUES ($1, $2, 'charge', $3, $4)`, gid, customer, amount,
			int64(attempt)); err != nil {
			return retryable("charge", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO accounts (customer, charged_cents)
 VALUES ($1, $2) ON CONFLICT (customer) DO UPDATE
 SET charged_cents = accounts.charged_cents + EXCLUDED.charged_cents`, customer,
			amount); err != nil {
			return retryable("charge", err)
		}
		return result(idem.OutcomeSucceeded, 200, "charged")
	}
}

// refundEffect, the compensation: refunds what the ledger says was charged for this saga.
func refundEffect(gid string) effect {
	return func(ctx context.Context, tx *sql.Tx, attempt uint64) idem.Result {
		var customer string
		var amount int64
		err := tx.QueryRowContext(ctx, `SELECT customer, amount_cents FROM ledger
 WHERE global_id = $1 AND kind = 'charge' ORDER BY id LIMIT 1`, gid).Scan(&customer, &amount)
		if err == sql.ErrNoRows {
			return result(idem.OutcomeSucceeded, 200, "nothing_charged")
		}
		if err != nil {
			return retryable("refund", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger (global_id, customer, kind,
 amount_cents, fence) VALUES ($1, $2, 'refund', $3, $4)`, gid, customer, amount,
			int64(attempt)); err != nil {
			return retryable("refund", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE accounts SET charged_cents = charged_cents - $2
 WHERE customer = $1`, customer, amount); err != nil {
			return retryable("refund", err)
		}
		return result(idem.OutcomeSucceeded, 200, "refunded")
	}
}

func statusWord(body []byte) string {
	if len(body) > 31 {
		body = body[:31]
	}
	return string(body)
}

// step runs one guarded step: the SDK's Run (fingerprint = SHA-256 of the canonical request)
// whose action is the barrier transaction between two crash points. Errors as sx_step_run:
// FAILED_PRECONDITION / INVALID_ARGUMENT as they are, ABORTED, else UNAVAILABLE (try again).
func (p *payments) step(gid string, phase idem.Phase, canonical string,
	fn effect) (*shoppb.StepReply, error) {
	db, o := p.db, p.o
	pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := db.PingContext(pctx)
	cancel()
	if err != nil {
		return nil, status.Error(codes.Unavailable, "payment: database unavailable")
	}
	key := idem.StepKey{GlobalID: gid, Service: "payment", Operation: "charge", Phase: phase}
	fp := sha256.Sum256([]byte(canonical))
	ro := idem.RunOptions{Fingerprint: fp[:],
		Deadline:    time.Duration(o.stepDeadlineMs) * time.Millisecond,
		Lease:       time.Duration(o.leaseMs) * time.Millisecond,
		BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond}
	appliedEarlier := false
	// the caller's cancellation does not stop a step once begun (as libidem's idem_step_run)
	rep, err := p.idem.Run(context.Background(), key, ro,
		func(ctx context.Context, s idem.StepContext) idem.Result {
			o.crash(afterBegin, key.Operation)
			br, err := barrierRun(ctx, db, key, s.Attempt, fn)
			if err != nil {
				fmt.Fprintf(os.Stderr, "barrier: %v\n", err)
				// a failed COMMIT may have committed: say so; anything else rolled back
				if errors.As(err, &errCommit{}) {
					return idem.Result{Outcome: idem.OutcomeUnknown}
				}
				return idem.Result{Outcome: idem.OutcomeRetryable}
			}
			out := br.result
			if br.rolledBack {
				out = idem.Result{Outcome: idem.OutcomeRetryable}
			}
			appliedEarlier = br.appliedEarlier
			o.crash(afterWrite, key.Operation)
			return out
		})
	where := key.Service + " " + key.Operation
	if err != nil {
		switch idem.Code(err) {
		case idem.CodeStepFailed: // RETRYABLE: nothing happened, the key was released
			return nil, status.Errorf(codes.Unavailable, "%s: not done, try again", where)
		case "FAILED_PRECONDITION":
			return nil, status.Errorf(codes.FailedPrecondition, "%s: %v", where, err)
		case "INVALID_ARGUMENT":
			return nil, status.Errorf(codes.InvalidArgument, "%s: %v", where, err)
		case "ABORTED":
			return nil, status.Errorf(codes.Aborted, "%s: %v", where, err)
		}
		return nil, status.Errorf(codes.Unavailable, "%s: %v", where, err)
	}
	if rep.Ran {
		o.crash(afterComplete, key.Operation)
	}
	reply := &shoppb.StepReply{Decision: strings.ToLower(rep.Decision.String()),
		Attempt: rep.Attempt, Takeover: rep.Takeover, Ran: rep.Ran, AppliedEarlier: appliedEarlier}
	if rep.Decision == idem.DecisionSkipNullCompensation ||
		rep.Decision == idem.DecisionSkipAlreadyCompensated {
		reply.Status = "skipped"
	} else {
		reply.Status = statusWord(rep.Result.Body)
	}
	return reply, nil
}

func (p *payments) Charge(_ context.Context, in *shoppb.ChargeRequest) (*shoppb.StepReply, error) {
	if in.GlobalId == "" || in.Customer == "" || in.AmountCents <= 0 {
		return nil, status.Error(codes.InvalidArgument,
			"global_id, customer and a positive amount_cents are required")
	}
	fp := fmt.Sprintf("charge\n%s\n%s\n%d", in.GlobalId, in.Customer, in.AmountCents)
	return p.step(in.GlobalId, idem.Forward, fp,
		chargeEffect(in.GlobalId, in.Customer, in.AmountCents))
}

func (p *payments) Refund(_ context.Context, in *shoppb.RefundRequest) (*shoppb.StepReply, error) {
	if in.GlobalId == "" {
		return nil, status.Error(codes.InvalidArgument, "global_id is required")
	}
	return p.step(in.GlobalId, idem.Compensation, "refund\n"+in.GlobalId, refundEffect(in.GlobalId))
}
