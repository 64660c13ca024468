package idemhttp

// heads_test.go — CheckHeads over real TCP on loopback, raw bytes in and out: every framing vector
// of client-lib/conformance/http-middleware.json and the head rules net/http would otherwise
// repair or answer itself (obs-fold, control characters, Host, a head over the limit, a target it
// cannot parse) as problem documents with the handler not run; requests that pass reach the
// handler unchanged, pipelined on one connection (a refusal after them waits for their answers);
// a body streams (the handler answers its first part before the client sends the rest;
// Expect: 100-continue); a slow head is closed by the header timeout, on a new and on a kept-alive
// connection; a hijacked connection is passed through.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type headsServer struct {
	addr string
	ran  atomic.Int64
}

type connKey struct{}

// startHeads serves h (nil = an echo of the body, 200) behind CheckHeads with the example's
// limits (16 KiB head) and the given header timeout.
func startHeads(t *testing.T, h http.HandlerFunc, headTimeout time.Duration) *headsServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &headsServer{addr: ln.Addr().String()}
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "body: "+err.Error(), 400)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintf(w, "%s %s %q", r.Method, r.RequestURI, b)
		}
	}
	srv := &http.Server{ReadHeaderTimeout: headTimeout, MaxHeaderBytes: 16 << 10,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.ran.Add(1); h(w, r) }),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		}}
	hl := CheckHeads(srv, ln, HeadOptions{})
	go func() { _ = srv.Serve(hl) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

type rawResp struct {
	status  int
	ctype   string
	problem string
	body    string
}

func readResp(t *testing.T, br *bufio.Reader) rawResp {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading an answer: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading an answer's body: %v", err)
	}
	a := rawResp{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: string(b)}
	if a.ctype == "application/problem+json" {
		var p Problem
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("problem document %q: %v", b, err)
		}
		a.problem = strings.TrimPrefix(p.Type, DefaultProblemBase+"#")
		if p.Status != a.status || p.Title == "" || !strings.HasPrefix(p.Instance, "urn:uuid:") {
			t.Errorf("problem document %q: status, title or instance wrong", b)
		}
	}
	return a
}

// exchangeOne sends raw on a new connection and reads one answer; with closed, it also checks
// that the server closed the connection after it.
func exchangeOne(t *testing.T, addr, raw string, closed bool) rawResp {
	t.Helper()
	c := dial(t, addr)
	_, _ = io.WriteString(c, raw) // a refusal may come before all of it is sent: the answer is still read
	br := bufio.NewReader(c)
	a := readResp(t, br)
	if closed {
		if n, err := br.Read(make([]byte, 1)); err == nil {
			t.Errorf("%.60q: the connection stays open after the refusal (%d more bytes)", raw, n)
		}
	}
	return a
}

func TestCheckHeadsFramingVectors(t *testing.T) {
	dir := "../../conformance"
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
	}
	if err := json.Unmarshal(b, &spec); err != nil || len(spec.FramingVectors) < 10 {
		t.Fatalf("http-middleware.json framing_vectors: %v", err)
	}
	s := startHeads(t, nil, 10*time.Second)
	for _, v := range spec.FramingVectors {
		raw := "POST /payments HTTP/1.1\r\nHost: x\r\n" + strings.Join(v.Lines, "\r\n") + "\r\nConnection: close\r\n\r\n" + v.Body
		before := s.ran.Load()
		a := exchangeOne(t, s.addr, raw, v.Problem != "")
		ran := s.ran.Load() - before
		if v.Problem == "" {
			if a.status != 200 || ran != 1 || a.body != `POST /payments "abc"` {
				t.Errorf("%s: %d ran %d %q, want 200 with the body abc", v.About, a.status, ran, a.body)
			}
			continue
		}
		if a.status != v.Status || a.problem != v.Problem || ran != 0 {
			t.Errorf("%s: %d %s %q ran %d, want %d %s, not run", v.About, a.status, a.ctype, a.body, ran, v.Status, v.Problem)
		}
	}
}

