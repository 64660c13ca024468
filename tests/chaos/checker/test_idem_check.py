#!/usr/bin/env python3
"""Self-tests of idem_check.py: synthetic histories, clean and with one planted bug each.

    python3 test_idem_check.py                  run the tests
    python3 test_idem_check.py --generate N OUT  write a simulated clean history of about N lines
                                                (and OUT.faults) to measure the checker's speed

The simulator below is a small model of a correct coordinator (the decision table of docs/api.md
section 3 and the rules of section 4) driven by concurrent processes whose calls take effect
between invoke and answer, some answers lost (`info`), some requests applied after the client gave
up, and calls still in flight when the run ends. Flags plant server bugs in the model.
"""

import base64
import heapq
import io
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import idem_check  # noqa: E402

SUMMARY = re.compile(r"^chaos: (\d+) ops \(ok (\d+), fail (\d+), unknown (\d+)\), "
                     r"(\d+) faults of (\d+) kinds, violations (\d+)$")


def b64(s):
    return base64.b64encode(s.encode()).decode()


# --- hand-written histories --------------------------------------------------------------------


class H:
    """Builds a history: call() adds an invoke and (unless typ is None) its answer."""

    def __init__(self):
        self.lines = []
        self.seq = 0

    def call(self, proc, f, key, ti, tc, typ="ok", inv=None, ans=None):
        self.seq += 1
        self.lines.append((ti, self.seq, dict({"t": ti, "process": proc, "type": "invoke",
                                               "f": f, "key": key}, **(inv or {}))))
        if typ is not None:
            self.seq += 1
            self.lines.append((tc, self.seq, dict({"t": tc, "process": proc, "type": typ,
                                                   "f": f, "key": key}, **(ans or {}))))
        return self

    def begin(self, proc, key, ti, tc, decision=None, attempt=None, typ="ok", res=None, error=None):
        ans = {}
        if decision:
            ans["decision"] = decision
        if attempt is not None:
            ans["attempt"] = attempt
        if res:
            ans.update(outcome=res[0], code=res[1], body=b64(res[2]))
        if error:
            ans["error"] = error
        return self.call(proc, "begin", key, ti, tc, typ, {"fingerprint": "61", "lease_ms": 100},
                         ans)

    def complete(self, proc, key, ti, tc, attempt, res, typ="ok", error=None):
        return self.call(proc, "complete", key, ti, tc, typ,
                         {"attempt": attempt, "outcome": res[0], "code": res[1],
                          "body": b64(res[2])},
                         dict({"attempt": attempt}, **({"error": error} if error else {})))

    def lookup(self, proc, key, ti, tc, state=None, attempt=1, res=None, typ="ok", error=None):
        ans = {}
        if state:
            ans.update(state=state, attempt=attempt)
        if res:
            ans.update(outcome=res[0], code=res[1], body=b64(res[2]))
        if error:
            ans["error"] = error
        return self.call(proc, "lookup", key, ti, tc, typ, None, ans)

    def resolve(self, proc, key, ti, tc, res, typ="ok"):
        return self.call(proc, "resolve", key, ti, tc, typ,
                         {"outcome": res[0], "code": res[1], "body": b64(res[2])})

    def text(self):
        return "".join(json.dumps(o) + "\n" for _, _, o in sorted(self.lines,
                                                                   key=lambda x: (x[0], x[1])))


def check_text(text, faults=None, extra=()):
    """Runs the checker's main on text; returns (exit status, stdout, json document)."""
    with tempfile.TemporaryDirectory() as d:
        hp = os.path.join(d, "history.jsonl")
        with open(hp, "w") as fh:
            fh.write(text)
        argv = [hp, "--json", os.path.join(d, "out.json")]
        if faults is not None:
            fp = os.path.join(d, "faults.jsonl")
            with open(fp, "w") as fh:
                fh.write(faults)
            argv += ["--faults", fp]
        buf = io.StringIO()
        with redirect_stdout(buf):
            rc = idem_check.main(argv + list(extra))
        doc = None
        if os.path.exists(argv[2]):
            with open(argv[2]) as fh:
                doc = json.load(fh)
        return rc, buf.getvalue(), doc


