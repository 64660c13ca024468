package idemhttp

// stored.go — how a handler's response is kept in the step result body: UTF-8 JSON
//   {"status":N,"headers":[[name,value],...],"body_b64":"...","body_omitted":true}
// headers in order (only the kept ones), body_b64 standard padded base64, body_omitted present
// (true) only when the body was too large to keep. docs/sdk-go.md documents it for the other
// SDKs.

import (
	"encoding/json"
	"errors"
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
