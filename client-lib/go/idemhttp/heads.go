package idemhttp

// heads.go — CheckHeads: a net.Listener wrapper that reads each request's raw bytes before
// net/http does, so that the rules net/http would repair or refuse itself (docs/api.md §19 rules
// 7 and 12) are answered as the rules say. Each connection parses its requests with net/http's own
// http.ReadRequest over a bufio.Reader on a tee of the socket; the bytes that parse consumed
// (bytes teed − what is still buffered) are exactly the request's bytes, so a request that passes
// is handed on to net/http unchanged, head and body, keep-alive and pipelining included.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// HeadOptions configure CheckHeads.
type HeadOptions struct {
	// ProblemBase is the base of the problem documents' type URIs; "" = DefaultProblemBase.
	ProblemBase string
	// Logf writes one line per refusal (naming its instance); nil = log.Printf.
	Logf func(format string, args ...interface{})
}

// CheckHeads returns ln wrapped for srv: srv must then serve the returned listener
// (srv.Serve(CheckHeads(srv, ln, o))). Each request's raw head is checked before net/http parses
// it; a request that passes goes on to net/http byte for byte, one that does not is answered with
// a problem document (application/problem+json, Connection: close) and its connection closed:
//
//   - a folded field line (obs-fold), a control character in a field name or value, a missing,
//     repeated or malformed Host, a request line or field net/http cannot parse: 400
//     request-malformed;
//   - a target net/http cannot parse: 400 target-malformed;
//   - Content-Length beside Transfer-Encoding, a Content-Length that is not 1*DIGIT or comes more
//     than once (equal values included), a Transfer-Encoding other than one "chunked" (or any in
//     HTTP/1.0): 400 body-malformed;
//   - a head (request line and fields) longer than srv.MaxHeaderBytes
//     (http.DefaultMaxHeaderBytes when 0): 431 header-too-large.
//
// A refusal is written only once net/http has answered every request before it on the
// connection, so pipelined answers keep their order. Bodies are not buffered: the body bytes go on
// as net/http reads them (streaming uploads and Expect: 100-continue keep working); what a
// connection holds is the head being read (at most the head limit) and what one read brings.
// The head is read under srv.ReadHeaderTimeout (else ReadTimeout) from its first byte, besides
// every read deadline net/http sets. CheckHeads sets srv.ConnState, calling a hook already set;
// a hijacked connection (WebSocket, CONNECT) is passed through unread from then on. It serves
// plain HTTP/1.1: wrap it around a TLS listener, not under one (net/http then does not see TLS).
// net/http still answers itself what the rules do not cover: a protocol version other than 1.x
// (505) and an Expect other than 100-continue (417).
func CheckHeads(srv *http.Server, ln net.Listener, o HeadOptions) net.Listener {
	if o.ProblemBase == "" {
		o.ProblemBase = DefaultProblemBase
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	l := &headListener{Listener: ln, o: o, limit: srv.MaxHeaderBytes, timeout: srv.ReadHeaderTimeout}
	if l.limit <= 0 {
		l.limit = http.DefaultMaxHeaderBytes
	}
	if l.timeout <= 0 {
		l.timeout = srv.ReadTimeout
	}
	prev := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		if hc, ok := c.(*headConn); ok {
			hc.state(s)
		}
		if prev != nil {
			prev(c, s)
		}
	}
	return l
}

type headListener struct {
	net.Listener
	o       HeadOptions
	limit   int
	timeout time.Duration
}

func (l *headListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &headConn{Conn: c, l: l, wake: make(chan struct{})}, nil
}

// errHeadTooLarge: the head being read passed the limit.
var errHeadTooLarge = errors.New("idemhttp: request head over the limit")

