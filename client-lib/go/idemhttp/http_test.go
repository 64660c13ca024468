package idemhttp_test

// http_test.go — the middleware over real HTTP on loopback against a real coordinator, driven
// by client-lib/conformance/http-middleware.json: its problem table, its request cases (chunked
// bodies, truncated and aborted uploads, limits, scope, key vs hashed text, methods, large
// answers), then 409, 500 coordinator-refused and 503 as problem documents, and a 200 MB answer
// that keeps the process's RSS under the file's bound over its baseline.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	idem "idem.dev/client"
	"idem.dev/client/idemhttp"
	"idem.dev/client/internal/testcoord"
)

type spec struct {
	Defaults struct {
		Methods        []string `json:"methods"`
		RequestBodyMax int64    `json:"request_body_max"`
		StoredBodyMax  int      `json:"stored_body_max"`
		CoordinatorMs  int      `json:"coordinator_call_timeout_ms"`
		ProblemBase    string   `json:"problem_base"`
	} `json:"defaults"`
	Problems []struct {
		Type      string `json:"type"`
		Status    int    `json:"status"`
		Title     string `json:"title"`
		Retryable bool   `json:"retryable"`
	} `json:"problems"`
	KeyToStep struct {
		Vectors []struct {
			Authorization *string `json:"authorization"`
			Key           string  `json:"key"`
			GlobalID      string  `json:"global_id"`
		} `json:"vectors"`
	} `json:"key_to_step"`
	Cases []struct {
		Name     string `json:"name"`
		Requests []struct {
			Request specRequest `json:"request"`
			Expect  struct {
				Status         int    `json:"status"`
				Problem        string `json:"problem"`
				Ran            *bool  `json:"ran"`
				Replayed       *bool  `json:"replayed"`
				BodyOmitted    bool   `json:"body_omitted"`
				BodyLength     *int   `json:"body_length"`
				AnswerOptional bool   `json:"answer_optional"`
			} `json:"expect"`
		} `json:"requests"`
	} `json:"cases"`
	LargeResponse struct {
		Bytes              int64 `json:"bytes"`
		RSSOverBaselineMax int64 `json:"rss_over_baseline_max"`
	} `json:"large_response"`
}

type specRequest struct {
	Method        string            `json:"method"`
	Path          string            `json:"path"`
	Key           *string           `json:"key"`
	Authorization *string           `json:"authorization"`
	Body          *string           `json:"body"`
	Chunks        []string          `json:"chunks"`
	BodyBytes     int               `json:"body_bytes"`
	Chunked       bool              `json:"chunked"`
	ContentLength *int              `json:"content_length"`
	Abort         bool              `json:"abort"`
	Headers       map[string]string `json:"headers"`
	Lines         []string          `json:"-"` // raw header lines, in order (repeated names)
}

