package main

// main_test.go — the example behind the middleware, over real HTTP on loopback, against a real
// coordinator (docs/api.md §19, docs/http-middleware.md): 100 concurrent POSTs with one key, 422, 400,
// replays, a 500 that runs again, every malformed key of the shared table, quoted vs bare,
// 255 characters, and a stopped coordinator (fail-closed 503, fail-open runs).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	idem "idem.dev/client"
	"idem.dev/client/idemhttp"
	"idem.dev/client/internal/testcoord"
)

type answer struct {
	status int
	header http.Header
	body   string
}

type problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	Retryable *bool  `json:"retryable"`
}

// post sends POST /payments; key nil = no header. Raw HTTP/1.1, so that any byte reaches the
// server (Go's client refuses control characters in header values).
func post(t *testing.T, base string, key *string, body string, extra ...string) answer {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var sb strings.Builder
	fmt.Fprintf(&sb, "POST /payments HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n", addr, len(body))
	if key != nil {
		sb.WriteString("Idempotency-Key: " + *key + "\r\n")
	}
	for i := 0; i+1 < len(extra); i += 2 {
		sb.WriteString(extra[i] + ": " + extra[i+1] + "\r\n")
	}
	sb.WriteString("\r\n" + body)
	if _, err := io.WriteString(conn, sb.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func executions(t *testing.T, base string) int64 {
	t.Helper()
	resp, err := http.Get(base + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		Executions int64 `json:"executions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s.Executions
}

func wantProblem(t *testing.T, what string, a answer, status int, anchor string, retryable bool) problem {
	t.Helper()
	var p problem
	if a.status != status || a.header.Get("Content-Type") != "application/problem+json" || json.Unmarshal([]byte(a.body), &p) != nil {
		t.Fatalf("%s: want a %d problem document, got %d %s %q", what, status, a.status, a.header.Get("Content-Type"), a.body)
	}
	if p.Type != "docs/http-middleware.md#"+anchor || p.Status != status || p.Title == "" || p.Detail == "" || p.Retryable == nil || *p.Retryable != retryable {
		t.Fatalf("%s: problem document %+v", what, p)
	}
	// Retry-After only from the coordinator's hint (docs/api.md §19 rule 11)
	if ra := a.header.Get("Retry-After"); retryable && ra == "0" {
		t.Fatalf("%s: Retry-After %q", what, ra)
	} else if !retryable && ra != "" {
		t.Fatalf("%s: Retry-After on a non-retryable problem", what)
	}
	return p
}

func str(s string) *string { return &s }

type fixture struct {
	co      *testcoord.Coord
	client  *idem.Client
	tenant  string
	journal string
}

func setup(t *testing.T) *fixture {
	co := testcoord.Start(t)
	f := &fixture{co: co, tenant: testcoord.Tenant("go-http"), journal: filepath.Join(t.TempDir(), "journal")}
	c, err := idem.Connect(idem.Options{Address: co.Addr, Tenant: f.tenant, JournalPath: f.journal, Deadline: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f.client = c
	return f
}

func (f *fixture) server(t *testing.T, service string) string {
	h, _, err := newServer(f.client, service, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config = httpServer(h) // as main serves it: the same limits, behind idemhttp.CheckHeads
	srv.Listener = idemhttp.CheckHeads(srv.Config, srv.Listener, idemhttp.HeadOptions{})
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestPaymentsBehindTheMiddleware(t *testing.T) {
	f := setup(t)
	base := f.server(t, "example-http")
	body := `{"amount":100}`

	t.Run("100 concurrent POSTs with one key run the handler once", func(t *testing.T) {
		key := str("conc-1")
		answers := make([]answer, 100)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				answers[i] = post(t, base, key, body, "Simulate-Delay-Ms", "300")
			}(i)
		}
		wg.Wait()
		live, replayed, conflict := 0, 0, 0
		var first string
		for _, a := range answers {
			if a.status == 201 && a.header.Get("Idempotent-Replayed") == "" {
				live++
				first = a.body
			}
		}
		for i, a := range answers {
			switch {
			case a.status == 201 && a.header.Get("Idempotent-Replayed") == "":
			case a.status == 201 && a.header.Get("Idempotent-Replayed") == "true":
				if a.body != first || a.header.Get("Content-Type") != "application/json" {
					t.Fatalf("answer %d: replay %q differs from the first %q", i, a.body, first)
				}
				replayed++
			case a.status == 409:
				wantProblem(t, "concurrent", a, 409, "in-progress", true)
				conflict++
			default:
				t.Fatalf("answer %d: %d %q", i, a.status, a.body)
			}
		}
		if live != 1 || executions(t, base) != 1 || !strings.Contains(first, `"execution":1`) {
			t.Fatalf("live answers %d, executions %d, first %q", live, executions(t, base), first)
		}
		t.Logf("100 concurrent: 1 ran, %d replayed, %d answered 409", replayed, conflict)
		a := post(t, base, key, body)
		if a.status != 201 || a.header.Get("Idempotent-Replayed") != "true" || a.body != first {
			t.Fatalf("after: %d %q", a.status, a.body)
		}
	})

	t.Run("same key, other body: 422", func(t *testing.T) {
		n := executions(t, base)
		a := post(t, base, str("conc-1"), `{"amount":101}`)
		p := wantProblem(t, "other body", a, 422, "fingerprint-mismatch", false)
		if !strings.Contains(p.Detail, "conc-1") || executions(t, base) != n {
			t.Fatalf("422: %+v, executions %d (was %d)", p, executions(t, base), n)
		}
	})

	t.Run("no key: 400", func(t *testing.T) {
		n := executions(t, base)
		wantProblem(t, "no key", post(t, base, nil, body), 400, "key-missing", false)
		if executions(t, base) != n {
			t.Fatal("the handler ran without a key")
		}
	})

	t.Run("three retries after completion: three replays", func(t *testing.T) {
		first := post(t, base, str("retries-1"), body)
		if first.status != 201 || first.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("first: %d %v", first.status, first.header)
		}
		n := executions(t, base)
		for i := 0; i < 3; i++ {
			a := post(t, base, str("retries-1"), body)
			if a.status != 201 || a.header.Get("Idempotent-Replayed") != "true" || a.body != first.body {
				t.Fatalf("retry %d: %d %v %q", i, a.status, a.header, a.body)
			}
		}
		if executions(t, base) != n {
			t.Fatal("a retry ran the handler")
		}
	})

	t.Run("a handler 500 runs again on the next retry", func(t *testing.T) {
		n := executions(t, base)
		a := post(t, base, str("fail-1"), body, "Simulate-Status", "500")
		if a.status != 500 || a.header.Get("Idempotent-Replayed") != "" || executions(t, base) != n+1 {
			t.Fatalf("500: %d %q", a.status, a.body)
		}
		a = post(t, base, str("fail-1"), body)
		if a.status != 201 || a.header.Get("Idempotent-Replayed") != "" || executions(t, base) != n+2 {
			t.Fatalf("retry after 500: %d %v %q, executions %d", a.status, a.header, a.body, executions(t, base))
		}
		a = post(t, base, str("fail-1"), body)
		if a.status != 201 || a.header.Get("Idempotent-Replayed") != "true" || executions(t, base) != n+2 {
			t.Fatalf("then: %d %v", a.status, a.header)
		}
	})

	t.Run("a handler 4xx is stored and replayed untouched", func(t *testing.T) {
		a := post(t, base, str("fail-4xx"), body, "Simulate-Status", "402")
		b := post(t, base, str("fail-4xx"), body)
		if a.status != 402 || b.status != 402 || b.header.Get("Idempotent-Replayed") != "true" || a.body != b.body {
			t.Fatalf("402: %d %q then %d %v %q", a.status, a.body, b.status, b.header, b.body)
		}
	})

	t.Run("every malformed key of the table: 400, handler not run", func(t *testing.T) {
		src := os.Getenv("IDEM_SOURCE_DIR")
		if src == "" {
			src = "../../../.."
		}
		raw, err := os.ReadFile(filepath.Join(src, "client-lib", "conformance", "idempotency-key.json"))
		if err != nil {
			t.Fatal(err)
		}
		var tb struct {
			Header []struct {
				Header *string `json:"header"`
				Key    *string `json:"key"`
				Error  string  `json:"error"`
			} `json:"header"`
		}
		if err := json.Unmarshal(raw, &tb); err != nil {
			t.Fatal(err)
		}
		n := executions(t, base)
		checked := 0
		for _, c := range tb.Header {
			if c.Key != nil {
				continue
			}
			if c.Header != nil && strings.TrimSpace(*c.Header) != *c.Header {
				continue // HTTP trims outer spaces before any parser sees the value
			}
			a := post(t, base, c.Header, body)
			if a.status != 400 {
				t.Fatalf("%q (%s): %d %q", derefOr(c.Header), c.Error, a.status, a.body)
			}
			// a control character in a field value is the server's request-malformed (idemhttp.CheckHeads,
			// before any handler); every other malformed key gets the middleware's problem
			// document naming the rule
			if strings.ContainsAny(derefOr(c.Header), "\x01\x7f") {
				wantProblem(t, c.Error, a, 400, "request-malformed", false)
			} else {
				anchor := "key-malformed"
				if c.Error == "missing" {
					anchor = "key-missing"
				}
				p := wantProblem(t, c.Error, a, 400, anchor, false)
				if c.Error != "missing" && !strings.Contains(p.Detail, `"`+c.Error+`"`) {
					t.Fatalf("%q: detail %q does not name the rule %s", derefOr(c.Header), p.Detail, c.Error)
				}
			}
			checked++
		}
		if checked < 12 || executions(t, base) != n {
			t.Fatalf("checked %d malformed keys; executions %d (was %d)", checked, executions(t, base), n)
		}
	})

	t.Run("a quoted key runs once and the same text bare is replayed", func(t *testing.T) {
		n := executions(t, base)
		a := post(t, base, str(`"quoted-1"`), body)
		b := post(t, base, str(`quoted-1`), body)
		if a.status != 201 || a.header.Get("Idempotent-Replayed") != "" || b.status != 201 ||
			b.header.Get("Idempotent-Replayed") != "true" || a.body != b.body || executions(t, base) != n+1 {
			t.Fatalf("quoted then bare: %d %v / %d %v, executions %d (was %d)", a.status, a.header, b.status, b.header, executions(t, base), n)
		}
	})

	t.Run("255 characters are accepted, 256 are not", func(t *testing.T) {
		k := "long-" + strings.Repeat("k", 250)
		a := post(t, base, &k, body)
		if len(k) != 255 || a.status != 201 {
			t.Fatalf("255: %d %q", a.status, a.body)
		}
		k += "k"
		wantProblem(t, "256", post(t, base, &k, body), 400, "key-malformed", false)
	})
}

func derefOr(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

func TestStoppedCoordinator(t *testing.T) {
	f := setup(t)
	closedBase := f.server(t, "ex-closed")
	openBase := f.server(t, "ex-open")
	ctx := context.Background()
	if _, err := f.client.SetPolicy(ctx, idem.Policy{Service: "ex-open", Operation: "*", FailureMode: idem.FailOpen}); err != nil {
		t.Fatal(err)
	}
	// one request each while the coordinator runs: the middleware caches each route's policy
	for _, b := range []string{closedBase, openBase} {
		if a := post(t, b, str("warm-1"), `{}`); a.status != 201 {
			t.Fatalf("warm-up: %d %q", a.status, a.body)
		}
	}
	f.co.Stop()

	n := executions(t, closedBase)
	start := time.Now()
	a := post(t, closedBase, str("down-1"), `{"amount":5}`)
	wantProblem(t, "fail-closed", a, 503, "coordinator-unavailable", true)
	if ra := a.header.Get("Retry-After"); ra != "" {
		t.Fatalf("fail-closed with no coordinator answering: a made-up Retry-After %q", ra)
	}
	if executions(t, closedBase) != n {
		t.Fatal("the fail-closed handler ran with the coordinator stopped")
	}
	t.Logf("fail-closed 503 after %v, Retry-After %s", time.Since(start).Round(time.Millisecond), a.header.Get("Retry-After"))

	n = executions(t, openBase)
	a = post(t, openBase, str("down-1"), `{"amount":5}`)
	if a.status != 201 || executions(t, openBase) != n+1 {
		t.Fatalf("fail-open: %d %q, executions %d (was %d)", a.status, a.body, executions(t, openBase), n)
	}
	j, _ := os.ReadFile(f.journal)
	if lines := strings.Split(strings.TrimSpace(string(j)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], " client "+f.tenant+" "+idemhttp.GlobalID("", "down-1")+" ex-open post--payments forward succeeded 201 ") {
		t.Fatalf("journal:\n%s", j)
	}
}
