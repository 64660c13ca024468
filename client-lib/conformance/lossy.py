#!/usr/bin/python3
"""lossy.py LISTEN UPSTREAM RULES_FILE — the conformance scenarios' fault-injecting front.

A gRPC proxy on LISTEN (host:port) that passes every call to the coordinator at UPSTREAM as it
came (bytes, metadata, deadline) and relays its answer (message, status, idem-* trailers), except
where a rule of RULES_FILE says otherwise. The runners write RULES_FILE for a scenario's `faults`
call (README.md); the file is read again whenever it changes (write a new file and rename it over
the old one), and every rule's window starts afresh then.

RULES_FILE: {"rules": [{"method": "BeginStep", "fault": "lose-after", "for_ms": 2500}, ...]}.
For a call, the first rule naming its method whose window is open applies. A rule's window opens at
the first call that reaches it and lasts `for_ms` (no `for_ms`: for good). Faults:
- `lose-before`: the try is lost before the coordinator has it: answered CANCELLED with no
  idem-reason, not passed on (what a draining node's gRPC core does, docs/upgrading.md);
- `lose-after`: the try is passed on and the coordinator acts, then its answer is dropped and the
  client gets CANCELLED with no idem-reason instead;
- `refuse`: answered UNAVAILABLE with no idem-reason, not passed on (as a refused connection).
Prints "listening on LISTEN" to stderr once it serves. Stops on SIGTERM.
"""
import json
import os
import signal
import sys
import threading
import time
from concurrent import futures

import grpc

FAULTS = ("lose-before", "lose-after", "refuse")


class Rules:
    """The rules of RULES_FILE and their windows, reloaded when the file changes."""

    def __init__(self, path):
        self.path = path
        self.stamp = None
        self.rules = []
        self.opened = {}
        self.lock = threading.Lock()

    def _reload(self):
        try:
            st = os.stat(self.path)
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp == self.stamp:
            return
        rules = []
        if stamp is not None:
            with open(self.path, encoding="utf-8") as f:
                rules = json.load(f).get("rules", [])
            for r in rules:
                if r.get("fault") not in FAULTS:
                    raise ValueError(f"{self.path}: fault {r.get('fault')!r} is not one of {FAULTS}")
        self.stamp, self.rules, self.opened = stamp, rules, {}
        print(f"lossy: rules {json.dumps(rules)}", file=sys.stderr, flush=True)

    def fault(self, method):
        name = method.rsplit("/", 1)[-1]
        with self.lock:
            self._reload()
            now = time.monotonic()
            for i, r in enumerate(self.rules):
                if r.get("method") != name:
                    continue
                opened = self.opened.setdefault(i, now)
                if "for_ms" in r and (now - opened) * 1000 >= r["for_ms"]:
                    continue
                return r["fault"]
        return None


# what gRPC itself sends or sets, not the caller's metadata
_OWN = {"user-agent", "content-type", "te", "grpc-timeout", "grpc-accept-encoding", "grpc-encoding"}


def _passable(md):
    return tuple((k, v) for k, v in (md or ()) if not k.startswith(":") and k not in _OWN
                 and not k.startswith("grpc-"))


class Front(grpc.GenericRpcHandler):
    def __init__(self, upstream, rules):
        self.channel = grpc.insecure_channel(upstream)
        self.rules = rules

    def service(self, details):
        method, md = details.method, _passable(details.invocation_metadata)
        call = self.channel.unary_unary(method)

        def handle(req, ctx):
            fault = self.rules.fault(method)
            if fault == "refuse":
                ctx.abort(grpc.StatusCode.UNAVAILABLE, "connection refused (conformance front)")
            if fault == "lose-before":
                ctx.abort(grpc.StatusCode.CANCELLED, "try lost before the coordinator had it (conformance front)")
            try:
                resp, rpc = call.with_call(req, timeout=ctx.time_remaining(), metadata=md)
                code, details_, trailers = grpc.StatusCode.OK, "", rpc.trailing_metadata()
            except grpc.RpcError as e:
                resp, code, details_, trailers = None, e.code(), e.details(), e.trailing_metadata()
            if fault == "lose-after":
                ctx.abort(grpc.StatusCode.CANCELLED, "try lost after the coordinator answered (conformance front)")
            ctx.set_trailing_metadata(_passable(trailers))
            if code != grpc.StatusCode.OK:
                ctx.abort(code, details_ or "")
            return resp

        return grpc.unary_unary_rpc_method_handler(handle)


def main():
    if len(sys.argv) != 4:
        print("usage: lossy.py LISTEN UPSTREAM RULES_FILE", file=sys.stderr)
        return 2
    listen, upstream, path = sys.argv[1:]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32),
                         handlers=[Front(upstream, Rules(path))])
    if server.add_insecure_port(listen) == 0:
        print(f"lossy: cannot listen on {listen}", file=sys.stderr)
        return 1
    server.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"lossy: listening on {listen}, passing on to {upstream}", file=sys.stderr, flush=True)
    stop.wait()
    server.stop(0).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
