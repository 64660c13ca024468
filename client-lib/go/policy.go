package idem

// policy.go — the client's policy cache: Run keeps the effective policy of each
// (service, operation) it runs fresh (one GetPolicy per PolicyRefresh period), so that when no
// coordinator can decide, the operation's failure mode is known (docs/api.md §6, §20).

import (
	"context"
	"sync"
	"time"
)

type policyEntry struct {
	mode    FailureMode // 0 = never fetched successfully
	fetched time.Time
	tried   time.Time
}

type policyCache struct {
	mu sync.Mutex
	m  map[[2]string]*policyEntry
}

func newPolicyCache() *policyCache { return &policyCache{m: map[[2]string]*policyEntry{}} }

func (c *Client) fetchPolicy(ctx context.Context, service, operation string, timeout time.Duration) *Error {
	now := time.Now()
	p, e := c.getPolicy(ctx, service, operation, timeout)
	pc := c.policies
	pc.mu.Lock()
	defer pc.mu.Unlock()
	k := [2]string{service, operation}
	ent := pc.m[k]
	if ent == nil {
		ent = &policyEntry{}
		pc.m[k] = ent
	}
	ent.tried = now
	if e == nil && (p.FailureMode == FailClosed || p.FailureMode == FailOpen) {
		ent.mode = p.FailureMode
		ent.fetched = now
	}
	return e
}

// notePolicy keeps the failure mode a BeginStep answer named (docs/api.md §20) as a fetch made
// now; nothing is kept when policies are never fetched (a negative refresh period).
func (c *Client) notePolicy(service, operation string, m FailureMode) {
	if c.refresh < 0 {
		return
	}
	now := time.Now()
	pc := c.policies
	pc.mu.Lock()
	defer pc.mu.Unlock()
	k := [2]string{service, operation}
	ent := pc.m[k]
	if ent == nil {
		ent = &policyEntry{}
		pc.m[k] = ent
	}
	ent.mode, ent.fetched, ent.tried = m, now, now
}

// refreshPolicy fetches the policy when the cached copy is older than the refresh period (a
// failed fetch keeps the old copy and is not retried before the next period).
func (c *Client) refreshPolicy(ctx context.Context, service, operation string) {
	if c.refresh < 0 {
		return
	}
	pc := c.policies
	now := time.Now()
	pc.mu.Lock()
	k := [2]string{service, operation}
	ent := pc.m[k]
	stale := ent == nil || now.Sub(ent.tried) >= c.refresh
	if ent != nil && stale {
		ent.tried = now // one fetch per period, however many goroutines run
	}
	pc.mu.Unlock()
	if stale {
		_ = c.fetchPolicy(ctx, service, operation, 0)
	}
}

// PrefetchPolicy fetches and caches the effective policy of (service, operation) now (e.g. at
// start-up, so an outage right after start is handled by the operation's policy rather than
// as "never known").
func (c *Client) PrefetchPolicy(ctx context.Context, service, operation string) error {
	if e := c.fetchPolicy(ctx, service, operation, 0); e != nil {
		return e
	}
	return nil
}

// CachedFailureMode is the cached failure mode of (service, operation), 0 when never fetched.
func (c *Client) CachedFailureMode(service, operation string) FailureMode {
	pc := c.policies
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if ent := pc.m[[2]string{service, operation}]; ent != nil {
		return ent.mode
	}
	return 0
}
