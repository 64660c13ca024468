#!/usr/bin/env python3
"""idem_check.py: reads a fault campaign's history (docs/api.md section 15) and checks the
coordinator's promises, sharing no code with the server (Python 3, standard library only).

    idem_check.py HISTORY [--faults FAULTS] [--json OUT] [--max-print N]

Exit status: 0 no violation, 1 violations, 2 unreadable or malformed input (the line is named).

History model
-------------
Each line is one JSON object: `t` (client wall clock, Unix ms), `process`, `type`
(invoke | ok | fail | info), `f` (begin | complete | extend | lookup | resolve), `key`
(global_id/service/operation/forward|compensation). A process runs one call at a time, so the
line that answers an invoke is the next non-invoke line of the same process (file order within a
process is trusted; across processes only `t` is used). An invoke followed by another invoke of
the same process, or by nothing, is *unanswered*.

An operation X has an invoke time X.ti and, when answered, an answer time X.tc. Each call takes
effect (if at all) at one instant inside [ti, tc] (its linearization point).

  * ok: took effect and its answer is known.
  * definite fail: a refusal that proves nothing happened (ABORTED, FAILED_PRECONDITION,
    NOT_FOUND, INVALID_ARGUMENT, ALREADY_EXISTS, PERMISSION_DENIED, UNAUTHENTICATED,
    OUT_OF_RANGE, UNIMPLEMENTED). The client library reports a refusal that came
    after a try that may have acted as `info`, so a `fail` with one of these codes is trusted.
  * maybe: `info`, unanswered, or a `fail` with any other code (DEADLINE_EXCEEDED, UNAVAILABLE,
    CANCELLED, INTERNAL, UNKNOWN, ...). It may have taken effect at any instant after ti, with no
    upper bound (a request stuck in a paused leader can still commit later), and its answer is
    unknown. Maybe operations are never used to prove that something happened, only to excuse:
    wherever a rule asks "could this have been written / issued?", a maybe operation invoked
    early enough counts as yes. (A standby's UNAVAILABLE, which the client library knows did
    nothing, is still treated as maybe: that can only hide a violation, never invent one.)

The only ordering the checker uses is real time: A precedes B when A was answered ok (or
with a definite refusal) and A.tc < B.ti (strictly; the clients share one host clock). Two calls that overlap are concurrent and may have
taken effect in either order. Retention is taken to be longer than the run (a forgotten key
would begin again at attempt 1); a read carrying `result_expired` is compared on outcome and code
only.

An *acknowledged finish* of a key K (call it F) is any ok answer that shows K finished with a
result r = (outcome, code, body): an ok complete or ok resolve with outcome succeeded, failed or
unknown (the invoke says what was written); an ok begin `replay` (its result); an ok lookup in
state succeeded/failed/unknown (its result); an ok `skip_null_compensation` on a compensation key
(the null compensation: succeeded, code 0, empty body). A finished record never changes except
that an UNKNOWN one may be resolved (docs/api.md section 4; Admin.ResolveStep accepts only
IN_PROGRESS and UNKNOWN steps); a resolution with outcome retryable releases it, and the key can
then proceed and finish again.

Rules
-----
rule 1 (one proceed per attempt)
    (a) For each key, no two ok begin answers `proceed` carry the same attempt.
    (b) For ok proceeds P, Q of one key with P.tc < Q.ti: Q.attempt > P.attempt.
rule 2 (complete / extend only for an issued, current attempt)
    (a) An ok complete or extend of attempt n on K needs n to have been issued by a proceed on
        K. Attempts of a key are 1, 2, 3, ... each issued by exactly one begin (attempt 0 is the
        null compensation, issued by skip_null_compensation). Let A be the attempts that ok
        proceeds on K returned; every attempt in 1..n not in A must have been issued by a
        distinct maybe begin on K (or an ok proceed whose attempt field is missing) invoked
        before X.tc. Violation when the missing attempts outnumber those begins.
    (b) Fencing: an ok complete or extend of attempt n on K invoked after an ok proceed of
        attempt m > n on K was answered (P.tc < X.ti) was accepted from a superseded attempt.
rule 3 (replays and lookups return a written result)
    (a) An ok replay, or an ok lookup in a finished state, on K returns a result r that some
        call W on K may have written with W.ti < R.tc: a complete or resolve with r (ok or
        maybe; a definite refusal wrote nothing), or, on a compensation key, the null
        compensation when a begin on K was answered skip_null_compensation or is maybe.
    (b) Agreement: for two such reads R1, R2 of K with R1.tc < R2.ti, R2 returns R1's result,
        unless the exception of rule 4 applies.
rule 4 (no acknowledged result changes or disappears)
    For an acknowledged finish F of K and any ok call X on K with F.tc < X.ti:
      - X is not a begin answered `proceed`;
      - X, a replay or finished lookup, returns F's result;
      - X, a lookup, does not find K in_progress, released, abandoned or absent (NOT_FOUND);
      - X, an ok complete or resolve, writes F's result (a retried complete is harmless; a
        different result would change an acknowledged one).
    Exception: F's outcome is `unknown` and a resolve of K (ok or maybe) may have taken effect
    between F and X (resolve.ti < X.tc and resolve not answered before F.ti); for a proceed, an
    in_progress, released or abandoned lookup that resolve must have outcome retryable (it
    releases the key, which may then proceed again or be abandoned by a compensation). An absent
    record is never excused.
    (Violations between two reads are reported as rule 3b.)
rule 5 (no forward action after its compensation was decided)
    The compensation of (g, s, o) is decided once any ok call shows its record: a compensation
    begin answered proceed, replay, skip_null_compensation or skip_already_compensated, or an ok
    compensation complete, extend, resolve, or lookup that found it. Let D be the first such
    answer. For the forward key, with D.tc < X.ti:
    (a) no ok begin answers `proceed`;
    (b) no ok extend (the forward is then abandoned or finished, never in progress);
    (c) no ok complete C, unless another complete of the same attempt with the same result, or
        a resolve with the same result (ok or maybe, invoked before C.tc), finished the forward
        before, making C a harmless retry. (A forward in progress when the compensation began
        is abandoned, and its late Complete must be refused.)
rule 6 (no null compensation after a forward that succeeded)
    For an acknowledged finish S of the forward with outcome succeeded (final), no compensation
    begin X with S.tc < X.ti is answered ok `skip_null_compensation`. The same holds for an
    acknowledged `unknown` forward, unless a resolve of the forward may have taken effect
    between S and X (it could have made the forward failed).

Figures (with --faults)
-----------------------
Per fault kind: injected (start lines); the share of calls answered ok among the calls invoked
while a fault of that kind lasted (ok / (ok + fail + info + unanswered)); from heal (`end`) to the
first ok answer; from heal to full throughput, the start of the first 1-s window (slid in
100-ms steps from the heal) whose ok answers reach 80 % of the median per-second ok count of the
fault-free whole seconds of the run. Medians and maxima are over the faults of the kind.
"""