func loadSpec(t *testing.T) *spec {
	dir := "../../conformance"
	if src := os.Getenv("IDEM_SOURCE_DIR"); src != "" {
		dir = filepath.Join(src, "client-lib", "conformance")
	}
	b, err := os.ReadFile(filepath.Join(dir, "http-middleware.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s spec
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Cases) < 8 || len(s.Problems) < 8 {
		t.Fatalf("http-middleware.json looks truncated: %d cases", len(s.Cases))
	}
	return &s
}

// testApp is the file's "app": counts executions, answers 201 JSON, or Response-Bytes of 'x'.
type testApp struct{ executions atomic.Int64 }

func (a *testApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := a.executions.Add(1)
	body, _ := io.ReadAll(r.Body)
	if ms, err := strconv.Atoi(r.Header.Get("Delay-Ms")); err == nil {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	if nb, err := strconv.ParseInt(r.Header.Get("Response-Bytes"), 10, 64); err == nil {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(200)
		piece := []byte(strings.Repeat("x", 64*1024))
		for nb > 0 {
			k := int64(len(piece))
			if nb < k {
				k = nb
			}
			if _, err := w.Write(piece[:k]); err != nil {
				return
			}
			nb -= k
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(201)
	fmt.Fprintf(w, `{"execution":%d,"body_length":%d}`+"\n", n, len(body))
}

type rawAnswer struct {
	status int
	header http.Header
	body   []byte
	n      int64
	none   bool // the server closed without an answer
}

// send writes the request byte for byte and reads the answer (counting, not keeping, a body
// longer than 1 MiB).
func send(t *testing.T, addr string, q specRequest) rawAnswer {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	method, path := q.Method, q.Path
	if method == "" {
		method = "POST"
	}
	if path == "" {
		path = "/echo"
	}
	var body []byte
	if q.Body != nil {
		body = []byte(*q.Body)
	} else if q.BodyBytes > 0 {
		body = []byte(strings.Repeat("x", q.BodyBytes))
	}
	w := bufio.NewWriter(conn)
	fmt.Fprintf(w, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nConnection: close\r\n", method, path, addr)
	if q.Key != nil {
		fmt.Fprintf(w, "Idempotency-Key: %s\r\n", *q.Key)
	}
	if q.Authorization != nil {
		fmt.Fprintf(w, "Authorization: %s\r\n", *q.Authorization)
	}
	for k, v := range q.Headers {
		fmt.Fprintf(w, "%s: %s\r\n", k, v)
	}
	for _, l := range q.Lines {
		fmt.Fprintf(w, "%s\r\n", l)
	}
	chunks := q.Chunks
	if q.Chunked && chunks == nil {
		for i := 0; i < len(body); i += 64 * 1024 {
			end := i + 64*1024
			if end > len(body) {
				end = len(body)
			}
			chunks = append(chunks, string(body[i:end]))
		}
	}
	if chunks != nil {
		w.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		for _, c := range chunks {
			fmt.Fprintf(w, "%x\r\n%s\r\n", len(c), c)
		}
		if !q.Abort {
			w.WriteString("0\r\n\r\n")
		}
	} else {
		cl := len(body)
		if q.ContentLength != nil {
			cl = *q.ContentLength
		}
		fmt.Fprintf(w, "Content-Length: %d\r\n\r\n", cl)
		w.Write(body)
	}
	// a write error is not fatal: the server may answer (413) and close before it read all
	_ = w.Flush()
	if q.Abort {
		_ = conn.(*net.TCPConn).CloseWrite()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		if q.Abort {
			return rawAnswer{none: true}
		}
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	a := rawAnswer{status: resp.StatusCode, header: resp.Header}
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	rest, _ := io.Copy(io.Discard, resp.Body)
	a.body, a.n = head, int64(len(head))+rest
	return a
}

var instanceRE = regexp.MustCompile(`^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// checkProblem checks a problem document against the file's table; key is the key the request
// had (nil = none or malformed).
func checkProblem(t *testing.T, s *spec, what string, a rawAnswer, word string, key *string) {
	t.Helper()
	var want *struct {
		Type      string `json:"type"`
		Status    int    `json:"status"`
		Title     string `json:"title"`
		Retryable bool   `json:"retryable"`
	}
	for i := range s.Problems {
		if s.Problems[i].Type == word {
			want = &s.Problems[i]
		}
	}
	if want == nil {
		t.Fatalf("%s: problem %q is not in http-middleware.json", what, word)
	}
	var p map[string]interface{}
	if a.header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(a.body, &p) != nil {
		t.Fatalf("%s: want a %s problem document, got %d %s %q", what, word, a.status, a.header.Get("Content-Type"), a.body)
	}
	if a.status != want.Status || p["type"] != s.Defaults.ProblemBase+"#"+word || p["title"] != want.Title ||
		p["status"] != float64(want.Status) || p["retryable"] != want.Retryable || p["detail"] == "" {
		t.Fatalf("%s: problem %d %v", what, a.status, p)
	}
	if inst, _ := p["instance"].(string); !instanceRE.MatchString(inst) {
		t.Fatalf("%s: instance %v", what, p["instance"])
	}
	if key != nil {
		if p["idempotency_key"] != *key {
			t.Fatalf("%s: idempotency_key %v, want %q", what, p["idempotency_key"], *key)
		}
	} else if _, ok := p["idempotency_key"]; ok {
		t.Fatalf("%s: idempotency_key without a key", what)
	}
	// Retry-After only on a retryable problem, and only from the coordinator's hint (never made
	// up): an in-progress answer carries one, a stopped coordinator's 503 none
	if ra := a.header.Get("Retry-After"); ra != "" && !want.Retryable {
		t.Fatalf("%s: Retry-After %q on a retryable=%v problem", what, ra, want.Retryable)
	}
}

type rig struct {
	co     *testcoord.Coord
	client *idem.Client
	app    *testApp
	addr   string
	logs   *logBuf
}

type logBuf struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuf) logf(f string, args ...interface{}) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(f, args...))
	l.mu.Unlock()
}

func (l *logBuf) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}

func newRig(t *testing.T, co *testcoord.Coord, token string) *rig {
	if co == nil {
		co = testcoord.Start(t)
	}
	c, err := idem.Connect(idem.Options{Address: co.Addr, Tenant: testcoord.Tenant("go-mw"), Token: token,
		JournalPath: filepath.Join(t.TempDir(), "journal"), Deadline: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := &rig{co: co, client: c, app: &testApp{}, logs: &logBuf{}}
	mw, err := idemhttp.New(idemhttp.Options{Client: c, Service: "go-mw", Deadline: 3 * time.Second, Logf: r.logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"executions":%d}`, r.app.executions.Load())
	})
	mux.Handle("/", mw.Wrap(r.app))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.addr = strings.TrimPrefix(srv.URL, "http://")
	return r
}

func expectedKey(q specRequest) *string {
	if q.Key == nil {
		return nil
	}
	k, rule := idemhttp.ParseKey(*q.Key)
	if rule != "" {
		return nil
	}
	return &k
}

func TestSpecProblemTable(t *testing.T) {
	s := loadSpec(t)
	got := idemhttp.ProblemTypes()
	if len(got) != len(s.Problems) {
		t.Fatalf("%d problem types here, %d in http-middleware.json", len(got), len(s.Problems))
	}
	for _, p := range s.Problems {
		g, ok := got[p.Type]
		if !ok || g.Status != p.Status || g.Title != p.Title || g.Retryable != p.Retryable {
			t.Errorf("problem %s: here %+v, in the file %+v", p.Type, g, p)
		}
	}
	if fmt.Sprint(s.Defaults.Methods) != "[POST PATCH]" || s.Defaults.RequestBodyMax != 1<<20 ||
		s.Defaults.StoredBodyMax != 64*1024 || s.Defaults.CoordinatorMs != 5000 || s.Defaults.ProblemBase != idemhttp.DefaultProblemBase {
		t.Fatalf("the file's defaults differ from the middleware's: %+v", s.Defaults)
	}
	for _, v := range s.KeyToStep.Vectors {
		r := httptest.NewRequest("POST", "/x", nil)
		if v.Authorization != nil {
			r.Header.Set("Authorization", *v.Authorization)
		}
		if got := idemhttp.GlobalID(idemhttp.AuthorizationScope(r), v.Key); got != v.GlobalID {
			t.Errorf("key %q with Authorization %v: %s, want %s", v.Key, v.Authorization, got, v.GlobalID)
		}
	}
}

func TestSpecCases(t *testing.T) {
	s := loadSpec(t)
	r := newRig(t, nil, "")
	for _, c := range s.Cases {
		t.Run(c.Name, func(t *testing.T) {
			for i, q := range c.Requests {
				what := fmt.Sprintf("request %d", i+1)
				before := r.app.executions.Load()
				a := send(t, r.addr, q.Request)
				ran := r.app.executions.Load() - before
				if q.Expect.Ran != nil && (ran == 1) != *q.Expect.Ran {
					t.Fatalf("%s: handler ran %d times, want ran=%v (%d %q)", what, ran, *q.Expect.Ran, a.status, a.body)
				}
				if a.none {
					if !q.Expect.AnswerOptional {
						t.Fatalf("%s: no answer", what)
					}
					t.Logf("%s: the server closed without an answer", what)
					continue
				}
				if a.status != q.Expect.Status {
					t.Fatalf("%s: status %d, want %d: %q", what, a.status, q.Expect.Status, a.body)
				}
				if q.Expect.Problem != "" {
					checkProblem(t, s, what, a, q.Expect.Problem, expectedKey(q.Request))
				}
				if q.Expect.Replayed != nil && (a.header.Get("Idempotent-Replayed") == "true") != *q.Expect.Replayed {
					t.Fatalf("%s: Idempotent-Replayed %q, want %v", what, a.header.Get("Idempotent-Replayed"), *q.Expect.Replayed)
				}
				if q.Expect.BodyOmitted != (a.header.Get("Idempotent-Body-Omitted") == "true") {
					t.Fatalf("%s: Idempotent-Body-Omitted %q", what, a.header.Get("Idempotent-Body-Omitted"))
				}
				if q.Expect.BodyLength != nil && a.n != int64(*q.Expect.BodyLength) {
					t.Fatalf("%s: body of %d bytes, want %d", what, a.n, *q.Expect.BodyLength)
				}
			}
		})
	}
}

func until(t *testing.T, what string, within time.Duration, f func() bool) {
	t.Helper()
	end := time.Now().Add(within)
	for !f() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestInProgressAndStoppedCoordinatorAreProblems(t *testing.T) {
	s := loadSpec(t)
	r := newRig(t, nil, "")
	key := "slow-1"
	body := "{}"
	done := make(chan rawAnswer, 1)
	go func() {
		done <- send(t, r.addr, specRequest{Key: &key, Body: &body, Headers: map[string]string{"Delay-Ms": "1500"}})
	}()
	until(t, "the first request to run", 10*time.Second, func() bool { return r.app.executions.Load() == 1 })
	checkProblem(t, s, "in progress", send(t, r.addr, specRequest{Key: &key, Body: &body}), "in-progress", &key)
	if a := <-done; a.status != 201 {
		t.Fatalf("first: %d %q", a.status, a.body)
	}
	r.co.Stop()
	k2 := "down-1"
	down := send(t, r.addr, specRequest{Key: &k2, Body: &body})
	checkProblem(t, s, "stopped coordinator", down, "coordinator-unavailable", &k2)
	if ra := down.header.Get("Retry-After"); ra != "" { // no coordinator answered: no hint to pass on
		t.Fatalf("stopped coordinator: a made-up Retry-After %q", ra)
	}
	if r.app.executions.Load() != 1 {
		t.Fatal("the handler ran with the coordinator stopped")
	}
}

func TestCoordinatorRefusalIs500Problem(t *testing.T) {
	s := loadSpec(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("right-token-0123456789 go-mw-tenant service\n"), 0600); err != nil {
		t.Fatal(err)
	}
	co := testcoord.Spawn(t, "--tokens", tokens)
	r := newRig(t, co, "wrong-token-0123456789")
	key := "refused-1"
	body := "{}"
	var a rawAnswer
	until(t, "the coordinator to answer (not 503)", 20*time.Second, func() bool {
		a = send(t, r.addr, specRequest{Key: &key, Body: &body})
		return a.status != 503
	})
	checkProblem(t, s, "bad token", a, "coordinator-refused", &key)
	if r.app.executions.Load() != 0 || r.logs.count("coordinator-refused") < 1 {
		t.Fatalf("executions %d, log %v", r.app.executions.Load(), r.logs.lines)
	}
	before := r.logs.count("coordinator-refused")
	a = send(t, r.addr, specRequest{Key: &key, Body: &body})
	checkProblem(t, s, "bad token again", a, "coordinator-refused", &key)
	if r.logs.count("coordinator-refused") != before+1 {
		t.Fatalf("one refusal logged %d times", r.logs.count("coordinator-refused")-before)
	}
}

func rssBytes(t *testing.T, field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			f := strings.Fields(l)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

func TestLargeResponseKeepsRSSBounded(t *testing.T) {
	s := loadSpec(t)
	r := newRig(t, nil, "")
	key, body := "rss-1", "{}"
	n := strconv.FormatInt(s.LargeResponse.Bytes, 10)
	warm := send(t, r.addr, specRequest{Key: str("rss-warm"), Body: &body, Headers: map[string]string{"Response-Bytes": "100000"}})
	if warm.status != 200 {
		t.Fatalf("warm-up: %d", warm.status)
	}
	// reset the peak (VmHWM) to the current RSS, then measure
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	base := rssBytes(t, "VmRSS")
	a := send(t, r.addr, specRequest{Key: &key, Body: &body, Headers: map[string]string{"Response-Bytes": n}})
	peak := rssBytes(t, "VmHWM")
	if a.status != 200 || a.n != s.LargeResponse.Bytes {
		t.Fatalf("large answer: %d, %d bytes", a.status, a.n)
	}
	t.Logf("a %d-byte answer: RSS baseline %d MB, peak %d MB (+%d MB)", a.n, base>>20, peak>>20, (peak-base)>>20)
	if peak-base > s.LargeResponse.RSSOverBaselineMax {
		t.Fatalf("peak RSS %d bytes over the baseline, more than %d", peak-base, s.LargeResponse.RSSOverBaselineMax)
	}
	rep := send(t, r.addr, specRequest{Key: &key, Body: &body, Headers: map[string]string{"Response-Bytes": n}})
	if rep.status != 200 || rep.header.Get("Idempotent-Replayed") != "true" || rep.header.Get("Idempotent-Body-Omitted") != "true" || rep.n != 0 {
		t.Fatalf("replay: %d %v %d bytes", rep.status, rep.header, rep.n)
	}
}

func str(s string) *string { return &s }
