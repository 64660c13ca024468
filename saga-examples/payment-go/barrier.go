package main

// barrier.go — libidem_pg's barrier (client-lib/include/idem/idem_pg.h) in Go on database/sql:
// the business writes and the step's dedup row commit in ONE local transaction, so an attempt
// that takes over after a crash between that COMMIT and CompleteStep finds the row and keeps the
// earlier attempt's result instead of acting twice. Same table (idem_barrier in the
// connection's schema), same claim, same columns: the C services and the cross-check read it.

import (
	"context"
	"database/sql"
	"fmt"

	idem "idem.dev/client"
)

const barrierCreateSQL = `CREATE TABLE IF NOT EXISTS idem_barrier (
 global_id text NOT NULL, service text NOT NULL, operation text NOT NULL,
 phase smallint NOT NULL, fence bigint NOT NULL CHECK (fence >= 1),
 outcome smallint, code integer NOT NULL DEFAULT 0, body bytea,
 applied_at timestamptz NOT NULL DEFAULT now(),
 PRIMARY KEY (global_id, service, operation, phase))`

// The claim: a row no attempt has finished, from an older attempt only (fence < attempt).
const barrierClaimSQL = `INSERT INTO idem_barrier (global_id, service, operation, phase, fence)
 VALUES ($1, $2, $3, $4, $5)
 ON CONFLICT (global_id, service, operation, phase) DO UPDATE SET fence = EXCLUDED.fence
 WHERE idem_barrier.fence < EXCLUDED.fence AND idem_barrier.outcome IS NULL
 RETURNING fence`

const barrierSelectSQL = `SELECT fence, outcome, code, body FROM idem_barrier
 WHERE global_id = $1 AND service = $2 AND operation = $3 AND phase = $4`

const barrierFinishSQL = `UPDATE idem_barrier SET outcome = $6, code = $7, body = $8, applied_at = now()
 WHERE global_id = $1 AND service = $2 AND operation = $3 AND phase = $4 AND fence = $5`

type txBeginner interface {
	BeginTx(ctx context.Context, o *sql.TxOptions) (*sql.Tx, error)
}

// barrierInit creates idem_barrier when missing (serialized between processes).
func barrierInit(ctx context.Context, db txBeginner) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit: a no-op
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(7342190001)"); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, barrierCreateSQL); err != nil {
		return err
	}
	return tx.Commit()
}

// effect runs inside the barrier's transaction: SUCCEEDED / FAILED commit with the dedup row;
// anything else rolls back (nothing happened).
type effect func(ctx context.Context, tx *sql.Tx, attempt uint64) idem.Result

type barrierReport struct {
	applied        bool // the effect ran and committed in this call
	appliedEarlier bool // the dedup row was there: an earlier attempt's result, effect not run
	rolledBack     bool // the effect reported RETRYABLE / UNKNOWN: nothing committed
	fence          uint64
	result         idem.Result
}

// errCommit: COMMIT itself failed; the effect may have committed (retry: the barrier tells).
type errCommit struct{ err error }

func (e errCommit) Error() string { return "barrier commit: " + e.err.Error() }

func barrierRun(ctx context.Context, db *sql.DB, key idem.StepKey, attempt uint64,
	fn effect) (*barrierReport, error) {
	if attempt == 0 {
		return nil, fmt.Errorf("barrier: attempt 0")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("barrier begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit: a no-op
	k := []any{key.GlobalID, key.Service, key.Operation, int32(key.Phase)}
	var claimed int64
	err = tx.QueryRowContext(ctx, barrierClaimSQL, append(k, int64(attempt))...).Scan(&claimed)
	if err == sql.ErrNoRows { // applied by an earlier (or concurrent, now committed) attempt
		rep := &barrierReport{appliedEarlier: true}
		var outcome sql.NullInt32
		var code int32
		var body []byte
		if err := tx.QueryRowContext(ctx, barrierSelectSQL, k...).Scan(&rep.fence, &outcome,
			&code, &body); err != nil {
			return nil, fmt.Errorf("barrier read: %w", err)
		}
		rep.result = idem.Result{Outcome: idem.OutcomeUnknown, Code: code, Body: body}
		if outcome.Valid {
			rep.result.Outcome = idem.Outcome(outcome.Int32)
		}
		return rep, nil
	}
	if err != nil {
		return nil, fmt.Errorf("barrier claim: %w", err)
	}
	out := fn(ctx, tx, attempt)
	if out.Outcome != idem.OutcomeSucceeded && out.Outcome != idem.OutcomeFailed {
		return &barrierReport{rolledBack: true,
			result: idem.Result{Outcome: idem.OutcomeRetryable, Code: out.Code}}, nil
	}
	var body any // NULL when empty, as libidem_pg stores it
	if len(out.Body) > 0 {
		body = out.Body
	}
	res, err := tx.ExecContext(ctx, barrierFinishSQL, append(k, int64(attempt),
		int32(out.Outcome), out.Code, body)...)
	if err != nil {
		return nil, fmt.Errorf("barrier record: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return nil, fmt.Errorf("barrier record: %d rows", n)
	}
	if err := tx.Commit(); err != nil {
		return nil, errCommit{err}
	}
	return &barrierReport{applied: true, fence: attempt, result: out}, nil
}
