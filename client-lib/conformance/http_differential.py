#!/usr/bin/python3
"""http_differential.py — one corpus of raw HTTP requests sent to every example server; their
answers, normalized, must be identical (docs/api.md §19).

    http_differential.py --coordinator HOST:PORT --tenant T NAME=PORT:SERVICE...

Each NAME=PORT:SERVICE is an example server (go, node, python, java) listening on 127.0.0.1:PORT
whose middleware uses step service SERVICE, all against the one coordinator. The corpus (built
here, at least 100 requests) holds every finding the rules answer and generated edge cases of keys
(idempotency-key.json's header table), paths (operation_vectors), headers, framing
(framing_vectors), methods, trace context (trace_vectors) and stored answers
(stored_answer_vectors, planted through the coordinator's BeginStep + CompleteStep under the
step key the server will use). Each request goes over its own TCP connection as raw bytes,
one server at a time per case so that executions counts are exact.

A normalized answer is: status, problem type word (a problem+json document's type after "#"),
replayed (Idempotent-Replayed: true), Content-Type (media type, lower case), and ran (how many
times the wrapped handler ran, from GET /stats before and after). Every answer is also checked
for leaks: a Server or X-Powered-By header, a stack trace, an exception's text or a server name
and version in the body. http-middleware.json example_server.exceptions lets a named server
answer a named case otherwise, exactly as the entry says. The report names each difference (the
request, then each server's normalized answer); the exit status is 1 on any difference or leak.
"""
import argparse
import base64
import hashlib
import json
import os
import re
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
SPEC = json.loads((HERE / "http-middleware.json").read_text())
KEYS = json.loads((HERE / "idempotency-key.json").read_text())
TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

LEAK_HEADERS = ("server", "x-powered-by", "x-aspnet-version")
LEAK_BODY = re.compile(r"Traceback \(most recent call last\)|\bat (java|javax|jakarta|org|sun|dev)\.[\w.$]+\(|"
                       r"Exception\b|Apache Tomcat|Tomcat/\d|[Ww]aitress|Werkzeug|wsgiref|WSGIServer|node:internal|"
                       r"\.(go|js|ts|py|java):\d+|goroutine \d+|X-Powered-By|Jetty")


# ---- the corpus ---------------------------------------------------------------------------------

def above_root(target):
    """Whether the target's path, percent-decoded, has a ".." segment that climbs above the root."""
    path = re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/]*", "", target).split("?", 1)[0]
    path = re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), path)
    depth = 0
    for seg in path.split("/")[1:]:
        if seg == "..":
            if depth == 0:
                return True
            depth -= 1
        elif seg not in ("", "."):
            depth += 1
    return False


