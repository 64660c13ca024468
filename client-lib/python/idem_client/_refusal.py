"""_refusal.py — which refusals of a repeated request prove that no earlier try of it acted
(docs/api.md §20, "A refusal that proves the lost try did nothing"). The same rule as libidem's
refusal_settles (client-lib/src/route.c)."""
from . import reasons
from ._gen import coordinator_pb2 as pb

_FINAL = (pb.OUTCOME_SUCCEEDED, pb.OUTCOME_FAILED)


def refusal_settles(req, err):
    """Whether err, the coordinator's refusal of req, proves that no earlier try of this request
    acted: had one acted, this repeat of it would have been answered otherwise. Then the refusal
    is the call's answer, its outcome known. BeginStep fingerprint-mismatch: a try that acted
    left the record with this request's fingerprint, which nothing changes. CompleteStep
    finished-differently (not UNKNOWN: an operator may settle that one): a try that acted stored
    this result under this attempt, for good. CompleteStep lease-lost, SUCCEEDED or FAILED only:
    such a step is never begun again nor abandoned. Every other refusal proves nothing."""
    if isinstance(req, pb.BeginStepRequest):
        return err.reason == reasons.FINGERPRINT_MISMATCH
    if not isinstance(req, pb.CompleteStepRequest):
        return False
    if err.reason == reasons.FINISHED_DIFFERENTLY:
        return req.outcome in _FINAL or req.outcome == pb.OUTCOME_RETRYABLE
    return err.reason == reasons.LEASE_LOST and req.outcome in _FINAL
