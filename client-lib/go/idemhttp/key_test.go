package idemhttp_test

// key_test.go — every case of client-lib/conformance/idempotency-key.json: the header parser
// (key or error word), the global id, the operation and the fingerprint.

import (
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"idem.dev/client/idemhttp"
)

type table struct {
	Errors []string `json:"errors"`
	Header []struct {
		Header *string `json:"header"`
		Key    *string `json:"key"`
		Error  string  `json:"error"`
		About  string  `json:"about"`
	} `json:"header"`
	GlobalIDRaw  []map[string]string `json:"global_id"`
	ScopeDefault []struct {
		Authorization *string `json:"authorization"`
		Scope         string  `json:"scope"`
	} `json:"scope_default"`
	Operation   []map[string]string `json:"operation"`
	Fingerprint []map[string]string `json:"fingerprint"`
}

func loadTable(t *testing.T) *table {
	dir := "../../conformance"
	if src := os.Getenv("IDEM_SOURCE_DIR"); src != "" {
		dir = filepath.Join(src, "client-lib", "conformance")
	}
	b, err := os.ReadFile(filepath.Join(dir, "idempotency-key.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tb table
	if err := json.Unmarshal(b, &tb); err != nil {
		t.Fatal(err)
	}
	if len(tb.Header) < 20 || len(tb.GlobalIDRaw) == 0 || len(tb.Operation) == 0 || len(tb.Fingerprint) == 0 {
		t.Fatalf("the table looks truncated: %d header cases", len(tb.Header))
	}
	return &tb
}

func TestHeaderTable(t *testing.T) {
	tb := loadTable(t)
	known := map[string]bool{}
	for _, e := range tb.Errors {
		known[e] = true
	}
	for i, c := range tb.Header {
		var lines []string
		if c.Header != nil {
			lines = []string{*c.Header}
		}
		key, rule := idemhttp.ParseKeyHeader(lines)
		switch {
		case c.Key != nil:
			if rule != "" || key != *c.Key {
				t.Errorf("case %d (%s): want key %q, got key %q rule %q", i, c.About, *c.Key, key, rule)
			}
		default:
			if !known[c.Error] {
				t.Errorf("case %d: error word %q not in the table's list", i, c.Error)
			}
			if rule != c.Error || key != "" {
				t.Errorf("case %d (%s): want error %q, got key %q rule %q", i, c.About, c.Error, key, rule)
			}
		}
	}
}

func TestTwoHeaderLinesAreAList(t *testing.T) {
	if _, rule := idemhttp.ParseKeyHeader([]string{"a", "b"}); rule != idemhttp.RuleComma {
		t.Fatalf("two bare lines: %q", rule)
	}
	if _, rule := idemhttp.ParseKeyHeader([]string{`"a"`, `"b"`}); rule != idemhttp.RuleTrailing {
		t.Fatalf("two Strings: %q", rule)
	}
}

func TestStepKeyAndFingerprintTable(t *testing.T) {
	tb := loadTable(t)
	for _, c := range tb.GlobalIDRaw {
		if got := idemhttp.GlobalID(c["scope"], c["key"]); got != c["global_id"] {
			t.Errorf("global id of %q in scope %q: got %q want %q", c["key"], c["scope"], got, c["global_id"])
		}
	}
	if len(tb.ScopeDefault) == 0 {
		t.Fatal("no scope_default vectors")
	}
	for _, c := range tb.ScopeDefault {
		r := httptest.NewRequest("POST", "/x", nil)
		if c.Authorization != nil {
			r.Header.Set("Authorization", *c.Authorization)
		}
		if got := idemhttp.AuthorizationScope(r); got != c.Scope {
			t.Errorf("scope of Authorization %v: got %q want %q", c.Authorization, got, c.Scope)
		}
	}
	for _, c := range tb.Operation {
		if got := idemhttp.Operation(c["method"], c["path"]); got != c["operation"] {
			t.Errorf("operation of %s %s: got %q want %q", c["method"], c["path"], got, c["operation"])
		}
	}
	for _, c := range tb.Fingerprint {
		got := hex.EncodeToString(idemhttp.Fingerprint(c["method"], c["target"], []byte(c["body"])))
		if got != c["sha256"] {
			t.Errorf("fingerprint of %s %s %q: got %s want %s", c["method"], c["target"], c["body"], got, c["sha256"])
		}
	}
}

func TestRetryAfterRoundsUp(t *testing.T) {
	for _, c := range []struct {
		in   time.Duration
		want int
	}{{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {1001 * time.Millisecond, 2}, {29999 * time.Millisecond, 30}} {
		if got := idemhttp.RetryAfterSeconds(c.in); got != c.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestStoredEncoding(t *testing.T) {
	s := &idemhttp.StoredResponse{Status: 201, Headers: [][2]string{{"Content-Type", "application/json"}, {"X-A", "1"}}, Body: []byte("{\"ok\":true}")}
	got := string(s.Encode())
	want := `{"status":201,"headers":[["Content-Type","application/json"],["X-A","1"]],"body_b64":"eyJvayI6dHJ1ZX0="}`
	if got != want {
		t.Fatalf("encoding\n got %s\nwant %s", got, want)
	}
	back, err := idemhttp.DecodeStored([]byte(got))
	if err != nil || back.Status != 201 || string(back.Body) != `{"ok":true}` || len(back.Headers) != 2 || back.BodyOmitted {
		t.Fatalf("decode: %+v %v", back, err)
	}
	omitted := (&idemhttp.StoredResponse{Status: 200, BodyOmitted: true}).Encode()
	if string(omitted) != `{"status":200,"headers":[],"body_b64":"","body_omitted":true}` {
		t.Fatalf("omitted: %s", omitted)
	}
}