class Req:
    """One raw request. head lines after the request line; body bytes as sent."""

    def __init__(self, label, method="POST", target="/payments", key=None, lines=(), body=b"{}",
                 framing="length", plant=None, exception=None, background=None):
        self.label, self.method, self.target, self.key = label, method, target, key
        self.lines, self.body, self.framing = list(lines), body, framing
        self.plant, self.exception, self.background = plant, exception, background

    def raw(self, key_text):
        out = [f"{self.method} {self.target} HTTP/1.1", "Host: 127.0.0.1"]
        if key_text is not None:
            out.append(f"Idempotency-Key: {key_text}")
        out += [ln.replace("{KEY}", key_text or "") for ln in self.lines]
        body = self.body
        if self.framing == "length":
            out.append(f"Content-Length: {len(body)}")
            out.append("Content-Type: application/json")
        elif self.framing == "chunked":
            out.append("Transfer-Encoding: chunked")
            out.append("Content-Type: application/json")
            body = (f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n") if body else b"0\r\n\r\n"
        # framing == "raw": the lines say it all, the body is sent as is
        out.append("Connection: close")
        return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + body


def case(name, *reqs):
    return {"name": name, "requests": list(reqs)}


def corpus():
    cases = []
    js = lambda o: json.dumps(o).encode()  # noqa: E731
    b = js({"amount": 100})
    # the findings the rules of docs/api.md §19 answer
    cases.append(case("one key, every spelling of the route: runs once, then replays",
                      Req("/payments", key="K", body=b), Req("/p%61yments", key="K", body=b),
                      Req("/payments/", key="K", body=b), Req("/x/../payments", key="K", body=b),
                      Req("//payments//", key="K", body=b), Req("/%2e/payments", key="K", body=b),
                      Req("/payments?x=1 (a query is another request)", target="/payments?x=1", key="K", body=b)))
    for t in ("/p%61yments", "/payments/", "/x/../payments", "/P%61yments", "/Payments"):
        cases.append(case(f"first request under {t}", Req(t, target=t, key="K", body=b), Req("/payments retry", key="K", body=b)))
    cases.append(case("two Authorization lines: one scope with the joined line, another with one",
                      Req("A1+A2", key="K", lines=["Authorization: Bearer token-one", "Authorization: Bearer token-two"], body=b),
                      Req("A1, A2 in one line", key="K", lines=["Authorization: Bearer token-one, Bearer token-two"], body=b),
                      Req("A1 alone", key="K", lines=["Authorization: Bearer token-one"], body=b),
                      Req("A2 alone", key="K", lines=["Authorization: Bearer token-two"], body=b)))
    cases.append(case("two Idempotency-Key lines", Req("two equal key lines", key="K", lines=["Idempotency-Key: {KEY}"], body=b)))
    cases.append(case("a folded Idempotency-Key", Req("obs-fold", key="K", lines=[], body=b, exception="obs-fold",
                                                         framing="length") ))
    cases[-1]["requests"][0].key_fold = True
    cases.append(case("two traceparent lines", Req("two traceparents", key="K", lines=[f"traceparent: {TP}",
                      "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"], body=b)))
    cases.append(case("a valid tracestate of about 8 KB",
                      Req("8 KB tracestate", key="K", lines=[f"traceparent: {TP}", "tracestate: " + ",".join(
                          f"k{i}=" + "x" * 250 for i in range(32))], body=b)))
    cases.append(case("a version-01 traceparent with a TAB",
                      Req("traceparent TAB", key="K", lines=["traceparent: 01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\tx"], body=b)))
    for m in ("post", "Post", "pOST"):
        cases.append(case(f"method {m}", Req(m, method=m, key="K", body=b)))
    cases.append(case("a head over the limit", Req("30 KiB header", key="K", lines=["X-Filler: " + "y" * 30000], body=b)))
    cases.append(case("a head under the limit", Req("10 KiB header", key="K", lines=["X-Filler: " + "y" * 10000], body=b)))
    cases.append(case("a control character in a header", Req("DEL in a header", key="K", lines=["X-A: a\x7fb"], body=b)))
    cases.append(case("a NUL in a header", Req("NUL in a header", key="K", lines=["X-A: a\x00b"], body=b)))
    cases.append(case("a 48-64 KiB answer keeps its Content-Type on replay",
                      Req("big 50000", key="K", body=js({"big": 50000})), Req("big 50000 replay", key="K", body=js({"big": 50000}))))
    cases.append(case("a 5xx is retried", Req("fail", key="K", body=js({"fail": True})), Req("fail again", key="K", body=js({"fail": True}))))
    cases.append(case("in progress: 409", Req("slow", key="K", body=js({"delay_ms": 1500}), background="slow"),
                      Req("same key while it runs", key="K", body=js({"delay_ms": 1500}))))
    cases.append(case("another body under the key: 422", Req("first", key="K", body=b), Req("second", key="K", body=js({"amount": 1}))))
    cases.append(case("chunked = Content-Length", Req("chunked", key="K", body=b, framing="chunked"), Req("length", key="K", body=b)))
    # routing and methods
    for m in ("GET", "PUT", "DELETE", "PATCH", "OPTIONS"):
        cases.append(case(f"{m} /payments", Req(f"{m} /payments", method=m, key="K", body=b"")))
    cases.append(case("POST /stats", Req("POST /stats", target="/stats", key="K", body=b)))
    cases.append(case("POST /nowhere", Req("POST /nowhere", target="/nowhere", key="K", body=b)))
    cases.append(case("POST /refunds", Req("refund", target="/refunds", key="K", body=b), Req("refund replay", target="/refunds/", key="K", body=b)))
    cases.append(case("no key", Req("no key", key=None, body=b)))
    # paths: every operation vector, POSTed with a key
    for v in SPEC["operation_vectors"]:
        if v["target"].startswith("/") or v["target"].lower().startswith("http"):
            exc = "dot-segments-above-root" if above_root(v["target"]) else None
            cases.append(case(f"target {v['target']}", Req(v["target"], target=v["target"], key="K", body=b, exception=exc)))
    # keys: every header case of idempotency-key.json
    for i, c in enumerate(KEYS["header"]):
        h = c["header"]
        if h is None:
            continue
        r = Req(f"key {h!r:.60}", key=None, lines=["Idempotency-Key: " + h], body=b)
        r.fixed_key = True
        cases.append(case(f"key case {i}: {c.get('about', '')}", r))
    # framing
    for v in SPEC["framing_vectors"]:
        exc = v.get("exception_case")
        cases.append(case(f"framing: {v['about']}", Req(v["about"], key="K", lines=v["lines"],
                                                        body=v["body"].encode(), framing="raw", exception=exc)))
    # trace context
    for v in SPEC["trace_vectors"]:
        lines = [f"traceparent: {x}" for x in v["traceparent"]] + [f"tracestate: {x}" for x in v["tracestate"]]
        cases.append(case(f"trace: {v['about']}", Req(v["about"], key="K", lines=lines, body=b)))
    # stored answers
    for v in SPEC["stored_answer_vectors"]:
        cases.append(case(f"stored: {v['about']}", Req(v["about"], key="K", body=b, plant=(v["code"], v["doc"].encode()))))
    return cases


# ---- sending ------------------------------------------------------------------------------------

def exchange(port, raw, timeout=20.0):
    """Sends raw on a new connection; returns the answer's bytes (until the server closes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server refused the head before the body: its answer is still read
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            data += chunk
            if complete(data):
                break
        return data
    finally:
        s.close()


def split(data):
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/\d\.\d (\d{3})", lines[0]) if lines else None
    headers = []
    for ln in lines[1:]:
        n, _, v = ln.partition(":")
        headers.append((n.strip().lower(), v.strip()))
    return (int(m.group(1)) if m else None), headers, body


def complete(data):
    if b"\r\n\r\n" not in data:
        return False
    status, headers, body = split(data)
    h = dict(headers)
    if "content-length" in h:
        try:
            return len(body) >= int(h["content-length"])
        except ValueError:
            return False
    if h.get("transfer-encoding", "").lower() == "chunked":
        return body.endswith(b"0\r\n\r\n")
    return False


def dechunk(body):
    out, rest = b"", body
    while rest:
        size, _, rest = rest.partition(b"\r\n")
        try:
            n = int(size.split(b";")[0], 16)
        except ValueError:
            return body
        if n == 0:
            break
        out, rest = out + rest[:n], rest[n + 2:]
    return out


def stats(port):
    data = exchange(port, b"GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    status, headers, body = split(data)
    if dict(headers).get("transfer-encoding", "").lower() == "chunked":
        body = dechunk(body)
    return json.loads(body)["executions"]


def normalize(data):
    """(status, problem, replayed, content_type) and the leaks of one answer."""
    if not data:
        return ("no answer", None, False, None), []
    status, headers, body = split(data)
    h = {}
    for n, v in headers:
        h.setdefault(n, v)
    if h.get("transfer-encoding", "").lower() == "chunked":
        body = dechunk(body)
    ctype = h.get("content-type", "").split(";")[0].strip().lower() or None
    problem = None
    if ctype == "application/problem+json":
        try:
            problem = json.loads(body).get("type", "").rpartition("#")[2] or "?"
        except ValueError:
            problem = "unparsable"
    leaks = [f"header {n}: {h[n]}" for n in LEAK_HEADERS if n in h]
    m = LEAK_BODY.search(body.decode("latin-1"))
    if m:
        leaks.append(f"body holds {m.group(0)!r}")
    return (status, problem, h.get("idempotent-replayed") == "true", ctype), leaks


# ---- planting stored answers --------------------------------------------------------------------

class Planter:
    def __init__(self, address, tenant):
        import grpc
        try:
            from idem_client._gen import coordinator_pb2 as pb
        except ImportError:
            import gen_proto  # noqa: F401  (client-lib/python)
            gen_proto.generate()
            from idem_client._gen import coordinator_pb2 as pb
        self.pb, self.md = pb, [("idem-tenant", tenant)]
        self.ch = grpc.insecure_channel(address)
        ser = lambda m: m.SerializeToString()  # noqa: E731
        self.begin = self.ch.unary_unary("/idem.v1.Coordinator/BeginStep", request_serializer=ser,
                                         response_deserializer=pb.BeginStepResponse.FromString)
        self.complete = self.ch.unary_unary("/idem.v1.Coordinator/CompleteStep", request_serializer=ser,
                                            response_deserializer=pb.CompleteStepResponse.FromString)

    def plant(self, service, key, method, target, body, code, doc):
        pb = self.pb
        gid = "k-" + hashlib.sha256(b"\x1f" + key.encode()).hexdigest()
        op = method.lower() + "--" + target.strip("/").lower()
        sk = pb.StepKey(global_id=gid, service=service, operation=op, phase=pb.PHASE_FORWARD)
        fp = hashlib.sha256(f"{method}\n{target}\n".encode() + body).digest()
        r = self.begin(pb.BeginStepRequest(key=sk, fingerprint=fp, lease_ms=30000), metadata=self.md, timeout=10)
        if r.decision != pb.DECISION_PROCEED:
            raise RuntimeError(f"planting {service}/{key}: decision {r.decision}")
        self.complete(pb.CompleteStepRequest(key=sk, attempt=r.attempt, outcome=pb.OUTCOME_SUCCEEDED, code=code,
                                             body=doc), metadata=self.md, timeout=10)


# ---- running ------------------------------------------------------------------------------------

def run_case(server, port, service, run, idx, c, planter):
    """The normalized answers of one case's requests on one server."""
    out = []
    bg = []
    for j, r in enumerate(c["requests"]):
        key = f"d{run}-{idx}"
        key_text = None if r.key is None or getattr(r, "fixed_key", False) else f'"{key}"'
        raw = r.raw(key_text)
        if getattr(r, "key_fold", False):
            raw = raw.replace(f"Idempotency-Key: {key_text}".encode(),
                              f"Idempotency-Key: \"{key}\r\n -x\"".encode())
        if r.plant:
            code, doc = r.plant
            planter.plant(service, key, r.method, r.target, r.body, code, doc)
        before = stats(port)
        if r.background:
            box = {}
            t = threading.Thread(target=lambda: box.update(data=exchange(port, raw)))
            t.start()
            deadline = time.monotonic() + 10
            while stats(port) == before and time.monotonic() < deadline:
                time.sleep(0.02)
            bg.append((r, t, box, before))
            continue
        data = exchange(port, raw)
        after = stats(port)
        norm, leaks = normalize(data)
        out.append((r, norm + (after - before,), leaks))
    for r, t, box, before in bg:
        t.join(30)
        norm, leaks = normalize(box.get("data", b""))
        out.insert(0, (r, norm + (1,), leaks))  # it was seen to run before the next request was sent
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coordinator", required=True)
    ap.add_argument("--tenant", required=True)
    ap.add_argument("servers", nargs="+", help="NAME=PORT:SERVICE")
    a = ap.parse_args()
    servers = []
    for s in a.servers:
        name, _, rest = s.partition("=")
        port, _, service = rest.partition(":")
        servers.append((name, int(port), service))
    exceptions = {(e["server"], e["case"]): e["what"] for e in SPEC["example_server"]["exceptions"]}
    planter = Planter(a.coordinator, a.tenant)
    run = uuid.uuid4().hex[:8]
    cases = corpus()
    nreq = sum(len(c["requests"]) for c in cases)
    print(f"http-differential: {len(cases)} cases, {nreq} requests, servers {', '.join(n for n, _, _ in servers)}")
    results = {}

    def worker(name, port, service):
        res = []
        for i, c in enumerate(cases):
            try:
                res.append(run_case(name, port, service, run, i, c, planter))
            except Exception as e:  # a server that cannot be asked: every request of the case differs
                res.append([(r, (f"error: {e}", None, False, None, None), []) for r in c["requests"]])
        results[name] = res

    threads = [threading.Thread(target=worker, args=s) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    diffs = leaks = excused = 0
    for i, c in enumerate(cases):
        for j, r in enumerate(c["requests"]):
            answers = {n: results[n][i][j] for n, _, _ in servers}
            for n, (_, norm, lk) in answers.items():
                for x in lk:
                    leaks += 1
                    print(f"LEAK {n}: {c['name']} / {r.label}: {x}")
            norms = {n: a[1] for n, a in answers.items()}
            # a server's documented exception: held to exactly what its entry says
            strict = {}
            for n, v in norms.items():
                e = exceptions.get((n, r.exception)) if r.exception else None
                if e is None:
                    strict[n] = v
                    continue
                ok = (r.exception in ("obs-fold", "content-length-and-chunked") and v[0] == 201 and v[4] == 1) or \
                     (r.exception == "dot-segments-above-root" and v[0] == 400 and v[4] == 0
                      and v[3] == "application/problem+json")
                if ok:
                    excused += 1
                else:
                    strict[n] = v
            if len(set(strict.values())) > 1:
                diffs += 1
                print(f"DIFF {c['name']} / {r.label}:")
                for n, v in norms.items():
                    tag = "" if n in strict else "  (excused: " + exceptions[(n, r.exception)][:60] + "…)"
                    print(f"    {n:7s} status={v[0]} problem={v[1]} replayed={v[2]} content-type={v[3]} ran={v[4]}{tag}")
    print(f"http-differential: {nreq} requests x {len(servers)} servers: {diffs} differences, {leaks} leaks, "
          f"{excused} answers excused by example_server.exceptions")
    return 1 if diffs or leaks else 0


if __name__ == "__main__":
    sys.exit(main())
