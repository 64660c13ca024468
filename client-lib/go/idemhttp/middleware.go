// Package idemhttp is the net/http Idempotency-Key middleware of the idem Go SDK
// (draft-ietf-httpapi-idempotency-key-header; docs/api.md §19, docs/http-middleware.md,
// docs/sdk-go.md). Wrap a handler with New(opts).Wrap(h) (or Middleware(opts)(h)): the first
// request with a key runs the handler and its answer is stored in the coordinator; a retry
// gets the stored answer with Idempotent-Replayed: true; errors the middleware answers itself
// are RFC 9457 problem documents.
package idemhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	idem "idem.dev/client"
)

// Options of the middleware. Client and Service are required.
type Options struct {
	Client *idem.Client
	// Service is the step key's service (1–64 of [a-z0-9._-]).
	Service string
	// Operation is the step key's operation; "" = per request, from method and path
	// (Operation()).
	Operation string
	// KeepHeaders are the response headers stored and replayed; nil = Content-Type.
	KeepHeaders []string
	// BodyLimit: a response body larger than this (bytes) is stored and replayed without its
	// body, with Idempotent-Body-Omitted: true; 0 = 32 KiB. (The stored encoding must also fit
	// the coordinator's 64 KiB.)
	BodyLimit int
	// MaxRequestBody: a larger request body is answered 413 without running; 0 = 1 MiB.
	MaxRequestBody int64
	// ProblemBase is the base of the problem documents' type URIs; "" = DefaultProblemBase.
	ProblemBase string
	// Wait: a request whose key is still running waits for the first one and replays its
	// answer (within Deadline) instead of answering 409 at once.
	Wait bool
	// Deadline bounds the middleware's part of a request (retries, waiting); the handler is
	// not bounded by it. 0 = 5 s.
	Deadline time.Duration
	// Lease of each execution; 0 = the policy's. It is extended while the handler runs.
	Lease time.Duration
	// OnError, when set, is told of errors after the handler ran (the answer was sent anyway):
	// a lost lease, a failed CompleteStep, a journal that could not be written.
	OnError func(r *http.Request, err error)
}

// Middleware is a configured Idempotency-Key middleware.
type Middleware struct {
	o    Options
	keep []string
}

// New checks the options.
func New(o Options) (*Middleware, error) {
	if o.Client == nil {
		return nil, errors.New("idemhttp: Options.Client is nil")
	}
	if !validName(o.Service) {
		return nil, fmt.Errorf("idemhttp: Options.Service %q is not 1-64 of [a-z0-9._-]", o.Service)
	}
	if o.Operation != "" && !validName(o.Operation) {
		return nil, fmt.Errorf("idemhttp: Options.Operation %q is not 1-64 of [a-z0-9._-]", o.Operation)
	}
	if o.BodyLimit < 0 || o.MaxRequestBody < 0 || o.Deadline < 0 || o.Lease < 0 {
		return nil, errors.New("idemhttp: Options: negative limit or duration")
	}
	if o.BodyLimit == 0 {
		o.BodyLimit = 32 * 1024
	}
	if o.MaxRequestBody == 0 {
		o.MaxRequestBody = 1 << 20
	}
	if o.ProblemBase == "" {
		o.ProblemBase = DefaultProblemBase
	}
	if o.Deadline == 0 {
		o.Deadline = 5 * time.Second
	}
	m := &Middleware{o: o, keep: []string{"Content-Type"}}
	if o.KeepHeaders != nil {
		m.keep = nil
		for _, h := range o.KeepHeaders {
			m.keep = append(m.keep, http.CanonicalHeaderKey(h))
		}
	}
	return m, nil
}

// Wrap is New(o).Wrap, panicking on bad options (for static set-up).
func Wrap(h http.Handler, o Options) http.Handler {
	m, err := New(o)
	if err != nil {
		panic(err)
	}
	return m.Wrap(h)
}

