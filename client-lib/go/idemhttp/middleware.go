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
	"log"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

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
	// Methods are the request methods the middleware wraps; others go to the handler
	// untouched. nil = POST and PATCH.
	Methods []string
	// Scope is the caller's part of the step key (docs/http-middleware.md, "Scope"): two
	// requests with one key but different scopes are two steps. nil = AuthorizationScope (the
	// hex SHA-256 of the Authorization header, "" without one).
	Scope func(*http.Request) string
	// BodyLimit: the handler's response is buffered up to this many bytes; past it the rest
	// streams to the client and the step is stored without its body (replayed with
	// Idempotent-Body-Omitted: true). 0 = 64 KiB. A body whose stored encoding would not fit
	// the coordinator's 64 KiB result is stored without it too.
	BodyLimit int
	// MaxRequestBody: a longer request body (declared or read, chunked included) is answered
	// 413 without running; 0 = 1 MiB.
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
	// Logf writes the middleware's log lines (one per problem it answers, naming its
	// instance); nil = log.Printf.
	Logf func(format string, args ...interface{})
	// OnError, when set, is told of errors after the handler ran (the answer was sent anyway):
	// a lost lease, a failed CompleteStep, a journal that could not be written.
	OnError func(r *http.Request, err error)
}

// Middleware is a configured Idempotency-Key middleware.
type Middleware struct {
	o       Options
	keep    []string
	methods map[string]bool
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
		o.BodyLimit = 64 * 1024
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
	if o.Scope == nil {
		o.Scope = AuthorizationScope
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	if o.Methods == nil {
		o.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	m := &Middleware{o: o, keep: []string{"Content-Type"}, methods: map[string]bool{}}
	for _, meth := range o.Methods { // methods match case-sensitively: "post" is not POST
		if meth == "" || strings.ToUpper(meth) != meth {
			return nil, fmt.Errorf("idemhttp: Options.Methods %q: a method is an upper-case token (methods match case-sensitively)", meth)
		}
		m.methods[meth] = true
	}
	if o.KeepHeaders != nil {
		m.keep = nil
		for _, h := range o.KeepHeaders {
			if neverKept(h) {
				return nil, fmt.Errorf("idemhttp: Options.KeepHeaders %q: %v are never kept (the middleware frames a replay itself)", h, NeverKept)
			}
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

// liveWriter holds the handler's answer up to limit bytes of body; past it, it sends the
// status, the headers and what it holds to the client and streams the rest (the step is then
// stored without its body), so a large answer never sits in memory whole.
type liveWriter struct {
	w         http.ResponseWriter
	header    http.Header
	status    int
	body      bytes.Buffer
	limit     int
	streaming bool
	panicked  bool
}

func (l *liveWriter) Header() http.Header { return l.header }
func (l *liveWriter) WriteHeader(s int) {
	if l.status == 0 {
		l.status = s
	}
}
func (l *liveWriter) Write(b []byte) (int, error) {
	if l.status == 0 {
		l.status = http.StatusOK
	}
	if !l.streaming && l.body.Len()+len(b) <= l.limit {
		return l.body.Write(b)
	}
	if !l.streaming {
		l.startStreaming()
	}
	return l.w.Write(b)
}

// Flush sends what the handler wrote so far when the answer already streams (a held answer is
// sent once the step is stored).
func (l *liveWriter) Flush() {
	if f, ok := l.w.(http.Flusher); ok && l.streaming {
		f.Flush()
	}
}

func (l *liveWriter) startStreaming() {
	l.streaming = true
	for k, v := range l.header {
		l.w.Header()[k] = v
	}
	l.w.WriteHeader(l.status)
	_, _ = l.w.Write(l.body.Bytes())
	l.body = bytes.Buffer{} // let the held part go
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

// Wraps says whether the middleware wraps a request of this method (case-sensitively: "post" is
// not POST).
func (m *Middleware) Wraps(method string) bool { return m.methods[method] }

// Wrap returns h behind the middleware.
func (m *Middleware) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, h) })
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, h http.Handler) {
	if !m.methods[r.Method] {
		h.ServeHTTP(w, r)
		return
	}
	key, rule := ParseKeyHeader(r.Header.Values("Idempotency-Key"))
	if rule == RuleMissing {
		m.problem(w, r, probKeyMissing, "", "the request has no Idempotency-Key header", 0)
		return
	}
	if rule != "" {
		raw := r.Header.Values("Idempotency-Key")
		m.problem(w, r, probKeyMalformed, "", fmt.Sprintf("Idempotency-Key %q breaks the rule %q: %s",
			joinLines(raw), rule, ruleText[rule]), 0)
		return
	}
	tgt := r.RequestURI
	if tgt == "" {
		tgt = r.URL.RequestURI()
	}
	norm, terr := NormalizeTarget(tgt)
	if terr != nil {
		m.problem(w, r, probTarget, key, fmt.Sprintf("%v; the handler did not run and idempotency key %q was not used", terr, key), 0)
		return
	}
	// framing (docs/api.md §19 rule 7): net/http refuses a signed, negative or
	// differing Content-Length itself (400) and repairs Content-Length beside chunked and a
	// repeated equal Content-Length before this runs (http-middleware.json example_server.exceptions)
	max := m.o.MaxRequestBody
	if r.ContentLength > max {
		m.problem(w, r, probBodyTooLarge, key, fmt.Sprintf("the request body of %d bytes is longer than the %d-byte limit; idempotency key %q was not used", r.ContentLength, max, key), 0)
		return
	}
	// net/http decodes a chunked body and reports a body shorter than its Content-Length or a
	// broken chunked framing as a read error (io.ErrUnexpectedEOF)
	body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		m.problem(w, r, probBodyIncomplete, key, fmt.Sprintf("the request body could not be read in full (%v); the handler did not run and idempotency key %q was not used", err, key), 0)
		return
	}
	if int64(len(body)) > max {
		m.problem(w, r, probBodyTooLarge, key, fmt.Sprintf("the request body is longer than the %d-byte limit; idempotency key %q was not used", max, key), 0)
		return
	}
	op := m.o.Operation
	if op == "" {
		op = operationOf(r.Method, norm.Path)
	}
	sk := idem.StepKey{GlobalID: GlobalID(m.o.Scope(r), key), Service: m.o.Service, Operation: op, Phase: idem.Forward}
	ro := idem.RunOptions{Fingerprint: Fingerprint(r.Method, norm.FingerprintTarget(), body), Deadline: m.o.Deadline,
		Lease: m.o.Lease, InProgress: idem.FailFast}
	if m.o.Wait {
		ro.InProgress = idem.WaitOnCoordinator
	}

	// the request's trace continues on the step (docs/api.md §22): the span in its context (an
	// instrumented server's), else its trace context headers, only as KeptTrace keeps them (an
	// invalid or too large one is dropped here, before any call: never an error)
	rctx := r.Context()
	if tp, ts := KeptTrace(r.Header); !trace.SpanContextFromContext(rctx).IsValid() && tp != "" {
		rctx = idem.ContextWithTraceparent(rctx, tp, ts)
	}
	var live *liveWriter
	rep, err := m.o.Client.Run(rctx, sk, ro, func(ctx context.Context, s idem.StepContext) idem.Result {
		live = &liveWriter{w: w, header: http.Header{}, limit: m.o.BodyLimit}
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
		if live.panicked && live.streaming {
			panic(http.ErrAbortHandler) // half an answer was sent: abort the connection
		}
		if !live.streaming {
			writeLive(w, live)
		}
		return
	}
	if err == nil && rep.Replayed {
		m.replay(w, r, key, rep.Result)
		return
	}
	if err == nil { // a SKIP decision: a compensation settled this key; nothing to answer with
		m.problem(w, r, probCompensated, key, fmt.Sprintf("the request with idempotency key %q was compensated and does not run again", key), 0)
		return
	}
	var e *idem.Error
	errors.As(err, &e)
	if e == nil {
		if m.o.OnError != nil {
			m.o.OnError(r, err)
		}
		m.problem(w, r, probInternal, key, fmt.Sprintf("the middleware could not run the request with idempotency key %q: %v", key, err), 0)
		return
	}
	switch k := problemFor(e.Code, e.Reason); k {
	case probInProgress:
		m.problem(w, r, k, key, fmt.Sprintf("a request with idempotency key %q is still being processed (%s %s)", key, e.Code, e.Reason), e.RetryAfter)
	case probMismatch:
		m.problem(w, r, k, key, fmt.Sprintf("idempotency key %q was used for another request (method, target or body); use a new key for a new request", key), 0)
	case probRefused:
		m.problem(w, r, k, key, fmt.Sprintf("the idem coordinator refused the middleware (%s %s): a misconfiguration a retry does not fix; the handler did not run", e.Code, e.Reason), 0)
	default:
		m.problem(w, r, k, key, fmt.Sprintf("no idem coordinator could decide on idempotency key %q (%s %s) and the operation fails closed; the handler did not run", key, e.Code, e.Reason), e.RetryAfter)
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
func (m *Middleware) runHandler(h http.Handler, rec *liveWriter, req *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			rec.panicked = true
			rec.status = http.StatusInternalServerError
			if rec.streaming { // the status is sent already; stored as retryable, then aborted
				return
			}
			rec.header = http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
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
func (m *Middleware) store(live *liveWriter) []byte {
	s := &StoredResponse{Status: live.status}
	for _, name := range m.keep {
		for _, v := range live.header.Values(name) {
			if strings.IndexFunc(v, func(c rune) bool { return (c < 0x20 && c != '\t') || c == 0x7f }) >= 0 {
				continue // net/http does not send it either; stored, it would make the replay invalid
			}
			s.Headers = append(s.Headers, [2]string{name, v})
		}
	}
	if !live.streaming && live.body.Len() <= m.o.BodyLimit {
		s.Body = live.body.Bytes()
	} else {
		s.BodyOmitted = true
	}
	b := s.Encode()
	if len(b) > idem.BodyMax { // the body goes first: the kept headers stay (a 48-64 KiB answer keeps its Content-Type)
		s.Body, s.BodyOmitted = nil, true
		b = s.Encode()
	}
	if len(b) > idem.BodyMax { // huge kept headers: keep the status at least
		s.Headers = nil
		b = s.Encode()
	}
	return b
}

func writeLive(w http.ResponseWriter, live *liveWriter) {
	for k, v := range live.header {
		w.Header()[k] = v
	}
	w.WriteHeader(live.status)
	_, _ = w.Write(live.body.Bytes())
}

func (m *Middleware) replay(w http.ResponseWriter, r *http.Request, key string, res idem.Result) {
	s, err := ValidateStored(res.Body, res.Code, m.keep)
	if err != nil { // logged with the instance; nothing of the stored answer is sent
		m.problem(w, r, probStoredInvalid, key, fmt.Sprintf("the answer stored for idempotency key %q cannot be replayed: %v", key, err), 0)
		return
	}
	for _, hv := range s.Headers {
		w.Header().Add(hv[0], hv[1])
	}
	w.Header().Set("Idempotent-Replayed", "true")
	if s.BodyOmitted {
		w.Header().Set("Idempotent-Body-Omitted", "true")
		w.Header().Set("Content-Length", "0")
	} else {
		w.Header().Set("Content-Length", strconv.Itoa(len(s.Body)))
	}
	w.WriteHeader(s.Status)
	if !s.BodyOmitted {
		_, _ = w.Write(s.Body)
	}
}
