"""client.py — Client: connect, the coordinator's calls, admin policies, the policy cache.

    client = idem_client.connect("127.0.0.1:50051", tenant="shop")
    report = client.run_step(StepKey(gid, "payment", "charge"), action, fingerprint=fp)

Every call takes `timeout` (seconds, the whole call with its redirects and retries; default the
client's `timeout`, 2 s). Bad input raises IdemError INVALID_ARGUMENT naming the field before
anything is sent. The client is thread-safe.
"""
import threading
import time
from dataclasses import dataclass

import grpc

from . import step as _step
from . import trace as _trace
from . import validate
from ._gen import coordinator_pb2 as pb
from ._rpc import Transport
from .errors import IdemError, invalid
from .types import (DECISIONS, FAILURE_MODES, OUTCOME_WORDS, OUTCOMES, PHASES, STATES, Begin,
                    Policy, Record, Result, Saga, StepKey)

COORD = "/idem.v1.Coordinator/"
ADMIN = "/idem.v1.Admin/"
WAIT_MS_MAX = 60000


@dataclass
class SagaStarted:
    global_id: str
    created: bool
    created_unix_ms: int


def _read(path, field):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise invalid(field, f"cannot read {path}: {e.strerror}") from None


def connect(address, tenant=None, token=None, *, tls=False, tls_root=None, tls_cert=None,
            tls_key=None, tls_server_name=None, timeout=2.0, journal_path=None,
            policy_refresh=30.0, max_body=validate.BODY_MAX):
    """A client of the coordinator at `address`: "host:port", "h1:p1,h2:p2" or a list of them
    (calls go to the leader, found from standbys' idem-leader answers or by trying the next).

    tenant     sent as idem-tenant (a server with authentication on takes the token's instead)
    token      sent as "authorization: Bearer TOKEN"
    tls, tls_root, tls_cert, tls_key, tls_server_name
               TLS (on when tls or any tls_* file is given): PEM files read now; the server is
               verified against tls_root (else gRPC's default roots), tls_cert + tls_key for
               mutual TLS, tls_server_name overrides the name expected in its certificate
    timeout    seconds per call (default 2)
    journal_path   the unguarded-execution journal; None = fail-open steps are refused like
               fail-closed ones when no coordinator can decide
    policy_refresh seconds a fetched policy stays fresh; < 0 = never fetch
    max_body   the coordinator's result body limit (bytes; default 64 KiB)
    """
    return Client(address, tenant, token, tls=tls, tls_root=tls_root, tls_cert=tls_cert,
                  tls_key=tls_key, tls_server_name=tls_server_name, timeout=timeout,
                  journal_path=journal_path, policy_refresh=policy_refresh, max_body=max_body)


