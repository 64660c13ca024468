package idem

// client.go — Connect, the channels (one per coordinator address, plus leaders named by
// idem-leader), the unary call with failover, and what each address last said (for §20's
// fail-open rule). The behaviour follows libidem's client.c.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"math/rand"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

const (
	defaultDeadline      = 2 * time.Second
	defaultPolicyRefresh = 30 * time.Second
	maxEndpoints         = 16
	minTry               = 50 * time.Millisecond
)

// Options of Connect. Address (or Addresses) is required.
type Options struct {
	// Address is "host:port", or a list "h1:p1,h2:p2" of the nodes of one cluster: calls go to
	// the leader, found from standbys' idem-leader answers or by trying the next address.
	Address string
	// Addresses is the same list as a slice (appended to Address's).
	Addresses []string
	// Tenant is sent as idem-tenant; "" = the server's default. With authentication on, the
	// token or certificate decides instead.
	Tenant string
	// Token is sent as "authorization: Bearer TOKEN" on every call; "" = none.
	Token string
	// Deadline bounds each call; 0 = 2 s. A context deadline that comes sooner wins.
	Deadline time.Duration
	// JournalPath is the unguarded-execution journal (libidem's line format, replayed by
	// `idemctl reconcile`); "" = none, and then a fail-open step is refused like a
	// fail-closed one when no coordinator can decide.
	JournalPath string
	// PolicyRefresh is how long a fetched policy is fresh; 0 = 30 s; < 0 = never fetch (every
	// step then fails closed when no coordinator can decide).
	PolicyRefresh time.Duration
	// TLS: plaintext unless TLS is true or a TLS file is given. The server's certificate is
	// verified against TLSRootFile (PEM), else the system roots; its name must match the
	// address's host, or TLSServerName. TLSCertFile + TLSKeyFile: mutual TLS.
	TLS           bool
	TLSRootFile   string
	TLSCertFile   string
	TLSKeyFile    string
	TLSServerName string
	// TracerProvider makes Run's idem.step spans (docs/sdk-go.md); nil = otel's global one
	// (otel.SetTracerProvider; a no-op until the application sets one). Every call sends the
	// traceparent of its context's span either way.
	TracerProvider trace.TracerProvider
}

type heard int

const (
	heardNone      heard = iota // never called
	heardNothing                // no answer (deadline, connection refused)
	heardUndecided              // store-unavailable, store-timeout, no-leader
	heardSent                   // not-leader with a leader named
	heardDecider                // an answer: this or another node decides
)

type endpoint struct {
	addr    string
	conn    *grpc.ClientConn
	heardAt time.Time
	heard   heard
	sentTo  int // heardSent: the endpoint of the leader named, -1 unknown
}

// Client is safe for concurrent use by any number of goroutines.
type Client struct {
	mu       sync.Mutex
	eps      []*endpoint
	cur      int
	dialOpts []grpc.DialOption
	md       []string // outgoing metadata pairs
	tenant   string
	deadline time.Duration
	journal  string
	refresh  time.Duration
	policies *policyCache
	lostAt   time.Time // the last lost try (lostTry) on any address, under mu

	tracerProvider trace.TracerProvider // nil = otel's global one

	rngMu sync.Mutex
	rng   *rand.Rand
}

