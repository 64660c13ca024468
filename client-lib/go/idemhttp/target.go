package idemhttp

// target.go — the route of a request target (docs/api.md §19 rule 5;
// client-lib/conformance/http-middleware.json operation_vectors): the path up to the first `?`,
// percent-decoded once, dot segments removed, runs of `/` as one, a trailing `/` dropped. It is
// the one spelling of a route: the operation and the fingerprint are made from it, and the
// example server routes on it, so a retry under another spelling is replayed, never run twice.

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrTargetMalformed is wrapped by NormalizeTarget's errors.
var ErrTargetMalformed = errors.New("request target malformed")

// Target is a normalized request target.
type Target struct {
	// Path is the normalized path (UTF-8, starts with "/").
	Path string
	// Query is the query as received (without the "?"); HasQuery tells an empty query from none.
	Query    string
	HasQuery bool
}

// FingerprintTarget is the target the fingerprint hashes: the path, plus "?" and the query when
// the target had one.
func (t Target) FingerprintTarget() string {
	if t.HasQuery {
		return t.Path + "?" + t.Query
	}
	return t.Path
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// NormalizeTarget normalizes a request target as received (origin-form, or absolute-form
// http(s)://host/path). The error wraps ErrTargetMalformed and names what is wrong.
func NormalizeTarget(target string) (Target, error) {
	t := target
	if low := strings.ToLower(t); strings.HasPrefix(low, "http://") || strings.HasPrefix(low, "https://") {
		rest := t[strings.Index(t, "://")+3:]
		i := strings.IndexAny(rest, "/?")
		if i < 0 {
			i = len(rest)
		}
		t = rest[i:]
		if !strings.HasPrefix(t, "/") {
			t = "/" + t
		}
	}
	if !strings.HasPrefix(t, "/") {
		return Target{}, fmt.Errorf("%w: %q does not start with / (nor is it http(s)://host/path)", ErrTargetMalformed, target)
	}
	var out Target
	if i := strings.IndexByte(t, '?'); i >= 0 {
		out.Query, out.HasQuery, t = t[i+1:], true, t[:i]
	}
	dec := make([]byte, 0, len(t))
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c == '%' {
			if i+2 >= len(t) {
				return Target{}, fmt.Errorf("%w: %q has a %% not followed by two hex digits", ErrTargetMalformed, target)
			}
			hi, ok1 := unhex(t[i+1])
			lo, ok2 := unhex(t[i+2])
			if !ok1 || !ok2 {
				return Target{}, fmt.Errorf("%w: %q has a %% not followed by two hex digits", ErrTargetMalformed, target)
			}
			c = hi<<4 | lo
			i += 2
		}
		if c < 0x20 || c == 0x7f {
			return Target{}, fmt.Errorf("%w: %q holds the control byte 0x%02x", ErrTargetMalformed, target, c)
		}
		dec = append(dec, c)
	}
	if !utf8.Valid(dec) {
		return Target{}, fmt.Errorf("%w: %q decodes to bytes that are not UTF-8", ErrTargetMalformed, target)
	}
	var segs []string
	for _, s := range strings.Split(string(dec), "/") {
		switch s {
		case "", ".":
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
		default:
			segs = append(segs, s)
		}
	}
	out.Path = "/" + strings.Join(segs, "/")
	return out, nil
}