import argparse
import bisect
import json
import math
import sys

INF = math.inf

DEFINITE = frozenset({
    "ABORTED", "FAILED_PRECONDITION", "NOT_FOUND", "INVALID_ARGUMENT", "ALREADY_EXISTS",
    "PERMISSION_DENIED", "UNAUTHENTICATED", "OUT_OF_RANGE", "UNIMPLEMENTED",
})
FINISHED = frozenset({"succeeded", "failed", "unknown"})
FUNCS = frozenset({"begin", "complete", "extend", "lookup", "resolve"})
ANSWERS = frozenset({"ok", "fail", "info"})

OK, FAIL, MAYBE = 0, 1, 2
NULL_RESULT = ("succeeded", 0, "")

RULE_NAMES = {
    "1": "one proceed per attempt",
    "2": "complete/extend only for an issued, current attempt",
    "3": "replays and lookups return a written result",
    "4": "no acknowledged result changes or disappears",
    "5": "no forward action after its compensation was decided",
    "6": "no null compensation after a forward that succeeded",
}


class InputError(Exception):
    """Malformed or unreadable input; the message names the file and line."""


class Op:
    """One call: its invoke, and its answer when there was one."""

    __slots__ = ("f", "st", "ti", "tc", "teff", "attempt", "decision", "res", "state",
                 "inv", "ans", "maybe_err")

    def __init__(self, f, ti, inv):
        self.f = f
        self.st = MAYBE
        self.ti = ti
        self.tc = INF          # answer time; INF when unanswered or maybe
        self.teff = INF        # latest instant it may take effect
        self.attempt = None
        self.decision = None
        self.res = None        # (outcome, code, body); body None when expired
        self.state = None      # lookups: state word, or "absent" for NOT_FOUND
        self.inv = inv         # line numbers
        self.ans = None


