package idemhttp

// stored.go — how a handler's response is kept in the step result body: UTF-8 JSON
//   {"status":N,"headers":[[name,value],...],"body_b64":"...","body_omitted":true}
// headers in order (only the kept ones), body_b64 standard padded base64, body_omitted present
// (true) only when the body was too large to keep. docs/sdk-go.md documents it for the other
// SDKs.

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// StoredResponse is a response as stored.
type StoredResponse struct {
	Status      int         `json:"status"`
	Headers     [][2]string `json:"headers"`
	Body        []byte      `json:"body_b64"`
	BodyOmitted bool        `json:"body_omitted,omitempty"`
}

// Encode is the step result body of r.
func (r *StoredResponse) Encode() []byte {
	if r.Headers == nil {
		r.Headers = [][2]string{}
	}
	if r.Body == nil {
		r.Body = []byte{} // "" rather than null
	}
	b, _ := json.Marshal(r) // []byte marshals as standard base64
	return b
}

// DecodeStored reads a step result body written by Encode (or another SDK's middleware).
func DecodeStored(b []byte) (*StoredResponse, error) {
	var r StoredResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r.Status < 100 || r.Status > 999 {
		return nil, errors.New("stored response has no valid status")
	}
	return &r, nil
}

// NeverKept are the headers a keep list may not name: the middleware frames a replay itself.
var NeverKept = []string{"Content-Length", "Transfer-Encoding", "Connection"}

func neverKept(name string) bool {
	for _, n := range NeverKept {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// ErrStoredInvalid is wrapped by ValidateStored's errors.
var ErrStoredInvalid = errors.New("stored answer invalid")

func invalidStored(format string, args ...interface{}) error {
	return fmt.Errorf("%w: "+format, append([]interface{}{ErrStoredInvalid}, args...)...)
}

// ValidateStored reads a step result (its body doc and code) as docs/api.md §19
// rule 10 says a replay may send it: a JSON object with status 200-599, headers only of keep
// (case-insensitively, never NeverKept) with values free of control characters (HTAB allowed),
// body_b64 standard base64, body_omitted absent or a boolean. An empty doc (the body dropped
// past retention) is the code as status, no headers, the body omitted. The error (wrapping
// ErrStoredInvalid) says what is wrong; the replay answers it 500 stored-answer-invalid.
func ValidateStored(doc []byte, code int32, keep []string) (*StoredResponse, error) {
	if len(doc) == 0 {
		if code < 200 || code > 599 {
			return nil, invalidStored("the result's body is gone and its code %d is not a status 200-599", code)
		}
		return &StoredResponse{Status: int(code), BodyOmitted: true}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil || m == nil {
		return nil, invalidStored("the result's body is not a JSON object")
	}
	var r StoredResponse
	if err := json.Unmarshal(m["status"], &r.Status); err != nil || m["status"] == nil {
		return nil, invalidStored("status %s is not an integer", string(m["status"]))
	}
	if r.Status < 200 || r.Status > 599 {
		return nil, invalidStored("status %d is not 200-599", r.Status)
	}
	var hs [][]string
	if err := json.Unmarshal(m["headers"], &hs); err != nil || m["headers"] == nil {
		return nil, invalidStored("headers are not a list of [name, value] string pairs")
	}
	for _, h := range hs {
		if len(h) != 2 {
			return nil, invalidStored("a header is %d strings, not [name, value]", len(h))
		}
		kept := false
		for _, k := range keep {
			kept = kept || strings.EqualFold(k, h[0])
		}
		if !kept || neverKept(h[0]) {
			return nil, invalidStored("header %q is not a kept header", h[0])
		}
		for i := 0; i < len(h[1]); i++ {
			if c := h[1][i]; (c < 0x20 && c != '\t') || c == 0x7f {
				return nil, invalidStored("header %q holds the control byte 0x%02x", h[0], c)
			}
		}
		r.Headers = append(r.Headers, [2]string{h[0], h[1]})
	}
	var b64 string
	if err := json.Unmarshal(m["body_b64"], &b64); err != nil || m["body_b64"] == nil {
		return nil, invalidStored("body_b64 is not a string")
	}
	body, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, invalidStored("body_b64 is not base64")
	}
	r.Body = body
	if raw, ok := m["body_omitted"]; ok {
		if err := json.Unmarshal(raw, &r.BodyOmitted); err != nil {
			return nil, invalidStored("body_omitted %s is not a boolean", string(raw))
		}
	}
	return &r, nil
}