func validName(s string) bool {
	if s == "" || len(s) > idem.NameMax {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// recorder captures the handler's answer.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

func outcomeOf(status int) idem.Outcome {
	switch {
	case status >= 500:
		return idem.OutcomeRetryable // the next retry runs the handler again
	case status >= 400:
		return idem.OutcomeFailed
	}
	return idem.OutcomeSucceeded
}

// Wrap returns h behind the middleware.
func (m *Middleware) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, h) })
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, h http.Handler) {
	base := m.o.ProblemBase
	key, rule := ParseKeyHeader(r.Header.Values("Idempotency-Key"))
	if rule == RuleMissing {
		writeProblem(w, base, probKeyMissing, "the request has no Idempotency-Key header", 0)
		return
	}
	if rule != "" {
		raw := r.Header.Values("Idempotency-Key")
		writeProblem(w, base, probKeyMalformed, fmt.Sprintf("Idempotency-Key %q breaks the rule %q: %s",
			joinLines(raw), rule, ruleText[rule]), 0)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, m.o.MaxRequestBody+1))
	if err != nil {
		http.Error(w, "cannot read the request body", http.StatusBadRequest)
		return
	}
	if int64(len(body)) > m.o.MaxRequestBody {
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return
	}
	target := r.RequestURI
	if target == "" || target[0] != '/' {
		target = r.URL.RequestURI()
	}
	op := m.o.Operation
	if op == "" {
		op = Operation(r.Method, r.URL.EscapedPath())
	}
	sk := idem.StepKey{GlobalID: GlobalID(key), Service: m.o.Service, Operation: op, Phase: idem.Forward}
	ro := idem.RunOptions{Fingerprint: Fingerprint(r.Method, target, body), Deadline: m.o.Deadline,
		Lease: m.o.Lease, InProgress: idem.FailFast}
	if m.o.Wait {
		ro.InProgress = idem.WaitOnCoordinator
	}

	var live *recorder
	rep, err := m.o.Client.Run(r.Context(), sk, ro, func(ctx context.Context, s idem.StepContext) idem.Result {
		live = &recorder{header: http.Header{}}
		req := r.Clone(ctx)
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		m.runHandler(h, live, req)
		if live.status == 0 {
			live.status = http.StatusOK
		}
		return idem.Result{Outcome: outcomeOf(live.status), Code: int32(live.status), Body: m.store(live)}
	})
	if rep != nil && rep.Ran && live != nil {
		if err != nil && idem.Code(err) != idem.CodeStepFailed && m.o.OnError != nil {
			m.o.OnError(r, err)
		}
		writeLive(w, live)
		return
	}
	if err == nil && rep.Replayed {
		m.replay(w, rep.Result)
		return
	}
	if err == nil { // a SKIP decision: a compensation settled this key; nothing to answer with
		writeProblem(w, base, probCompensated, fmt.Sprintf("the request with idempotency key %q was compensated and does not run again", key), 0)
		return
	}
	var e *idem.Error
	errors.As(err, &e)
	switch {
	case e != nil && e.Code == "ABORTED":
		writeProblem(w, base, probInProgress, fmt.Sprintf("a request with idempotency key %q is still being processed", key), e.RetryAfter)
	case e != nil && e.Code == "FAILED_PRECONDITION" && e.Reason == "fingerprint-mismatch":
		writeProblem(w, base, probMismatch, fmt.Sprintf("idempotency key %q was used for another request (method, target or body); use a new key for a new request", key), 0)
	case e != nil && (e.Code == "UNAVAILABLE" || e.Code == "DEADLINE_EXCEEDED" || e.Code == "CANCELLED"):
		writeProblem(w, base, probUnavailable, fmt.Sprintf("no idem coordinator could decide on idempotency key %q (%s) and the operation fails closed; the handler did not run", key, e.Code), e.RetryAfter)
	default:
		if m.o.OnError != nil {
			m.o.OnError(r, err)
		}
		http.Error(w, "idempotency middleware: "+err.Error(), http.StatusInternalServerError)
	}
}

var ruleText = map[string]string{
	RuleEmpty:        "the key is empty",
	RuleTooLong:      "the key is longer than 255 characters",
	RuleNonPrintable: "a character outside printable ASCII",
	RuleComma:        "a bare value with a comma (a list)",
	RuleTrailing:     "something after the String's closing quote (a list or parameters)",
	RuleUnterminated: "the String has no closing quote",
	RuleBadEscape:    "an escape other than \\\" and \\\\ in the String",
}

func joinLines(v []string) string {
	s := ""
	for i, l := range v {
		if i > 0 {
			s += ", "
		}
		s += l
	}
	return s
}

// runHandler calls h; a panic becomes a 500 (stored as retryable), as net/http would answer.
func (m *Middleware) runHandler(h http.Handler, rec *recorder, req *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			rec.header = http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
			rec.status = http.StatusInternalServerError
			rec.body.Reset()
			rec.body.WriteString("internal server error\n")
			if m.o.OnError != nil {
				m.o.OnError(req, fmt.Errorf("idemhttp: handler panicked: %v", p))
			}
		}
	}()
	h.ServeHTTP(rec, req)
}

// store encodes the live answer for the coordinator: the kept headers, the body unless it is
// over the limit.
func (m *Middleware) store(live *recorder) []byte {
	s := &StoredResponse{Status: live.status}
	for _, name := range m.keep {
		for _, v := range live.header.Values(name) {
			s.Headers = append(s.Headers, [2]string{name, v})
		}
	}
	if live.body.Len() <= m.o.BodyLimit {
		s.Body = live.body.Bytes()
	} else {
		s.BodyOmitted = true
	}
	b := s.Encode()
	if len(b) > idem.BodyMax { // huge kept headers: keep the status at least
		s.Body, s.BodyOmitted, s.Headers = nil, true, nil
		b = s.Encode()
	}
	return b
}

func writeLive(w http.ResponseWriter, live *recorder) {
	for k, v := range live.header {
		w.Header()[k] = v
	}
	w.WriteHeader(live.status)
	_, _ = w.Write(live.body.Bytes())
}

func (m *Middleware) replay(w http.ResponseWriter, res idem.Result) {
	s, err := DecodeStored(res.Body)
	if err != nil { // the body is gone (past the policy's retention_s) or not ours: the status
		s = &StoredResponse{Status: int(res.Code), BodyOmitted: true}
		if s.Status < 100 || s.Status > 999 {
			s.Status = http.StatusOK
		}
	}
	for _, hv := range s.Headers {
		w.Header().Add(hv[0], hv[1])
	}
	w.Header().Set("Idempotent-Replayed", "true")
	if s.BodyOmitted {
		w.Header().Set("Idempotent-Body-Omitted", "true")
	}
	w.WriteHeader(s.Status)
	if !s.BodyOmitted {
		_, _ = w.Write(s.Body)
	}
}
