#!/usr/bin/python3
"""Interop: drives idem-coordinator from Python's grpcio, with messages generated at run time
from proto/idem/v1/coordinator.proto, to show that a client in another language, written only
against the contract, works.

Run with Debian's /usr/bin/python3 (python3-grpcio, python3-protobuf). Reads:
  IDEM_COORDINATOR_BIN  the server binary (started here, on a free 127.0.0.1 port)
  IDEM_TEST_PG_URL      the Postgres it uses
Exits 0 when every check passes, 1 on any mismatch, 2 when the environment is incomplete.
"""
import hashlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import grpc

REPO = Path(os.environ.get("IDEM_SOURCE_DIR") or Path(__file__).resolve().parents[2])
START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 5.0


class Mismatch(Exception):
    pass


def generate_messages(tmp):
    """protoc --python_out into tmp; returns the coordinator_pb2 module."""
    subprocess.run(
        ["protoc", f"--python_out={tmp}", "-I", str(REPO / "proto"), "idem/v1/coordinator.proto"],
        check=True,
    )
    sys.path.insert(0, tmp)
    from idem.v1 import coordinator_pb2  # noqa: E402 (generated above)

    return coordinator_pb2


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stubs:
    """channel.unary_unary stubs for the methods the test uses."""

    def __init__(self, channel, pb):
        def stub(service, method, req, resp):
            return channel.unary_unary(
                f"/idem.v1.{service}/{method}",
                request_serializer=req.SerializeToString,
                response_deserializer=resp.FromString,
            )

        self.begin_saga = stub("Coordinator", "BeginSaga", pb.BeginSagaRequest, pb.BeginSagaResponse)
        self.begin_step = stub("Coordinator", "BeginStep", pb.BeginStepRequest, pb.BeginStepResponse)
        self.complete_step = stub(
            "Coordinator", "CompleteStep", pb.CompleteStepRequest, pb.CompleteStepResponse
        )
        self.lookup_step = stub("Coordinator", "LookupStep", pb.LookupStepRequest, pb.StepRecord)
        self.get_status = stub("Admin", "GetStatus", pb.GetStatusRequest, pb.GetStatusResponse)


def wait_until_serving(proc, stubs, pb, log_path):
    """Polls Admin/GetStatus until it answers, the server exits, or the deadline passes."""
    deadline = time.monotonic() + START_TIMEOUT_S
    last = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Mismatch(f"server exited with {proc.returncode} during start-up:\n{read(log_path)}")
        try:
            return stubs.get_status(pb.GetStatusRequest(), timeout=1.0, wait_for_ready=True)
        except grpc.RpcError as e:
            last = e
            if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                time.sleep(0.05)  # answered, but not yet usable: poll again shortly
    raise Mismatch(f"no answer from Admin/GetStatus within {START_TIMEOUT_S}s ({last}):\n{read(log_path)}")


def read(path):
    try:
        return Path(path).read_text(errors="replace")[-4000:]
    except OSError:
        return ""


def expect(cond, what):
    if not cond:
        raise Mismatch(what)


def expect_error(fn, req, md, code, what):
    try:
        fn(req, metadata=md, timeout=CALL_TIMEOUT_S)
    except grpc.RpcError as e:
        expect(e.code() == code, f"{what}: expected {code.name}, got {e.code().name} ({e.details()})")
        return e
    raise Mismatch(f"{what}: expected {code.name}, got OK")


