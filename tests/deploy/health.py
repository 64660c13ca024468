#!/usr/bin/python3
"""health.py ADDR SERVICE — grpc.health.v1.Health/Check as the kubelet's grpc probe asks it;
prints SERVING, NOT_SERVING, or the gRPC error's code. The message is one string field (1) and the
answer one enum (1); encoded by hand, no generated code."""
import sys

import grpc

STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def main():
    addr, service = sys.argv[1], sys.argv[2]
    name = service.encode()
    req = (b"\x0a" + bytes([len(name)]) + name) if name else b""
    with grpc.insecure_channel(addr) as ch:
        check = ch.unary_unary("/grpc.health.v1.Health/Check")
        try:
            resp = check(req, timeout=3)
        except grpc.RpcError as e:
            print(e.code().name)
            return
    status = resp[1] if len(resp) >= 2 and resp[0] == 0x08 else 0
    print(STATUS.get(status, str(status)))


if __name__ == "__main__":
    main()