class Client:
    def __init__(self, address, tenant=None, token=None, *, tls=False, tls_root=None,
                 tls_cert=None, tls_key=None, tls_server_name=None, timeout=2.0,
                 journal_path=None, policy_refresh=30.0, max_body=validate.BODY_MAX):
        addrs = validate.addresses(address)
        if tenant is not None and tenant != "":
            validate.global_id(tenant, "tenant")
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise invalid("timeout", "must be a positive number of seconds")
        if token is not None and (not isinstance(token, str) or not token or "\n" in token):
            raise invalid("token", "must be a non-empty string")
        if (tls_cert is None) != (tls_key is None):
            raise invalid("tls_cert" if tls_key is not None else "tls_key",
                          "tls_cert and tls_key go together")
        md = []
        if tenant:
            md.append(("idem-tenant", tenant))
        if token:
            md.append(("authorization", f"Bearer {token}"))
        creds, options = None, []
        if tls or tls_root or tls_cert or tls_key:
            creds = grpc.ssl_channel_credentials(
                root_certificates=_read(tls_root, "tls_root") if tls_root else None,
                private_key=_read(tls_key, "tls_key") if tls_key else None,
                certificate_chain=_read(tls_cert, "tls_cert") if tls_cert else None)
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override", tls_server_name))
        self.tenant = tenant or "default"
        self.timeout = float(timeout)
        self.journal_path = journal_path or None
        self.policy_refresh = float(policy_refresh)
        self.max_body = int(max_body)
        self._t = Transport(addrs, md, creds, options)
        self._pmu = threading.Lock()
        self._policies = {}  # (service, operation) -> [failure_mode or None, fetched_at]

    # --- plumbing ---------------------------------------------------------------------------

    def close(self):
        self._t.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _timeout(self, timeout):
        if timeout is None:
            return self.timeout
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise invalid("timeout", "must be a positive number of seconds")
        return float(timeout)

    def _call(self, path, req, resp_cls, timeout, repeatable=True, trace=None):
        """trace: the call's traceparent/tracestate pairs (trace.metadata); None = the current
        opentelemetry span's, when there is one."""
        if trace is None:
            trace = _trace.metadata()
        return self._t.call(path, req, resp_cls, self._timeout(timeout), repeatable, trace)

    def _key_pb(self, key):
        if not isinstance(key, StepKey):
            raise invalid("key", "must be a StepKey")
        validate.global_id(key.global_id)
        validate.name(key.service, "service")
        validate.name(key.operation, "operation")
        if key.phase not in PHASES:
            raise invalid("phase", "must be \"forward\" or \"compensation\"")
        return pb.StepKey(global_id=key.global_id, service=key.service, operation=key.operation,
                          phase=PHASES[key.phase])

    # --- Coordinator ------------------------------------------------------------------------

    def begin_saga(self, request_id=None, saga_type="", labels=None, timeout=None):
        """BeginSaga: a new global id (UUIDv7); the same request_id again returns the same one."""
        if request_id is not None and (not isinstance(request_id, str) or not 1 <= len(request_id) <= 255
                                       or not all(0x20 < ord(c) < 0x7f for c in request_id)):
            raise invalid("request_id", "must be 1-255 printable ASCII characters")
        req = pb.BeginSagaRequest(request_id=request_id or "", saga_type=saga_type or "",
                                  labels=dict(labels or {}))
        r = self._call(COORD + "BeginSaga", req, pb.BeginSagaResponse, timeout,
                       repeatable=bool(request_id))
        return SagaStarted(r.global_id, r.created, r.created_unix_ms)

    def begin_step(self, key, fingerprint=b"", lease_ms=0, wait_ms=0, timeout=None, *,
                   traceparent=None, tracestate=None):
        """BeginStep. wait_ms (0-60000): hold the call while the step is in progress elsewhere
        (docs/api.md §12); the call's timeout then defaults to the client's plus wait_ms.
        traceparent/tracestate: the caller's W3C trace context (default: opentelemetry's current
        span, when importable); the coordinator keeps its trace id with the step."""
        req = self._begin_req(key, fingerprint, lease_ms, wait_ms)
        trace = _trace.metadata(traceparent, tracestate)
        if timeout is None:
            timeout = self.timeout + wait_ms / 1000.0
        return self._begin(req, timeout, trace)

    def _begin_req(self, key, fingerprint, lease_ms, wait_ms):
        k = self._key_pb(key)
        fp = validate.to_bytes(fingerprint, "fingerprint", validate.FINGERPRINT_MAX)
        if not isinstance(lease_ms, int) or not 0 <= lease_ms <= 3600000:
            raise invalid("lease_ms", "must be 0-3600000")
        if not isinstance(wait_ms, int) or not 0 <= wait_ms <= WAIT_MS_MAX:
            raise invalid("wait_ms", "must be 0-60000")
        return pb.BeginStepRequest(key=k, fingerprint=fp, lease_ms=lease_ms, wait_ms=wait_ms)

    def _begin(self, req, timeout, trace=None):
        r = self._call(COORD + "BeginStep", req, pb.BeginStepResponse, timeout, trace=trace)
        if r.decision not in DECISIONS:
            raise IdemError("BAD_RESPONSE", f"unknown decision {r.decision}")
        # every answer names the operation's failure mode (0 from an older coordinator)
        mode = {1: "fail-closed", 2: "fail-open"}.get(r.failure_mode)
        if mode and self.policy_refresh >= 0:
            self._cache_policy(req.key.service, req.key.operation, mode)
        res = _result(r.result, r.result_expired) if r.decision == 2 else None
        return Begin(DECISIONS[r.decision], r.attempt, r.lease_expires_unix_ms, r.takeover,
                     r.expires_unix_ms, res, r.result_expires_unix_ms)

    def complete_step(self, key, attempt, outcome, code=0, body=b"", timeout=None, *,
                      traceparent=None, tracestate=None, trace=None):
        """CompleteStep: settles (succeeded / failed / unknown) or releases (retryable) the
        step of `attempt`. A repeated identical Complete is harmless. traceparent/tracestate
        as begin_step."""
        k = self._key_pb(key)
        if trace is None:
            trace = _trace.metadata(traceparent, tracestate)
        if outcome not in OUTCOMES:
            raise invalid("outcome", "must be succeeded, failed, retryable or unknown")
        if not isinstance(attempt, int) or attempt < 1:
            raise invalid("attempt", "must be a positive integer")
        b = validate.to_bytes(body, "body", self.max_body)
        req = pb.CompleteStepRequest(key=k, attempt=attempt, outcome=OUTCOMES[outcome],
                                     code=int(code), body=b)
        return _record(self._call(COORD + "CompleteStep", req, pb.CompleteStepResponse,
                                  timeout, trace=trace).record)

    def extend_lease(self, key, attempt, lease_ms=0, timeout=None, *, traceparent=None,
                     tracestate=None, trace=None):
        """ExtendLease of the caller's attempt; returns the new lease expiry (Unix ms)."""
        req = pb.ExtendLeaseRequest(key=self._key_pb(key), attempt=attempt, lease_ms=lease_ms)
        if trace is None:
            trace = _trace.metadata(traceparent, tracestate)
        return self._call(COORD + "ExtendLease", req, pb.ExtendLeaseResponse,
                          timeout, trace=trace).lease_expires_unix_ms

    def lookup(self, key, timeout=None):
        """LookupStep: the step's record (NOT_FOUND when there is none)."""
        req = pb.LookupStepRequest(key=self._key_pb(key))
        return _record(self._call(COORD + "LookupStep", req, pb.StepRecord, timeout))

    def get_saga(self, global_id, timeout=None):
        """GetSaga with all its steps (follows the pages of docs/api.md §16)."""
        validate.global_id(global_id)
        steps, token, r = [], "", None
        while True:
            r = self._call(COORD + "GetSaga", pb.GetSagaRequest(global_id=global_id, page_token=token),
                           pb.GetSagaResponse, timeout)
            steps.extend(_record(s) for s in r.steps)
            token = r.next_page_token
            if not token:
                return Saga(r.global_id, r.saga_type, r.created_unix_ms, steps, dict(r.labels))

    def get_policy(self, service, operation, timeout=None):
        """GetPolicy: the effective policy of (service, operation)."""
        validate.name(service, "service")
        validate.name(operation, "operation")
        r = self._call(COORD + "GetPolicy", pb.GetPolicyRequest(service=service, operation=operation),
                       pb.Policy, timeout)
        p = _policy(r)
        self._cache_policy(service, operation, p.failure_mode)
        return p

    # --- Admin ------------------------------------------------------------------------------

    def set_policy(self, service, operation, failure_mode="fail-closed", retention_s=86400,
                   lease_ms=30000, key_retention_s=0, timeout=None):
        """Admin.SetPolicy (admin role): service/operation may be "*". retention_s and lease_ms
        0 = the built-in default (24 h, 30 s), as in every SDK; key_retention_s 0 = retention_s."""
        for field, v in (("retention_s", retention_s), ("lease_ms", lease_ms),
                         ("key_retention_s", key_retention_s)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise invalid(field, "must be a whole number, 0 or more")
        retention_s = retention_s or 86400
        lease_ms = lease_ms or 30000
        validate.policy_name(service, "service")
        validate.policy_name(operation, "operation")
        if failure_mode not in FAILURE_MODES:
            raise invalid("failure_mode", "must be fail-closed or fail-open")
        req = pb.Policy(service=service, operation=operation,
                        failure_mode=FAILURE_MODES[failure_mode], retention_s=retention_s,
                        lease_ms=lease_ms, key_retention_s=key_retention_s)
        return _policy(self._call(ADMIN + "SetPolicy", req, pb.Policy, timeout))

    # --- the policy cache (fail-open) ---------------------------------------------------------

    def _cache_policy(self, service, operation, mode):
        with self._pmu:
            self._policies[(service, operation)] = [mode, time.monotonic()]

    def prefetch_policy(self, service, operation, timeout=None):
        """Fetches and caches the effective policy now (e.g. at start-up)."""
        self.get_policy(service, operation, timeout)

    def refresh_policy(self, service, operation, timeout=None):
        """Fetches the policy when the cached copy is older than policy_refresh; a failed fetch
        keeps the old copy and is not tried again before the next refresh period."""
        if self.policy_refresh < 0:
            return
        with self._pmu:
            e = self._policies.get((service, operation))
            if e and time.monotonic() - e[1] < self.policy_refresh:
                return
            if e:
                e[1] = time.monotonic()
            else:
                self._policies[(service, operation)] = [None, time.monotonic()]
        try:
            self.get_policy(service, operation, timeout)
        except IdemError:
            pass

    def cached_failure_mode(self, service, operation):
        """The cached failure mode, or None when never fetched."""
        with self._pmu:
            e = self._policies.get((service, operation))
            return e[0] if e else None

    def none_could_decide(self, since):
        return self._t.none_could_decide(since)

    def lost_since(self, since):
        return self._t.lost_since(since)

    def endpoints(self):
        return self._t.endpoints()

    # --- the step helper ----------------------------------------------------------------------

    run_step = _step.run_step


def _result(r, expired=False):
    return Result(OUTCOME_WORDS.get(r.outcome, "unknown"), r.code, bytes(r.body),
                  r.completed_unix_ms, bool(expired))


def _record(r):
    phase = "compensation" if r.key.phase == 2 else "forward"
    return Record(StepKey(r.key.global_id, r.key.service, r.key.operation, phase),
                  STATES.get(r.state, "unspecified"), r.attempt, bytes(r.fingerprint),
                  _result(r.result, r.result_expired) if r.HasField("result") else None,
                  r.created_unix_ms, r.updated_unix_ms, r.lease_expires_unix_ms, r.expires_unix_ms,
                  r.tenant, r.begin_trace_id, r.complete_trace_id)


def _policy(r):
    mode = {1: "fail-closed", 2: "fail-open"}.get(r.failure_mode, "fail-closed")
    return Policy(r.service, r.operation, mode, r.retention_s, r.lease_ms, r.updated_unix_ms,
                  r.key_retention_s)
