// saga-payment-go — the order saga's payment participant in Go, a drop-in replacement of
// saga-examples/payment/payment.c: the same gRPC API (shop.v1.Payments: Charge, Refund), the
// same flags and SAGA_* environment, the same tables in its own schema (--schema), and the same
// guarded step: the Go SDK's step helper (idem.Client.Run: BeginStep, the action on PROCEED,
// CompleteStep, replay, wait, lease keep-alive) around the Postgres barrier (barrier.go).
//
// Its own tables, in its own schema:
//
//	ledger   (id, global_id, customer, kind charge|refund, amount_cents, fence, at)
//	accounts (customer, charged_cents)   what each customer has been charged, net of refunds
//	idem_barrier                          the dedup rows (barrier.go, libidem_pg's table)
//
// The ledger deliberately has no unique constraint on (global_id, kind): exactly-once comes from
// the coordinator and the barrier, and the acceptance test would see a double charge.
// Step keys: (global_id, "payment", "charge", FORWARD) and (…, COMPENSATION) for the refund. A
// charge over declineOverCents, or for a customer named "declined…", is declined: a definite
// FAILED, remembered by the barrier and replayed by the coordinator.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lib/pq"
	"google.golang.org/grpc"

	idem "idem.dev/client"
	"idem.dev/saga-payment/shoppb"
)

const schemaSQL = `CREATE TABLE IF NOT EXISTS ledger (
 id bigserial PRIMARY KEY, global_id text NOT NULL, customer text NOT NULL,
 kind text NOT NULL CHECK (kind IN ('charge', 'refund')), amount_cents bigint NOT NULL,
 fence bigint NOT NULL, at timestamptz NOT NULL DEFAULT now());
CREATE INDEX IF NOT EXISTS ledger_global_id ON ledger (global_id);
CREATE TABLE IF NOT EXISTS accounts (
 customer text PRIMARY KEY, charged_cents bigint NOT NULL DEFAULT 0)`

// openDB connects to o.pg (a URL or a conninfo string) with search_path = o.schema, creates the
// schema, the tables and idem_barrier (serialized between processes as payment.c does).
func openDB(o *opts) (*sql.DB, error) {
	dsn := o.pg
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		var err error
		if dsn, err = pq.ParseURL(dsn); err != nil {
			return nil, err
		}
	}
	// every pooled connection starts in the service's schema (a startup parameter)
	dsn += " search_path=" + o.schema + " client_min_messages=warning"
	db, err := sqlOpen(dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(o.threads)
	db.SetMaxIdleConns(o.threads)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	defer c.Close()
	err = func() error {
		tx, err := c.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(7342190002)"); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+o.schema); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if _, err := c.ExecContext(ctx, "SELECT pg_advisory_lock(7342190003)"); err != nil {
			return err
		}
		defer c.ExecContext(ctx, "SELECT pg_advisory_unlock(7342190003)") //nolint:errcheck
		if _, err := c.ExecContext(ctx, schemaSQL); err != nil {
			return err
		}
		return barrierInit(ctx, c)
	}()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot set up schema %s: %w", o.schema, err)
	}
	return db, nil
}

// sqlOpen opens a pool on dsn. Without an sslmode, lib/pq requires TLS where libpq prefers it:
// a server without TLS is then asked again in plain text, as libpq's "prefer" does.
func sqlOpen(dsn string) (*sql.DB, error) {
	conn, err := pq.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	if strings.Contains(dsn, "sslmode=") {
		return db, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err == nil || !errors.Is(err, pq.ErrSSLNotSupported) {
		return db, nil // other errors show at first use, as payment.c reports them
	}
	db.Close()
	if conn, err = pq.NewConnector(dsn + " sslmode=disable"); err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

func main() {
	rand.Seed(time.Now().UnixNano() ^ int64(os.Getpid()))
	o := parseOpts(os.Args)
	db, err := openDB(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "payment: %v\n", err)
		os.Exit(1)
	}
	c, err := idem.Connect(idem.Options{Address: o.coordinator, Tenant: o.tenant,
		Deadline: 3 * time.Second})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot create the coordinator client: %v\n", err)
		os.Exit(1)
	}
	lis, err := net.Listen("tcp", o.listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot listen on %s\n", o.listen)
		os.Exit(1)
	}
	srv := grpc.NewServer()
	shoppb.RegisterPaymentsServer(srv, &payments{o: o, db: db, idem: c})
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	fmt.Printf("listening on %s\n", o.listen)
	rc := 0
	select {
	case <-sigs: // drain: running calls finish, then stop (at most 10 s)
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			srv.Stop()
		}
	case err := <-served:
		fmt.Fprintf(os.Stderr, "payment: serve: %v\n", err)
		rc = 1
	}
	c.Close()
	db.Close()
	os.Exit(rc)
}
