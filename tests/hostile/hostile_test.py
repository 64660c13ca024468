#!/usr/bin/python3
"""hostile_test.py — hostile input that once hurt the server, kept refused (docs/api.md §16).

Starts a real idem-coordinator on loopback against $IDEM_TEST_PG_URL and checks:
  bomb        a 200 MiB gzip request is refused (UNIMPLEMENTED, idem-reason unimplemented)
              before it is inflated: the server's RSS grows by less than 20 MB; deflate too
  big replies 1,000 steps of 64 KiB: ListSteps pages stay under 3 MiB and cover every step once
              (grpcio at its default 4 MiB limit); idemctl lists them all; a 70-step saga of
              64 KiB bodies through GetSaga pages and `idemctl saga`
  no readers  clients with a zero receive window asking for megabyte pages: the server buffers
              at most its reply budget (RPC_REPLY_BUFFER_MAX) and refuses the rest, and keeps
              answering everyone else
  metrics     1,000 idle and trickling connections on the /metrics port: scrapes still answer;
              500 connections pipelining GET /metrics without reading: scrapes stay fast
  wire        a `key` sent twice, metadata of 9 and 40 KiB (RESOURCE_EXHAUSTED with idem-reason),
              an upper-case IDEM-TENANT, --require-tenant, a health check
              naming a service with control bytes, a forged ListAudit token with 30 digits
Run by ctest (label integration) with the variables scripts/test exports.
"""

import concurrent.futures
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop"))
from h2raw import RawH2  # noqa: E402
from interop_test import Mismatch, expect, free_port, generate_messages, read  # noqa: E402

MiB = 1 << 20
BODY = 64 * 1024
ASAN = "ASAN_OPTIONS" in os.environ  # memory figures of an ASan build include its quarantine
REPLY_BUFFER_MAX = 128 * MiB  # server/rpc/rpc_internal.h RPC_REPLY_BUFFER_MAX
COORD = "/idem.v1.Coordinator/"
ADMIN = "/idem.v1.Admin/"


def rss_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise Mismatch(f"no VmRSS for {pid}")


def wait_for(what, cond, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise Mismatch(f"{what}: not within {seconds}s")


class Server:
    def __init__(self, binary, pg_url, tmp, *flags):
        self.port, self.metrics_port = free_port(), free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.log = os.path.join(tmp, f"server-{self.port}.log")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [binary, "--listen", self.addr, "--pg", pg_url,
                 "--metrics", f"127.0.0.1:{self.metrics_port}", *flags],
                stdout=log, stderr=subprocess.STDOUT)
        self.channel = grpc.insecure_channel(self.addr)

    def stub(self, path, req, resp):
        return self.channel.unary_unary(path, request_serializer=req.SerializeToString,
                                        response_deserializer=resp.FromString)

    def raw(self, path):
        return self.channel.unary_unary(path, request_serializer=lambda b: b,
                                        response_deserializer=lambda b: b)

    def wait_serving(self, pb):
        status = self.stub(ADMIN + "GetStatus", pb.GetStatusRequest, pb.GetStatusResponse)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Mismatch(f"server exited with {self.proc.returncode}:\n{read(self.log)}")
            try:
                status(pb.GetStatusRequest(), timeout=1.0, wait_for_ready=True)
                return
            except grpc.RpcError:
                time.sleep(0.05)
        raise Mismatch(f"server not serving within 30s:\n{read(self.log)}")

    def stop(self):
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def code_of(fn):
    try:
        fn()
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as e:
        return e.code(), e.details() or ""


def refusal_of(fn):
    """(code, details, idem-reason) of a call that fails; the reason is "" when none came."""
    try:
        fn()
        return grpc.StatusCode.OK, "", ""
    except grpc.RpcError as e:
        reason = dict(e.trailing_metadata() or ()).get("idem-reason", "")
        return e.code(), e.details() or "", reason


# --- 1. the compression bomb -------------------------------------------------------------