def _result(obj, default_outcome=None):
    """(outcome, code, body) of a line; body None when the line says the body expired."""
    code = obj.get("code")
    body = None if obj.get("result_expired") else (obj.get("body") or "")
    return (obj.get("outcome") or default_outcome, 0 if code is None else code, body)


def same(a, b):
    """Results equal; a missing (expired) body matches any body."""
    return (a[0] == b[0] and a[1] == b[1]
            and (a[2] is None or b[2] is None or a[2] == b[2]))


class Key:
    __slots__ = ("name", "comp", "ops")

    def __init__(self, name, comp):
        self.name = name
        self.comp = comp
        self.ops = []


class History:
    """The parsed history: operations grouped by key, plus the figures' raw columns."""

    def __init__(self):
        self.keys = {}
        self.n_invoke = self.n_ok = self.n_fail = self.n_info = 0
        self.t_first = INF
        self.t_last = -INF
        self.inv_times = []    # (ti, answer kind) of every call, for the figures
        self.ok_times = []     # answer time of every ok

    def key(self, name, lineno, path):
        k = self.keys.get(name)
        if k is None:
            parts = name.split("/")
            if len(parts) != 4 or parts[3] not in ("forward", "compensation"):
                raise InputError(f"{path}:{lineno}: key {name!r} is not "
                                 "global_id/service/operation/forward|compensation")
            k = Key(name, parts[3] == "compensation")
            self.keys[name] = k
        return k


def _num(obj, field, lineno, path):
    v = obj.get(field)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(f"{path}:{lineno}: field {field!r} missing or not a number")
    return v


def read_history(path):
    h = History()
    pending = {}               # process -> (Op, Key)
    try:
        fh = open(path, "r", encoding="utf-8")
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}")
    loads = json.loads
    with fh:
        lineno = 0
        for line in fh:
            lineno += 1
            if not line.strip():
                continue
            try:
                obj = loads(line)
            except ValueError as e:
                raise InputError(f"{path}:{lineno}: not JSON ({e})")
            if not isinstance(obj, dict):
                raise InputError(f"{path}:{lineno}: not a JSON object")
            t = _num(obj, "t", lineno, path)
            proc = obj.get("process")
            typ = obj.get("type")
            f = obj.get("f")
            if proc is None:
                raise InputError(f"{path}:{lineno}: field 'process' missing")
            if f not in FUNCS:
                raise InputError(f"{path}:{lineno}: field 'f' is {f!r}")
            if t < h.t_first:
                h.t_first = t
            if t > h.t_last:
                h.t_last = t
            if typ == "invoke":
                name = obj.get("key")
                if not isinstance(name, str):
                    raise InputError(f"{path}:{lineno}: field 'key' missing")
                k = h.key(name, lineno, path)
                op = Op(f, t, lineno)
                a = obj.get("attempt")
                if isinstance(a, int) and not isinstance(a, bool):
                    op.attempt = a
                if f in ("complete", "resolve"):
                    op.res = _result(obj)
                if proc in pending:
                    _close(h, *pending[proc])
                pending[proc] = (op, k)
                h.n_invoke += 1
                continue
            if typ not in ANSWERS:
                raise InputError(f"{path}:{lineno}: field 'type' is {typ!r}")
            p = pending.pop(proc, None)
            if p is None:
                raise InputError(f"{path}:{lineno}: {typ} answer of process {proc} "
                                 "without a call in flight")
            op, k = p
            if op.f != f:
                raise InputError(f"{path}:{lineno}: answer f={f!r} to a call f={op.f!r} "
                                 f"(line {op.inv})")
            op.ans = lineno
            if typ == "ok":
                h.n_ok += 1
                op.st = OK
                op.tc = op.teff = t
                if f == "begin":
                    op.decision = obj.get("decision")
                    if op.decision == "proceed":
                        a = obj.get("attempt")
                        op.attempt = a if isinstance(a, int) and not isinstance(a, bool) else None
                    elif op.decision == "replay":
                        op.res = _result(obj)
                elif f == "lookup":
                    op.state = obj.get("state")
                    a = obj.get("attempt")
                    op.attempt = a if isinstance(a, int) and not isinstance(a, bool) else None
                    if op.state in FINISHED:
                        op.res = _result(obj, op.state)
                h.ok_times.append(t)
            elif typ == "fail":
                h.n_fail += 1
                err = obj.get("error")
                if err in DEFINITE:
                    op.st = FAIL
                    op.tc = op.teff = t
                    if f == "lookup" and err == "NOT_FOUND":
                        op.state = "absent"
            else:
                h.n_info += 1
            _close(h, op, k, typ)
    for op, k in pending.values():
        _close(h, op, k)
    return h


