// Command http is the Go SDK's HTTP example (docs/api.md §19): POST /payments behind the
// Idempotency-Key middleware answers 201 with a JSON body naming the execution number;
// GET /stats answers {"executions": N}. Run it with `go run ./examples/http` (GOPATH mode, see
// client-lib/go/go.sh) or scripts/example-http go.
//
// Environment: IDEM_ADDRESS (default 127.0.0.1:50051; a comma-separated list for a cluster),
// IDEM_TENANT (default shop), IDEM_TOKEN, PORT (default 8081; it listens on 127.0.0.1),
// IDEM_SERVICE (the step key's service, default http-go), IDEM_JOURNAL (the fail-open journal,
// default $TMPDIR/idem-example-http-go.journal), IDEM_HTTP_DEADLINE_MS (the middleware's
// deadline). The defaults differ from the Node (8082, http-node) and Python (8083, http-python)
// examples' and from quickstart's console (8080), so that all of them run side by side. A port
// already taken is refused before anything else: the port is named, "listening" is printed only
// once the port is bound, and the exit status is 1.
//
// Routes are matched on the normalized path (docs/api.md §19 rule 5: /p%61yments/ is
// /payments) before the middleware sees the request: another path is 404, another method 405, a
// method with a lower-case letter or a target that cannot be normalized 400, each a problem
// document (http-middleware.json example_server). The listener is wrapped in
// idemhttp.CheckHeads, so what net/http would repair or refuse itself before any handler runs is
// answered as the rules say, as problem documents: a head over 16 KiB 431 header-too-large,
// obs-fold or a control character 400 request-malformed, Content-Length beside
// Transfer-Encoding, twice or malformed and a Transfer-Encoding other than chunked 400
// body-malformed (the handler does not run).
//
// The wrapped handler reads its JSON body (anything else = {}): {"fail": true} answers 500 (stored
// as retryable), {"delay_ms": N} sleeps N ms first, {"big": N} answers N bytes of text/plain. Two
// request headers that are not part of the fingerprint do the same for trying it out:
// Simulate-Status: N answers that status instead of 201, Simulate-Delay-Ms: N sleeps N ms first.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	idem "idem.dev/client"
	"idem.dev/client/idemhttp"
)

type app struct {
	executions atomic.Int64
}

func writeJSON(w http.ResponseWriter, status int, v interface{}) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func (a *app) payment(w http.ResponseWriter, r *http.Request) {
	n := a.executions.Add(1)
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Amount  *int64  `json:"amount"`
		Fail    bool    `json:"fail"`
		DelayMs float64 `json:"delay_ms"`
		Big     int     `json:"big"`
	}
	_ = json.Unmarshal(body, &req)
	delay := req.DelayMs
	if ms, err := strconv.Atoi(r.Header.Get("Simulate-Delay-Ms")); err == nil && ms > 0 {
		delay += float64(ms)
	}
	if delay > 10000 {
		delay = 10000
	}
	if delay > 0 {
		time.Sleep(time.Duration(delay * float64(time.Millisecond)))
	}
	kind := "payment"
	if t, err := idemhttp.NormalizeTarget(r.RequestURI); err == nil && t.Path == "/refunds" {
		kind = "refund"
	}
	if req.Fail {
		writeJSON(w, http.StatusInternalServerError, map[string]interface{}{"execution": n, "error": kind + " gateway failed"})
		return
	}
	if s, err := strconv.Atoi(r.Header.Get("Simulate-Status")); err == nil && s >= 200 && s <= 599 {
		writeJSON(w, s, map[string]interface{}{"execution": n, "error": "simulated status " + strconv.Itoa(s)})
		return
	}
	if req.Big > 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(bytes.Repeat([]byte("x"), req.Big))
		return
	}
	writeJSON(w, http.StatusCreated, map[string]interface{}{kind: fmt.Sprintf("%s-%d", kind, n), "execution": n,
		"amount": req.Amount})
}

// newServer is the example's handler: routing on the normalized path first (404, 405, 400 as
// problem documents), POST /payments and POST /refunds behind the middleware.
func newServer(c *idem.Client, service string, deadline time.Duration) (http.Handler, *app, error) {
	a := &app{}
	mw, err := idemhttp.New(idemhttp.Options{Client: c, Service: service, Deadline: deadline})
	if err != nil {
		return nil, nil, err
	}
	payments := mw.Wrap(http.HandlerFunc(a.payment))
	stats := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]int64{"executions": a.executions.Load()})
	})
	routes := map[string]struct {
		method string
		h      http.Handler
	}{"/payments": {"POST", payments}, "/refunds": {"POST", payments}, "/stats": {"GET", stats}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != strings.ToUpper(r.Method) {
			idemhttp.WriteServerProblem(w, "", "request-malformed", fmt.Sprintf("the method %q has a lower-case letter (methods are case-sensitive)", r.Method))
			return
		}
		t, err := idemhttp.NormalizeTarget(r.RequestURI)
		if err != nil {
			idemhttp.WriteServerProblem(w, "", "target-malformed", err.Error())
			return
		}
		rt, ok := routes[t.Path]
		switch {
		case !ok:
			idemhttp.WriteServerProblem(w, "", "not-found", "no route "+t.Path)
		case r.Method != rt.method && !(rt.method == "GET" && r.Method == "HEAD"):
			w.Header().Set("Allow", rt.method)
			idemhttp.WriteServerProblem(w, "", "method-not-allowed", fmt.Sprintf("%s %s: only %s", r.Method, t.Path, rt.method))
		default:
			rt.h.ServeHTTP(w, r)
		}
	}), a, nil
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	addr := "127.0.0.1:" + env("PORT", "8081")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "example-http: cannot listen on %s: %v\n"+
			"example-http: port %s is taken (quickstart's console holds 8080): choose another with PORT=, e.g. PORT=8091\n",
			addr, err, env("PORT", "8081"))
		os.Exit(1)
	}
	journal := env("IDEM_JOURNAL", filepath.Join(os.TempDir(), "idem-example-http-go.journal"))
	c, err := idem.Connect(idem.Options{Address: env("IDEM_ADDRESS", "127.0.0.1:50051"),
		Tenant: env("IDEM_TENANT", "shop"), Token: os.Getenv("IDEM_TOKEN"), JournalPath: journal})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var deadline time.Duration
	if ms, err := strconv.Atoi(os.Getenv("IDEM_HTTP_DEADLINE_MS")); err == nil && ms > 0 {
		deadline = time.Duration(ms) * time.Millisecond
	}
	h, _, err := newServer(c, env("IDEM_SERVICE", "http-go"), deadline)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("example-http: listening on http://%s (coordinator %s, tenant %s, service %s, journal %s)",
		addr, env("IDEM_ADDRESS", "127.0.0.1:50051"), env("IDEM_TENANT", "shop"),
		env("IDEM_SERVICE", "http-go"), journal)
	srv := httpServer(h)
	log.Fatal(srv.Serve(idemhttp.CheckHeads(srv, ln, idemhttp.HeadOptions{})))
}

// httpServer is the example's net/http server: a 16 KiB head read within 10 s. Serve it on
// idemhttp.CheckHeads(srv, listener, ...).
func httpServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10}
}
