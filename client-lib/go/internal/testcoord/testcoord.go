// Package testcoord starts real idem-coordinator processes for the Go SDK's tests:
// IDEM_COORDINATOR_BIN against IDEM_TEST_PG_URL, on a free loopback port, stopped by PID
// (SIGTERM, then SIGKILL) when the test ends. Tests skip when the two variables are unset.
package testcoord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "idem.dev/client/idempb"
)

// Coord is one running coordinator.
type Coord struct {
	Addr string
	Log  string
	// Dial is how Status reaches the node; nil = plaintext (set it for a TLS node).
	Dial grpc.DialOption
	cmd  *exec.Cmd
	done chan struct{}
}

// Env returns the coordinator binary and the Postgres URL; the test fails when they are unset
// (scripts/test sets both; a skipped integration test would pass silently).
func Env(t testing.TB) (bin, pg string) {
	bin, pg = os.Getenv("IDEM_COORDINATOR_BIN"), os.Getenv("IDEM_TEST_PG_URL")
	if bin == "" || pg == "" {
		t.Fatal("IDEM_COORDINATOR_BIN and IDEM_TEST_PG_URL must be set (scripts/test does)")
	}
	return bin, pg
}

// FreePort returns a loopback address nobody listens on right now.
func FreePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Tenant returns a fresh tenant name, so runs never see each other's keys.
func Tenant(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// Start runs a single-node coordinator (extra flags appended) and waits until it leads.
func Start(t testing.TB, extra ...string) *Coord {
	c := Spawn(t, extra...)
	c.WaitLeader(t, 20*time.Second)
	return c
}

// Spawn runs a coordinator without waiting for it.
func Spawn(t testing.TB, extra ...string) *Coord {
	bin, pg := Env(t)
	addr := FreePort(t)
	log := filepath.Join(t.TempDir(), "coordinator-"+addr[len("127.0.0.1:"):]+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--listen", addr, "--pg", pg, "--reaper-interval", "0"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	c := &Coord{Addr: addr, Log: log, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(log); err == nil {
				t.Logf("coordinator %s log:\n%s", addr, b)
			}
		}
	})
	return c
}

// Status asks the node's Admin.GetStatus.
func (c *Coord) Status(ctx context.Context) (*pb.GetStatusResponse, error) {
	dial := c.Dial
	if dial == nil {
		dial = grpc.WithInsecure()
	}
	conn, err := grpc.DialContext(ctx, c.Addr, dial)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return pb.NewAdminClient(conn).GetStatus(ctx, &pb.GetStatusRequest{})
}

// WaitLeader polls GetStatus until the node leads with a healthy store.
func (c *Coord) WaitLeader(t testing.TB, within time.Duration) {
	c.waitStatus(t, within, func(s *pb.GetStatusResponse) bool { return s.Leader && s.StoreOk })
}

// WaitStandby polls until the node answers and names another node as leader.
func (c *Coord) WaitStandby(t testing.TB, within time.Duration) {
	c.waitStatus(t, within, func(s *pb.GetStatusResponse) bool {
		return !s.Leader && s.LeaderAddress != "" && s.LeaderAddress != c.Addr
	})
}

func (c *Coord) waitStatus(t testing.TB, within time.Duration, ok func(*pb.GetStatusResponse) bool) {
	end := time.Now().Add(within)
	var last string
	for time.Now().Before(end) {
		select {
		case <-c.done:
			t.Fatalf("coordinator %s exited early (log %s)", c.Addr, c.Log)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		s, err := c.Status(ctx)
		cancel()
		if err == nil && ok(s) {
			return
		}
		last = fmt.Sprint(s, err)
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("coordinator %s not in the expected state within %v: %s", c.Addr, within, last)
}

// Stop sends SIGTERM to the process (by PID) and waits for it; SIGKILL after 10 s.
func (c *Coord) Stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}
