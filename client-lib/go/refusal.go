package idem

// refusal.go — which refusals of a repeated request prove that no earlier try of it acted
// (docs/api.md §20, "A refusal that proves the lost try did nothing"): a lookup in
// settlingRefusals (settling.go), which scripts/gen-reasons writes from
// client-lib/conformance/settling-refusals.json, the one list that every client library takes.

import (
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "idem.dev/client/idempb"
)

// settlingRefusal is a refusal that proves it: method's request refused with reason, whatever
// the request's outcome (anyOutcome) or when its outcome is one of outcomes.
type settlingRefusal struct {
	method     string
	reason     string
	anyOutcome bool
	outcomes   []pb.Outcome
}

// refusalSettles reports whether e, the coordinator's refusal of req, a request of method (its
// gRPC path, "/idem.v1.Coordinator/BeginStep"), proves that no earlier try of this request
// acted: had one acted, this repeat of it would have been answered otherwise. Then the refusal
// is the call's answer, its outcome known. Every refusal that settlingRefusals does not list
// proves nothing.
func refusalSettles(method string, req proto.Message, e *Error) bool {
	name := method[strings.LastIndexByte(method, '/')+1:]
	for _, s := range settlingRefusals {
		if s.method != name || s.reason != e.Reason {
			continue
		}
		if s.anyOutcome {
			return true
		}
		o, ok := requestOutcome(req)
		if !ok {
			return false
		}
		for _, x := range s.outcomes {
			if x == o {
				return true
			}
		}
		return false
	}
	return false
}

// requestOutcome is req's outcome field; false when its message has none.
func requestOutcome(req proto.Message) (pb.Outcome, bool) {
	m := req.ProtoReflect()
	fd := m.Descriptor().Fields().ByName("outcome")
	if fd == nil || fd.Kind() != protoreflect.EnumKind || fd.IsList() {
		return 0, false
	}
	return pb.Outcome(m.Get(fd).Enum()), true
}
