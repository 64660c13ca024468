#!/usr/bin/python3
"""step.py — your first guarded step from Python (grpcio), the same flow as ../c/step.c.

A shop charges a card for an order; the double-click sends the same request twice; idem runs the
charge once and answers the second request with the first one's result.

    /usr/bin/python3 step.py ORDER-ID        (Debian's python3-grpcio and python3-protobuf)

IDEM_ADDRESS: the coordinator (default 127.0.0.1:50051); IDEM_TENANT: your tenant (default
"shop"). The order id defaults to order-python-1 and the step's service is payment-python, so it
runs beside the C, Go and Node examples without sharing their sagas. The messages are generated
from proto/idem/v1/coordinator.proto with protoc at start, into a temporary folder.
Exit status: 0 when the charge ran at most once, 1 otherwise.
"""
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

PROTO_DIR = Path(__file__).resolve().parents[3] / "proto"


def load_messages(tmp):
    subprocess.run(["protoc", f"--python_out={tmp}", "-I", str(PROTO_DIR),
                    "idem/v1/coordinator.proto"], check=True)
    sys.path.insert(0, tmp)
    from idem.v1 import coordinator_pb2  # generated just above
    return coordinator_pb2


class Gateway:
    """A pretend payment gateway that counts its charges."""

    def __init__(self):
        self.charges = 0

    def charge(self, order_id, amount_cents, fencing_token):
        self.charges += 1
        return 200, f"receipt for {order_id}, attempt {fencing_token}".encode()


def pay(call, pb, md, gid, order_id, amount_cents, gateway):
    """One request to pay for the order: BeginStep, the charge on PROCEED, CompleteStep."""
    key = pb.StepKey(global_id=gid, service="payment-python", operation="charge",
                     phase=pb.PHASE_FORWARD)
    fp = hashlib.sha256(f"order={order_id};amount={amount_cents}".encode()).digest()
    for _ in range(50):  # ABORTED: another request runs the step right now; wait and ask again
        try:
            begin = call("BeginStep", pb.BeginStepRequest(key=key, fingerprint=fp),
                         pb.BeginStepResponse, md)
            break
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.ABORTED:
                raise
            time.sleep(0.1)
    else:
        raise RuntimeError("the step stayed in progress")
    if begin.decision == pb.DECISION_REPLAY:
        print(f"replayed: the stored result, code {begin.result.code}, body {begin.result.body!r}")
        return begin.result
    if begin.decision != pb.DECISION_PROCEED:
        raise RuntimeError(f"unexpected decision {begin.decision}")
    code, body = gateway.charge(order_id, amount_cents, begin.attempt)  # attempt: a fencing token
    outcome = pb.OUTCOME_SUCCEEDED if code < 300 else pb.OUTCOME_FAILED
    done = call("CompleteStep", pb.CompleteStepRequest(key=key, attempt=begin.attempt,
                                                       outcome=outcome, code=code, body=body),
                pb.CompleteStepResponse, md)
    print(f"ran: the gateway was called, code {code}, body {body!r}")
    return done.record.result


def main():
    address = os.environ.get("IDEM_ADDRESS") or "127.0.0.1:50051"
    tenant = os.environ.get("IDEM_TENANT") or "shop"
    order_id = sys.argv[1] if len(sys.argv) > 1 else "order-python-1"
    md = (("idem-tenant", tenant),)  # every call names its tenant (lower-case metadata name)
    with tempfile.TemporaryDirectory() as tmp, grpc.insecure_channel(address) as channel:
        pb = load_messages(tmp)

        def call(method, req, resp_type, metadata):
            service = "Coordinator"
            f = channel.unary_unary(f"/idem.v1.{service}/{method}",
                                    request_serializer=req.SerializeToString,
                                    response_deserializer=resp_type.FromString)
            return f(req, metadata=metadata, timeout=5)

        saga = call("BeginSaga", pb.BeginSagaRequest(request_id=order_id, saga_type="order"),
                    pb.BeginSagaResponse, md)
        state = "new" if saga.created else "the order's existing saga"
        print(f"saga {saga.global_id} ({state})")
        gateway = Gateway()
        first = pay(call, pb, md, saga.global_id, order_id, 4200, gateway)    # the click
        second = pay(call, pb, md, saga.global_id, order_id, 4200, gateway)   # the double-click
        if gateway.charges > 1 or second.body != first.body:
            print(f"FAILED: {gateway.charges} charges", file=sys.stderr)
            return 1
        print(f"charged {gateway.charges} time(s) for two requests")
        return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except grpc.RpcError as e:
        print(f"{e.code().name}: {e.details()}", file=sys.stderr)
        sys.exit(1)
