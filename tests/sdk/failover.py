#!/usr/bin/python3
"""tests/sdk/failover.py — the SDKs' failover test: kill -9 of the leader while three SDK clients
(Go, Node, Python) run steps; each follows the failover to the standby; the participants' ledgers
count 0 duplicate executions.

Starts on loopback (the approach of client-lib/conformance/run): a one-member etcd, a leader and a
standby coordinator elected through it on a database of their own (created beside
IDEM_TEST_PG_URL's and dropped at the end: the leader raises a fence in it). The three clients
(client-lib/go/cmd/idem-failover-client, client-lib/node/test/failover-client.js,
client-lib/python/tests/failover_client.py) start together, each with LEADER,STANDBY; once every
ledger shows some executed steps the leader is killed with SIGKILL (by PID); the clients then
finish within a deadline. Asserts:
  - each key of each client was executed at most once (ledger lines "KEY ATTEMPT"), and exactly
    once since every key settled, and the client's own count of runs that executed agrees;
  - every client settled every run (unsettled 0, runs = steps x repeat) and the only errors it met
    on the way are what the SDKs' contract allows during a failover, each then run again:
    UNAVAILABLE (no node could answer yet), DEADLINE_EXCEEDED (the run's or a call's deadline
    passed while no leader was serving) and ABORTED (in-progress: a BeginStep whose PROCEED
    answer was lost with the leader keeps the key until its lease expires; the retry takes it
    over — the action had not run);
  - each client executed steps after the kill (its ledger grew), so it reached the new leader;
  - the standby became the leader (idemctl status, GetStatus) and the old leader is dead.
Prints the counts. Bounded: the whole test stays under 90 s.

Environment: IDEM_TEST_PG_URL, IDEM_COORDINATOR_BIN, IDEM_IDEMCTL_BIN, IDEM_GO_BUILD (the Go
build folder, as client-lib/go/tests.cmake's), IDEM_SOURCE_DIR. Node's node_modules must be
installed (client-lib/node/deps.sh); the package is built here (npm run build, under its lock).
"""
import collections
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(os.environ.get("IDEM_SOURCE_DIR") or Path(__file__).resolve().parents[2])
STEPS, REPEAT = 600, 3           # keys per client, runs of each
KILL_AFTER = 30                  # ledger lines each client shows before the kill
TEST_DEADLINE_S = 85
ALLOWED = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "ABORTED"}
T0 = time.monotonic()


def left():
    return TEST_DEADLINE_S - (time.monotonic() - T0)