def check_bomb(srv, pb):
    key = pb.StepKey(global_id="g", service="s", operation="o", phase=pb.PHASE_FORWARD)
    req = pb.BeginStepRequest(key=key).SerializeToString()
    req += b"\x7a\x80\x80\x80\x64" + b"\0" * (200 * MiB)  # unknown field 15, 200 MiB of zeros
    ch = grpc.insecure_channel(srv.addr, options=[("grpc.max_send_message_length", -1)])
    try:
        f = ch.unary_unary(COORD + "BeginStep", request_serializer=lambda b: b,
                           response_deserializer=lambda b: b)
        before = rss_mb(srv.proc.pid)
        code, msg, reason = refusal_of(lambda: f(req, compression=grpc.Compression.Gzip, timeout=60,
                                                 metadata=(("idem-tenant", "bomb"),)))
        grown = rss_mb(srv.proc.pid) - before
        # every compression algorithm the client may pick is refused the same way (§16, §5)
        for alg in (grpc.Compression.Deflate, grpc.Compression.Gzip):
            # compressible (gRPC core sends a message that does not shrink uncompressed)
            small = pb.BeginStepRequest(key=key).SerializeToString() + b"\x7a\x80\x80\x04" + \
                b"\0" * 65536
            c2, m2, r2 = refusal_of(lambda: f(small, compression=alg, timeout=10,
                                              metadata=(("idem-tenant", "bomb"),)))
            print(f"  compressed ({alg.name}): {c2.name} ({m2}), idem-reason {r2!r}")
            expect(c2 == grpc.StatusCode.UNIMPLEMENTED and r2 == "unimplemented"
                   and "compressed" in m2, f"compressed {alg.name}: {c2.name} {m2!r} {r2!r}")
    finally:
        ch.close()
    print(f"  bomb: {code.name} ({msg}), idem-reason {reason!r}; server RSS grew {grown:.1f} MB")
    expect(code == grpc.StatusCode.UNIMPLEMENTED, f"bomb: expected UNIMPLEMENTED, got {code.name}")
    expect(reason == "unimplemented", f"bomb: idem-reason {reason!r}, expected 'unimplemented'")
    expect(grown < 20, f"bomb: the server's RSS grew {grown:.1f} MB (limit 20)")


# --- 2. big replies ----------------------------------------------------------------------

def write_steps(srv, pb, tenant, keys, body):
    md = (("idem-tenant", tenant),)
    begin = srv.stub(COORD + "BeginStep", pb.BeginStepRequest, pb.BeginStepResponse)
    complete = srv.stub(COORD + "CompleteStep", pb.CompleteStepRequest, pb.CompleteStepResponse)

    def one(k):
        r = begin(pb.BeginStepRequest(key=k), metadata=md, timeout=30)
        expect(r.decision == pb.DECISION_PROCEED, f"BeginStep {k}: {r}")
        complete(pb.CompleteStepRequest(key=k, attempt=r.attempt, outcome=pb.OUTCOME_SUCCEEDED,
                                        code=200, body=body), metadata=md, timeout=30)

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(one, keys))


def idemctl_json(srv, tenant, *args):
    out = subprocess.run([os.environ["IDEMCTL_BIN"], "--addr", srv.addr, "--tenant", tenant,
                          "--json", "--deadline-ms", "30000", *args],
                         capture_output=True, text=True, timeout=120)
    expect(out.returncode == 0, f"idemctl {' '.join(args)}: exit {out.returncode}: {out.stderr}")
    return out.stdout


