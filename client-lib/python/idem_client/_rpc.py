"""_rpc.py — channels to the coordinator nodes, one unary call with leader redirects and failover.

Each address gets a grpc channel (created on first use). A call goes to the current endpoint;
UNAVAILABLE with a trailing idem-leader (a standby answered: nothing was done) sends it straight
to that leader (a channel is added for it); UNAVAILABLE without one, or CANCELLED from a
draining node (`Transport._lost_try`), moves on to the next address with backoff and jitter,
inside the call's timeout. A try is sent only on a connected channel, after reading what the
connection received (`connected`: a draining node's GOAWAY); one that cannot connect ends
UNAVAILABLE (DEADLINE_EXCEEDED when its deadline passes first) with the outcome known: nothing
was sent. The message classes come from protoc (gen_proto.py); calls use grpc's generic
channel.unary_unary.

Every endpoint remembers what its last call heard, for the fail-open rule of docs/api.md §20
(`none_could_decide`): nothing (deadline, connection refused), undecided (store-unavailable,
store-timeout, no-leader), sent elsewhere (not-leader naming a leader), or a decider.
"""
import random
import threading
import time

import grpc

try:  # grpc's own core binding: the channel's connectivity and a completion queue to poll
    from grpc._cython import cygrpc as _cygrpc
except ImportError:  # pragma: no cover (every grpcio has it; without it nothing is checked)
    _cygrpc = None

from . import reasons
from ._refusal import refusal_settles
from .errors import IdemError

NOTHING, UNDECIDED, SENT, DECIDER = "nothing", "undecided", "sent", "decider"
UNDECIDED_REASONS = (reasons.STORE_UNAVAILABLE, reasons.STORE_TIMEOUT, reasons.NO_LEADER)
MIN_TRY_S = 0.05


def now():
    return time.monotonic()


def backoff_s(base, cap, n):
    """Full jitter: random(0, min(cap, base * 2^n))."""
    return random.uniform(0, min(cap, base * (2 ** min(n, 30))))


class _Endpoint:
    def __init__(self, addr, channel):
        self.addr = addr
        self.channel = channel
        self.stubs = {}
        self.heard_at = 0.0  # monotonic seconds, 0 = never
        self.heard = None
        self.sent_to = None  # SENT: the address of the leader it named


def error_from_rpc(e):
    """An IdemError from a grpc.RpcError (code name, idem-reason, idem-leader, retry-after,
    idem-detail, idem-hint)."""
    code = e.code().name if hasattr(e, "code") and e.code() is not None else "UNKNOWN"
    reason = leader = detail = hint = ""
    retry_after = 0
    try:
        trailers = e.trailing_metadata() or ()
    except Exception:  # noqa: BLE001 (a failure before any answer has none)
        trailers = ()
    for k, v in trailers:
        if isinstance(v, bytes):
            v = v.decode(errors="replace")
        if k == "idem-reason":
            reason = v
        elif k == "idem-leader":
            leader = v
        elif k == "idem-detail":
            detail = v
        elif k == "idem-hint":
            hint = v
        elif k == "idem-retry-after-ms":
            try:
                retry_after = max(0, int(v))
            except ValueError:
                pass
    details = e.details() if hasattr(e, "details") else str(e)
    unknown = code == "DEADLINE_EXCEEDED" or (code == "UNAVAILABLE" and not leader)
    return IdemError(code, details or code.lower().replace("_", " "), reason=reason, leader=leader,
                     retry_after_ms=retry_after, outcome_unknown=unknown, detail=detail, hint=hint)


_READY, _GONE = 2, (3, 4)  # grpc_connectivity_state: READY; TRANSIENT_FAILURE, SHUTDOWN


def connected(channel, deadline):
    """Whether channel is connected (READY) before a try is sent on it, connecting it if need be
    until deadline (now() seconds): False when it cannot connect (TRANSIENT_FAILURE) or the
    deadline passes first, and then nothing was sent. gRPC core reads a client's connections only
    while a thread polls, and an idle client polls nothing: a draining node's GOAWAY can sit
    unread, and a call written on that connection reaches a server whose shutdown has begun,
    which ends it CANCELLED unhandled (a lost try). So first one poll without waiting (a
    completion queue nothing completes, deadline past): a GOAWAY already received is read and
    the channel left without a connection (docs/internals.md, "An idle client's next call").
    A grpc without these calls (not grpcio's cygrpc) is taken as connected."""
    ch = getattr(channel, "_channel", None)
    if _cygrpc is None or not hasattr(ch, "watch_connectivity_state"):
        return True
    _cygrpc.CompletionQueue().poll(time.time() - 1)
    st = ch.check_connectivity_state(True)
    while st != _READY:
        left = deadline - now()
        if st in _GONE or left <= 0:
            return False
        ch.watch_connectivity_state(st, time.time() + min(left, 0.1))  # a change, or 100 ms
        st = ch.check_connectivity_state(True)
    return True


def heard_of(err):
    if err is None:
        return DECIDER
    if err.code == "DEADLINE_EXCEEDED":
        return NOTHING
    if not err.reason:  # connection refused, reset: gRPC's answer, not a coordinator's
        return NOTHING if err.code == "UNAVAILABLE" else DECIDER
    if err.reason in UNDECIDED_REASONS:
        return UNDECIDED
    if err.reason == reasons.NOT_LEADER and err.leader:
        return SENT
    return DECIDER