// headConn is one connection. Read is called by one goroutine at a time (net/http's reader or,
// after a hijack, the hijacker); the fields under mu are also set by ConnState and
// SetReadDeadline from other goroutines.
type headConn struct {
	net.Conn
	l *headListener

	// the reading side
	pend    []byte        // every byte read from the socket and not yet handed on, in order
	snap    *bytes.Reader // the part of pend the current parse started with, not yet parsed
	br      *bufio.Reader // the current request's parser input: snap, then the socket; nil = none
	sn      bytes.Reader  // snap and br point here (kept from request to request)
	rd      *bufio.Reader
	body    io.Reader // the current request's body as http.ReadRequest framed it; nil = none left
	inHead  bool      // a head is being read (the socket reader enforces the limit)
	sockErr error     // the socket's last error while parsing
	scratch []byte
	eof     bool // a refusal was written or the head timed out: Read answers io.EOF

	mu       sync.Mutex
	wake     chan struct{} // closed (and replaced) when a field below changes
	heads    int           // requests handed on to net/http
	idles    int           // of them, answered (ConnState StateIdle)
	hijacked bool
	closed   bool
	waiting  bool      // a refusal waits for the answers to earlier requests
	rdl      time.Time // net/http's read deadline
	hdl      time.Time // the head's own deadline (zero = none)
}

// notifyLocked wakes a refusal waiting for earlier answers (refuse).
func (c *headConn) notifyLocked() {
	if c.waiting {
		close(c.wake)
		c.wake = make(chan struct{})
	}
}

func (c *headConn) state(s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch s {
	case http.StateIdle:
		c.idles++
	case http.StateHijacked:
		c.hijacked = true
	default:
		return
	}
	c.notifyLocked()
}

// applyLocked sets the socket's read deadline to the earlier of net/http's and the head's.
func (c *headConn) applyLocked() {
	d := c.rdl
	if !c.hdl.IsZero() && (d.IsZero() || c.hdl.Before(d)) {
		d = c.hdl
	}
	_ = c.Conn.SetReadDeadline(d)
}

func (c *headConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rdl = t
	c.applyLocked()
	c.notifyLocked()
	return nil
}

func (c *headConn) SetDeadline(t time.Time) error {
	_ = c.SetReadDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *headConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.notifyLocked()
	c.mu.Unlock()
	return c.Conn.Close()
}

// CloseWrite half-closes the socket when it can (net/http uses it before closing after an error).
func (c *headConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// sockReader is the parser's view of the socket: it appends what it reads to pend, bounds a head
// being read to the limit, and starts the head's deadline at its first byte once net/http has
// answered every earlier request (a head read while a handler still runs waits, as net/http's
// own read would).
type sockReader struct{ c *headConn }

// srcReader is the parser's input: what pend held when the parse started, then the socket.
type srcReader struct{ c *headConn }

func (s srcReader) Read(p []byte) (int, error) {
	if s.c.snap.Len() > 0 {
		return s.c.snap.Read(p)
	}
	return sockReader{s.c}.Read(p)
}

func (s sockReader) Read(p []byte) (int, error) {
	c := s.c
	if c.inHead { // read-ahead past the head is at most one bufio buffer, as in net/http
		room := c.l.limit + 4096 - len(c.pend)
		if room <= 0 {
			c.sockErr = errHeadTooLarge
			return 0, errHeadTooLarge
		}
		if len(p) > room {
			p = p[:room]
		}
	}
	n, err := c.Conn.Read(p)
	c.pend = append(c.pend, p[:n]...)
	if n > 0 && c.inHead && c.l.timeout > 0 {
		c.mu.Lock()
		if c.hdl.IsZero() && c.heads == c.idles {
			c.hdl = time.Now().Add(c.l.timeout)
			c.applyLocked()
		}
		c.mu.Unlock()
	}
	if err != nil {
		c.sockErr = err
	}
	return n, err
}

func (c *headConn) isHijacked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hijacked
}

func (c *headConn) Read(p []byte) (int, error) {
	for {
		if c.isHijacked() || (c.br != nil && c.sockErr != nil && !c.inHead) {
			if len(c.pend) > 0 { // a hijacker's bytes (or a broken body's) go on as they came
				n := copy(p, c.pend)
				c.pend = c.pend[n:]
				return n, nil
			}
			if err := c.sockErr; err != nil && !c.isHijacked() {
				return 0, err
			}
			return c.Conn.Read(p)
		}
		if c.eof {
			return 0, io.EOF
		}
		if c.br != nil { // a request handed on: its bytes the parser consumed go first
			if k := len(c.pend) - c.br.Buffered() - c.snap.Len(); k > 0 {
				n := copy(p, c.pend[:k])
				c.pend = c.pend[n:]
				return n, nil
			}
			if c.body == nil { // the request is over: the next one's head
				c.br, c.snap = nil, nil
				continue
			}
			if c.scratch == nil {
				c.scratch = make([]byte, 32<<10)
			}
			m := len(p)
			if m > len(c.scratch) {
				m = len(c.scratch)
			}
			_, err := c.body.Read(c.scratch[:m])
			if err == io.EOF {
				c.body = nil
			} else if err != nil && c.sockErr == nil {
				// a body net/http cannot read either (a broken chunk): its bytes go on as
				// they came and net/http answers it; the connection is not read as HTTP again
				c.sockErr = err
			}
			continue
		}
		if len(p) == 0 {
			return 0, nil
		}
		if err := c.readHead(); err != nil {
			return 0, err
		}
	}
}

