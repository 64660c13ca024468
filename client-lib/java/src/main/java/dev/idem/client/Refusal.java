package dev.idem.client;

import idem.v1.CoordinatorOuterClass;
import idem.v1.CoordinatorOuterClass.BeginStepRequest;
import idem.v1.CoordinatorOuterClass.CompleteStepRequest;

/** Which refusals of a repeated request prove that no earlier try of it acted (docs/api.md §20,
 *  "A refusal that proves the lost try did nothing"). The same rule as libidem's refusal_settles
 *  (client-lib/src/route.c). */
final class Refusal {
  private Refusal() {}

  /** Whether e, the coordinator's refusal of req, proves that no earlier try of this request
   *  acted: had one acted, this repeat of it would have been answered otherwise. Then the refusal
   *  is the call's answer, its outcome known. BeginStep fingerprint-mismatch: a try that acted
   *  left the record with this request's fingerprint, which nothing changes. CompleteStep
   *  finished-differently (not UNKNOWN: an operator may settle that one): a try that acted stored
   *  this result under this attempt, for good. CompleteStep lease-lost, SUCCEEDED or FAILED only:
   *  such a step is never begun again nor abandoned. Every other refusal proves nothing. */
  static boolean settles(Object req, IdemException e) {
    if (req instanceof BeginStepRequest) return Reason.FINGERPRINT_MISMATCH.equals(e.reason());
    if (!(req instanceof CompleteStepRequest c)) return false;
    CoordinatorOuterClass.Outcome o = c.getOutcome();
    boolean fin = o == CoordinatorOuterClass.Outcome.OUTCOME_SUCCEEDED
        || o == CoordinatorOuterClass.Outcome.OUTCOME_FAILED;
    if (Reason.FINISHED_DIFFERENTLY.equals(e.reason()))
      return fin || o == CoordinatorOuterClass.Outcome.OUTCOME_RETRYABLE;
    return fin && Reason.LEASE_LOST.equals(e.reason());
  }
}
