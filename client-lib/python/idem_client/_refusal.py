"""_refusal.py — which refusals of a repeated request prove that no earlier try of it acted
(docs/api.md §20, "A refusal that proves the lost try did nothing"): a lookup in
SETTLING_REFUSALS (_settling.py), which scripts/gen-reasons writes from
client-lib/conformance/settling-refusals.json, the one list that every client library takes."""
from ._settling import SETTLING_REFUSALS


def refusal_settles(path, req, err):
    """Whether err, the coordinator's refusal of req, a request of the method at path (its gRPC
    path, "/idem.v1.Coordinator/BeginStep"), proves that no earlier try of this request acted:
    had one acted, this repeat of it would have been answered otherwise. Then the refusal is the
    call's answer, its outcome known. Every refusal that SETTLING_REFUSALS does not list proves
    nothing."""
    method = path.rsplit("/", 1)[-1]
    for m, reason, any_outcome, outcomes in SETTLING_REFUSALS:
        if m == method and reason == err.reason:
            return any_outcome or getattr(req, "outcome", None) in outcomes
    return False