FWD = "g1/pay/charge/forward"
COMP = "g1/pay/charge/compensation"
S1 = ("succeeded", 200, "one")
S2 = ("succeeded", 200, "two")
U1 = ("unknown", 500, "maybe")
F1 = ("failed", 402, "no")


# --- the simulator -------------------------------------------------------------------------------


class Server:
    """A model of a correct coordinator; bugs: 'skip_fence', 'double_proceed'."""

    def __init__(self, bugs=(), rng=None):
        self.recs = {}
        self.bugs = set(bugs)
        self.rng = rng

    def rec(self, key):
        return self.recs.get(key)

    def begin(self, key, now, lease):
        pair, phase = key.rsplit("/", 1)
        fk, ck = pair + "/forward", pair + "/compensation"
        f, c = self.recs.get(fk), self.recs.get(ck)
        if phase == "forward":
            if c is not None:
                return ("ok", {"decision": "skip_already_compensated"})
            if f is None:
                self.recs[fk] = {"state": "in_progress", "attempt": 1, "lease": now + lease,
                                 "res": None}
                return ("ok", {"decision": "proceed", "attempt": 1})
            return self.row(fk, f, now, lease)
        fs = f["state"] if f else None
        if fs in (None, "released", "failed"):
            if c is not None:
                return self.comp_decides(ck, c, now, lease)
            if fs != "failed":
                self.recs[fk] = {"state": "abandoned", "attempt": f["attempt"] if f else 0,
                                 "lease": 0, "res": None}
            self.recs[ck] = {"state": "succeeded", "attempt": 0, "lease": 0,
                             "res": ("succeeded", 0, "")}
            return ("ok", {"decision": "skip_null_compensation"})
        if fs == "in_progress":
            if f["lease"] > now:
                return ("fail", {"error": "ABORTED"})
            f.update(state="abandoned", res=None)
        return self.comp_decides(ck, c, now, lease)

    def comp_decides(self, ck, c, now, lease):
        if c is None:
            self.recs[ck] = {"state": "in_progress", "attempt": 1, "lease": now + lease,
                             "res": None}
            return ("ok", {"decision": "proceed", "attempt": 1})
        if c["attempt"] == 0 and c["state"] == "succeeded":
            return ("ok", {"decision": "skip_null_compensation"})
        return self.row(ck, c, now, lease)

    def row(self, k, r, now, lease):
        s = r["state"]
        if s == "in_progress":
            if r["lease"] > now:
                if "double_proceed" in self.bugs and self.rng.random() < 0.3:
                    return ("ok", {"decision": "proceed", "attempt": r["attempt"]})
                return ("fail", {"error": "ABORTED"})
            r.update(attempt=r["attempt"] + 1, lease=now + lease)
            return ("ok", {"decision": "proceed", "attempt": r["attempt"]})
        if s == "released":
            r.update(state="in_progress", attempt=r["attempt"] + 1, lease=now + lease)
            return ("ok", {"decision": "proceed", "attempt": r["attempt"]})
        if s in ("succeeded", "failed", "unknown"):
            o, code, body = r["res"]
            return ("ok", {"decision": "replay", "outcome": o, "code": code, "body": b64(body)})
        return ("ok", {"decision": "skip_already_compensated"})

    def finish(self, r, res):
        r.update(state="released" if res[0] == "retryable" else res[0], res=res, lease=0)

    def complete(self, key, attempt, res):
        r = self.recs.get(key)
        if r is None:
            return ("fail", {"error": "NOT_FOUND"})
        if attempt > r["attempt"]:
            return ("fail", {"error": "FAILED_PRECONDITION"})
        if r["state"] == "abandoned":
            return ("fail", {"error": "ABORTED"})
        if attempt < r["attempt"]:
            if "skip_fence" in self.bugs and r["state"] == "in_progress":
                self.finish(r, res)
                return ("ok", {})
            return ("fail", {"error": "ABORTED"})
        if r["state"] == "in_progress":
            self.finish(r, res)
            return ("ok", {})
        if r["res"] == res:
            return ("ok", {})
        return ("fail", {"error": "FAILED_PRECONDITION"})

    def extend(self, key, attempt, now, lease):
        r = self.recs.get(key)
        if r is None:
            return ("fail", {"error": "NOT_FOUND"})
        if r["state"] != "in_progress" or r["attempt"] != attempt:
            return ("fail", {"error": "ABORTED"})
        r["lease"] = now + lease
        return ("ok", {})

    def lookup(self, key):
        r = self.recs.get(key)
        if r is None:
            return ("fail", {"error": "NOT_FOUND"})
        a = {"state": r["state"], "attempt": r["attempt"]}
        if r["res"] is not None and r["state"] != "in_progress":
            o, code, body = r["res"]
            a.update(outcome=o, code=code, body=b64(body))
        return ("ok", a)

    def resolve(self, key, res):
        r = self.recs.get(key)
        if r is None:
            return ("fail", {"error": "NOT_FOUND"})
        if r["state"] not in ("in_progress", "unknown"):
            return ("fail", {"error": "FAILED_PRECONDITION"})
        self.finish(r, res)
        return ("ok", {})