def need(name):
    v = os.environ.get(name)
    if not v:
        sys.exit(f"failover: {name} must be set")
    return v


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def wait_until(cond, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def ledger_lines(path):
    try:
        with open(path, encoding="utf-8") as f:
            return [ln.split() for ln in f.read().splitlines() if ln]
    except FileNotFoundError:
        return []


def check_ledger(name, lines, prefix, steps):
    """0 duplicates: each key at most once; every key once (all settled). Returns problems."""
    count = collections.Counter(k for k, _ in lines)
    dups = {k: n for k, n in count.items() if n > 1}
    problems = []
    if dups:
        problems.append(f"{name}: {len(dups)} key(s) executed more than once, e.g. "
                        f"{sorted(dups.items())[:5]}")
    want = {f"{prefix}-{i}" for i in range(steps)}
    missing, stray = want - set(count), set(count) - want
    if missing:
        problems.append(f"{name}: {len(missing)} key(s) never executed, e.g. {sorted(missing)[:5]}")
    if stray:
        problems.append(f"{name}: ledger holds keys it never ran: {sorted(stray)[:5]}")
    return problems


def main():
    base = need("IDEM_TEST_PG_URL")
    coord = need("IDEM_COORDINATOR_BIN")
    idemctl = need("IDEM_IDEMCTL_BIN")
    go_build = need("IDEM_GO_BUILD")
    if "?" in base:
        sys.exit("failover: IDEM_TEST_PG_URL with parameters is not supported")
    work = Path(tempfile.mkdtemp(prefix="idem-sdk-failover."))
    db = f"idem_sdkfo_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    procs = []
    created = False
    try:
        # the clients, built first (nothing runs yet)
        go_bin = Path(go_build) / "bin" / "idem-failover-client"
        subprocess.run([str(ROOT / "client-lib/go/go.sh"), go_build, "build", "-o", str(go_bin),
                        "idem.dev/client/cmd/idem-failover-client"], check=True, timeout=300)
        node_dir = ROOT / "client-lib/node"
        if not (node_dir / "node_modules/@grpc/grpc-js").is_dir():
            sys.exit("failover: client-lib/node/node_modules is missing: run client-lib/node/deps.sh")
        subprocess.run(["flock", ".build.lock", "npm", "run", "--silent", "build"], cwd=node_dir,
                       check=True, timeout=300)
        t_start = time.monotonic()  # the 90 s bound counts from here (builds are cached in CI)
        global T0
        T0 = t_start

        subprocess.run(["psql", "-qX", base, "-c", f"create database {db}"], check=True,
                       stdout=subprocess.DEVNULL)
        created = True
        url = base.rsplit("/", 1)[0] + "/" + db

        ep, pp = free_port(), free_port()
        etcd = subprocess.Popen(
            ["etcd", "--name", "fo", "--data-dir", str(work / "etcd"),
             "--listen-client-urls", f"http://127.0.0.1:{ep}",
             "--advertise-client-urls", f"http://127.0.0.1:{ep}",
             "--listen-peer-urls", f"http://127.0.0.1:{pp}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{pp}",
             "--initial-cluster", f"fo=http://127.0.0.1:{pp}", "--log-level", "warn"],
            stdout=open(work / "etcd.log", "w"), stderr=subprocess.STDOUT)
        procs.append(etcd)

        def etcd_up():
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{ep}/health", timeout=1).status == 200
            except OSError:
                return False
        wait_until(etcd_up, 15, "etcd")

        def start_node(name, log):
            port = free_port()
            p = subprocess.Popen(
                [coord, "--listen", f"127.0.0.1:{port}", "--pg", url, "--etcd", f"http://127.0.0.1:{ep}",
                 "--node-id", name, "--election-prefix", f"/idem/sdk-failover/{db}",
                 "--election-ttl", "2", "--reaper-interval", "0", "--workers", "4"],
                stdout=subprocess.DEVNULL, stderr=open(work / log, "w"))
            procs.append(p)
            return p, port

        def log_has(log, pat):
            return pat in (work / log).read_text(errors="replace")
        leader, lport = start_node("fo-leader", "leader.log")
        wait_until(lambda: port_open(lport) and log_has("leader.log", "elected leader"), 15, "the leader")
        standby, sport = start_node("fo-standby", "standby.log")
        wait_until(lambda: port_open(sport) and log_has("standby.log", "listening"), 15, "the standby")

        addrs = f"127.0.0.1:{lport},127.0.0.1:{sport}"
        tenant = "sdkfailover"
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        clients = {}
        cmds = {
            "go": [str(go_bin)],
            "node": ["node", str(node_dir / "test/failover-client.js")],
            "python": ["/usr/bin/python3", str(ROOT / "client-lib/python/tests/failover_client.py")],
        }
        duration = max(10, int(left()) - 10)
        for name, cmd in cmds.items():
            prefix = f"{name}-{uuid.uuid4().hex[:8]}"
            ledger = work / f"{name}.ledger"
            p = subprocess.Popen(
                cmd + ["--addresses", addrs, "--tenant", tenant, "--ledger", str(ledger),
                       "--prefix", prefix, "--steps", str(STEPS), "--repeat", str(REPEAT),
                       "--duration", str(duration)],
                stdout=subprocess.PIPE, stderr=open(work / f"{name}.err", "w"), env=env, text=True)
            procs.append(p)
            clients[name] = (p, prefix, ledger)

        # the kill: once every client has executed some steps, and none has finished
        def all_started():
            for name, (p, _, ledger) in clients.items():
                if p.poll() is not None:
                    raise AssertionError(f"{name} client exited before the kill (status {p.returncode}): "
                                         f"{(work / (name + '.err')).read_text()[-2000:]}")
                if len(ledger_lines(ledger)) < KILL_AFTER:
                    return False
            return True
        wait_until(all_started, 30, f"{KILL_AFTER} executed steps in every client's ledger")
        at_kill = {name: len(ledger_lines(ledger)) for name, (_, _, ledger) in clients.items()}
        os.kill(leader.pid, signal.SIGKILL)
        leader.wait(timeout=5)
        t_kill = time.monotonic()
        print(f"failover: killed the leader (pid {leader.pid}); ledger lines then: {at_kill}", flush=True)

        summaries = {}
        for name, (p, _, _) in clients.items():
            try:
                out, _ = p.communicate(timeout=max(1, left()))
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{name} client did not finish within the test's deadline")
            if p.returncode != 0:
                raise AssertionError(f"{name} client failed (status {p.returncode}): "
                                     f"{(work / (name + '.err')).read_text()[-2000:]}")
            summaries[name] = json.loads(out.strip().splitlines()[-1])
        t_done = time.monotonic()

        problems = []
        for name, (_, prefix, ledger) in clients.items():
            s, lines = summaries[name], ledger_lines(ledger)
            print(f"failover: {name}: {json.dumps(s)}; ledger {len(lines)} lines "
                  f"({len(lines) - at_kill[name]} after the kill)", flush=True)
            problems += check_ledger(name, lines, prefix, STEPS)
            if s["unsettled"] != 0 or s["runs"] != STEPS * REPEAT:
                problems.append(f"{name}: {s['unsettled']} run(s) unsettled, {s['runs']} of "
                                f"{STEPS * REPEAT} settled")
            bad = {c: n for c, n in s["errors"].items() if c not in ALLOWED}
            if bad:
                problems.append(f"{name}: errors outside the failover contract: {bad}")
            if s["ran"] != len(lines):
                problems.append(f"{name}: the client counts {s['ran']} executions, its ledger {len(lines)}")
            if len(lines) <= at_kill[name]:
                problems.append(f"{name}: executed nothing after the kill (never reached the new leader)")
            if s["replayed"] == 0:
                problems.append(f"{name}: no replay seen (each key runs {REPEAT} times)")

        st = subprocess.run([idemctl, "--addr", f"127.0.0.1:{sport}", "--json", "status"],
                            capture_output=True, text=True, timeout=10)
        print(f"failover: standby status: {st.stdout.strip()}", flush=True)
        try:
            status = json.loads(st.stdout)
        except ValueError:
            status = {}
        if status.get("leader") is not True or status.get("node_id") != "fo-standby":
            problems.append(f"the standby is not the leader after the kill: {st.stdout.strip()} {st.stderr.strip()}")
        if leader.poll() is None:
            problems.append("the old leader is still running")

        total = dups = 0
        for c in clients.values():
            keys = [k for k, _ in ledger_lines(c[2])]
            total, dups = total + len(keys), dups + len(keys) - len(set(keys))
        print(f"failover: {len(clients)} clients, {total} executions, {dups} duplicate(s); "
              f"clients finished {t_done - t_kill:.1f}s after the kill, {t_done - T0:.1f}s in all",
              flush=True)
        if problems:
            for pr in problems:
                print("FAIL: " + pr, flush=True)
            for log in ("leader.log", "standby.log"):
                print(f"--- {log}\n" + (work / log).read_text(errors="replace")[-1500:], flush=True)
            print("0 passed, 1 failed")
            return 1
        print("1 passed, 0 failed")
        return 0
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if created:
            subprocess.run(["psql", "-qX", base, "-c", f"drop database if exists {db} with (force)"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print(f"FAIL: {e}\n0 passed, 1 failed", flush=True)
        sys.exit(1)