def _close(h, op, k, typ=None):
    """Files a finished (or abandoned) call under its key."""
    # OK, FAIL (a definite refusal: an answer, e.g. ABORTED "in progress") or MAYBE
    h.inv_times.append((op.ti, op.st if typ is not None else MAYBE))
    # A definite refusal changes nothing; only lookups' NOT_FOUND is kept, as a read.
    if op.st == FAIL and op.state != "absent":
        return
    k.ops.append(op)


def read_faults(path):
    faults = []
    try:
        fh = open(path, "r", encoding="utf-8")
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}")
    with fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise InputError(f"{path}:{lineno}: not JSON ({e})")
            if not isinstance(obj, dict):
                raise InputError(f"{path}:{lineno}: not a JSON object")
            t = _num(obj, "t", lineno, path)
            fault = obj.get("fault")
            phase = obj.get("phase")
            if not isinstance(fault, str) or phase not in ("start", "end"):
                raise InputError(f"{path}:{lineno}: needs 'fault' and 'phase' start|end")
            faults.append((t, fault, phase, str(obj.get("target", "")), lineno))
    return faults


# --- the rules -------------------------------------------------------------------------------


class Checker:
    def __init__(self, history):
        self.h = history
        self.violations = []

    def report(self, rule, key, msg, ops):
        lines = set()
        for op in ops:
            lines.add(op.inv)
            if op.ans is not None:
                lines.add(op.ans)
        self.violations.append({"rule": rule, "key": key, "message": msg,
                                "lines": sorted(lines)})

    def run(self):
        pairs = {}
        for name, k in self.h.keys.items():
            self.check_key(k)
            pairs.setdefault(name.rsplit("/", 1)[0], [None, None])[1 if k.comp else 0] = k
        for fwd, comp in pairs.values():
            if fwd is not None and comp is not None:
                self.check_pair(fwd, comp)
        return self.violations

    # rules 1-4: one key at a time
    def check_key(self, k):
        ops = k.ops
        proceeds = [o for o in ops if o.st == OK and o.f == "begin" and o.decision == "proceed"]
        self.rule1(k, proceeds)
        self.rule2(k, ops, proceeds)
        resolves = [o for o in ops if o.f == "resolve" and o.st != FAIL]
        self.rule3a(k, ops)
        self.rule34(k, ops, resolves)

    def rule1(self, k, proceeds):
        by_attempt = {}
        for p in proceeds:
            if p.attempt is not None:
                by_attempt.setdefault(p.attempt, []).append(p)
        for a, ps in sorted(by_attempt.items()):
            if len(ps) > 1:
                self.report("1", k.name, f"attempt {a} was answered proceed {len(ps)} times", ps)
        known = [p for p in proceeds if p.attempt is not None]
        by_tc = sorted(known, key=lambda o: o.tc)
        best = None
        j = 0
        for q in sorted(known, key=lambda o: o.ti):
            while j < len(by_tc) and by_tc[j].tc < q.ti:
                if best is None or by_tc[j].attempt > best.attempt:
                    best = by_tc[j]
                j += 1
            if best is not None and best.attempt > q.attempt:
                self.report("1", k.name, f"attempt went down: proceed {q.attempt} invoked after "
                            f"proceed {best.attempt} was answered", [best, q])

    def rule2(self, k, ops, proceeds):
        writers = [o for o in ops if o.st == OK and o.f in ("complete", "extend")]
        if not writers:
            return
        issued = sorted({p.attempt for p in proceeds if p.attempt is not None})
        # begins that may have issued an attempt the history does not show
        hidden = sorted([o.ti for o in ops if o.f == "begin" and
                         (o.st == MAYBE or (o.decision == "proceed" and o.attempt is None))])
        null_ok = [o for o in ops if o.f == "begin" and o.st == OK and
                   o.decision == "skip_null_compensation"]
        known = sorted((p for p in proceeds if p.attempt is not None), key=lambda o: o.tc)
        known_tc = [p.tc for p in known]
        prefix_best = []
        best = None
        for p in known:
            if best is None or p.attempt > best.attempt:
                best = p
            prefix_best.append(best)
        for x in writers:
            n = x.attempt
            if n is None:
                continue
            if n == 0:
                if not null_ok and bisect.bisect_left(hidden, x.tc) == 0:
                    self.report("2", k.name, f"{x.f} of attempt 0 accepted, but no begin "
                                "could have written a null compensation", [x])
                continue
            if n < 0:
                self.report("2", k.name, f"{x.f} of attempt {n} accepted", [x])
                continue
            missing = n - bisect.bisect_right(issued, n) + bisect.bisect_right(issued, 0)
            if missing > 0:
                may = bisect.bisect_left(hidden, x.tc)
                if missing > may:
                    shown = [p for p in proceeds if p.attempt is not None and p.attempt <= n]
                    self.report("2", k.name,
                                f"{x.f} of attempt {n} accepted, but {missing} of attempts 1..{n} "
                                f"were not answered proceed and only {may} begin(s) with an "
                                "unknown answer were invoked before it was answered", [x] + shown)
                    continue
            j = bisect.bisect_left(known_tc, x.ti)
            if j > 0 and prefix_best[j - 1].attempt > n:
                p = prefix_best[j - 1]
                self.report("2", k.name, f"{x.f} of attempt {n} accepted after attempt "
                            f"{p.attempt} was answered proceed (fencing)", [p, x])

    def rule3a(self, k, ops):
        reads = [o for o in ops if o.st == OK and o.res is not None and
                 ((o.f == "begin" and o.decision == "replay") or o.f == "lookup")]
        if not reads:
            return
        first = {}             # result -> earliest invoke of a call that may have written it
        first_oc = {}          # (outcome, code) -> the same, for expired bodies
        for o in ops:
            r = None
            if o.f in ("complete", "resolve") and o.st != FAIL and o.res and o.res[0] in FINISHED:
                r = o.res
            elif (k.comp and o.f == "begin" and
                  (o.st == MAYBE or o.decision == "skip_null_compensation")):
                r = NULL_RESULT
            if r is None:
                continue
            if o.ti < first.get(r, INF):
                first[r] = o.ti
            if o.ti < first_oc.get(r[:2], INF):
                first_oc[r[:2]] = o.ti
        for x in reads:
            r = x.res
            t = first_oc.get(r[:2], INF) if r[2] is None else first.get(r, INF)
            if t < x.tc:
                continue
            what = "replay" if x.f == "begin" else f"lookup ({x.state})"
            cands = [o for o in ops if o.f in ("complete", "resolve") and o.st != FAIL and
                     o.res and o.res[0] in FINISHED and o.ti < x.tc][:5]
            self.report("3", k.name, f"{what} returned {_fmt(r)}, which no complete or "
                        "resolution invoked before it was answered wrote", [x] + cands)

    def rule34(self, k, ops, resolves):
        fins = []
        for o in ops:
            if o.st != OK:
                continue
            if o.f in ("complete", "resolve") and o.res and o.res[0] in FINISHED:
                fins.append((o, o.res))
            elif o.f == "begin" and o.decision == "replay" and o.res is not None:
                fins.append((o, o.res))
            elif o.f == "lookup" and o.res is not None:
                fins.append((o, o.res))
            elif k.comp and o.f == "begin" and o.decision == "skip_null_compensation":
                fins.append((o, NULL_RESULT))
        if not fins:
            return
        # group acknowledged finishes by result; within a group: answer times sorted, and the
        # prefix maximum of invoke times (the finish hardest to excuse by a resolve)
        groups = {}
        for o, r in fins:
            groups.setdefault((r[0], r[1], r[2]), []).append(o)
        gl = []
        for r, os_ in groups.items():
            os_.sort(key=lambda o: o.tc)
            late = []
            best = None
            for o in os_:
                if best is None or o.ti > best.ti:
                    best = o
                late.append(best)
            gl.append((r, [o.tc for o in os_], os_, late))
        gl.sort(key=lambda g: g[1][0])
        for x in ops:
            if x.st == FAIL and x.state != "absent":
                continue
            if x.st == MAYBE:
                continue
            if x.f == "begin":
                if x.decision == "proceed":
                    kind = "proceed"
                elif x.decision == "replay" and x.res is not None:
                    kind = "read"
                else:
                    continue
            elif x.f == "lookup":
                if x.res is not None:
                    kind = "read"
                elif x.state in ("in_progress", "released", "abandoned", "absent"):
                    kind = "gone"
                else:
                    continue
            elif x.f in ("complete", "resolve"):
                if x.res is None:
                    continue
                kind = "write"
            else:
                continue
            for r, tcs, os_, late in gl:
                j = bisect.bisect_left(tcs, x.ti)
                if j == 0:
                    continue
                if kind in ("read", "write") and x.res is not None and same(x.res, r):
                    continue
                if kind == "write" and x.f == "resolve" and r[0] == "unknown":
                    continue   # resolving an unknown result is what resolve is for
                f = os_[0]
                if r[0] == "unknown" and resolves:
                    f = late[j - 1]
                    # a retryable resolution releases the key: it may then proceed again,
                    # or be abandoned by a compensation; nothing makes it absent
                    need_retryable = kind in ("proceed", "gone")
                    never = kind == "gone" and x.state == "absent"
                    if not never and any(
                            s.ti < x.tc and s.teff > f.ti and
                            (not need_retryable or (s.res and s.res[0] == "retryable"))
                            for s in resolves):
                        continue
                rule = "3" if kind == "read" and _is_read(f) else "4"
                if kind == "proceed":
                    msg = f"begin answered proceed (attempt {x.attempt}) after {_fmt(r)} was acknowledged"
                elif kind == "gone":
                    msg = f"lookup found the step {x.state} after {_fmt(r)} was acknowledged"
                elif kind == "read":
                    msg = (f"{'replay' if x.f == 'begin' else 'lookup'} returned {_fmt(x.res)} "
                           f"after {_fmt(r)} was acknowledged")
                else:
                    msg = f"{x.f} of {_fmt(x.res)} accepted after {_fmt(r)} was acknowledged"
                self.report(rule, k.name, msg, [f, x])
                break

    # rules 5 and 6: a forward and its compensation
    def check_pair(self, fwd, comp):
        decided = None
        for o in comp.ops:
            if o.st != OK:
                continue
            shows = ((o.f == "begin" and o.decision in ("proceed", "replay", "skip_null_compensation",
                                                        "skip_already_compensated"))
                     or o.f in ("complete", "extend", "resolve")
                     or (o.f == "lookup" and o.state != "absent"))
            if shows and (decided is None or o.tc < decided.tc):
                decided = o
        if decided is not None:
            d = decided
            for x in fwd.ops:
                if x.st != OK or x.ti <= d.tc:
                    continue
                if x.f == "begin" and x.decision == "proceed":
                    self.report("5", fwd.name, f"forward answered proceed (attempt {x.attempt}) "
                                "after its compensation was decided", [d, x])
                elif x.f == "extend":
                    self.report("5", fwd.name, f"forward extend of attempt {x.attempt} accepted "
                                "after its compensation was decided", [d, x])
                elif x.f == "complete" and x.res is not None:
                    ok = any(w is not x and w.st != FAIL and w.res is not None and
                             same(w.res, x.res) and w.ti < x.tc and
                             (w.f == "resolve" or (w.f == "complete" and w.attempt == x.attempt))
                             for w in fwd.ops)
                    if not ok:
                        self.report("5", fwd.name, f"forward complete of attempt {x.attempt} "
                                    f"({_fmt(x.res)}) accepted after its compensation was "
                                    "decided, and nothing had finished the forward", [d, x])
        nulls = [o for o in comp.ops if o.st == OK and o.f == "begin" and
                 o.decision == "skip_null_compensation"]
        if not nulls:
            return
        acks = []
        for o in fwd.ops:
            if o.st != OK or o.res is None or o.res[0] not in ("succeeded", "unknown"):
                continue
            if ((o.f == "complete" or o.f == "resolve" or o.f == "lookup") or
                    (o.f == "begin" and o.decision == "replay")):
                acks.append(o)
        if not acks:
            return
        acks.sort(key=lambda o: o.tc)
        fres = [o for o in fwd.ops if o.f == "resolve" and o.st != FAIL]
        for x in nulls:
            for s in acks:
                if s.tc >= x.ti:
                    break
                if s.res[0] == "unknown" and any(r.ti < x.tc and r.teff > s.ti for r in fres):
                    continue
                self.report("6", comp.name, f"compensation answered skip_null_compensation after "
                            f"its forward was acknowledged {s.res[0]}", [s, x])
                break


