"""errors.py — IdemError: what every failed call of idem_client raises.

An error is a value: `code` is the gRPC status code name ("ABORTED", "UNAVAILABLE", ...) or one
of the SDK's own ("STEP_FAILED": the action reported retryable and the key was released;
"DATA_LOSS": the journal could not be written; "STEP_UNKNOWN": run_step lost a try and its
timeout passed before an answer said what it did; "BAD_RESPONSE"). Decide on code and reason
(the coordinator's idem-reason, docs/api.md §5), never on the message.
"""
from . import reasons


class IdemError(Exception):
    """A failed call.

    code            gRPC code name, or STEP_FAILED / DATA_LOSS / STEP_UNKNOWN / BAD_RESPONSE
    reason          the coordinator's idem-reason ("in-progress", "not-leader", ...); "" when no
                    coordinator answered (connection refused, deadline) or the SDK itself refused
    message         short, lower-case; for bad input it names the field
    field           bad input: the offending field ("address", "global_id", "body", ...), else ""
    leader          UNAVAILABLE from a standby: the leader's host:port, else ""
    detail          the coordinator's idem-detail (more about what happened), else ""
    hint            the coordinator's idem-hint (what to do about it), else ""; detail and hint
                    are for people: decide on code and reason, never on them
    retry_after_ms  ABORTED because in progress: the coordinator's hint (idem-retry-after-ms), else 0
    outcome_unknown DEADLINE_EXCEEDED / UNAVAILABLE / a CANCELLED the client did not cause (a
                    draining node's), after the request was sent, or a repeat after that
                    refused: it may have acted; STEP_UNKNOWN. Not set on a refusal that proves no
                    try acted (BeginStep fingerprint-mismatch; CompleteStep finished-differently,
                    or lease-lost of a SUCCEEDED or FAILED outcome: docs/api.md §20), nor for a
                    try that could not connect ("cannot connect to ADDR: nothing was sent")
    report          run_step: the RunReport when the action did run (STEP_FAILED, DATA_LOSS,
                    a lost lease, STEP_UNKNOWN at CompleteStep), else None
    """

    def __init__(self, code, message, reason="", field="", leader="", retry_after_ms=0,
                 outcome_unknown=False, report=None, detail="", hint=""):
        super().__init__(f"{code}: {message}" + (f" ({reason})" if reason else ""))
        self.code = code
        self.message = message
        self.reason = reason
        self.field = field
        self.leader = leader
        self.detail = detail
        self.hint = hint
        self.retry_after_ms = retry_after_ms
        self.outcome_unknown = outcome_unknown
        self.report = report
        self._lost = False  # a lost try (Transport._lost_try): run_step retries it


def invalid(field, message):
    """Bad input found before any call: INVALID_ARGUMENT naming the field."""
    return IdemError("INVALID_ARGUMENT", f"{field}: {message}", reason=reasons.INVALID_ARGUMENT,
                     field=field)