def check_big_replies(srv, pb, tenant):
    body = b"\xab" * BODY
    keys = [pb.StepKey(global_id=f"big-{i:04d}", service="bigsvc", operation="op",
                       phase=pb.PHASE_FORWARD) for i in range(1000)]
    t0 = time.monotonic()
    write_steps(srv, pb, tenant, keys, body)
    print(f"  wrote 1,000 steps of 64 KiB in {time.monotonic() - t0:.1f}s")

    md = (("idem-tenant", tenant),)
    raw = srv.raw(ADMIN + "ListSteps")  # default grpcio limits: 4 MiB received
    seen, token, pages, biggest = set(), "", 0, 0
    while True:
        req = pb.ListStepsRequest(service="bigsvc", page_size=1000, page_token=token)
        data = raw(req.SerializeToString(), metadata=md, timeout=30)
        biggest = max(biggest, len(data))
        page = pb.ListStepsResponse.FromString(data)
        pages += 1
        for s in page.steps:
            expect(s.key.global_id not in seen, f"ListSteps: {s.key.global_id} listed twice")
            expect(s.result.body == body, f"ListSteps: {s.key.global_id} body differs")
            seen.add(s.key.global_id)
        token = page.next_page_token
        if not token:
            break
        expect(pages < 100, "ListSteps: more than 100 pages")
    print(f"  ListSteps page_size=1000: {pages} pages, largest reply {biggest} bytes")
    expect(len(seen) == 1000, f"ListSteps: {len(seen)} steps listed, expected 1000")
    expect(biggest <= 3 * MiB, f"ListSteps: a reply of {biggest} bytes (limit 3 MiB)")
    expect(pages >= 20, f"ListSteps: {pages} pages for 64 MB of bodies")

    out = idemctl_json(srv, tenant, "steps", "--service", "bigsvc", "--limit", "0")
    n = out.count('"global_id"')
    print(f"  idemctl steps --service bigsvc --limit 0: exit 0, {n} steps")
    expect(n == 1000, f"idemctl steps: {n} steps, expected 1000")

    gid = f"bigsaga-{uuid.uuid4().hex[:8]}"
    keys = [pb.StepKey(global_id=gid, service="bigsvc", operation=f"op{i:02d}",
                       phase=pb.PHASE_FORWARD) for i in range(70)]
    write_steps(srv, pb, tenant, keys, body)
    get = srv.raw(COORD + "GetSaga")
    ops, token, pages = [], "", 0
    while True:
        data = get(pb.GetSagaRequest(global_id=gid, page_token=token).SerializeToString(),
                   metadata=md, timeout=30)
        expect(len(data) <= 3 * MiB, f"GetSaga: a reply of {len(data)} bytes")
        page = pb.GetSagaResponse.FromString(data)
        expect(page.global_id == gid, f"GetSaga page {pages}: global_id {page.global_id}")
        ops += [s.key.operation for s in page.steps]
        pages += 1
        token = page.next_page_token
        if not token:
            break
        expect(pages < 20, "GetSaga: more than 20 pages")
    print(f"  GetSaga of 70 x 64 KiB: {pages} pages")
    expect(sorted(ops) == sorted(k.operation for k in keys) and len(set(ops)) == 70,
           f"GetSaga: {len(ops)} steps over the pages, {len(set(ops))} distinct")
    expect(pages >= 2, "GetSaga: one page for 4.5 MB")
    out = json.loads(idemctl_json(srv, tenant, "saga", gid))
    steps = out.get("steps", []) if isinstance(out, dict) else []
    print(f"  idemctl saga: exit 0, {len(steps)} steps")
    expect(len(steps) == 70, f"idemctl saga: {len(steps)} steps, expected 70")


# --- 3. clients that do not read -----------------------------------------------------------