func TestCheckHeadsHeadRules(t *testing.T) {
	s := startHeads(t, nil, 10*time.Second)
	filler := func(n int) string { return "X-Filler: " + strings.Repeat("y", n) + "\r\n" }
	for _, c := range []struct {
		about, raw, problem string
		status              int
	}{
		{"obs-fold", "POST /p HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n", "request-malformed", 400},
		{"obs-fold with a tab", "POST /p HTTP/1.1\r\nHost: x\r\nIdempotency-Key: \"k\r\n\t-x\"\r\nContent-Length: 0\r\n\r\n", "request-malformed", 400},
		{"DEL in a value", "POST /p HTTP/1.1\r\nHost: x\r\nX-A: a\x7fb\r\nContent-Length: 0\r\n\r\n", "request-malformed", 400},
		{"NUL in a value", "POST /p HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n", "request-malformed", 400},
		{"no Host", "POST /p HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "request-malformed", 400},
		{"two Hosts", "POST /p HTTP/1.1\r\nHost: x\r\nHost: y\r\nContent-Length: 0\r\n\r\n", "request-malformed", 400},
		{"a broken request line", "POST /p HTTP/1.1 x\r\nHost: x\r\n\r\n", "request-malformed", 400},
		{"a target net/http cannot parse", "POST /p%zz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", "target-malformed", 400},
		{"Transfer-Encoding in HTTP/1.0", "POST /p HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "body-malformed", 400},
		{"an empty Content-Length", "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: \r\n\r\n", "body-malformed", 400},
		{"a 30 KiB head", "POST /p HTTP/1.1\r\nHost: x\r\n" + filler(30000) + "Content-Length: 0\r\n\r\n", "header-too-large", 431},
		{"a 200 KiB head", "POST /p HTTP/1.1\r\nHost: x\r\n" + filler(200<<10) + "Content-Length: 0\r\n\r\n", "header-too-large", 431},
		{"a 10 KiB head", "POST /p HTTP/1.1\r\nHost: x\r\n" + filler(10000) + "Content-Length: 0\r\n\r\n", "", 200},
		{"a valid tab in a value", "POST /p HTTP/1.1\r\nHost: x\r\nX-A: a\tb\r\nContent-Length: 0\r\n\r\n", "", 200},
	} {
		before := s.ran.Load()
		a := exchangeOne(t, s.addr, c.raw, c.problem != "")
		ran := s.ran.Load() - before
		if a.status != c.status || a.problem != c.problem || ran != int64(map[bool]int{true: 0, false: 1}[c.problem != ""]) {
			t.Errorf("%s: %d %s %q ran %d, want %d %q", c.about, a.status, a.ctype, a.body, ran, c.status, c.problem)
		}
	}
}

// refusing says whether the connection holds a refusal waiting for earlier answers.
func (c *headConn) refusing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
}

func TestCheckHeadsPipelined(t *testing.T) {
	// the third request's handler runs until the connection has read the fourth (malformed)
	// request and holds its refusal: the refusal must still come after the third answer
	s := startHeads(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method == "GET" {
			hc := r.Context().Value(connKey{}).(*headConn)
			for deadline := time.Now().Add(10 * time.Second); !hc.refusing(); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Error("the malformed fourth request was not read while the third ran")
					break
				}
			}
		}
		fmt.Fprintf(w, "%s %s %q", r.Method, r.RequestURI, b)
	}, 10*time.Second)
	c := dial(t, s.addr)
	raw := "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc" +
		"POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\nX-Trailer: 1\r\n\r\n" +
		"GET /c HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /d HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for _, want := range []string{`POST /a "abc"`, `POST /b "abcdefg"`, `GET /c ""`} {
		if a := readResp(t, br); a.status != 200 || a.body != want {
			t.Fatalf("answer %d %q, want 200 %q", a.status, a.body, want)
		}
	}
	if a := readResp(t, br); a.status != 400 || a.problem != "body-malformed" {
		t.Fatalf("fourth answer %d %q, want 400 body-malformed", a.status, a.body)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the connection stays open after the refusal")
	}
	if n := s.ran.Load(); n != 3 {
		t.Fatalf("the handler ran %d times, want 3", n)
	}
}

