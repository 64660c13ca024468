#!/usr/bin/python3
"""conformance.py — the Python SDK's runner of client-lib/conformance/scenarios.json.

    client-lib/conformance/run /usr/bin/python3 client-lib/python/conformance.py [NAME...]

Reads the environment client-lib/conformance/README.md describes, runs each scenario (or the
named ones) against the coordinators given there, prints `ok NAME` or `not ok NAME: what
differed` a line (`skip NAME: needs WHAT` for a scenario that needs a capability this runner
lacks), and exits 0 only when every scenario it ran passed.
"""
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
try:
    import idem_client  # noqa: E402
except ImportError:
    import gen_proto  # noqa: E402
    gen_proto.generate()
    import idem_client  # noqa: E402
from idem_client import IdemError, Output, StepKey  # noqa: E402

# the capabilities a scenario's "needs" may name that this runner has (none: the Python SDK has
# no ResolveStep, "resolve")
HAS = frozenset()


def env(name):
    v = os.environ.get(name)
    if not v:
        raise SystemExit(f"conformance.py: {name} is not set (run through client-lib/conformance/run)")
    return v


class Scenario:
    def __init__(self, sc, tmp):
        self.sc = sc
        addr = {"leader": "IDEM_ADDRESS", "standby": "IDEM_STANDBY_ADDRESS",
                "stoppable": "IDEM_STOPPABLE_ADDRESS", "lossy": "IDEM_LOSSY_ADDRESS"}[sc.get("client", "leader")]
        self.journal = None
        if sc.get("journal"):
            self.journal = os.path.join(tmp, f"journal-py-{sc['name']}-{os.getpid()}.log")
            if os.path.exists(self.journal):
                os.unlink(self.journal)
        self.client = idem_client.connect(env(addr), timeout=2.0, journal_path=self.journal)
        self.gid = self.client.begin_saga(timeout=10.0).global_id
        self.background = {}
        self.counted = {}

    def key(self, c):
        return StepKey(self.gid, c.get("service", "conformance"), c["step"], c.get("phase", "forward"))

    def run(self, c):
        act = c.get("action", {})
        got = {"ran": False}

        def action(ctx):
            got["ran"] = True
            if act.get("sleep_ms"):
                time.sleep(act["sleep_ms"] / 1000.0)
            return Output(act.get("outcome", "succeeded"), act.get("code", 0),
                          act.get("body", "").encode())

        opts = c.get("options", {})
        try:
            rep = self.client.run_step(self.key(c), action, c.get("fingerprint", "").encode(),
                                       timeout=opts.get("deadline_ms", 10000) / 1000.0,
                                       no_wait=bool(opts.get("no_wait")),
                                       lease_ms=opts.get("lease_ms", 0))
            got.update(ok=True, replayed=rep.replayed, takeover=rep.takeover,
                       unguarded=rep.unguarded, journaled=rep.journaled, decision=rep.decision,
                       attempt=rep.attempt)
            if rep.result is not None:
                got.update(outcome=rep.result.outcome, code=rep.result.code,
                           body=rep.result.body.decode(errors="replace"))
        except IdemError as e:
            got.update(ok=False, error=e.code, reason=e.reason, detail=e.detail, hint=e.hint,
                       outcome_unknown=bool(e.outcome_unknown))
            if e.report is not None:
                got.update(attempt=e.report.attempt, takeover=e.report.takeover)
        return got

    def count_calls(self, method, code):
        """idem_rpc_calls_total of METHOD (Coordinator/METHOD when it names no service) with code
        CODE ("any": every code summed) on the leader's /metrics, less what this scenario's
        previous count of the method and code saw."""
        text = urllib.request.urlopen(f"http://{env('IDEM_METRICS_ADDRESS')}/metrics",
                                      timeout=5).read().decode()
        full = method if "/" in method else f"Coordinator/{method}"
        want = f'idem_rpc_calls_total{{method="{full}",code="'
        if code != "any":
            want += f'{code}"}} '
        lines = [l for l in text.splitlines() if l.startswith(want)]
        if not lines:
            return {"ok": False, "error": f"no {want} on the leader's /metrics"}
        total = sum(int(float(l[l.index("} ") + 2:])) for l in lines)
        counted = f"{method} {code}"
        count = total - self.counted.get(counted, 0)
        self.counted[counted] = total
        return {"ok": True, "count": count}

    def call(self, c):
        kind = c["call"]
        if kind == "run" and c.get("background"):
            box = {}
            t = threading.Thread(target=lambda: box.update(self.run(c)))
            t.start()
            self.background[c["background"]] = (t, box)
            return None
        if kind == "run":
            return self.run(c)
        if kind == "join":
            t, box = self.background.pop(c["background"])
            t.join()
            return box
        try:
            if kind == "begin":
                b = self.client.begin_step(self.key(c), c.get("fingerprint", "").encode(),
                                           lease_ms=c.get("lease_ms", 0))
                return {"ok": True, "decision": b.decision, "attempt": b.attempt}
            if kind == "complete":
                r = c.get("result", {})
                self.client.complete_step(self.key(c), c["attempt"], r.get("outcome", "succeeded"),
                                          r.get("code", 0), r.get("body", "").encode())
                return {"ok": True}
            if kind == "policy_set":
                # as given (absent = 0): 0 is the SDK's to fill with the built-in default
                p = self.client.set_policy(c["service"], c["operation"], c["failure_mode"],
                                           retention_s=c.get("retention_s", 0),
                                           lease_ms=c.get("lease_ms", 0),
                                           key_retention_s=c.get("key_retention_s", 0))
                return {"ok": True, "retention_s": p.retention_s, "lease_ms": p.lease_ms,
                        "key_retention_s": p.key_retention_s}
            if kind == "sleep":
                time.sleep(c.get("ms", 0) / 1000.0)
                return {"ok": True}
            if kind == "count_calls":
                return self.count_calls(c["method"], c.get("code", "OK"))
            if kind == "policy_prefetch":
                self.client.prefetch_policy(c["service"], c["operation"])
                return {"ok": True}
            if kind == "faults":  # the lossy front's rules: a new file renamed over the old
                path = env("IDEM_CONFORMANCE_FAULTS")
                with open(path + ".new", "w") as f:
                    json.dump({"rules": c.get("rules", [])}, f)
                os.replace(path + ".new", path)
                return {"ok": True}
            if kind == "stop_coordinator":
                subprocess.run(["sh", "-c", env("IDEM_CONFORMANCE_STOP")], check=True)
                return {"ok": True}
            if kind == "journal_lines":
                n = 0
                if self.journal and os.path.exists(self.journal):
                    with open(self.journal) as f:
                        n = sum(1 for line in f if line.strip())
                return {"ok": True, "count": n}
        except IdemError as e:
            return {"ok": False, "error": e.code, "reason": e.reason, "detail": e.detail,
                    "hint": e.hint, "outcome_unknown": bool(e.outcome_unknown)}
        raise ValueError(f"unknown call {kind!r}")


