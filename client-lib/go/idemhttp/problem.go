package idemhttp

// problem.go — the RFC 9457 problem documents the middleware answers itself (400, 409, 422,
// 503), with the titles and anchors of docs/http-middleware.md.

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// DefaultProblemBase is where the problem types point by default (a relative reference).
const DefaultProblemBase = "docs/http-middleware.md"

type problemKind struct {
	anchor, title string
	status        int
	retryable     bool
}

var (
	probKeyMissing   = problemKind{"key-missing", "Idempotency-Key missing", 400, false}
	probKeyMalformed = problemKind{"key-malformed", "Idempotency-Key malformed", 400, false}
	probMismatch     = problemKind{"fingerprint-mismatch", "Idempotency-Key reused", 422, false}
	probInProgress   = problemKind{"in-progress", "Request in progress", 409, true}
	probUnavailable  = problemKind{"coordinator-unavailable", "Idempotency coordinator unavailable", 503, true}
	probCompensated  = problemKind{"compensated", "Request compensated", 422, false}
)

// Problem is the document's JSON (field order as in the draft's examples).
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	Retryable bool   `json:"retryable"`
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

func writeProblem(w http.ResponseWriter, base string, k problemKind, detail string, retryAfter time.Duration) {
	p := Problem{Type: base + "#" + k.anchor, Title: k.title, Status: k.status, Detail: detail,
		Retryable: k.retryable}
	b, _ := json.Marshal(p)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if k.retryable {
		h.Set("Retry-After", strconv.Itoa(RetryAfterSeconds(retryAfter)))
	}
	w.WriteHeader(k.status)
	_, _ = w.Write(b)
}