class Transport:
    def __init__(self, addresses, metadata, credentials=None, options=()):
        self._mu = threading.Lock()
        self._metadata = tuple(metadata)
        self._credentials = credentials
        self._options = list(options)
        self._eps = []
        self._cur = 0
        self._closed = False
        self._lost_at = None  # now() of the last lost try (_lost_try), any address
        for a in addresses:
            self._add(a)

    def _add(self, addr):
        """The index of addr's endpoint, added when new."""
        with self._mu:
            for i, ep in enumerate(self._eps):
                if ep.addr == addr:
                    return i
            if self._credentials is not None:
                ch = grpc.secure_channel(addr, self._credentials, options=self._options)
            else:
                ch = grpc.insecure_channel(addr, options=self._options)
            self._eps.append(_Endpoint(addr, ch))
            return len(self._eps) - 1

    def endpoints(self):
        with self._mu:
            return len(self._eps)

    def close(self):
        with self._mu:
            self._closed = True
            for ep in self._eps:
                ep.channel.close()

    def _stub(self, ep, path, resp_cls):
        with self._mu:
            s = ep.stubs.get(path)
            if s is None:
                s = ep.channel.unary_unary(path, request_serializer=lambda m: m.SerializeToString(),
                                           response_deserializer=resp_cls.FromString)
                ep.stubs[path] = s
            return s

    def _note(self, ep, err):
        h = heard_of(err)
        with self._mu:
            ep.heard_at = now()
            ep.heard = h
            ep.sent_to = err.leader if h == SENT else None

    def lost_since(self, since):
        """Whether a try of this client was lost (_lost_try) since `since` (now() seconds)."""
        with self._mu:
            return self._lost_at is not None and self._lost_at >= since

    def none_could_decide(self, since):
        """True when every known address was called since `since` and none could decide: no
        answer, or store-unavailable / store-timeout / no-leader (a standby's not-leader counts
        as what the leader it names said). Never after a lost try since `since`: that node was
        up and may have decided (docs/api.md §20)."""
        with self._mu:
            by_addr = {ep.addr: ep for ep in self._eps}
            if not self._eps or (self._lost_at is not None and self._lost_at >= since):
                return False
            for ep in self._eps:
                e = ep
                for _ in range(len(self._eps)):
                    if e.heard != SENT or e.heard_at < since or e.sent_to not in by_addr:
                        break
                    e = by_addr[e.sent_to]
                if not (e.heard_at >= since and e.heard in (NOTHING, UNDECIDED)):
                    return False
            return True

    def _lost_try(self, err):
        """A try gRPC ended with CANCELLED, without idem-reason, that close() (the only
        cancellation a caller of this client has) did not cause. The coordinator never answers
        CANCELLED: a draining node's gRPC killed a call that reached it after its shutdown began,
        without saying whether the handler had it (docs/upgrading.md). Like an UNAVAILABLE
        without idem-leader: outcome unknown, repeated on the next address only when
        repeatable."""
        with self._mu:
            closed = self._closed
        return err.code == "CANCELLED" and not err.reason and not closed

    def _once(self, idx, path, req, resp_cls, timeout, extra=()):
        with self._mu:
            ep = self._eps[idx]
        stub = self._stub(ep, path, resp_cls)
        deadline = now() + max(timeout, 0.001)
        try:
            if not connected(ep.channel, deadline):  # not sent: the outcome is known
                late = now() >= deadline
                err = IdemError("DEADLINE_EXCEEDED" if late else "UNAVAILABLE",
                                f"cannot connect to {ep.addr}"
                                f"{' before the deadline' if late else ''}: nothing was sent")
                self._note(ep, err)
                return None, err
            resp = stub(req, timeout=max(deadline - now(), 0.001),
                        metadata=self._metadata + tuple(extra))
        except ValueError:  # grpc's "closed channel": close() came between two tries
            with self._mu:
                if not self._closed:
                    raise
            return None, IdemError("CANCELLED", "client is closed")
        except grpc.RpcError as e:
            err = error_from_rpc(e)
            if self._lost_try(err):
                err.outcome_unknown = err._lost = True
                with self._mu:
                    self._lost_at = now()
            self._note(ep, err)
            return None, err
        self._note(ep, None)
        return resp, None

    def call(self, path, req, resp_cls, timeout, repeatable=True, extra=()):
        """One unary call, following redirects and failing over inside `timeout` seconds.
        repeatable: whether repeating it after an unknown outcome is harmless. extra: metadata
        pairs sent besides the client's (traceparent, tracestate)."""
        deadline = now() + timeout
        unknown = False
        tries = 0
        while True:
            with self._mu:
                idx, n = self._cur, len(self._eps)
            resp, err = self._once(idx, path, req, resp_cls, deadline - now(), extra)
            if err is None:
                return resp
            if err.code == "DEADLINE_EXCEEDED" and n > 1:  # no answer: start elsewhere next time
                with self._mu:
                    if self._cur == idx:
                        self._cur = (idx + 1) % n
            lost = err.code == "CANCELLED" and err.outcome_unknown  # _lost_try: gRPC's, not ours
            if err.code != "UNAVAILABLE" and not lost:
                # a refusal after a try that may have acted, unless it proves none did
                if unknown and not refusal_settles(path, req, err):
                    err.outcome_unknown = True
                raise err
            standby = not err.outcome_unknown  # idem-leader came with it: nothing was done
            if not standby:
                unknown = True
                if not repeatable:
                    raise err
            nxt = idx
            if standby and err.leader:
                nxt = self._add(err.leader)
            elif n > 1:
                nxt = (idx + 1) % n
            with self._mu:
                if self._cur == idx:
                    self._cur = nxt
            wait = 0 if (standby and err.leader and nxt != idx) else backoff_s(0.025, 0.5, tries)
            tries += 1
            if now() + wait + MIN_TRY_S >= deadline:
                if unknown:
                    err.outcome_unknown = True
                raise err
            time.sleep(wait)
