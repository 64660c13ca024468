package idem

// validate.go — the contract's input rules (docs/api.md §1), checked before any call so that
// bad input is an INVALID_ARGUMENT *Error naming the field and nothing is sent.

import (
	"net"
	"strconv"
)

const (
	GlobalIDMax    = 128
	NameMax        = 64
	FingerprintMax = 64
	// BodyMax is the coordinator's default result body limit (64 KiB).
	BodyMax = 64 * 1024
)

func globalIDChar(c byte) bool {
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		c == '.' || c == '_' || c == ':' || c == '-'
}

func nameChar(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'
}

// ValidGlobalID reports whether s follows the global_id rule: 1–128 of [A-Za-z0-9._:-].
func ValidGlobalID(s string) bool {
	if len(s) == 0 || len(s) > GlobalIDMax {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !globalIDChar(s[i]) {
			return false
		}
	}
	return true
}

func checkGlobalID(field, s string) *Error {
	if s == "" {
		return invalid(field, "%s is empty", field)
	}
	if len(s) > GlobalIDMax {
		return invalid(field, "%s is longer than %d characters", field, GlobalIDMax)
	}
	if !ValidGlobalID(s) {
		return invalid(field, "%s has a character outside [A-Za-z0-9._:-]", field)
	}
	return nil
}

// checkName: service and operation, 1–64 of [a-z0-9._-]; star allows "*" (policies).
func checkName(field, s string, star bool) *Error {
	if s == "" {
		return invalid(field, "%s is empty", field)
	}
	if star && s == "*" {
		return nil
	}
	if len(s) > NameMax {
		return invalid(field, "%s is longer than %d characters", field, NameMax)
	}
	for i := 0; i < len(s); i++ {
		if !nameChar(s[i]) {
			return invalid(field, "%s has a character outside [a-z0-9._-]", field)
		}
	}
	return nil
}

func checkKey(k StepKey) *Error {
	if e := checkGlobalID("key.global_id", k.GlobalID); e != nil {
		return e
	}
	if e := checkName("key.service", k.Service, false); e != nil {
		return e
	}
	if e := checkName("key.operation", k.Operation, false); e != nil {
		return e
	}
	if k.Phase != 0 && k.Phase != Forward && k.Phase != Compensation {
		return invalid("key.phase", "key.phase %d is neither forward (1) nor compensation (2)", k.Phase)
	}
	return nil
}

func checkFingerprint(fp []byte) *Error {
	if len(fp) > FingerprintMax {
		return invalid("fingerprint", "fingerprint is %d bytes, over %d", len(fp), FingerprintMax)
	}
	return nil
}

func checkBody(field string, b []byte) *Error {
	if len(b) > BodyMax {
		return invalid(field, "%s is %d bytes, over the %d-byte limit", field, len(b), BodyMax)
	}
	return nil
}

func checkOutcome(field string, o Outcome) *Error {
	if o < OutcomeSucceeded || o > OutcomeUnknown {
		return invalid(field, "%s %d is not succeeded, failed, retryable or unknown", field, o)
	}
	return nil
}

// checkAddress: "host:port" with a host and a port 1–65535.
func checkAddress(a string) *Error {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return invalid("options.address", "address %q is not host:port", a)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return invalid("options.address", "address %q has no port 1-65535", a)
	}
	return nil
}