def simulate(seed=1, procs=12, lines=20000, bugs=(), out=None, faults_out=None):
    """A clean (unless bugs) history of about `lines` lines; returns its text unless out is
    given (a file object, written as it goes)."""
    rng = random.Random(seed)
    srv = Server(bugs, rng)
    buf = [] if out is None else None
    emit_count = [0]

    def emit(obj):
        s = json.dumps(obj, separators=(",", ":")) + "\n"
        emit_count[0] += 1
        if buf is not None:
            buf.append(s)
        else:
            out.write(s)

    events = []
    seq = [0]

    def at(t, kind, proc, data=None):
        seq[0] += 1
        heapq.heappush(events, (t, seq[0], kind, proc, data))

    state = {p: {"todo": None, "seqn": 0} for p in range(procs)}
    outs = [("succeeded", 200)] * 5 + [("failed", 402)] * 2 + [("retryable", 503)] * 2 + \
        [("unknown", 500)]

    def pick_key(t, phase=None):
        gen = int(t // 400)
        g = f"g{gen}-{rng.randrange(3)}"
        if phase is None:
            phase = "compensation" if rng.random() < 0.25 else "forward"
        return f"{g}/{rng.choice(['pay', 'stock'])}/charge/{phase}"

    def start(p, t, f, key, inv, then=None):
        """Invokes f now; the server applies it after a delay; the answer comes back later,
        or is lost (info), or the request is lost, or applied after the client gave up."""
        emit(dict({"t": round(t, 3), "process": p, "type": "invoke", "f": f, "key": key}, **inv))
        r = rng.random()
        d1 = rng.uniform(0.1, 3.0)
        d2 = rng.uniform(0.1, 3.0)
        if r < 0.02:        # request lost: no effect, client times out
            at(t + 40, "answer", p, (f, key, None, then, inv))
        elif r < 0.04:      # applied, answer lost
            at(t + d1, "apply", p, (f, key, inv, None, then))
            at(t + 40, "answer", p, (f, key, None, then, inv))
        elif r < 0.05:      # applied long after the client gave up
            at(t + 40, "answer", p, (f, key, None, then, inv))
            at(t + 40 + rng.uniform(1, 100), "apply", p, (f, key, inv, None, then))
        else:
            at(t + d1, "apply", p, (f, key, inv, d2, then))

    def apply(t, f, key, inv):
        if f == "begin":
            return srv.begin(key, t, inv["lease_ms"])
        if f == "complete":
            return srv.complete(key, inv["attempt"], (inv["outcome"], inv["code"],
                                                       base64.b64decode(inv["body"]).decode()))
        if f == "extend":
            return srv.extend(key, inv["attempt"], t, inv["lease_ms"])
        if f == "lookup":
            return srv.lookup(key)
        return srv.resolve(key, (inv["outcome"], inv["code"],
                                 base64.b64decode(inv["body"]).decode()))

    def idle(p, t):
        at(t + rng.uniform(0, 2), "next", p)

    for p in range(procs):
        idle(p, rng.uniform(0, 5))
    t = 0.0
    while events and emit_count[0] < lines:
        t, _, kind, p, data = heapq.heappop(events)
        st = state[p]
        if kind == "next":
            r = rng.random()
            if r < 0.75:
                start(p, t, "begin", pick_key(t), {"fingerprint": "61",
                                                   "lease_ms": rng.randrange(10, 40)})
            elif r < 0.93:
                start(p, t, "lookup", pick_key(t), {})
            else:
                o = rng.choice([("succeeded", 299), ("failed", 299), ("retryable", 299)])
                st["seqn"] += 1
                start(p, t, "resolve", pick_key(t, "forward"),
                      {"outcome": o[0], "code": o[1], "body": b64(f"r{p}-{st['seqn']}")})
        elif kind == "apply":
            f, key, inv, d2, then = data
            typ, ans = apply(t, f, key, inv)
            if d2 is not None:
                at(t + d2, "answer", p, (f, key, (typ, ans), then, inv))
        elif kind == "answer":
            f, key, result, then, inv = data
            if result is None:
                typ, ans = ("info", {}) if rng.random() < 0.7 else \
                    ("fail", {"error": "DEADLINE_EXCEEDED"})
            else:
                typ, ans = result
            line = {"t": round(t, 3), "process": p, "type": typ, "f": f, "key": key}
            if f in ("complete", "extend"):
                line["attempt"] = inv["attempt"]
            line.update(ans)
            emit(line)
            if f == "begin" and typ == "ok" and ans.get("decision") == "proceed":
                a = ans["attempt"]
                r = rng.random()
                lease = inv["lease_ms"]
                if r < 0.08:
                    idle(p, t)          # crashed: someone takes over after the lease
                    continue
                st["todo"] = (key, a)
                if r < 0.2:
                    at(t + lease + rng.uniform(1, 20), "complete", p)   # too slow
                elif r < 0.3:
                    at(t + rng.uniform(0, lease / 2), "extend", p)
                else:
                    at(t + rng.uniform(0, 5), "complete", p)
                continue
            if f == "extend":
                if typ == "ok":
                    at(t + rng.uniform(0, 5), "complete", p)
                    continue
            if f == "complete" and typ == "info" and rng.random() < 0.5:
                start(p, t + 1, "complete", key, inv)   # the same complete again
                continue
            idle(p, t)
        elif kind == "extend":
            key, a = st["todo"]
            start(p, t, "extend", key, {"attempt": a, "lease_ms": rng.randrange(10, 40)})
        elif kind == "complete":
            key, a = st["todo"]
            o, code = rng.choice(outs)
            st["seqn"] += 1
            start(p, t, "complete", key, {"attempt": a, "outcome": o, "code": code,
                                          "body": b64(f"p{p}-{st['seqn']}-a{a}")})
    if faults_out is not None:
        kinds = ["kill_leader", "pause_leader", "partition_etcd"]
        ft = 50.0
        while ft + 300 < t:
            k = rng.choice(kinds)
            faults_out.write(json.dumps({"t": ft, "fault": k, "phase": "start",
                                         "target": "n1"}) + "\n")
            faults_out.write(json.dumps({"t": ft + 100, "fault": k, "phase": "end",
                                         "target": "n1"}) + "\n")
            ft += 400
    return "".join(buf) if buf is not None else None


# --- the tests ------------------------------------------------------------------------------------


def rules_of(doc):
    return sorted({v["rule"] for v in doc["violations"]})


class CleanHistories(unittest.TestCase):
    def test_simulated_clean_histories_have_no_violation(self):
        for seed in (1, 2, 3):
            text = simulate(seed=seed, lines=30000)
            rc, out, doc = check_text(text)
            self.assertEqual(doc["violations"], [], out[:3000])
            self.assertEqual(rc, 0)
            # the history does exercise concurrency, unknowns and every decision
            for needle in ('"type":"info"', '"decision":"replay"', '"decision":"proceed",'
                           '"attempt":3', '"decision":"skip_null_compensation"',
                           '"decision":"skip_already_compensated"', '"f":"resolve","key"'):
                self.assertIn(needle, text, needle)

    def test_concurrent_reads_around_a_complete(self):
        h = H()
        h.begin(1, FWD, 0, 1, "proceed", 1)
        h.lookup(2, FWD, 1.5, 9, "in_progress")            # may be ordered before the complete
        h.complete(1, FWD, 2, 3, 1, S1)
        h.lookup(3, FWD, 2.5, 10, "succeeded", 1, S1)
        h.begin(4, FWD, 2.6, 2.9, "replay", res=S1)        # concurrent with the complete
        h.begin(5, FWD, 4, 5, "replay", res=S1)
        h.complete(1, FWD, 6, 7, 1, S1)                     # a retried complete is harmless
        rc, out, doc = check_text(h.text())
        self.assertEqual((rc, doc["violations"]), (0, []), out)


class UnknownsAreNotReported(unittest.TestCase):
    def assertClean(self, h):
        rc, out, doc = check_text(h.text())
        self.assertEqual(doc["violations"], [], out)
        self.assertEqual(rc, 0)

    def test_replay_of_an_info_complete(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.complete(1, FWD, 2, 50, 1, S1, typ="info")
        h.begin(2, FWD, 10, 11, "replay", res=S1)
        h.lookup(3, FWD, 12, 13, "succeeded", 1, S1)
        self.assertClean(h)

    def test_replay_of_an_unanswered_complete(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.complete(1, FWD, 2, None, 1, S1, typ=None)
        h.begin(2, FWD, 10, 11, "replay", res=S1)
        self.assertClean(h)

    def test_replay_of_a_complete_that_timed_out(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.complete(1, FWD, 2, 40, 1, S1, typ="fail", error="DEADLINE_EXCEEDED")
        h.begin(2, FWD, 10, 11, "replay", res=S1)
        self.assertClean(h)

    def test_complete_for_an_attempt_whose_begin_was_info(self):
        h = H().begin(1, FWD, 0, 50, typ="info")
        h.complete(2, FWD, 60, 61, 1, S1)
        self.assertClean(h)

    def test_attempt_gap_covered_by_one_info_begin(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.begin(2, FWD, 10, 40, typ="info")
        h.complete(4, FWD, 45, 46, 2, ("retryable", 503, "later"))  # attempt 2: the info begin's
        h.begin(3, FWD, 50, 51, "proceed", 3)
        self.assertClean(h)

    def test_resolution_of_an_unknown_result(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.complete(1, FWD, 2, 3, 1, U1)
        h.begin(2, FWD, 4, 4.5, "replay", res=U1)
        h.resolve(9, FWD, 5, 6, S2)
        h.begin(2, FWD, 8, 9, "replay", res=S2)
        h.lookup(3, FWD, 10, 11, "succeeded", 1, S2)
        self.assertClean(h)

    def test_info_resolution_then_release(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.complete(1, FWD, 2, 3, 1, U1)
        h.resolve(9, FWD, 5, 60, ("retryable", 299, "again"), typ="info")
        h.begin(2, FWD, 8, 9, "proceed", 2)
        h.complete(2, FWD, 10, 11, 2, S2)
        h.begin(3, FWD, 12, 13, "replay", res=S2)
        self.assertClean(h)

    def test_null_compensation_lookup_and_repeat(self):
        h = H().begin(1, COMP, 0, 1, "skip_null_compensation")
        h.lookup(2, COMP, 2, 3, "succeeded", 0)
        h.lookup(2, FWD, 4, 5, "abandoned", 0)
        h.begin(3, FWD, 6, 7, "skip_already_compensated")
        h.begin(1, COMP, 8, 9, "skip_null_compensation")
        self.assertClean(h)

    def test_forward_complete_retried_after_compensation(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.complete(1, FWD, 2, 100, 1, S1, typ="info")
        h.begin(2, COMP, 10, 11, "proceed", 1)
        h.complete(1, FWD, 101, 102, 1, S1)
        self.assertClean(h)

    def test_compensation_concurrent_with_forward_success(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.complete(1, FWD, 2, 30, 1, S1)
        h.begin(2, COMP, 10, 20, "skip_null_compensation")   # not after the ack: no proof
        self.assertClean(h)


class PlantedBugs(unittest.TestCase):
    def assertRule(self, h, rule, only=False):
        rc, out, doc = check_text(h.text())
        self.assertEqual(rc, 1, out)
        self.assertIn(rule, rules_of(doc), out)
        if only:
            self.assertEqual(rules_of(doc), [rule], out)
        self.assertIn(f"VIOLATION rule {rule} ", out)
        # each violation prints its lines with their numbers
        self.assertRegex(out, r"\n +\d+: \{\"t\"")
        return doc

    def test_rule1_double_proceed(self):
        h = H().begin(1, FWD, 0, 2, "proceed", 1).begin(2, FWD, 1, 3, "proceed", 1)
        doc = self.assertRule(h, "1", only=True)
        self.assertEqual(doc["violations"][0]["lines"], [1, 2, 3, 4])

    def test_rule1_attempt_goes_down(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 2).begin(2, FWD, 2, 3, "proceed", 1)
        self.assertRule(h, "1")

    def test_rule2_complete_for_never_issued_attempt(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1).complete(1, FWD, 2, 3, 2, S1)
        self.assertRule(h, "2", only=True)

    def test_rule2_gap_larger_than_the_unknown_begins(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.begin(2, FWD, 10, 40, typ="info")
        h.begin(3, FWD, 50, 51, "proceed", 4)
        h.complete(4, FWD, 60, 61, 3, S1)  # attempts 2 and 3 missing, one unknown begin
        self.assertRule(h, "2", only=True)

    def test_rule2_stale_attempt_accepted(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.begin(2, FWD, 200, 201, "proceed", 2)
        h.complete(1, FWD, 210, 211, 1, S1)
        self.assertRule(h, "2", only=True)

    def test_rule3_replay_with_a_body_no_complete_wrote(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.complete(1, FWD, 5, 20, 1, S1)
        h.begin(2, FWD, 6, 8, "replay", res=("succeeded", 200, "forged"))
        self.assertRule(h, "3", only=True)

    def test_rule3_result_of_a_refused_complete(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.complete(2, FWD, 2, 3, 1, S2, typ="fail", error="ABORTED")
        h.complete(1, FWD, 4, 30, 1, S1, typ="info")
        h.begin(3, FWD, 10, 11, "replay", res=S2)
        self.assertRule(h, "3", only=True)

    def test_rule3_reads_disagree(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.complete(1, FWD, 2, 50, 1, S1, typ="info")
        h.complete(5, FWD, 3, 51, 1, S2, typ="info")
        h.begin(2, FWD, 10, 11, "replay", res=S1)
        h.begin(3, FWD, 12, 13, "replay", res=S2)
        self.assertRule(h, "3", only=True)

    def test_rule4_acknowledged_result_then_proceed(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.complete(1, FWD, 2, 3, 1, S1)
        h.begin(2, FWD, 10, 11, "proceed", 2)
        self.assertRule(h, "4", only=True)

    def test_rule4_acknowledged_result_disappears(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.complete(1, FWD, 2, 3, 1, F1)
        h.lookup(2, FWD, 10, 11, typ="fail", error="NOT_FOUND")
        self.assertRule(h, "4", only=True)

    def test_rule4_unknown_without_resolution_stays(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.complete(1, FWD, 2, 3, 1, U1)
        h.resolve(9, FWD, 1, 1.5, S2)     # answered before the complete: cannot excuse
        h.begin(2, FWD, 8, 9, "replay", res=S2)
        self.assertRule(h, "4")

    def test_rule5_forward_proceeds_after_compensation(self):
        h = H().begin(1, COMP, 0, 1, "proceed", 1)
        h.begin(2, FWD, 5, 6, "proceed", 1)
        self.assertRule(h, "5", only=True)

    def test_rule5_late_forward_complete_accepted(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.begin(2, COMP, 100, 101, "proceed", 1)
        h.complete(1, FWD, 110, 111, 1, S1)
        self.assertRule(h, "5", only=True)

    def test_rule6_null_compensation_after_succeeded_forward(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        h.complete(1, FWD, 2, 3, 1, S1)
        h.begin(2, COMP, 5, 6, "skip_null_compensation")
        self.assertRule(h, "6", only=True)

    def test_simulated_server_without_fence_check(self):
        found = set()
        for seed in (1, 2):
            rc, out, doc = check_text(simulate(seed=seed, lines=30000, bugs=("skip_fence",)))
            self.assertEqual(rc, 1)
            found.update(rules_of(doc))
        self.assertIn("2", found)

    def test_simulated_server_with_second_proceed(self):
        rc, out, doc = check_text(simulate(seed=4, lines=30000, bugs=("double_proceed",)))
        self.assertEqual(rc, 1)
        self.assertIn("1", rules_of(doc))


class Interface(unittest.TestCase):
    def test_summary_line_and_figures(self):
        h = H()
        for i in range(40):
            h.lookup(1, FWD, i * 100, i * 100 + 5, typ="fail", error="NOT_FOUND")
            h.lookup(2, FWD, i * 100 + 1, i * 100 + 6, "in_progress") if i >= 39 else None
        h.begin(3, FWD, 10, 20, typ="info")
        h.begin(4, FWD, 30, None, typ=None)
        faults = "".join(json.dumps(x) + "\n" for x in [
            {"t": 500, "fault": "kill_leader", "phase": "start", "target": "n1"},
            {"t": 800, "fault": "kill_leader", "phase": "end", "target": "n1"},
            {"t": 1550, "fault": "pause_leader", "phase": "start", "target": "n1"},
            {"t": 1750, "fault": "pause_leader", "phase": "end", "target": "n1"},
            {"t": 2500, "fault": "kill_leader", "phase": "start", "target": "n2"},
            {"t": 2600, "fault": "kill_leader", "phase": "end", "target": "n2"}])
        rc, out, doc = check_text(h.text(), faults)
        last = out.rstrip("\n").split("\n")[-1]
        m = SUMMARY.match(last)
        self.assertIsNotNone(m, last)
        self.assertEqual(last, "chaos: 43 ops (ok 1, fail 40, unknown 2), "
                               "3 faults of 2 kinds, violations 0")
        self.assertEqual(rc, 0)
        self.assertIn("kill_leader", out)
        self.assertIn("80 %", out)
        kinds = {k["fault"]: k for k in doc["figures"]["kinds"]}
        self.assertEqual(kinds["kill_leader"]["injected"], 2)
        self.assertEqual(kinds["pause_leader"]["calls"], 2)

    def test_summary_without_faults(self):
        h = H().begin(1, FWD, 0, 1, "proceed", 1)
        rc, out, _ = check_text(h.text())
        self.assertEqual(out.rstrip("\n").split("\n")[-1],
                         "chaos: 1 ops (ok 1, fail 0, unknown 0), 0 faults of 0 kinds, "
                         "violations 0")

    def test_malformed_lines_exit_2_naming_the_line(self):
        good = H().begin(1, FWD, 0, 1, "proceed", 1).text()
        cases = [good + "{not json\n",
                 good + json.dumps({"t": 5, "process": 7, "type": "ok", "f": "begin",
                                    "key": FWD}) + "\n",
                 good + json.dumps({"t": 5, "process": 7, "type": "invoke", "f": "begin",
                                    "key": "no-slashes"}) + "\n",
                 good + json.dumps({"process": 7, "type": "invoke", "f": "begin",
                                    "key": FWD}) + "\n"]
        for text in cases:
            with tempfile.TemporaryDirectory() as d:
                p = os.path.join(d, "h.jsonl")
                with open(p, "w") as fh:
                    fh.write(text)
                r = subprocess.run([sys.executable, os.path.join(HERE, "idem_check.py"), p],
                                   capture_output=True, text=True)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn("h.jsonl:3:", r.stderr)

    def test_missing_file_and_exit_codes_from_the_command_line(self):
        r = subprocess.run([sys.executable, os.path.join(HERE, "idem_check.py"),
                            "/nonexistent/history.jsonl"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "h.jsonl")
            with open(p, "w") as fh:
                fh.write(H().begin(1, FWD, 0, 2, "proceed", 1)
                         .begin(2, FWD, 1, 3, "proceed", 1).text())
            r = subprocess.run([sys.executable, os.path.join(HERE, "idem_check.py"), p],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertTrue(r.stdout.rstrip().endswith("violations 1"), r.stdout)
        r = subprocess.run([sys.executable, os.path.join(HERE, "idem_check.py"), "--help"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0)
        self.assertIn("--faults", r.stdout)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--generate":
        n, path = int(sys.argv[2]), sys.argv[3]
        with open(path, "w") as fh, open(path + ".faults", "w") as ff:
            simulate(seed=7, procs=32, lines=n, out=fh, faults_out=ff)
        sys.exit(0)
    unittest.main()