// readHead parses the next request's head from pend and the socket. On success the request is
// handed on (c.br, c.body set); on a broken rule it answers the problem and returns io.EOF; on a
// socket error (a deadline net/http set, the peer gone) it returns that error, keeping pend for
// the next try.
func (c *headConn) readHead() error {
	c.sn.Reset(c.pend)
	c.snap = &c.sn
	if c.rd == nil {
		c.rd = bufio.NewReaderSize(srcReader{c}, 4096)
	} else {
		c.rd.Reset(srcReader{c})
	}
	c.br = c.rd
	c.sockErr, c.inHead = nil, true
	if len(c.pend) > 0 && c.l.timeout > 0 { // a pipelined head's deadline starts once it is next
		c.mu.Lock()
		if c.hdl.IsZero() && c.heads == c.idles {
			c.hdl = time.Now().Add(c.l.timeout)
			c.applyLocked()
		}
		c.mu.Unlock()
	}
	req, err := http.ReadRequest(c.br)
	c.inHead = false
	headLen := len(c.pend) - c.br.Buffered() - c.snap.Len()
	if err != nil {
		se := c.sockErr
		c.br, c.snap, c.sockErr = nil, nil, nil
		switch {
		case se == errHeadTooLarge:
			return c.refuse("header-too-large", fmt.Sprintf("the request head is longer than %d bytes", c.l.limit))
		case se == io.EOF && len(c.pend) == 0:
			return io.EOF
		case se == io.EOF:
			return c.refuse("request-malformed", "the connection ended inside the request head")
		case se != nil:
			c.mu.Lock()
			own := !c.hdl.IsZero() && !time.Now().Before(c.hdl) && (c.rdl.IsZero() || c.hdl.Before(c.rdl))
			c.mu.Unlock()
			if own { // the head's own deadline: closed without an answer, as net/http does
				c.eof = true
			}
			return se
		}
		return c.refuse(classify(err))
	}
	if headLen > c.l.limit {
		c.br, c.snap = nil, nil
		return c.refuse("header-too-large", fmt.Sprintf("the request head is longer than %d bytes", c.l.limit))
	}
	if typ, detail := checkHead(c.pend[:headLen], req); typ != "" {
		c.br, c.snap = nil, nil
		return c.refuse(typ, detail)
	}
	c.body = req.Body
	if req.Body == http.NoBody {
		c.body = nil
	}
	c.mu.Lock()
	c.heads++
	c.hdl = time.Time{}
	c.applyLocked()
	c.mu.Unlock()
	return nil
}

// classify maps a parse error of http.ReadRequest to a problem type and detail.
func classify(err error) (string, string) {
	var ue *url.Error
	if errors.As(err, &ue) {
		return "target-malformed", fmt.Sprintf("the request target %q cannot be parsed", ue.URL)
	}
	msg := err.Error()
	if strings.Contains(msg, "Content-Length") || strings.Contains(msg, "transfer encoding") {
		return "body-malformed", "the request's framing is malformed: " + msg
	}
	return "request-malformed", "the request head cannot be parsed: " + msg
}