def differences(expect, got):
    out = []
    for k, want in expect.items():
        have = bool(got.get(k)) if k == "outcome_unknown" else got.get(k)
        if k == "error":
            if have not in (want if isinstance(want, list) else [want]):
                out.append(f"error {have!r}, expected one of {want}" if isinstance(want, list)
                           else f"error {have!r}, expected {want!r}")
            elif have == "STEP_UNKNOWN" and got.get("outcome_unknown") is not True:
                out.append("error STEP_UNKNOWN without outcome_unknown")  # errors.py, api.md §20
        elif have != want:
            out.append(f"{k} {have!r}, expected {want!r}" +
                       (f" (error {got.get('error')} {got.get('reason')})" if k != "error" and
                        got.get("error") else ""))
    return out


def run_scenario(sc, tmp):
    s = Scenario(sc, tmp)
    try:
        for i, c in enumerate(sc["calls"]):
            got = s.call(c)
            if got is None:
                continue
            diff = differences(c.get("expect", {}), got)
            if diff:
                return f"call {i + 1} ({c['call']}): " + "; ".join(diff)
        return None
    finally:
        for t, _ in s.background.values():
            t.join()
        s.client.close()


def main(names):
    data = json.loads((Path(env("IDEM_CONFORMANCE_DIR")) / "scenarios.json").read_text())
    tmp = env("IDEM_CONFORMANCE_TMP")
    scenarios = [s for s in data["scenarios"] if not names or s["name"] in names]
    unknown = set(names) - {s["name"] for s in data["scenarios"]}
    if unknown:
        print(f"conformance.py: no such scenario: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    failed = 0
    skipped = 0
    for sc in scenarios:
        need = next((n for n in sc.get("needs", []) if n not in HAS), None)
        if need is not None:
            skipped += 1
            print(f"skip {sc['name']}: needs {need}", flush=True)
            continue
        try:
            why = run_scenario(sc, tmp)
        except Exception as e:  # noqa: BLE001 (reported as the scenario's failure)
            why = f"{type(e).__name__}: {e}"
        if why:
            failed += 1
            print(f"not ok {sc['name']}: {why}", flush=True)
        else:
            print(f"ok {sc['name']}", flush=True)
    print(f"conformance.py: {len(scenarios) - failed - skipped} passed, {failed} failed, "
          f"{skipped} skipped", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
