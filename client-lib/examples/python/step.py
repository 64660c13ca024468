#!/usr/bin/python3
"""step.py — your first guarded step from Python (idem_client, the Python SDK), the same flow and
the same printed lines as ../c/step.c.

A shop charges a card for an order; the double-click sends the same request twice; idem runs the
charge once and answers the second request with the first one's result.

    /usr/bin/python3 client-lib/examples/python/step.py ORDER-ID
                                        (Debian's python3-grpcio, python3-protobuf and protoc)

The SDK is taken from the checkout (client-lib/python; `import idem_client` once it is
installed): its messages are generated with protoc into client-lib/python/idem_client/_gen
(ignored by git) before the import. IDEM_ADDRESS: the coordinator (default 127.0.0.1:50051);
IDEM_TENANT: your tenant (default "shop"). The order id defaults to order-python-1 and the step's
service is payment-python, so it runs beside the C, Go, Node and Java examples without sharing
their sagas. Exit status: 0 when the charge ran at most once, 1 otherwise.
"""
import hashlib
import os
import sys
from pathlib import Path

SDK = Path(__file__).resolve().parents[2] / "python"
sys.path.insert(0, str(SDK))
import gen_proto  # noqa: E402 (client-lib/python/gen_proto.py)

try:
    gen_proto.generate()
except RuntimeError as e:  # no protoc, or no proto/ folder
    sys.exit(str(e))
import idem_client  # noqa: E402
from idem_client import IdemError, Output, StepKey  # noqa: E402


class Gateway:
    """A pretend payment gateway that counts its charges."""

    def __init__(self):
        self.charges = 0

    def charge(self, order_id, fencing_token):
        self.charges += 1
        return 200, f"receipt for {order_id}, attempt {fencing_token}".encode()


def pay(client, gid, order_id, amount_cents, gateway):
    """One request to pay for the order: what each of the duplicates runs."""
    # the request's identity: a different amount under the same key is refused
    fp = hashlib.sha256(f"order={order_id};amount={amount_cents}".encode()).digest()
    key = StepKey(gid, "payment-python", "charge")

    def charge(ctx):  # called only when idem answers PROCEED
        code, body = gateway.charge(order_id, ctx.attempt)  # pass the attempt on as a fencing token
        return Output("succeeded", code, body)

    rep = client.run_step(key, charge, fingerprint=fp)
    if rep.ran or rep.replayed:
        how = "ran: the gateway was called" if rep.ran else "replayed: the stored result"
        r = rep.result
        body = r.body.decode(errors="replace")
        print(f'{how}, outcome {r.outcome}, code {r.code}, body "{body}"')
    else:
        print("skipped: nothing to run")
    return rep


def main():
    address = os.environ.get("IDEM_ADDRESS") or "127.0.0.1:50051"
    tenant = os.environ.get("IDEM_TENANT") or "shop"
    order_id = sys.argv[1] if len(sys.argv) > 1 else "order-python-1"
    try:
        client = idem_client.connect(address, tenant=tenant)
    except IdemError as e:
        print(f"connect: {e}", file=sys.stderr)
        return 1
    with client:
        # One saga per order: the order id is the saga's request id, so a retried checkout finds
        # the same global id instead of starting a second saga.
        try:
            saga = client.begin_saga(request_id=order_id, saga_type="order")
        except IdemError as e:
            print(f"begin saga: {e}", file=sys.stderr)
            return 1
        state = "new" if saga.created else "the order's existing saga"
        print(f"saga {saga.global_id} ({state})")

        gateway = Gateway()
        try:
            first = pay(client, saga.global_id, order_id, 4200, gateway)   # the first click
            second = pay(client, saga.global_id, order_id, 4200, gateway)  # the double-click
        except IdemError as e:
            print(f"pay: {e}", file=sys.stderr)
            return 1
        if gateway.charges > 1:
            print(f"the gateway was called {gateway.charges} times", file=sys.stderr)
            return 1
        if not second.replayed or first.result is None or second.result.body != first.result.body:
            print("the second request did not replay the first one's result", file=sys.stderr)
            return 1
        print(f"charged {gateway.charges} time(s) for two requests")
        return 0


if __name__ == "__main__":
    sys.exit(main())
