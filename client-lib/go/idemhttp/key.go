package idemhttp

// key.go — the Idempotency-Key header parser, the step key and the fingerprint, exactly as
// client-lib/conformance/idempotency-key.json says (its table drives key_test.go).

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	idem "idem.dev/client"
)

// KeyMax is the longest key accepted, in characters.
const KeyMax = 255

// The rules a malformed header breaks (the table's error words).
const (
	RuleMissing      = "missing"
	RuleEmpty        = "empty"
	RuleTooLong      = "too-long"
	RuleNonPrintable = "non-printable"
	RuleComma        = "comma"
	RuleTrailing     = "trailing"
	RuleUnterminated = "unterminated"
	RuleBadEscape    = "bad-escape"
)

// ParseKeyHeader parses the Idempotency-Key field lines of a request (nil or empty = no
// header). Several lines are one comma-separated list, as HTTP says: always refused. It
// returns the key, or "" and the rule the value breaks.
func ParseKeyHeader(lines []string) (key, rule string) {
	if len(lines) == 0 {
		return "", RuleMissing
	}
	return ParseKey(strings.Join(lines, ", "))
}

func printable(c byte) bool { return c >= 0x20 && c <= 0x7e }

// ParseKey parses one field value: a value that starts with `"` is an RFC 8941 String
// (escapes \" and \\ only, nothing after the closing quote); any other value is the key
// verbatim. It returns the key, or "" and the rule the value breaks.
func ParseKey(v string) (key, rule string) {
	if v == "" {
		return "", RuleEmpty
	}
	if v[0] != '"' {
		for i := 0; i < len(v); i++ {
			if !printable(v[i]) {
				return "", RuleNonPrintable
			}
		}
		if strings.IndexByte(v, ',') >= 0 {
			return "", RuleComma
		}
		if len(v) > KeyMax {
			return "", RuleTooLong
		}
		return v, ""
	}
	var sb strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case !printable(c):
			return "", RuleNonPrintable
		case c == '\\':
			if i+1 >= len(v) {
				return "", RuleUnterminated
			}
			i++
			if v[i] != '"' && v[i] != '\\' {
				if !printable(v[i]) {
					return "", RuleNonPrintable
				}
				return "", RuleBadEscape
			}
			sb.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", RuleTrailing
			}
			k := sb.String()
			if k == "" {
				return "", RuleEmpty
			}
			if len(k) > KeyMax {
				return "", RuleTooLong
			}
			return k, ""
		default:
			sb.WriteByte(c)
		}
	}
	return "", RuleUnterminated
}

// GlobalID is the step's global id for a key in a scope: "k-" + the lower-case hex SHA-256 of
// the scope's bytes, one 0x1F byte and the key's bytes, for every key (docs/api.md §19,
// amended), so that neither two scopes (callers) nor two keys name one step.
func GlobalID(scope, key string) string {
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0x1f})
	h.Write([]byte(key))
	return "k-" + hex.EncodeToString(h.Sum(nil))
}

// AuthorizationScope is the default scope of a request: the lower-case hex SHA-256 of its
// Authorization header's value, "" when it has none (several lines are joined with ", ").
func AuthorizationScope(r *http.Request) string {
	v := r.Header.Values("Authorization")
	if len(v) == 0 {
		return ""
	}
	sum := sha256.Sum256([]byte(strings.Join(v, ", ")))
	return hex.EncodeToString(sum[:])
}

// Operation is the default operation name of a request target: lower-case(method + " " +
// normalized path) (NormalizeTarget: decoded, dot segments removed, one spelling per route, no
// query), every byte outside [a-z0-9._-] as "-", cut to 64 characters. A target that cannot be
// normalized (the middleware answers it 400 target-malformed) is named from its raw path.
func Operation(method, target string) string {
	if t, err := NormalizeTarget(target); err == nil {
		return operationOf(method, t.Path)
	}
	if i := strings.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	return operationOf(method, target)
}

func operationOf(method, path string) string {
	b := []byte(method + " " + path) // byte by byte: ASCII letters lower-cased, any other byte one "-"
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
			continue
		}
		if !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) > idem.NameMax {
		b = b[:idem.NameMax]
	}
	return string(b)
}

// Fingerprint is SHA-256 of method + "\n" + target + "\n" + body, target being the normalized
// path plus "?" and the query as received when there is one (Target.FingerprintTarget).
func Fingerprint(method, target string, body []byte) []byte {
	h := sha256.New()
	h.Write([]byte(method + "\n" + target + "\n"))
	h.Write(body)
	return h.Sum(nil)
}
