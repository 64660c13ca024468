package idemhttp

// tracectx.go — which of a request's W3C trace context the middleware passes to the coordinator
// (docs/api.md §19 rule 8; http-middleware.json trace_vectors): one traceparent
// line that follows §22 and is at most 512 bytes, and beside it the tracestate lines joined
// with "," when that is at most 512 bytes of 0x20-0x7E. Anything else is dropped before the
// first call (never an error), so the coordinator's 8 KiB metadata limit is never reached
// through them.

import (
	"net/http"
	"strings"
)

// TraceMax is the longest traceparent or tracestate passed on, in bytes.
const TraceMax = 512

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')) {
			return false
		}
	}
	return true
}

// ValidTraceparent says whether v follows docs/api.md §22: version-traceid-spanid-flags in
// lower-case hex, version not ff, ids not all zero; version 00 has nothing after the flags, a
// later version may append "-" and more printable fields.
func ValidTraceparent(v string) bool {
	if len(v) < 55 || len(v) > TraceMax || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return false
	}
	ver, tid, sid, flags := v[0:2], v[3:35], v[36:52], v[53:55]
	if !lowerHex(ver) || ver == "ff" || !lowerHex(tid) || !lowerHex(sid) || !lowerHex(flags) ||
		tid == strings.Repeat("0", 32) || sid == strings.Repeat("0", 16) {
		return false
	}
	if len(v) == 55 {
		return true
	}
	if ver == "00" || v[55] != '-' {
		return false
	}
	for i := 56; i < len(v); i++ {
		if v[i] <= 0x20 || v[i] >= 0x7f {
			return false
		}
	}
	return true
}

// KeptTrace is the trace context of h the middleware passes on ("" = none).
func KeptTrace(h http.Header) (traceparent, tracestate string) {
	tp := h.Values("Traceparent")
	if len(tp) != 1 || !ValidTraceparent(tp[0]) {
		return "", ""
	}
	ts := strings.Join(h.Values("Tracestate"), ",")
	if len(ts) > TraceMax {
		return tp[0], ""
	}
	for i := 0; i < len(ts); i++ {
		if ts[i] < 0x20 || ts[i] > 0x7e {
			return tp[0], ""
		}
	}
	return tp[0], ts
}
