#!/usr/bin/python3
"""failover_client.py — runs steps through the Python SDK's step helper (client.run_step) for the
failover test (tests/sdk/failover.py) and the per-SDK figures (bench/sdk-bench). The same command
line as client-lib/go/cmd/idem-failover-client and client-lib/node/test/failover-client.js:

  failover_client.py --addresses LEADER,STANDBY --tenant T --ledger FILE --prefix P
      --steps N --duration S [--repeat 3] [--workers 4] [--lease-ms 3000] [--bench]

Failover mode: keys P-0 … P-(N-1), each run --repeat times (rounds in order, so that later rounds
replay); --workers threads take the runs in turn. The action appends "KEY ATTEMPT" to the ledger
and fsyncs it before returning, so the ledger counts every execution. A run that ends in an error
is counted (errors by code) and run again until it settles or the --duration bound passes (then
it is "unsettled").

Bench mode (--bench): --workers (16 unless given) run a new key each, with an action that does
nothing, for --duration seconds; the ledger is not written.

Prints one JSON line: sdk, mode, runs, ran, replayed, takeovers, errors {code: n}, unsettled,
elapsed_ms, and in bench mode pairs_per_s, p50_ms, p99_ms. Exits 0 when the summary was printed
(the caller judges it), 2 on bad arguments.
"""
import argparse
import itertools
import json
import os
import sys
import threading
import time
from pathlib import Path

PY_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PY_DIR))
if not (PY_DIR / "idem_client" / "_gen" / "coordinator_pb2.py").exists():
    import gen_proto  # noqa: E402
    gen_proto.generate()
import idem_client  # noqa: E402
from idem_client import IdemError, Output, StepKey  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--addresses", required=True)
    p.add_argument("--tenant", required=True)
    p.add_argument("--ledger", default="")
    p.add_argument("--prefix", required=True)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--duration", type=float, default=30.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--lease-ms", type=int, default=3000)
    p.add_argument("--bench", action="store_true")
    a = p.parse_args()
    if not a.bench and (not a.ledger or a.steps <= 0 or a.repeat <= 0):
        p.error("failover mode needs --ledger, --steps > 0 and --repeat > 0")
    if a.duration <= 0:
        p.error("--duration must be > 0")
    workers = a.workers if a.workers > 0 else (16 if a.bench else 4)

    client = idem_client.connect(a.addresses, tenant=a.tenant)
    ledger = None if a.bench else os.open(a.ledger, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    lock = threading.Lock()
    s = {"sdk": "python", "mode": "bench" if a.bench else "failover", "runs": 0, "ran": 0,
         "replayed": 0, "takeovers": 0, "errors": {}, "unsettled": 0}
    lat = []
    counter = itertools.count()
    start = time.monotonic()
    end = start + a.duration
    total = a.steps * a.repeat

    def add(name, n=1):
        with lock:
            s[name] += n

    def worker():
        mine = []
        while True:
            n = next(counter)
            if a.bench:
                if time.monotonic() >= end:
                    break
                gid = f"{a.prefix}-{n}"
            else:
                if n >= total:
                    break
                gid = f"{a.prefix}-{n % a.steps}"
            key = StepKey(gid, "failover", "step")

            def action(ctx, gid=gid):
                if ledger is not None:
                    with lock:
                        os.write(ledger, f"{gid} {ctx.attempt}\n".encode())
                        os.fsync(ledger)
                return Output("succeeded", 200, gid.encode())

            while True:
                left = end - time.monotonic()
                if left <= 0:
                    add("unsettled")
                    break
                t0 = time.monotonic()
                try:
                    rep = client.run_step(key, action, timeout=10.0 if a.bench else min(10.0, left), lease_ms=a.lease_ms)
                except IdemError as e:
                    with lock:
                        s["errors"][e.code] = s["errors"].get(e.code, 0) + 1
                    if a.bench:
                        break
                    continue
                mine.append(time.monotonic() - t0)
                add("runs")
                add("ran", int(rep.ran))
                add("replayed", int(rep.replayed))
                add("takeovers", int(rep.takeover))
                break
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    s["elapsed_ms"] = int(elapsed * 1000)
    if a.bench and lat:
        lat.sort()
        s["pairs_per_s"] = s["runs"] / elapsed
        s["p50_ms"] = lat[int(0.50 * (len(lat) - 1))] * 1000
        s["p99_ms"] = lat[int(0.99 * (len(lat) - 1))] * 1000
    client.close()
    print(json.dumps(s), flush=True)


if __name__ == "__main__":
    main()