def check_no_readers(srv, pb, tenant):
    req = pb.ListStepsRequest(service="bigsvc", page_size=1000).SerializeToString()
    md = [("idem-tenant", tenant)]
    before = rss_mb(srv.proc.pid)
    conns = [RawH2(srv.port, window=0) for _ in range(int(os.environ.get("HOSTILE_CONNS", "5")))]
    try:
        sids = [(c, c.call(ADMIN + "ListSteps", req, md)) for c in conns for _ in range(14)]
        asked = len(sids)
        # each page is ~3 MiB: past the budget the server answers RESOURCE_EXHAUSTED (no DATA, so
        # it arrives); the calls it did answer wait for a window that never opens
        budget_calls = REPLY_BUFFER_MAX // (3 * MiB)

        def refused():
            for c in conns:
                c.pump(0.01)
            return sum(1 for c, s in sids if c.status.get(s) == 8)

        # 70 pages of ~3 MiB read from Postgres: slow on a loaded machine, hence the long bound
        need = asked - budget_calls - 8
        try:
            wait_for("refusals of the replies past the budget", lambda: refused() >= need, 240)
        except Mismatch as m:  # what had come by then, for whoever reads the failure
            codes = {}
            for c, s in sids:
                k = c.status.get(s, "none yet")
                codes[k] = codes.get(k, 0) + 1
            raise Mismatch(f"{m}: {refused()} of {asked} pages refused, {need} needed; "
                           f"grpc-status of the {asked} calls: {codes}") from None
        time.sleep(0.5)  # let the last accepted replies settle in memory before measuring
        grown = rss_mb(srv.proc.pid) - before
        n_refused = refused()
        msgs = {c.message.get(s, "") for c, s in sids if c.status.get(s) == 8}
        print(f"  no readers: {asked} pages asked, {n_refused} refused ({sorted(msgs)[:1]}); "
              f"RSS grew {grown:.0f} MB (budget {REPLY_BUFFER_MAX // MiB} MiB)")
        expect(any("wait for clients to read" in m for m in msgs), f"refusal message: {msgs}")
        # the bound (README "Limits"): the replies held, at most the budget, plus what the
        # workers allocated while building pages (rows, records, encodings), which the allocator
        # keeps for reuse; asking twice as many pages measured the same (230 and 246 MB)
        if not ASAN:
            expect(grown < REPLY_BUFFER_MAX / MiB + 200, f"no readers: RSS grew {grown:.0f} MB")
        # everyone else is still served: a small read, and a step
        lookup = srv.stub(COORD + "LookupStep", pb.LookupStepRequest, pb.StepRecord)
        rec = lookup(pb.LookupStepRequest(key=pb.StepKey(global_id="big-0000", service="bigsvc",
                                                         operation="op", phase=pb.PHASE_FORWARD)),
                     metadata=md, timeout=10)
        expect(rec.state == pb.STEP_STATE_SUCCEEDED, f"LookupStep during the flood: {rec.state}")
    finally:
        for c in conns:
            c.close()
    # once those clients are gone their replies are freed: a page is served again
    raw = srv.raw(ADMIN + "ListSteps")

    def page_served():
        code, _ = code_of(lambda: raw(req, metadata=md, timeout=30))
        return code == grpc.StatusCode.OK

    wait_for("a page served after the non-readers left", page_served, 60)


# --- 4. the metrics port under idle and trickling connections ------------------------------

def scrape(port, timeout=3):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
        return r.status, r.read()


def check_metrics(srv):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    socks = []
    try:
        for i in range(1000):
            s = socket.create_connection(("127.0.0.1", srv.metrics_port), timeout=5)
            socks.append(s)
        line = b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
        ok, t_end, k = 0, time.monotonic() + 6, 0
        while time.monotonic() < t_end:
            for s in socks[500:]:  # half of them trickle one byte at a time
                try:
                    s.send(line[k % len(line):k % len(line) + 1])
                except OSError:
                    pass
            k += 1
            t = time.monotonic()
            status, body = scrape(srv.metrics_port)
            expect(status == 200 and b"idem_" in body, f"scrape: {status}")
            ok += 1
            time.sleep(max(0.0, 1.0 - (time.monotonic() - t)))
        print(f"  metrics: {ok} scrapes answered with 1,000 idle and trickling connections open")
        expect(ok >= 4, f"metrics: only {ok} scrapes")
    finally:
        for s in socks:
            s.close()


