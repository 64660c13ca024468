package dev.idem.client;

import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Message;
import idem.v1.CoordinatorOuterClass;
import java.util.Set;

/** Which refusals of a repeated request prove that no earlier try of it acted (docs/api.md §20,
 *  "A refusal that proves the lost try did nothing"): a lookup in {@link SettlingRefusals#ROWS},
 *  which scripts/gen-reasons writes from client-lib/conformance/settling-refusals.json, the one
 *  list that every client library takes. */
final class Refusal {
  private Refusal() {}

  /** A refusal that proves it: method's request refused with reason, whatever the request's
   *  outcome (anyOutcome) or when its outcome is one of outcomes. */
  record Row(String method, String reason, boolean anyOutcome,
             Set<CoordinatorOuterClass.Outcome> outcomes) {}

  /** Whether e, the coordinator's refusal of req, a request of method (its bare name,
   *  "BeginStep"), proves that no earlier try of this request acted: had one acted, this repeat
   *  of it would have been answered otherwise. Then the refusal is the call's answer, its
   *  outcome known. Every refusal that {@link SettlingRefusals#ROWS} does not list proves
   *  nothing. */
  static boolean settles(String method, Object req, IdemException e) {
    for (Row r : SettlingRefusals.ROWS) {
      if (r.method().equals(method) && r.reason().equals(e.reason()))
        return r.anyOutcome() || r.outcomes().contains(outcome(req));
    }
    return false;
  }

  /** req's outcome field; OUTCOME_UNSPECIFIED when its message has none. */
  private static CoordinatorOuterClass.Outcome outcome(Object req) {
    if (!(req instanceof Message m)) return CoordinatorOuterClass.Outcome.OUTCOME_UNSPECIFIED;
    FieldDescriptor f = m.getDescriptorForType().findFieldByName("outcome");
    if (f == null || f.getType() != FieldDescriptor.Type.ENUM || f.isRepeated())
      return CoordinatorOuterClass.Outcome.OUTCOME_UNSPECIFIED;
    return CoordinatorOuterClass.Outcome.valueOf((EnumValueDescriptor) m.getField(f));
  }
}
