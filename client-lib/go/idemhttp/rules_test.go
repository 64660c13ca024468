package idemhttp_test

// rules_test.go — every vector of docs/api.md §19 in
// client-lib/conformance/http-middleware.json, against the middleware's own functions: the
// operation and fingerprint target from the request target, repeated headers (key, scope),
// methods, trace context, stored answers, the coordinator error table with every reason word,
// and the example servers' problem table. (framing_vectors and example_server are sent over
// real HTTP by examples/http's test and the differential test.)

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	idem "idem.dev/client"
	"idem.dev/client/idemhttp"
)

type rulesSpec struct {
	Defaults struct {
		Methods     []string `json:"methods"`
		KeepHeaders []string `json:"keep_headers"`
		NeverKept   []string `json:"never_kept"`
		TraceMax    int      `json:"trace_max_bytes"`
	} `json:"defaults"`
	CoordinatorErrors []struct {
		Code    string  `json:"code"`
		Reason  *string `json:"reason"`
		Problem string  `json:"problem"`
	} `json:"coordinator_errors"`
	ReasonWords      []string `json:"reason_words"`
	OperationVectors []struct {
		Method, Target, Path, Operation, Error string
		FingerprintTarget                      string `json:"fingerprint_target"`
	} `json:"operation_vectors"`
	HeaderVectors []struct {
		About    string      `json:"about"`
		Lines    [][2]string `json:"lines"`
		Key      *string     `json:"key"`
		KeyError string      `json:"key_error"`
		Scope    *string     `json:"scope"`
	} `json:"header_vectors"`
	MethodVectors []struct {
		Method  string `json:"method"`
		Wrapped bool   `json:"wrapped"`
	} `json:"method_vectors"`
	TraceVectors []struct {
		About           string   `json:"about"`
		Traceparent     []string `json:"traceparent"`
		Tracestate      []string `json:"tracestate"`
		KeepTraceparent *string  `json:"keep_traceparent"`
		KeepTracestate  *string  `json:"keep_tracestate"`
	} `json:"trace_vectors"`
	StoredAnswerVectors []struct {
		About       string      `json:"about"`
		Code        int32       `json:"code"`
		Doc         string      `json:"doc"`
		Problem     string      `json:"problem"`
		Status      int         `json:"status"`
		Headers     [][2]string `json:"headers"`
		BodyB64     *string     `json:"body_b64"`
		BodyOmitted bool        `json:"body_omitted"`
	} `json:"stored_answer_vectors"`
	ExampleServer struct {
		Problems []struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
		} `json:"problems"`
	} `json:"example_server"`
}