// Connect validates the options and creates the channels (they connect lazily).
func Connect(o Options) (*Client, error) {
	var addrs []string
	for _, a := range strings.Split(o.Address, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	for _, a := range o.Addresses {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, invalid("options.address", "address is missing")
	}
	if len(addrs) > maxEndpoints {
		return nil, invalid("options.address", "more than %d addresses", maxEndpoints)
	}
	for _, a := range addrs {
		if e := checkAddress(a); e != nil {
			return nil, e
		}
	}
	if o.Tenant != "" {
		if e := checkGlobalID("options.tenant", o.Tenant); e != nil {
			return nil, e
		}
	}
	if o.Deadline < 0 {
		return nil, invalid("options.deadline", "deadline is negative")
	}
	for i := 0; i < len(o.Token); i++ {
		if o.Token[i] <= ' ' || o.Token[i] > '~' {
			return nil, invalid("options.token", "token has a character outside printable ASCII")
		}
	}
	c := &Client{deadline: o.Deadline, journal: o.JournalPath, refresh: o.PolicyRefresh,
		tenant: o.Tenant, policies: newPolicyCache(), tracerProvider: o.TracerProvider,
		rng: rand.New(rand.NewSource(time.Now().UnixNano()))}
	if c.deadline == 0 {
		c.deadline = defaultDeadline
	}
	if c.refresh == 0 {
		c.refresh = defaultPolicyRefresh
	}
	if o.Tenant != "" {
		c.md = append(c.md, "idem-tenant", o.Tenant)
	}
	if o.Token != "" {
		c.md = append(c.md, "authorization", "Bearer "+o.Token)
	}
	creds, e := transportCreds(o)
	if e != nil {
		return nil, e
	}
	c.dialOpts = []grpc.DialOption{creds, grpc.WithUserAgent("idem-go/" + Version),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6,
				Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second})}
	for _, a := range addrs {
		if _, err := c.addEndpoint(a); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Version of this SDK.
const Version = "0.2.0"

func transportCreds(o Options) (grpc.DialOption, *Error) {
	useTLS := o.TLS || o.TLSRootFile != "" || o.TLSCertFile != "" || o.TLSKeyFile != ""
	if !useTLS {
		return grpc.WithInsecure(), nil
	}
	cfg := &tls.Config{ServerName: o.TLSServerName, MinVersion: tls.VersionTLS12}
	if o.TLSRootFile != "" {
		pem, err := os.ReadFile(o.TLSRootFile)
		if err != nil {
			return nil, invalid("options.tls_root_file", "tls_root_file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, invalid("options.tls_root_file", "tls_root_file %s holds no PEM certificate", o.TLSRootFile)
		}
		cfg.RootCAs = pool
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return nil, invalid("options.tls_key_file", "tls_cert_file and tls_key_file go together")
	}
	if o.TLSCertFile != "" {
		pair, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile)
		if err != nil {
			return nil, invalid("options.tls_cert_file", "tls_cert_file/tls_key_file: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg)), nil
}

// addEndpoint returns the index of addr's endpoint, dialling it on first sight.
func (c *Client) addEndpoint(addr string) (int, *Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.eps {
		if e.addr == addr {
			return i, nil
		}
	}
	if len(c.eps) >= maxEndpoints {
		return -1, invalid("options.address", "more than %d coordinator addresses", maxEndpoints)
	}
	conn, err := grpc.Dial(addr, c.dialOpts...)
	if err != nil {
		return -1, &Error{Code: "INTERNAL", Message: "cannot create a channel to " + addr + ": " + err.Error()}
	}
	c.eps = append(c.eps, &endpoint{addr: addr, conn: conn, sentTo: -1})
	return len(c.eps) - 1, nil
}

// Close closes every channel. No call may be in flight.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.eps {
		e.conn.Close()
	}
	c.eps = nil
	return nil
}

// Tenant is the configured tenant ("default" when none), as the journal writes it.
func (c *Client) Tenant() string {
	if c.tenant == "" {
		return "default"
	}
	return c.tenant
}

// Deadline is the per-call deadline.
func (c *Client) Deadline() time.Duration { return c.deadline }

// lostSince: a try of this client was lost (lostTry) at or after since, on any address.
func (c *Client) lostSince(since time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.lostAt.Before(since)
}

func (c *Client) endpoints() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.eps)
}

// backoff is random(0, min(max, base * 2^n)) (full jitter).
func (c *Client) backoff(base, max time.Duration, n int) time.Duration {
	cap := base
	for i := 0; i < n && cap < max; i++ {
		cap *= 2
	}
	if cap > max {
		cap = max
	}
	if cap <= 0 {
		return 0
	}
	c.rngMu.Lock()
	defer c.rngMu.Unlock()
	return time.Duration(c.rng.Int63n(int64(cap) + 1))
}

// sleep waits d or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func heardOf(e *Error) heard {
	if e == nil {
		return heardDecider
	}
	if e.Code == "DEADLINE_EXCEEDED" {
		return heardNothing
	}
	if e.Reason == "" { // connection refused, reset: gRPC's, not a coordinator's
		if e.Code == "UNAVAILABLE" {
			return heardNothing
		}
		return heardDecider
	}
	switch e.Reason {
	case ReasonStoreUnavailable, ReasonStoreTimeout, ReasonNoLeader:
		return heardUndecided
	case ReasonNotLeader:
		if e.Leader != "" {
			return heardSent
		}
	}
	return heardDecider
}

func (c *Client) noteHeard(ep int, e *Error) {
	h := heardOf(e)
	c.mu.Lock()
	defer c.mu.Unlock()
	if ep >= len(c.eps) {
		return
	}
	p := c.eps[ep]
	p.heardAt = time.Now()
	p.heard = h
	p.sentTo = -1
	if h == heardSent {
		for i, q := range c.eps {
			if q.addr == e.Leader {
				p.sentTo = i
			}
		}
	}
}

// noneCouldDecide: every known address was called since `since` and none could decide (no
// answer, or its store / election is down); a standby's not-leader counts as what the node it
// named said (docs/api.md §20). Never after a lost try since `since`: that node was up and may
// have decided.
func (c *Client) noneCouldDecide(since time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.eps) == 0 || !c.lostAt.Before(since) { // a lost try: that node may have decided
		return false
	}
	for i := range c.eps {
		j := i
		for hops := 0; hops < len(c.eps) && c.eps[j].heard == heardSent; hops++ {
			if c.eps[j].heardAt.Before(since) || c.eps[j].sentTo < 0 {
				break
			}
			j = c.eps[j].sentTo
		}
		e := c.eps[j]
		if e.heardAt.Before(since) || (e.heard != heardNothing && e.heard != heardUndecided) {
			return false
		}
	}
	return true
}

