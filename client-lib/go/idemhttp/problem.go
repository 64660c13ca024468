package idemhttp

// problem.go — the RFC 9457 problem documents the middleware answers itself (400, 409, 413,
// 422, 500, 503), with the types, titles and statuses of client-lib/conformance/
// http-middleware.json and the anchors of docs/http-middleware.md. Each carries `instance`
// (urn:uuid: + a fresh UUID, also in the middleware's log line) and, when the request had a
// key, `idempotency_key`.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	idem "idem.dev/client"
)

// DefaultProblemBase is where the problem types point by default (a relative reference).
const DefaultProblemBase = "docs/http-middleware.md"

type problemKind struct {
	anchor, title string
	status        int
	retryable     bool
}

var (
	probKeyMissing     = problemKind{"key-missing", "Idempotency-Key missing", 400, false}
	probKeyMalformed   = problemKind{"key-malformed", "Idempotency-Key malformed", 400, false}
	probBodyIncomplete = problemKind{"body-incomplete", "Request body incomplete", 400, false}
	probInProgress     = problemKind{"in-progress", "Request in progress", 409, true}
	probBodyTooLarge   = problemKind{"body-too-large", "Request body too large", 413, false}
	probMismatch       = problemKind{"fingerprint-mismatch", "Idempotency-Key reused", 422, false}
	probCompensated    = problemKind{"compensated", "Request compensated", 422, false}
	probRefused        = problemKind{"coordinator-refused", "Idempotency coordinator refused the middleware", 500, false}
	probInternal       = problemKind{"middleware-error", "Idempotency middleware error", 500, false}
	probUnavailable    = problemKind{"coordinator-unavailable", "Idempotency coordinator unavailable", 503, true}
	probTarget         = problemKind{"target-malformed", "Request target malformed", 400, false}
	probBodyMalformed  = problemKind{"body-malformed", "Request body framing malformed", 400, false}
	probStoredInvalid  = problemKind{"stored-answer-invalid", "Stored answer invalid", 500, false}

	middlewareProblems = []problemKind{probKeyMissing, probKeyMalformed, probBodyIncomplete, probInProgress,
		probBodyTooLarge, probMismatch, probCompensated, probRefused, probInternal, probUnavailable,
		probTarget, probBodyMalformed, probStoredInvalid}
	// the example servers' own problems (http-middleware.json example_server.problems)
	serverProblems = []problemKind{
		{"request-malformed", "Request malformed", 400, false},
		{"not-found", "Not found", 404, false},
		{"method-not-allowed", "Method not allowed", 405, false},
		{"header-too-large", "Request header fields too large", 431, false},
	}
)

// ProblemTypes lists every problem the middleware answers: type word → status, title,
// retryable (the tests compare it with client-lib/conformance/http-middleware.json).
func ProblemTypes() map[string]struct {
	Status    int
	Title     string
	Retryable bool
} {
	out := map[string]struct {
		Status    int
		Title     string
		Retryable bool
	}{}
	for _, k := range middlewareProblems {
		out[k.anchor] = struct {
			Status    int
			Title     string
			Retryable bool
		}{k.status, k.title, k.retryable}
	}
	return out
}

// Problem is the document's JSON (field order as in the draft's examples).
type Problem struct {
	Type           string `json:"type"`
	Title          string `json:"title"`
	Status         int    `json:"status"`
	Detail         string `json:"detail"`
	Instance       string `json:"instance"`
	Retryable      bool   `json:"retryable"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// RetryAfterSeconds is the Retry-After value for a coordinator hint: whole seconds rounded up,
// at least 1.
func RetryAfterSeconds(hint time.Duration) int {
	s := int((hint + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

// newInstance is urn:uuid: + a random (version 4) UUID.
func newInstance() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return "urn:uuid:" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// problem writes the document and logs one line naming its instance; key is "" when the
// request had no (well-formed) key.
func (m *Middleware) problem(w http.ResponseWriter, r *http.Request, k problemKind, key, detail string, retryAfter time.Duration) {
	p := Problem{Type: m.o.ProblemBase + "#" + k.anchor, Title: k.title, Status: k.status, Detail: detail,
		Instance: newInstance(), Retryable: k.retryable, IdempotencyKey: key}
	b, _ := json.Marshal(p)
	m.o.Logf("idemhttp: %s %s: %d %s instance=%s key=%q: %s", r.Method, r.URL.Path, k.status, k.anchor, p.Instance, key, detail)
	writeProblemDoc(w, k.status, b, k.retryable && retryAfter > 0, retryAfter)
}

func writeProblemDoc(w http.ResponseWriter, status int, b []byte, retry bool, retryAfter time.Duration) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if retry { // only with the coordinator's hint: never made up
		h.Set("Retry-After", strconv.Itoa(RetryAfterSeconds(retryAfter)))
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// ServerProblemTypes lists the example servers' own problems (type word → status, title,
// retryable), as http-middleware.json example_server.problems.
func ServerProblemTypes() map[string]int {
	out := map[string]int{}
	for _, k := range serverProblems {
		out[k.anchor] = k.status
	}
	return out
}

// WriteServerProblem answers one of the example server's own problems (request-malformed,
// not-found, method-not-allowed, header-too-large) as a problem document under base ("" =
// DefaultProblemBase), or the middleware's target-malformed; it panics on another type word.
func WriteServerProblem(w http.ResponseWriter, base, typ, detail string) {
	if base == "" {
		base = DefaultProblemBase
	}
	for _, k := range append(append([]problemKind{}, serverProblems...), probTarget) {
		if k.anchor == typ {
			b, _ := json.Marshal(Problem{Type: base + "#" + k.anchor, Title: k.title, Status: k.status,
				Detail: detail, Instance: newInstance(), Retryable: k.retryable})
			writeProblemDoc(w, k.status, b, false, 0)
			return
		}
	}
	panic("idemhttp: WriteServerProblem: no problem type " + typ)
}

// ProblemFor is the problem type word a coordinator error maps to (http-middleware.json
// coordinator_errors): every ABORTED (lease-lost included) is in-progress, FAILED_PRECONDITION
// with fingerprint-mismatch or no reason is fingerprint-mismatch, UNAUTHENTICATED,
// PERMISSION_DENIED and INVALID_ARGUMENT are coordinator-refused, anything else
// coordinator-unavailable.
func ProblemFor(code, reason string) string {
	return problemFor(code, reason).anchor
}

func problemFor(code, reason string) problemKind {
	switch {
	case code == "ABORTED":
		return probInProgress
	case code == "FAILED_PRECONDITION" && (reason == idem.ReasonFingerprintMismatch || reason == ""):
		return probMismatch
	case code == "UNAUTHENTICATED" || code == "PERMISSION_DENIED" || code == "INVALID_ARGUMENT":
		return probRefused
	}
	return probUnavailable
}