func TestCheckHeadsStreamingBody(t *testing.T) {
	s := startHeads(t, func(w http.ResponseWriter, r *http.Request) {
		first := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, first); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		fmt.Fprintf(w, "got %s\n", first)
		w.(http.Flusher).Flush()
		rest, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "then %s\n", rest)
	}, 10*time.Second)

	t.Run("chunked, answered before the rest is sent", func(t *testing.T) {
		c := dial(t, s.addr)
		_, _ = io.WriteString(c, "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || line != "got hello\n" {
			t.Fatalf("first part %q %v, want \"got hello\" before the rest is sent", line, err)
		}
		_, _ = io.WriteString(c, "5\r\nworld\r\n0\r\n\r\n")
		rest, _ := io.ReadAll(resp.Body)
		if string(rest) != "then world\n" {
			t.Fatalf("rest %q, want \"then world\"", rest)
		}
	})
	t.Run("Expect: 100-continue", func(t *testing.T) {
		c := dial(t, s.addr)
		_, _ = io.WriteString(c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n")
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
			t.Fatalf("first line %q %v, want 100 Continue before the body is sent", line, err)
		}
		if _, err := br.ReadString('\n'); err != nil { // the empty line after 100 Continue
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, "helloworld")
		a := readResp(t, br)
		if a.status != 200 || a.body != "got hello\nthen world\n" {
			t.Fatalf("%d %q", a.status, a.body)
		}
	})
}

func TestCheckHeadsSlowHead(t *testing.T) {
	s := startHeads(t, nil, 300*time.Millisecond)
	closedWithin := func(t *testing.T, c net.Conn, br *bufio.Reader) {
		t.Helper()
		t0 := time.Now()
		b, err := br.ReadByte()
		if err == nil {
			t.Fatalf("a byte %q came from the server on a stalled head", b)
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Fatalf("the stalled head was closed after %v (header timeout 300ms)", d)
		}
	}
	t.Run("first request", func(t *testing.T) {
		c := dial(t, s.addr)
		_, _ = io.WriteString(c, "POST /p HTTP/1.1\r\nHost: x\r\n")
		closedWithin(t, c, bufio.NewReader(c))
	})
	t.Run("second request on a kept-alive connection", func(t *testing.T) {
		c := dial(t, s.addr)
		_, _ = io.WriteString(c, "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nz")
		br := bufio.NewReader(c)
		if a := readResp(t, br); a.status != 200 {
			t.Fatalf("first request: %d %q", a.status, a.body)
		}
		_, _ = io.WriteString(c, "POST /p HTTP/1.1\r\nHo")
		closedWithin(t, c, br)
	})
}

func TestCheckHeadsHijackPassesThrough(t *testing.T) {
	s := startHeads(t, func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		line, _ := brw.ReadString('\n')
		_, _ = brw.WriteString("echo " + line)
		_ = brw.Flush()
	}, 10*time.Second)
	c := dial(t, s.addr)
	_, _ = io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("%v %v", resp, err)
	}
	// not HTTP: read as a head it would be refused
	_, _ = io.WriteString(c, "\x00 not http \x7f\r\n\r\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "echo \x00 not http \x7f\r\n" {
		t.Fatalf("%q %v", line, err)
	}
}

// BenchmarkCheckHeads: keep-alive POSTs (a 14-byte body) over loopback to one handler, served
// plain and behind CheckHeads; requests/s = 1e9 / ns/op.
func BenchmarkCheckHeads(b *testing.B) {
	const req = "POST /payments HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 14\r\n\r\n{\"amount\":100}"
	for _, wrap := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "CheckHeads"}[wrap]
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10,
				Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, "{\"executions\":1}\n")
				})}
			l := ln
			if wrap {
				l = CheckHeads(srv, ln, HeadOptions{})
			}
			go func() { _ = srv.Serve(l) }()
			defer srv.Close()
			b.RunParallel(func(pb *testing.PB) {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					b.Error(err)
					return
				}
				defer c.Close()
				br := bufio.NewReader(c)
				for pb.Next() {
					if _, err := io.WriteString(c, req); err != nil {
						b.Error(err)
						return
					}
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}
