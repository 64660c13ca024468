package main

// rules_test.go — the example server's own answers (http-middleware.json example_server, docs/api.md
// §19) over raw HTTP on loopback against a real coordinator: routing on the normalized
// path before the middleware (404, 405 with Allow, a lower-case method 400, a malformed target 400,
// each a problem document), one key under every spelling of the route runs once, no Server or
// X-Powered-By header, and every framing vector of the file as its rule says (400 body-malformed as
// a problem document, the handler not run: the example serves behind idemhttp.CheckHeads).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type rawAnswer struct {
	status int
	header http.Header
	body   string
}

// raw sends head lines (after the request line; Host and Connection: close added) and body.
func raw(t *testing.T, base, method, target string, lines []string, body string) rawAnswer {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	msg := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\n", method, target, addr)
	for _, l := range lines {
		msg += l + "\r\n"
	}
	msg += "Connection: close\r\n\r\n" + body
	if _, err := io.WriteString(conn, msg); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawAnswer{resp.StatusCode, resp.Header, string(b)}
}

func (a rawAnswer) problemType() string {
	var p struct {
		Type string `json:"type"`
	}
	if a.header.Get("Content-Type") != "application/problem+json" || json.Unmarshal([]byte(a.body), &p) != nil {
		return ""
	}
	return strings.TrimPrefix(p.Type, "docs/http-middleware.md#")
}

func TestExampleServerRules(t *testing.T) {
	f := setup(t)
	base := f.server(t, "example-rules")
	body := `{"amount":7}`
	cl := fmt.Sprintf("Content-Length: %d", len(body))
	for _, c := range []struct {
		method, target string
		status         int
		problem, allow string
	}{
		{"post", "/payments", 400, "request-malformed", ""},
		{"Post", "/payments", 400, "request-malformed", ""},
		{"POST", "/nowhere", 404, "not-found", ""},
		{"GET", "/payments", 405, "method-not-allowed", "POST"},
		{"PATCH", "/payments", 405, "method-not-allowed", "POST"},
		{"POST", "/stats", 405, "method-not-allowed", "GET"},
		{"POST", "/p%zzyments", 400, "target-malformed", ""},
		{"POST", "/p%C3%28", 400, "target-malformed", ""},
	} {
		a := raw(t, base, c.method, c.target, []string{`Idempotency-Key: "rules-x"`, cl}, body)
		if a.status != c.status || a.problemType() != c.problem || a.header.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d %q Allow %q %q, want %d %s Allow %q", c.method, c.target, a.status, a.problemType(),
				a.header.Get("Allow"), a.body, c.status, c.problem, c.allow)
		}
	}
	n := executions(t, base)
	targets := []string{"/payments", "/p%61yments", "/payments/", "/x/../payments", "//payments", "/%2e/payments?"}
	for i, target := range targets {
		a := raw(t, base, "POST", target, []string{`Idempotency-Key: "rules-spelling"`, cl}, body)
		if i == len(targets)-1 { // the last has a "?": another fingerprint target, 422
			if a.status != 422 || a.problemType() != "fingerprint-mismatch" {
				t.Errorf("%s: %d %q, want 422 fingerprint-mismatch", target, a.status, a.body)
			}
			continue
		}
		if a.status != 201 || (a.header.Get("Idempotent-Replayed") == "true") != (i > 0) {
			t.Errorf("%s: %d replayed %q %q", target, a.status, a.header.Get("Idempotent-Replayed"), a.body)
		}
		for _, h := range []string{"Server", "X-Powered-By"} {
			if a.header.Get(h) != "" {
				t.Errorf("%s: header %s: %s", target, h, a.header.Get(h))
			}
		}
	}
	if got := executions(t, base) - n; got != 1 {
		t.Fatalf("one key under five spellings of /payments ran %d times, want once", got)
	}
}

func TestExampleServerFramingVectors(t *testing.T) {
	dir := "../../../conformance"
	if src := os.Getenv("IDEM_SOURCE_DIR"); src != "" {
		dir = filepath.Join(src, "client-lib", "conformance")
	}
	b, err := os.ReadFile(filepath.Join(dir, "http-middleware.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		FramingVectors []struct {
			About   string   `json:"about"`
			Lines   []string `json:"lines"`
			Body    string   `json:"body"`
			Status  int      `json:"status"`
			Problem string   `json:"problem"`
		} `json:"framing_vectors"`
		ExampleServer struct {
			Exceptions []struct{ Server, Case, What string } `json:"exceptions"`
		} `json:"example_server"`
	}
	if err := json.Unmarshal(b, &spec); err != nil || len(spec.FramingVectors) < 5 {
		t.Fatalf("http-middleware.json framing_vectors: %v", err)
	}
	for _, e := range spec.ExampleServer.Exceptions {
		if e.Server == "go" {
			t.Errorf("example_server.exceptions excuses the Go example (%s): it is held to the rule", e.Case)
		}
	}
	f := setup(t)
	base := f.server(t, "example-framing")
	for i, v := range spec.FramingVectors {
		key := fmt.Sprintf(`Idempotency-Key: "framing-%d"`, i)
		before := executions(t, base)
		a := raw(t, base, "POST", "/payments", append([]string{key}, v.Lines...), v.Body)
		ran := executions(t, base) - before
		if v.Problem == "" {
			if a.status != v.Status || ran != 1 {
				t.Errorf("%s: %d ran %d %q, want %d", v.About, a.status, ran, a.body, v.Status)
			}
			continue
		}
		if a.status != v.Status || a.problemType() != v.Problem || ran != 0 {
			t.Errorf("%s: %d %s ran %d %q, want %d %s, not run", v.About, a.status, a.header.Get("Content-Type"), ran, a.body, v.Status, v.Problem)
		}
	}
}