def run_checks(stubs, pb, tenant):
    md = (("idem-tenant", tenant),)
    n = 0

    # BeginSaga: the same request id twice gives the same global id, created only once.
    rid = f"interop-{uuid.uuid4()}"
    req = pb.BeginSagaRequest(request_id=rid, saga_type="interop", labels={"suite": "interop"})
    s1 = stubs.begin_saga(req, metadata=md, timeout=CALL_TIMEOUT_S)
    expect(s1.global_id and s1.created, f"first BeginSaga: {s1}")
    s2 = stubs.begin_saga(req, metadata=md, timeout=CALL_TIMEOUT_S)
    expect(s2.global_id == s1.global_id, f"second BeginSaga id {s2.global_id} != {s1.global_id}")
    expect(not s2.created, "second BeginSaga: created should be false")
    n += 2

    key = pb.StepKey(global_id=s1.global_id, service="payments", operation="charge",
                     phase=pb.PHASE_FORWARD)
    fp = hashlib.sha256(b"amount=100;currency=EUR").digest()
    begin = pb.BeginStepRequest(key=key, fingerprint=fp)

    # First BeginStep proceeds with attempt 1.
    b1 = stubs.begin_step(begin, metadata=md, timeout=CALL_TIMEOUT_S)
    expect(b1.decision == pb.DECISION_PROCEED, f"first BeginStep: decision {b1.decision}")
    expect(b1.attempt == 1 and not b1.takeover, f"first BeginStep: attempt {b1.attempt}, takeover {b1.takeover}")
    n += 1

    # While it is in progress: ABORTED with idem-retry-after-ms.
    e = expect_error(stubs.begin_step, begin, md, grpc.StatusCode.ABORTED, "BeginStep in progress")
    trailers = dict(e.trailing_metadata() or ())
    hint = trailers.get("idem-retry-after-ms")
    expect(hint is not None and hint.isdigit(), f"ABORTED without a numeric idem-retry-after-ms: {trailers}")
    n += 1

    # CompleteStep stores the result.
    body = b'{"charge":"ch_interop"}'
    done = stubs.complete_step(
        pb.CompleteStepRequest(key=key, attempt=1, outcome=pb.OUTCOME_SUCCEEDED, code=201, body=body),
        metadata=md, timeout=CALL_TIMEOUT_S)
    expect(done.record.state == pb.STEP_STATE_SUCCEEDED, f"CompleteStep: state {done.record.state}")
    n += 1

    # BeginStep again: REPLAY with the stored body.
    b2 = stubs.begin_step(begin, metadata=md, timeout=CALL_TIMEOUT_S)
    expect(b2.decision == pb.DECISION_REPLAY, f"BeginStep after Complete: decision {b2.decision}")
    expect(b2.result.outcome == pb.OUTCOME_SUCCEEDED and b2.result.code == 201 and b2.result.body == body,
           f"replayed result differs: {b2.result}")
    n += 1

    # LookupStep: SUCCEEDED, attempt 1, in our tenant.
    rec = stubs.lookup_step(pb.LookupStepRequest(key=key), metadata=md, timeout=CALL_TIMEOUT_S)
    expect(rec.state == pb.STEP_STATE_SUCCEEDED and rec.attempt == 1, f"LookupStep: {rec}")
    expect(rec.fingerprint == fp, "LookupStep: fingerprint differs")
    expect(rec.tenant in ("", tenant), f"LookupStep: tenant {rec.tenant!r}, expected {tenant!r}")
    n += 1

    # Another tenant does not see it.
    other = (("idem-tenant", tenant + "-other"),)
    expect_error(stubs.lookup_step, pb.LookupStepRequest(key=key), other, grpc.StatusCode.NOT_FOUND,
                 "LookupStep from another tenant")
    n += 1

    # A malformed key: INVALID_ARGUMENT naming the field.
    bad = pb.BeginStepRequest(key=pb.StepKey(global_id="not a valid id!", service="payments",
                                             operation="charge", phase=pb.PHASE_FORWARD))
    e = expect_error(stubs.begin_step, bad, md, grpc.StatusCode.INVALID_ARGUMENT, "malformed global_id")
    expect("global_id" in (e.details() or ""), f"INVALID_ARGUMENT does not name global_id: {e.details()!r}")
    n += 1
    return n


def main():
    binary = os.environ.get("IDEM_COORDINATOR_BIN")
    pg_url = os.environ.get("IDEM_TEST_PG_URL")
    if not binary or not pg_url:
        print("interop_python: IDEM_COORDINATOR_BIN and IDEM_TEST_PG_URL must be set (scripts/test does)",
              file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="idem-interop.") as tmp:
        pb = generate_messages(tmp)
        port = free_port()
        addr = f"127.0.0.1:{port}"
        log_path = os.path.join(tmp, "server.log")
        tenant = f"interop-{uuid.uuid4().hex[:12]}"
        proc = None
        channel = None
        try:
            with open(log_path, "wb") as log:
                proc = subprocess.Popen([binary, "--listen", addr, "--pg", pg_url],
                                        stdout=log, stderr=subprocess.STDOUT)
            channel = grpc.insecure_channel(addr)
            stubs = Stubs(channel, pb)
            status = wait_until_serving(proc, stubs, pb, log_path)
            n = run_checks(stubs, pb, tenant)
            channel.close()
            channel = None
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=20)
            proc = None
            expect(rc == 0, f"server exited with {rc} after SIGTERM:\n{read(log_path)}")
            n += 1
            print(f"interop_python: ok, {n} checks passed (server {status.version or '?'} on {addr}, "
                  f"tenant {tenant})")
            return 0
        except Mismatch as m:
            print(f"interop_python: FAILED: {m}", file=sys.stderr)
            return 1
        except grpc.RpcError as e:
            print(f"interop_python: FAILED: unexpected {e.code().name}: {e.details()}", file=sys.stderr)
            return 1
        finally:
            if channel is not None:
                channel.close()
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


if __name__ == "__main__":
    sys.exit(main())