def _is_read(o):
    return o.f == "lookup" or (o.f == "begin" and o.decision == "replay")


def _fmt(r):
    body = "<expired>" if r[2] is None else repr(r[2])
    return f"({r[0]}, {r[1]}, {body})"


# --- figures ---------------------------------------------------------------------------------


def figures(h, faults):
    """Per fault kind: injected, ok share while it lasted, heal to first ok, heal to full
    throughput (see the module docstring)."""
    windows = []               # (kind, start, end or None)
    open_ = {}
    for t, fault, phase, target, _ in sorted(faults, key=lambda x: x[0]):
        if phase == "start":
            open_.setdefault((fault, target), []).append(len(windows))
            windows.append([fault, t, None])
        else:
            lst = open_.get((fault, target))
            if lst:
                windows[lst.pop(0)][2] = t
    t_end = h.t_last
    inv = sorted(h.inv_times)
    inv_t = [x[0] for x in inv]
    ok_t = sorted(h.ok_times)
    # baseline: median ok count of whole seconds without any fault
    baseline = None
    note = "fault-free seconds"
    if ok_t and h.t_first < INF:
        t0 = h.t_first
        nsec = int((t_end - t0) // 1000)
        busy = [False] * max(nsec, 0)
        for _, s, e in windows:
            e = t_end if e is None else e
            lo = max(int((s - t0) // 1000), 0)
            hi = min(int((e - t0) // 1000), nsec - 1)
            for i in range(lo, hi + 1):
                busy[i] = True
        counts = [0] * max(nsec, 0)
        for t in ok_t:
            i = int((t - t0) // 1000)
            if 0 <= i < nsec:
                counts[i] += 1
        free = [c for c, b in zip(counts, busy) if not b]
        if not free:
            free = counts
            note = "all seconds (none was fault-free)"
        if free:
            baseline = _median(free)
    rows = {}
    for kind, s, e in windows:
        r = rows.setdefault(kind, {"fault": kind, "injected": 0, "ok": 0, "answered": 0, "calls": 0,
                                   "first_ok_ms": [], "full_ms": [], "unhealed": 0})
        r["injected"] += 1
        e2 = t_end if e is None else e
        lo = bisect.bisect_left(inv_t, s)
        hi = bisect.bisect_right(inv_t, e2)
        r["calls"] += hi - lo
        r["ok"] += sum(1 for i in range(lo, hi) if inv[i][1] == OK)
        r["answered"] += sum(1 for i in range(lo, hi) if inv[i][1] != MAYBE)
        if e is None:
            r["unhealed"] += 1
            continue
        i = bisect.bisect_left(ok_t, e)
        if i < len(ok_t):
            r["first_ok_ms"].append(ok_t[i] - e)
        if baseline is not None:
            need = 0.8 * baseline
            step = 0
            while e + step * 100 + 1000 <= t_end:
                w0 = e + step * 100
                c = bisect.bisect_left(ok_t, w0 + 1000) - bisect.bisect_left(ok_t, w0)
                if c >= need:
                    r["full_ms"].append(step * 100.0)
                    break
                step += 1
    out = []
    for kind in sorted(rows):
        r = rows[kind]
        out.append({
            "fault": kind, "injected": r["injected"], "calls": r["calls"], "ok": r["ok"],
            "ok_share": (r["ok"] / r["calls"]) if r["calls"] else None,
            "answered_share": (r["answered"] / r["calls"]) if r["calls"] else None,
            "first_ok_ms_median": _median(r["first_ok_ms"]) if r["first_ok_ms"] else None,
            "first_ok_ms_max": max(r["first_ok_ms"]) if r["first_ok_ms"] else None,
            "full_ms_median": _median(r["full_ms"]) if r["full_ms"] else None,
            "full_ms_max": max(r["full_ms"]) if r["full_ms"] else None,
            "full_reached": len(r["full_ms"]), "healed": r["injected"] - r["unhealed"],
        })
    return {"baseline_ok_per_s": baseline, "baseline_from": note, "kinds": out}


def _median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def format_figures(fig):
    def ms(v):
        return "-" if v is None else f"{v:.0f}"

    def sec(v):
        return "-" if v is None else f"{v / 1000:.1f}"
    head = ["fault", "injected", "calls", "ok share", "answered", "heal->1st ok ms (med/max)",
            "heal->full s (med/max, reached)"]
    rows = [head]
    for r in fig["kinds"]:
        share = "-" if r["ok_share"] is None else f"{100 * r['ok_share']:.1f} %"
        ans = "-" if r.get("answered_share") is None else f"{100 * r['answered_share']:.1f} %"
        rows.append([r["fault"], str(r["injected"]), str(r["calls"]), share, ans,
                     f"{ms(r['first_ok_ms_median'])}/{ms(r['first_ok_ms_max'])}",
                     f"{sec(r['full_ms_median'])}/{sec(r['full_ms_max'])}, "
                     f"{r['full_reached']} of {r['healed']}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = []
    for n, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    b = fig["baseline_ok_per_s"]
    lines.append("ok share: calls invoked while the fault lasted that were answered ok; answered: "
                 "ok or a definite refusal (ABORTED in progress, FAILED_PRECONDITION, NOT_FOUND)")
    lines.append("full throughput: the first 1-s window after the heal (slid in 100-ms steps) "
                 "with at least 80 % of the median ok/s of " + fig["baseline_from"] +
                 (f" ({b:g} ok/s)" if b is not None else " (no ok answers)"))
    return "\n".join(lines)


def fetch_lines(path, wanted):
    got = {}
    if not wanted:
        return got
    with open(path, "r", encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if n in wanted:
                got[n] = line.rstrip("\n")
    return got


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="idem_check.py",
        description="Check an idem fault-campaign history (history.jsonl) against the "
                    "coordinator's promises; see the module docstring for the rules.")
    ap.add_argument("history", help="history.jsonl: one call's invoke or answer a line")
    ap.add_argument("--faults", help="faults.jsonl: the nemesis's start/end lines, for figures")
    ap.add_argument("--json", metavar="OUT", help="also write the figures and violations here")
    ap.add_argument("--max-print", type=int, default=200, metavar="N",
                    help="print at most N violations with their lines (default 200); "
                         "all are counted")
    args = ap.parse_args(argv)
    try:
        h = read_history(args.history)
        faults = read_faults(args.faults) if args.faults else None
    except InputError as e:
        print(f"idem_check: {e}", file=sys.stderr)
        return 2
    violations = Checker(h).run()
    violations.sort(key=lambda v: (v["lines"][0] if v["lines"] else 0))
    shown = violations[:max(args.max_print, 0)]
    wanted = set()
    for v in shown:
        wanted.update(v["lines"])
    text = fetch_lines(args.history, wanted)
    out = sys.stdout
    for v in shown:
        out.write(f"VIOLATION rule {v['rule']} ({RULE_NAMES[v['rule']]}) key {v['key']}: "
                  f"{v['message']}\n")
        for n in v["lines"]:
            out.write(f"  {n:>9}: {text.get(n, '')}\n")
        v["text"] = [text.get(n, "") for n in v["lines"]]
    if len(violations) > len(shown):
        out.write(f"... and {len(violations) - len(shown)} more violations not printed\n")
    by_rule = {}
    for v in violations:
        by_rule[v["rule"]] = by_rule.get(v["rule"], 0) + 1
    if violations:
        out.write("violations by rule: " + ", ".join(
            f"rule {r}: {n}" for r, n in sorted(by_rule.items())) + "\n")
    fig = None
    n_faults = n_kinds = 0
    if faults is not None:
        fig = figures(h, faults)
        n_faults = sum(1 for f in faults if f[2] == "start")
        n_kinds = len({f[1] for f in faults if f[2] == "start"})
        out.write(format_figures(fig) + "\n")
    unknown = h.n_invoke - h.n_ok - h.n_fail
    summary = (f"chaos: {h.n_invoke} ops (ok {h.n_ok}, fail {h.n_fail}, unknown {unknown}), "
               f"{n_faults} faults of {n_kinds} kinds, violations {len(violations)}")
    if args.json:
        doc = {"ops": h.n_invoke, "ok": h.n_ok, "fail": h.n_fail, "unknown": unknown,
               "faults": n_faults, "fault_kinds": n_kinds, "violations_total": len(violations),
               "violations_by_rule": by_rule, "violations": violations, "figures": fig,
               "summary": summary}
        try:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=1)
                fh.write("\n")
        except OSError as e:
            print(f"idem_check: {args.json}: {e.strerror}", file=sys.stderr)
            return 2
    out.write(summary + "\n")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