def check_metrics_pipelined(srv):
    """500 connections each pipeline 64 KiB of GET /metrics and never read: what one
    connection may have answered and queued is bounded, so a scrape stays fast."""
    req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    socks = []
    try:
        for _ in range(500):
            s = socket.create_connection(("127.0.0.1", srv.metrics_port), timeout=5)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            s.setblocking(False)
            sent = 0
            while sent < 64 * 1024:
                try:
                    sent += s.send(req * 64)
                except (BlockingIOError, OSError):
                    break
            socks.append(s)
        times = []
        for i in range(8):
            t = time.monotonic()
            # the first waits behind 500 renderings: on a loaded machine (CI, ASan) that can
            # take seconds; the later scrapes are the check
            status, body = scrape(srv.metrics_port, timeout=20 if i == 0 else 3)
            times.append((time.monotonic() - t) * 1000)
            expect(status == 200 and b"idem_" in body, f"scrape: {status}")
            time.sleep(0.1)
        print("  metrics: 500 connections pipelining without reading; scrapes took "
              + ", ".join(f"{ms:.0f}" for ms in times) + " ms")
        # the first scrape waits behind one rendering per connection (500, as for any 500
        # requests); after that nothing is left queued (before the bound: 1.7 s, then 200-300 ms)
        expect(times[0] < 15000, f"the first scrape took {times[0]:.0f} ms (> 15 s)")
        # the median: one later scrape may also read the step counts afresh (once a second)
        later = sorted(times[1:])[len(times[1:]) // 2]
        expect(later < 100, f"later scrapes took {later:.0f} ms in the median (> 100 ms)")
    finally:
        for s in socks:
            s.close()


# --- 5. the wire: repeated fields, header names, tenants, health, forged tokens -------------

def check_wire(srv, pb, tenant, strict):
    key = pb.StepKey(global_id="g1", service="s", operation="o", phase=pb.PHASE_FORWARD)
    one = pb.BeginStepRequest(key=key).SerializeToString()
    second = pb.BeginStepRequest(key=pb.StepKey(global_id="g2")).SerializeToString()
    code, msg = code_of(lambda: srv.raw(COORD + "BeginStep")(
        one + second, metadata=(("idem-tenant", tenant),), timeout=10))
    print(f"  key sent twice: {code.name} ({msg})")
    expect(code == grpc.StatusCode.INVALID_ARGUMENT and msg.startswith("key:"),
           f"key twice: {code.name} {msg}")

    # metadata over the server's 8 KiB: refused by the server with a reason (§5), not by the
    # transport without one; the call's own metadata (tenant, key) is the same as any call's
    begin = srv.raw(COORD + "BeginStep")
    for size in (9 * 1024, 40 * 1024):
        code, msg, reason = refusal_of(lambda: begin(
            one, metadata=(("idem-tenant", tenant), ("x-filler", "a" * size)), timeout=10))
        print(f"  metadata of {size // 1024} KiB: {code.name} ({msg}), idem-reason {reason!r}")
        expect(code == grpc.StatusCode.RESOURCE_EXHAUSTED and reason == "resource-exhausted"
               and "metadata" in msg, f"metadata {size}: {code.name} {msg!r} {reason!r}")
    other = pb.BeginStepRequest(key=pb.StepKey(global_id="g-meta", service="s", operation="o",
                                               phase=pb.PHASE_FORWARD)).SerializeToString()
    code, msg = code_of(lambda: begin(other, metadata=(("idem-tenant", tenant),), timeout=10))
    expect(code == grpc.StatusCode.OK, f"after the big metadata: {code.name} {msg}")

    c = RawH2(srv.port)
    try:
        st, msg = c.wait(c.call(COORD + "BeginStep", one, [("IDEM-TENANT", "shop")]))
        print(f"  IDEM-TENANT: status {st} ({msg})")
        expect(st == 3 and "lower case" in msg, f"IDEM-TENANT: status {st} {msg}")
        st, msg = c.wait(c.call(COORD + "BeginStep", one, [("idem-tenant", tenant)],
                                compressed=True))
        # accepted and written down (README "Limits"): gRPC core hands the bytes over as they
        # are, without the flag, and nothing is inflated; the message is read as identity
        print(f"  compressed flag without grpc-encoding: status {st} ({msg}): read as identity")
        expect(st == 0, f"compressed flag, no encoding: status {st} {msg}")
    finally:
        c.close()

    health = srv.raw("/grpc.health.v1.Health/Check")
    code, msg = code_of(lambda: health(b"\x0a\x05a\x01\x1bb\x07", timeout=10))
    print(f"  health of a service with control bytes: {code.name} ({msg!r})")
    expect(code == grpc.StatusCode.NOT_FOUND and all(ch >= " " for ch in msg),
           f"health: {code.name} {msg!r}")

    # a ListAudit token whose id has 30 digits: refused, not saturated
    import base64
    audit = srv.stub(ADMIN + "ListAudit", pb.ListAuditRequest, pb.ListAuditResponse)
    resolve = srv.stub(ADMIN + "ResolveStep", pb.ResolveStepRequest, pb.StepRecord)
    begin = srv.stub(COORD + "BeginStep", pb.BeginStepRequest, pb.BeginStepResponse)
    md = (("idem-tenant", tenant),)
    for i in range(2):
        k = pb.StepKey(global_id=f"aud-{i}", service="s", operation="o", phase=pb.PHASE_FORWARD)
        begin(pb.BeginStepRequest(key=k), metadata=md, timeout=10)
        resolve(pb.ResolveStepRequest(key=k, outcome=pb.OUTCOME_FAILED, reason="test"),
                metadata=md, timeout=10)
    tok = audit(pb.ListAuditRequest(page_size=1), metadata=md, timeout=10).next_page_token
    expect(tok, "ListAudit: no next_page_token after one of two entries")
    raw = base64.urlsafe_b64decode(tok + "=" * (-len(tok) % 4))
    forged = base64.urlsafe_b64encode(raw[:17] + b"9" * 30).rstrip(b"=").decode()
    code, msg = code_of(lambda: audit(pb.ListAuditRequest(page_size=1, page_token=forged),
                                      metadata=md, timeout=10))
    print(f"  ListAudit token with a 30-digit id: {code.name} ({msg})")
    expect(code == grpc.StatusCode.INVALID_ARGUMENT and "page_token" in msg, f"{code.name} {msg}")

    # --require-tenant: no idem-tenant is refused; GetStatus still answers
    code, msg = code_of(lambda: strict.raw(COORD + "BeginStep")(one, timeout=10))
    print(f"  --require-tenant, no idem-tenant: {code.name} ({msg})")
    expect(code == grpc.StatusCode.INVALID_ARGUMENT and "idem-tenant" in msg, f"{code.name} {msg}")
    code, _ = code_of(lambda: strict.raw(ADMIN + "GetStatus")(b"", timeout=10))
    expect(code == grpc.StatusCode.OK, f"--require-tenant: GetStatus {code.name}")
    fresh = pb.BeginStepRequest(key=pb.StepKey(global_id="g-strict", service="s", operation="o",
                                               phase=pb.PHASE_FORWARD)).SerializeToString()
    code, _ = code_of(lambda: strict.raw(COORD + "BeginStep")(
        fresh, metadata=(("idem-tenant", tenant),), timeout=10))
    expect(code == grpc.StatusCode.OK, f"--require-tenant with idem-tenant: {code.name}")


def print_log_tails(servers, lines=40):
    """The last lines of each server's log (the logs go with the temporary folder)."""
    for s in servers:
        tail = read(s.log).splitlines()[-lines:]
        print(f"--- the last {len(tail)} lines of {s.log}", file=sys.stderr)
        for line in tail:
            print(f"   | {line}", file=sys.stderr)


def main():
    binary, pg_url = os.environ.get("IDEM_COORDINATOR_BIN"), os.environ.get("IDEM_TEST_PG_URL")
    if not binary or not pg_url or not os.environ.get("IDEMCTL_BIN"):
        print("hostile: IDEM_COORDINATOR_BIN, IDEM_TEST_PG_URL and IDEMCTL_BIN must be set",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="idem-hostile.") as tmp:
        pb = generate_messages(tmp)
        servers = []
        try:
            srv = Server(binary, pg_url, tmp)
            servers.append(srv)
            strict = Server(binary, pg_url, tmp, "--require-tenant")
            servers.append(strict)
            srv.wait_serving(pb)
            strict.wait_serving(pb)
            tenant = f"hostile-{uuid.uuid4().hex[:10]}"
            only = os.environ.get("HOSTILE_ONLY")
            for name, fn in [("bomb", lambda: check_bomb(srv, pb)),
                             ("wire", lambda: check_wire(srv, pb, tenant, strict)),
                             ("metrics", lambda: check_metrics(srv)),
                             ("metrics pipelined", lambda: check_metrics_pipelined(srv)),
                             ("big replies", lambda: check_big_replies(srv, pb, tenant)),
                             ("no readers", lambda: check_no_readers(srv, pb, tenant))]:
                if only and name not in only.split(",") and name != "big replies":
                    continue
                print(f"hostile: {name}", flush=True)
                fn()
                expect(srv.proc.poll() is None, f"server died during {name}:\n{read(srv.log)}")
            print("hostile: ok")
            return 0
        except Mismatch as m:
            print(f"hostile: FAILED: {m}", file=sys.stderr)
            print_log_tails(servers)
            return 1
        except grpc.RpcError as e:
            print(f"hostile: FAILED: unexpected {e.code().name}: {e.details()}", file=sys.stderr)
            print_log_tails(servers)
            return 1
        finally:
            for s in servers:
                s.stop()


if __name__ == "__main__":
    sys.exit(main())
