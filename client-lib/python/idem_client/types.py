"""types.py — the SDK's plain values: step keys, results, reports, the action's context."""
import threading
from dataclasses import dataclass, field

FORWARD = "forward"
COMPENSATION = "compensation"
PHASES = {FORWARD: 1, COMPENSATION: 2}

# Outcome words (idem.v1 Outcome; the journal and idemctl spell them so)
SUCCEEDED, FAILED, RETRYABLE, UNKNOWN = "succeeded", "failed", "retryable", "unknown"
OUTCOMES = {SUCCEEDED: 1, FAILED: 2, RETRYABLE: 3, UNKNOWN: 4}
OUTCOME_WORDS = {v: k for k, v in OUTCOMES.items()}

# Decision names (idem.v1 Decision without the prefix), as the conformance file spells them
DECISIONS = {1: "PROCEED", 2: "REPLAY", 3: "SKIP_NULL_COMPENSATION", 4: "SKIP_ALREADY_COMPENSATED",
             5: "PROCEED_UNGUARDED"}

FAIL_CLOSED, FAIL_OPEN = "fail-closed", "fail-open"
FAILURE_MODES = {FAIL_CLOSED: 1, FAIL_OPEN: 2}

STATES = {0: "none", 1: "in_progress", 2: "succeeded", 3: "failed", 4: "unknown", 5: "abandoned",
          6: "released"}


@dataclass(frozen=True)
class StepKey:
    global_id: str
    service: str
    operation: str
    phase: str = FORWARD


@dataclass
class Result:
    outcome: str = UNKNOWN  # succeeded / failed / retryable / unknown
    code: int = 0
    body: bytes = b""
    completed_unix_ms: int = 0
    expired: bool = False  # a REPLAY past retention_s: outcome and code only (docs/api.md §12)


@dataclass
class Output:
    """What an action reports (returned from it). Returning None, or an outcome other than the
    four words, completes the step as unknown: it may or may not have acted."""
    outcome: str = SUCCEEDED
    code: int = 0
    body: bytes = b""


@dataclass
class Begin:
    """BeginStep's answer."""
    decision: str
    attempt: int
    lease_expires_unix_ms: int = 0
    takeover: bool = False
    expires_unix_ms: int = 0
    result: Result = None
    result_expires_unix_ms: int = 0


@dataclass
class Record:
    """A step as the coordinator holds it (LookupStep, CompleteStep, GetSaga)."""
    key: StepKey
    state: str
    attempt: int
    fingerprint: bytes
    result: Result
    created_unix_ms: int
    updated_unix_ms: int
    lease_expires_unix_ms: int
    expires_unix_ms: int
    tenant: str
    begin_trace_id: str = ""  # the trace of the BeginStep that began the current attempt
    complete_trace_id: str = ""  # of the call (or reaper action) that finished it


@dataclass
class Saga:
    global_id: str
    saga_type: str
    created_unix_ms: int
    steps: list
    labels: dict


@dataclass
class Policy:
    service: str
    operation: str
    failure_mode: str = FAIL_CLOSED
    retention_s: int = 0
    lease_ms: int = 0
    updated_unix_ms: int = 0
    key_retention_s: int = 0


@dataclass
class StepContext:
    """Given to the action. attempt is the fencing number: pass it on to your own writes.
    lease_lost is set when the lease could not be extended any more (another caller may take
    the step over): stop early, the completion will be refused."""
    key: StepKey
    attempt: int
    takeover: bool = False
    unguarded: bool = False
    lease_lost: threading.Event = field(default_factory=threading.Event)


@dataclass
class RunReport:
    """As libidem's idem_run_report."""
    decision: str = ""
    attempt: int = 0
    ran: bool = False
    takeover: bool = False
    replayed: bool = False
    result: Result = None
    begin_retries: int = 0
    unguarded: bool = False
    journaled: bool = False