func loadRules(t *testing.T) *rulesSpec {
	dir := "../../conformance"
	if src := os.Getenv("IDEM_SOURCE_DIR"); src != "" {
		dir = filepath.Join(src, "client-lib", "conformance")
	}
	b, err := os.ReadFile(filepath.Join(dir, "http-middleware.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s rulesSpec
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.OperationVectors) < 10 || len(s.StoredAnswerVectors) < 10 || len(s.TraceVectors) < 5 ||
		len(s.HeaderVectors) < 3 || len(s.MethodVectors) < 3 || len(s.ReasonWords) < 10 || len(s.CoordinatorErrors) < 5 {
		t.Fatal("http-middleware.json: the round-three vectors look truncated")
	}
	return &s
}

func TestOperationVectors(t *testing.T) {
	for _, v := range loadRules(t).OperationVectors {
		got, err := idemhttp.NormalizeTarget(v.Target)
		if v.Error != "" {
			if err == nil {
				t.Errorf("%s %q: normalized to %q, want %s", v.Method, v.Target, got.Path, v.Error)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %q: %v, want path %q", v.Method, v.Target, err, v.Path)
			continue
		}
		if got.Path != v.Path || got.FingerprintTarget() != v.FingerprintTarget {
			t.Errorf("%s %q: path %q fingerprint target %q, want %q %q", v.Method, v.Target, got.Path, got.FingerprintTarget(), v.Path, v.FingerprintTarget)
		}
		if op := idemhttp.Operation(v.Method, v.Target); op != v.Operation {
			t.Errorf("%s %q: operation %q, want %q", v.Method, v.Target, op, v.Operation)
		}
	}
}

func TestHeaderVectors(t *testing.T) {
	for _, v := range loadRules(t).HeaderVectors {
		r, _ := http.NewRequest("POST", "/payments", nil)
		for _, l := range v.Lines {
			r.Header.Add(l[0], l[1])
		}
		key, rule := idemhttp.ParseKeyHeader(r.Header.Values("Idempotency-Key"))
		if v.KeyError != "" {
			if rule != v.KeyError {
				t.Errorf("%s: key %q rule %q, want rule %q", v.About, key, rule, v.KeyError)
			}
			continue
		}
		if rule != "" || key != *v.Key {
			t.Errorf("%s: key %q rule %q, want %q", v.About, key, rule, *v.Key)
		}
		if v.Scope != nil {
			if got := idemhttp.AuthorizationScope(r); got != *v.Scope {
				t.Errorf("%s: scope %q, want %q", v.About, got, *v.Scope)
			}
		}
	}
}

func TestMethodVectors(t *testing.T) {
	s := loadRules(t)
	m, err := idemhttp.New(idemhttp.Options{Client: dummyClient(t), Service: "rules"})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range s.MethodVectors {
		if m.Wraps(v.Method) != v.Wrapped {
			t.Errorf("method %q: wrapped %v, want %v", v.Method, m.Wraps(v.Method), v.Wrapped)
		}
	}
	if _, err := idemhttp.New(idemhttp.Options{Client: dummyClient(t), Service: "rules", Methods: []string{"post"}}); err == nil {
		t.Error(`Methods ["post"] was accepted; a method is an upper-case token`)
	}
	for _, h := range s.Defaults.NeverKept {
		if _, err := idemhttp.New(idemhttp.Options{Client: dummyClient(t), Service: "rules", KeepHeaders: []string{h}}); err == nil {
			t.Errorf("KeepHeaders [%q] was accepted; it is never kept", h)
		}
	}
}

func TestTraceVectors(t *testing.T) {
	s := loadRules(t)
	if s.Defaults.TraceMax != idemhttp.TraceMax {
		t.Fatalf("TraceMax %d, the file says %d", idemhttp.TraceMax, s.Defaults.TraceMax)
	}
	for _, v := range s.TraceVectors {
		h := http.Header{}
		for _, l := range v.Traceparent {
			h.Add("Traceparent", l)
		}
		for _, l := range v.Tracestate {
			h.Add("Tracestate", l)
		}
		tp, ts := idemhttp.KeptTrace(h)
		want := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		if tp != want(v.KeepTraceparent) || ts != want(v.KeepTracestate) {
			t.Errorf("%s: kept traceparent %q tracestate %.40q, want %q %.40q", v.About, tp, ts, want(v.KeepTraceparent), want(v.KeepTracestate))
		}
	}
}

func TestStoredAnswerVectors(t *testing.T) {
	s := loadRules(t)
	for _, v := range s.StoredAnswerVectors {
		got, err := idemhttp.ValidateStored([]byte(v.Doc), v.Code, s.Defaults.KeepHeaders)
		if v.Problem != "" {
			if err == nil {
				t.Errorf("%s: accepted (status %d), want %s", v.About, got.Status, v.Problem)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", v.About, err)
			continue
		}
		hs := got.Headers
		if hs == nil {
			hs = [][2]string{}
		}
		wantH := v.Headers
		if wantH == nil {
			wantH = [][2]string{}
		}
		hj, _ := json.Marshal(hs)
		wj, _ := json.Marshal(wantH)
		if got.Status != v.Status || !bytes.Equal(hj, wj) || got.BodyOmitted != v.BodyOmitted {
			t.Errorf("%s: status %d headers %s omitted %v, want %d %s %v", v.About, got.Status, hj, got.BodyOmitted, v.Status, wj, v.BodyOmitted)
		}
		if v.BodyB64 != nil && base64.StdEncoding.EncodeToString(got.Body) != *v.BodyB64 {
			t.Errorf("%s: body %q, want base64 %s", v.About, got.Body, *v.BodyB64)
		}
	}
}

func TestCoordinatorErrorTable(t *testing.T) {
	s := loadRules(t)
	want := func(code, reason string) string {
		for _, row := range s.CoordinatorErrors {
			if (row.Code == code || row.Code == "*") && (row.Reason == nil || *row.Reason == reason) {
				return row.Problem
			}
		}
		t.Fatalf("coordinator_errors has no row for %s %q", code, reason)
		return ""
	}
	n := 0
	for _, row := range s.CoordinatorErrors {
		code := row.Code
		if code == "*" {
			code = "INTERNAL"
		}
		for _, reason := range append([]string{""}, s.ReasonWords...) {
			if got := idemhttp.ProblemFor(code, reason); got != want(code, reason) {
				t.Errorf("%s %q: problem %q, want %q", code, reason, got, want(code, reason))
			}
			n++
		}
	}
	t.Logf("%d code and reason pairs", n)
}

func TestExampleServerProblemTable(t *testing.T) {
	s := loadRules(t)
	got := idemhttp.ServerProblemTypes()
	if len(got) != len(s.ExampleServer.Problems) {
		t.Fatalf("%d server problems, the file has %d", len(got), len(s.ExampleServer.Problems))
	}
	for _, p := range s.ExampleServer.Problems {
		if got[p.Type] != p.Status {
			t.Errorf("server problem %s: status %d, want %d", p.Type, got[p.Type], p.Status)
		}
	}
}

// dummyClient is a client of an address nothing listens on (never called: New needs one).
func dummyClient(t *testing.T) *idem.Client {
	c, err := idem.Connect(idem.Options{Address: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