// checkHead checks what http.ReadRequest accepted but net/http's server refuses, or repairs before
// a handler sees it: raw is the head's bytes as received, req what ReadRequest made of them.
func checkHead(raw []byte, req *http.Request) (string, string) {
	lines := bytes.Split(raw, []byte("\n"))
	for _, ln := range lines[1:] {
		if len(ln) > 0 && (ln[0] == ' ' || ln[0] == '\t') {
			return "request-malformed", "a field line is folded (obs-fold)"
		}
	}
	// the fields as received (before net/http merges Content-Length or drops it beside chunked)
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw)))
	if _, err := tp.ReadLine(); err != nil {
		return "request-malformed", "the request line cannot be read"
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return "request-malformed", "the request's fields cannot be parsed: " + err.Error()
	}
	for name, vv := range h {
		if !httpguts.ValidHeaderFieldName(name) {
			return "request-malformed", fmt.Sprintf("the field name %q is not a token", name)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return "request-malformed", fmt.Sprintf("the field %s has a control character", name)
			}
		}
	}
	cl, te := h["Content-Length"], h["Transfer-Encoding"]
	switch {
	case len(te) > 0 && len(cl) > 0:
		return "body-malformed", "the request has both Content-Length and Transfer-Encoding"
	case len(te) > 0 && !req.ProtoAtLeast(1, 1):
		return "body-malformed", "an HTTP/1.0 request has Transfer-Encoding"
	case len(te) > 1 || (len(te) == 1 && !strings.EqualFold(textproto.TrimString(te[0]), "chunked")):
		return "body-malformed", fmt.Sprintf("Transfer-Encoding %q: only one \"chunked\" is allowed", strings.Join(te, ", "))
	case len(cl) > 1:
		return "body-malformed", fmt.Sprintf("Content-Length comes %d times", len(cl))
	case len(cl) == 1 && !digits(textproto.TrimString(cl[0])):
		return "body-malformed", fmt.Sprintf("Content-Length %q is not a decimal number", cl[0])
	}
	hosts, ok := h["Host"]
	if req.ProtoAtLeast(1, 1) && (!ok || len(hosts) == 0) && req.Method != "CONNECT" {
		return "request-malformed", "the request has no Host field"
	}
	if len(hosts) > 1 {
		return "request-malformed", "the request has more than one Host field"
	}
	if len(hosts) == 1 && !httpguts.ValidHostHeader(hosts[0]) {
		return "request-malformed", fmt.Sprintf("the Host field %q is malformed", hosts[0])
	}
	return "", ""
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// refuse answers the problem once net/http has answered every request handed on before it, then
// half-closes the connection and reads what the client still sends for a moment (so that closing
// does not reset the answer away), and returns io.EOF: net/http closes the connection. While an
// earlier request's handler runs, it returns the read deadline net/http sets (os.ErrDeadlineExceeded)
// and answers on a later Read.
func (c *headConn) refuse(typ, detail string) error {
	for {
		c.mu.Lock()
		if c.hijacked || c.closed || c.heads == c.idles {
			c.waiting = false
			c.mu.Unlock()
			break
		}
		c.waiting = true
		dl, ch := c.rdl, c.wake
		c.mu.Unlock()
		if dl.IsZero() {
			<-ch
			continue
		}
		d := time.Until(dl)
		if d <= 0 {
			// the head stays in pend: it is read, and refused, again on the next Read
			return os.ErrDeadlineExceeded
		}
		t := time.NewTimer(d)
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
	if c.isHijacked() {
		return nil // the hijacker reads pend as it came
	}
	c.eof = true
	k, ok := problemKinds()[typ]
	if !ok {
		k = problemKind{typ, typ, 400, false}
	}
	inst := newInstance()
	b, _ := json.Marshal(Problem{Type: c.l.o.ProblemBase + "#" + typ, Title: k.title, Status: k.status,
		Detail: detail, Instance: inst})
	c.l.o.Logf("idemhttp: %s: %d %s instance=%s: %s", c.RemoteAddr(), k.status, typ, inst, detail)
	resp := &http.Response{StatusCode: k.status, ProtoMajor: 1, ProtoMinor: 1, Close: true,
		Header:        http.Header{"Content-Type": {"application/problem+json"}},
		ContentLength: int64(len(b)), Body: io.NopCloser(bytes.NewReader(b))}
	_ = c.Conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := resp.Write(c.Conn); err == nil {
		_ = c.CloseWrite()
		_ = c.Conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, _ = io.CopyN(io.Discard, c.Conn, 1<<20)
	}
	return io.EOF
}

func problemKinds() map[string]problemKind {
	m := map[string]problemKind{}
	for _, k := range append(append([]problemKind{}, serverProblems...), middlewareProblems...) {
		m[k.anchor] = k
	}
	return m
}
