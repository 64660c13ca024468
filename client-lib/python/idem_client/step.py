"""step.py — Client.run_step: BeginStep → the action → CompleteStep, as libidem's idem_step_run.

BeginStep waits on the coordinator while the step is in progress elsewhere (wait_ms: what is
left of the run, at most 60 s) unless no_wait; ABORTED and UNAVAILABLE (and DEADLINE_EXCEEDED
from one of several addresses) are retried with exponential backoff and full jitter, raised to
the coordinator's idem-retry-after-ms after ABORTED; no wait crosses the run's timeout. On
PROCEED the action runs while a thread extends the lease every third of it (ExtendLease); a
lease that cannot be extended any more sets ctx.lease_lost and the run raises ABORTED /
lease-lost instead of completing. REPLAY returns the stored result without running; the SKIPs
run nothing. When no coordinator can decide (docs/api.md §20) a fail-open operation (cached
policy) with a journal runs unguarded and is journaled; PROCEED_UNGUARDED is journaled too.
"""
import threading
import time

from . import journal
from . import reasons
from . import trace as _trace
from ._rpc import backoff_s
from .errors import IdemError
from .types import OUTCOMES, Output, Result, RunReport, StepContext

WAIT_MS_MAX = 60000


def _sleep_before_retry(end, n, base, cap, hint_ms):
    wait = backoff_s(base, cap, n)
    if hint_ms > 0:
        wait = max(wait, min(hint_ms / 1000.0, cap))
    if time.monotonic() + wait >= end:
        return False
    time.sleep(wait)
    return True


def _lost(e):
    """A lost try (Transport._lost_try marked it): CANCELLED without idem-reason that close() did
    not cause, so its outcome is unknown."""
    return getattr(e, "_lost", False)


def _given_up(client, e, began, call):
    """What the run raises when its timeout ends its retries with e: STEP_UNKNOWN when a try
    of the client was lost since the run began (the step may have begun, or been completed,
    on it), else e."""
    if not (_lost(e) or e.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "ABORTED")):
        return e
    if not client.lost_since(began):
        return e
    return IdemError("STEP_UNKNOWN", f"{call}: a try was lost and the run's timeout passed "
                     f"before an answer said what it did (last: {e.code}"
                     + (f" {e.reason}" if e.reason else "") + ")", outcome_unknown=True)


def _begin_with_retries(client, req, end, wait, retry_in_progress, base, cap, report, trace,
                        began):
    last = None
    n = 0
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        req.wait_ms = int(min(left * 1000, WAIT_MS_MAX)) if wait else 0
        try:
            return client._begin(req, min(client.timeout + req.wait_ms / 1000.0, left), trace)
        except IdemError as e:
            last = e
            elsewhere = e.code == "DEADLINE_EXCEEDED" and client.endpoints() > 1
            if e.code == "DEADLINE_EXCEEDED" and not elsewhere:  # after a lost try: STEP_UNKNOWN
                raise _given_up(client, e, began, "BeginStep") from None
            if e.code not in ("ABORTED", "UNAVAILABLE") and not elsewhere and not _lost(e):
                raise
            if e.code == "ABORTED" and not retry_in_progress:
                raise
            if not _sleep_before_retry(end, n, base, cap,
                                       e.retry_after_ms if e.code == "ABORTED" else 0):
                raise _given_up(client, e, began, "BeginStep") from None
            report.begin_retries += 1
            n += 1
    if last is not None:
        raise _given_up(client, last, began, "BeginStep")
    raise IdemError("DEADLINE_EXCEEDED", "run deadline exceeded")


def _complete_with_retries(client, key, attempt, res, end, base, cap, trace, began):
    """The first Complete always gets the client's full per-call timeout, even when the run's
    has passed while the action ran (else the step would run again after its lease)."""
    n = 0
    while True:
        timeout = client.timeout
        if n > 0:
            timeout = min(timeout, end - time.monotonic())
        try:
            return client.complete_step(key, attempt, res.outcome, res.code, res.body,
                                        timeout=max(timeout, 0.001), trace=trace)
        except IdemError as e:
            if e.code not in ("UNAVAILABLE", "DEADLINE_EXCEEDED") and not _lost(e):
                raise
            if not _sleep_before_retry(end, n, base, cap, 0):
                raise _given_up(client, e, began, "CompleteStep") from None
            n += 1


class _LeaseKeeper(threading.Thread):
    """Extends the lease every third of it while the action runs."""

    def __init__(self, client, key, attempt, lease_ms, lease_s, lost, trace):
        super().__init__(daemon=True, name="idem-lease")
        self.trace = trace
        self.client, self.key, self.attempt, self.lease_ms = client, key, attempt, lease_ms
        self.period = max(lease_s / 3.0, 0.02)
        self.call_s = max(lease_s / 2.0, 0.05)  # an answer later than that may come too late
        self.lost = lost
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(self.period):
            try:
                self.client.extend_lease(self.key, self.attempt, self.lease_ms,
                                         timeout=min(self.client.timeout, self.call_s),
                                         trace=self.trace)
            except IdemError as e:
                if e.code in ("ABORTED", "NOT_FOUND", "FAILED_PRECONDITION"):
                    self.lost.set()
                    return