// invokeAt is one try on endpoint ep, bounded by deadline.
func (c *Client) invokeAt(ctx context.Context, ep int, method string, req, resp proto.Message,
	deadline time.Time) *Error {
	c.mu.Lock()
	if ep >= len(c.eps) {
		c.mu.Unlock()
		return &Error{Code: "CANCELLED", Message: "client is closed"}
	}
	conn := c.eps[ep].conn
	c.mu.Unlock()
	callCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if len(c.md) > 0 {
		callCtx = metadata.AppendToOutgoingContext(callCtx, c.md...)
	}
	callCtx = withTraceMetadata(callCtx)
	var trailer metadata.MD
	err := conn.Invoke(callCtx, method, req, resp, grpc.Trailer(&trailer))
	if err == nil {
		c.noteHeard(ep, nil)
		return nil
	}
	e := fromCall(ctx, err, trailer)
	if c.lostTry(ctx, e) {
		e.OutcomeUnknown, e.lost = true, true
		c.mu.Lock()
		c.lostAt = time.Now()
		c.mu.Unlock()
	}
	if ctx.Err() == nil { // the caller's own cancellation says nothing about the coordinator
		c.noteHeard(ep, e)
	}
	return e
}

// lostTry: gRPC ended the try with CANCELLED, without idem-reason, and neither the caller's
// ctx nor Close cancelled it. The coordinator never answers CANCELLED: a draining node's gRPC
// server killed a call that reached it after its shutdown began, without saying whether the
// handler had it (docs/upgrading.md). Like an UNAVAILABLE without idem-leader: outcome
// unknown, repeated on the next address only when repeatable.
func (c *Client) lostTry(ctx context.Context, e *Error) bool {
	if e.Code != "CANCELLED" || e.Reason != "" || ctx.Err() != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.eps != nil // nil: closed
}

// invoke calls method on the current endpoint and follows failover: a standby's idem-leader
// sends the call to that leader at once; UNAVAILABLE from an unreachable node, or CANCELLED
// from a draining one (lostTry), moves on to the next address with backoff, within the call's
// deadline. A call whose outcome may be unknown is repeated only when repeatable (the
// coordinator's idempotency makes that harmless).
func (c *Client) invoke(ctx context.Context, method string, req, resp proto.Message,
	timeout time.Duration, repeatable bool) *Error {
	if timeout <= 0 {
		timeout = c.deadline
	}
	deadline := time.Now().Add(timeout)
	unknown := false
	for tries := 0; ; tries++ {
		c.mu.Lock()
		ep, n := c.cur, len(c.eps)
		c.mu.Unlock()
		if n == 0 {
			return &Error{Code: "CANCELLED", Message: "client is closed"}
		}
		e := c.invokeAt(ctx, ep, method, req, resp, deadline)
		if e == nil {
			return nil
		}
		if ctx.Err() != nil {
			e.OutcomeUnknown = e.OutcomeUnknown || unknown
			return e
		}
		if e.Code == "DEADLINE_EXCEEDED" && n > 1 { // no answer: the next call starts elsewhere
			c.moveCur(ep, (ep+1)%n)
		}
		lost := e.Code == "CANCELLED" && e.OutcomeUnknown // lostTry: gRPC's, not the caller's
		if e.Code != "UNAVAILABLE" && !lost {
			// a refusal after a try that may have acted, unless it proves none did
			e.OutcomeUnknown = e.OutcomeUnknown || (unknown && !refusalSettles(method, req, e))
			return e
		}
		if !e.standby {
			unknown = true
			if !repeatable {
				return e
			}
		}
		next := ep
		if e.standby && e.Leader != "" {
			if i, err := c.addEndpoint(e.Leader); err == nil {
				next = i
			}
		} else if n > 1 {
			next = (ep + 1) % n
		}
		c.moveCur(ep, next)
		var wait time.Duration
		if !(e.standby && e.Leader != "" && next != ep) {
			wait = c.backoff(25*time.Millisecond, 500*time.Millisecond, tries)
		}
		if time.Now().Add(wait + minTry).After(deadline) {
			e.OutcomeUnknown = e.OutcomeUnknown || unknown
			return e
		}
		if !sleep(ctx, wait) {
			e.OutcomeUnknown = e.OutcomeUnknown || unknown
			return e
		}
	}
}

func (c *Client) moveCur(from, to int) {
	c.mu.Lock()
	if c.cur == from {
		c.cur = to
	}
	c.mu.Unlock()
}