def _to_result(out, max_body):
    if out is None:
        return Result("unknown", 0, b"")
    if isinstance(out, tuple):
        out = Output(*out)
    outcome = out.outcome if out.outcome in OUTCOMES else "unknown"
    body = out.body.encode() if isinstance(out.body, str) else bytes(out.body or b"")
    if len(body) > max_body:
        raise IdemError("INVALID_ARGUMENT", f"body: the action's body is {len(body)} bytes, more "
                        f"than the limit of {max_body}", reason=reasons.INVALID_ARGUMENT, field="body")
    return Result(outcome, int(out.code or 0), body)


def run_step(self, key, action, fingerprint=b"", *, timeout=10.0, lease_ms=0, no_wait=False,
             retry_in_progress=True, backoff_base=0.05, backoff_max=1.0, traceparent=None,
             tracestate=None):
    """Runs one guarded step; returns a RunReport or raises IdemError.

    action(ctx: StepContext) -> Output(outcome, code, body) (or a tuple of them; None = unknown).
    An exception from the action completes the step as "unknown" (it may have acted) and is
    then raised again. timeout: seconds for the whole run, retries included (default 10).
    Errors: FAILED_PRECONDITION (fingerprint mismatch), ABORTED (in progress at the deadline,
    or reason lease-lost), UNAVAILABLE / DEADLINE_EXCEEDED, STEP_UNKNOWN (a try was lost and
    the timeout passed before an answer said what it did: e.report is set when the action ran,
    its result may or may not be stored), STEP_FAILED (the action reported
    retryable: the key was released; e.report holds the run), DATA_LOSS (the journal).
    retry_in_progress=False with no_wait=True: the first ABORTED in-progress is raised at once.
    traceparent, tracestate: the caller's W3C trace context, sent with every call of the run
    (default: opentelemetry's current span when the package is importable); the coordinator
    keeps its trace id with the step (docs/api.md §22). A malformed one is INVALID_ARGUMENT.
    """
    req = self._begin_req(key, fingerprint, lease_ms, 0)  # validates key, fingerprint, lease
    trace = _trace.metadata(traceparent, tracestate)  # taken once: the lease thread sends it too
    fp = req.fingerprint
    if not callable(action):
        raise IdemError("INVALID_ARGUMENT", "action: is not callable", reason=reasons.INVALID_ARGUMENT,
                        field="action")
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise IdemError("INVALID_ARGUMENT", "timeout: must be a positive number of seconds",
                        reason=reasons.INVALID_ARGUMENT, field="timeout")
    cap = max(backoff_max, backoff_base)
    end = time.monotonic() + timeout
    # the failure mode comes with every BeginStep answer (client.py): nothing is called before
    # the first try; an older coordinator's answer names none, and the policy is fetched after it

    report = RunReport()
    source = "server"
    began = time.monotonic()
    try:
        b = _begin_with_retries(self, req, end, not no_wait, retry_in_progress, backoff_base, cap,
                                report, trace, began)
    except IdemError as e:
        # no coordinator can decide (docs/api.md §20): a fail-open operation with a journal runs
        if not (e.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED") and self.none_could_decide(began)
                and self.journal_path
                and self.cached_failure_mode(key.service, key.operation) == "fail-open"):
            raise
        b = None
        source = "client"

    if b is None:
        report.decision, report.attempt = "PROCEED_UNGUARDED", 0
        takeover = False
    else:
        if self.cached_failure_mode(key.service, key.operation) is None:
            self.refresh_policy(key.service, key.operation, timeout=min(self.timeout, timeout))
        report.decision, report.attempt = b.decision, b.attempt
        takeover = b.takeover
        if b.decision == "REPLAY":
            report.replayed = True
            report.result = b.result
            return report
        if b.decision in ("SKIP_NULL_COMPENSATION", "SKIP_ALREADY_COMPENSATED"):
            return report

    unguarded = report.decision == "PROCEED_UNGUARDED"
    ctx = StepContext(key, report.attempt, takeover, unguarded)
    report.ran, report.takeover, report.unguarded = True, takeover, unguarded
    keeper = None
    if not unguarded:
        lease_s = lease_ms / 1000.0 if lease_ms else max(b.lease_expires_unix_ms / 1000.0 - time.time(), 0.05)
        keeper = _LeaseKeeper(self, key, report.attempt, lease_ms, lease_s, ctx.lease_lost, trace)
        keeper.start()
    raised = None
    try:
        out = action(ctx)
        report.result = _to_result(out, self.max_body)
    except IdemError:
        raise
    except BaseException as exc:  # noqa: BLE001 (completed as unknown, raised below)
        raised = exc
        report.result = Result("unknown", 0, repr(exc).encode()[:1024])
    finally:
        if keeper is not None:
            keeper.stop.set()
            keeper.join()

    if unguarded and self.journal_path:
        try:
            journal.append(self.journal_path, journal.line(source, self.tenant, key, fp, report.result))
        except OSError as e:
            raise IdemError("DATA_LOSS", f"journal {self.journal_path}: {e.strerror}",
                            report=report) from None
        report.journaled = True
    if not unguarded:
        if ctx.lease_lost.is_set():
            raise IdemError("ABORTED", "lease lost while the action ran: not completed",
                            reason=reasons.LEASE_LOST, report=report)
        try:
            rec = _complete_with_retries(self, key, report.attempt, report.result, end,
                                         backoff_base, cap, trace, began)
            if rec.result is not None:
                report.result.completed_unix_ms = rec.result.completed_unix_ms
        except IdemError as e:
            e.report = report
            raise
    if raised is not None:
        raise raised
    if report.result.outcome == "retryable":
        raise IdemError("STEP_FAILED", "the action reported a retryable failure; the key was released",
                        report=report)
    return report
