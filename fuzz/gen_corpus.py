#!/usr/bin/python3
"""gen_corpus.py — writes the seed corpora of the fuzz targets into fuzz/corpus/ (run once,
then commit the files; scripts/fuzz never writes into the repository).

  /usr/bin/python3 fuzz/gen_corpus.py      # Debian's python3-protobuf and protoc

corpus/rpc/     one file per request: byte 0 = the method's index in server/rpc/rpc_methods.c
                (read from that file, so re-run this after the table changes) + flags * number
                of methods (flag 1: store unreachable; flag 2: a length byte and the tenant
                follow), then the encoded request. The keys
                match the records fuzz/fuzz_store.c seeds (tenant default: g-1 charge in
                progress, g-2 charge succeeded + refund unknown, g-3 charge failed).
corpus/etcd/    byte 0 an ASCII digit choosing the HTTP status (fuzz_etcd.c: 0-2 = 200,
                3 = 400, 4 = 404, 5 = 500, 6 = 503, 7 = none), then an etcd v3 gateway body.
corpus/config/  --config files.
"""
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")


def protos():
    tmp = tempfile.mkdtemp(prefix="idem-fuzz-pb2.")
    try:
        subprocess.check_call(["protoc", "--python_out=" + tmp,
                               "-I" + os.path.join(ROOT, "proto"), "idem/v1/coordinator.proto"])
        sys.path.insert(0, tmp)
        return importlib.import_module("idem.v1.coordinator_pb2")
    finally:
        shutil.rmtree(tmp)


class HealthCheckRequest:
    """grpc.health.v1.HealthCheckRequest { string service = 1; } (python3-grpcio's own grpc
    package would shadow a generated grpc.health module)."""

    def __init__(self, service):
        self.service = service.encode()

    def SerializeToString(self, deterministic=True):
        return b"\x0a" + bytes([len(self.service)]) + self.service if self.service else b""


def method_order():
    src = open(os.path.join(ROOT, "server", "rpc", "rpc_methods.c")).read()
    names = re.findall(r'\{(?:COORD|ADMIN)\s+"(\w+)"|\{"/grpc\.health\.v1\.Health/(\w+)"', src)
    return ["Health" + b if b else a for a, b in names]


def write(sub, name, data):
    d = os.path.join(OUT, sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def rpc_seeds(pb):
    P = pb

    def key(gid="g-1", svc="payment", op="charge", phase=P.PHASE_FORWARD):
        return P.StepKey(global_id=gid, service=svc, operation=op, phase=phase)

    comp = P.PHASE_COMPENSATION
    n = len(method_order())
    seeds = {
        "BeginSaga": [
            P.BeginSagaRequest(request_id="req-1", saga_type="order", labels={"order": "o-1"}),
            P.BeginSagaRequest(),
            P.BeginSagaRequest(request_id="req-2", saga_type="order",
                               labels={"shop": "s-1", "region/eu": "west", "empty": ""}),
            P.BeginSagaRequest(saga_type="bad\ttype", labels={"k y": "v"}),
        ],
        "BeginStep": [
            P.BeginStepRequest(key=key(), fingerprint=b"fp-1", lease_ms=10000),
            P.BeginStepRequest(key=key("g-9"), fingerprint=b"\x00" * 32),
            P.BeginStepRequest(key=key("g-2"), fingerprint=b"fp-1"),
            P.BeginStepRequest(key=key("g-2", phase=comp), fingerprint=b"fp-1"),
            P.BeginStepRequest(key=key("g-3", phase=comp)),
            P.BeginStepRequest(key=key("g-8", "inventory", "reserve", comp), lease_ms=3600001),
            P.BeginStepRequest(key=key("not valid!", "Payment", "")),
            P.BeginStepRequest(),
        ],
        "CompleteStep": [
            P.CompleteStepRequest(key=key(), attempt=1, outcome=P.OUTCOME_SUCCEEDED, code=200,
                                  body=b'{"charge":"ch_1"}'),
            P.CompleteStepRequest(key=key(), attempt=1, outcome=P.OUTCOME_FAILED, code=402),
            P.CompleteStepRequest(key=key(), attempt=1, outcome=P.OUTCOME_RETRYABLE),
            P.CompleteStepRequest(key=key(), attempt=1, outcome=P.OUTCOME_UNKNOWN),
            P.CompleteStepRequest(key=key("g-2"), attempt=1, outcome=P.OUTCOME_SUCCEEDED,
                                  code=200, body=b'{"ok":true}'),
            P.CompleteStepRequest(key=key(), attempt=2, outcome=P.OUTCOME_SUCCEEDED),
            P.CompleteStepRequest(key=key("g-7"), attempt=1, outcome=P.OUTCOME_SUCCEEDED),
        ],
        "ExtendLease": [
            P.ExtendLeaseRequest(key=key(), attempt=1, lease_ms=20000),
            P.ExtendLeaseRequest(key=key(), attempt=1),
            P.ExtendLeaseRequest(key=key("g-2"), attempt=1, lease_ms=1000),
            P.ExtendLeaseRequest(key=key(), attempt=0),
        ],
        "LookupStep": [
            P.LookupStepRequest(key=key()),
            P.LookupStepRequest(key=key("g-2", phase=comp)),
            P.LookupStepRequest(key=key("g-404")),
        ],
        "GetSaga": [P.GetSagaRequest(global_id=g) for g in ("g-1", "g-2", "g-404", "")],
        "GetPolicy": [
            P.GetPolicyRequest(service="payment", operation="charge"),
            P.GetPolicyRequest(service="payment", operation="refund"),
            P.GetPolicyRequest(service="*", operation="*"),
        ],
        "ListSteps": [
            P.ListStepsRequest(),
            P.ListStepsRequest(state=P.STEP_STATE_IN_PROGRESS, lease_expired_only=True),
            P.ListStepsRequest(service="payment", operation="charge", page_size=1),
            P.ListStepsRequest(global_id="g-2", updated_before_unix_ms=1767225600000),
            P.ListStepsRequest(page_size=1, page_token=steps_token("default", "g-1", "payment",
                                                                   "charge", 1)),
        ],
        "ResolveStep": [
            P.ResolveStepRequest(key=key(), outcome=P.OUTCOME_SUCCEEDED, code=200,
                                 body=b"{}", reason="charge confirmed with the PSP"),
            P.ResolveStepRequest(key=key("g-2", phase=comp), outcome=P.OUTCOME_RETRYABLE,
                                 reason="refund never reached the PSP", actor="ops@example"),
            P.ResolveStepRequest(key=key("g-3"), outcome=P.OUTCOME_FAILED, reason="x"),
            P.ResolveStepRequest(key=key(), outcome=P.OUTCOME_SUCCEEDED, reason=""),
        ],
        "SetPolicy": [
            P.Policy(service="payment", operation="charge", failure_mode=P.FAILURE_MODE_FAIL_OPEN,
                     retention_s=3600, lease_ms=5000),
            P.Policy(service="*", operation="*", failure_mode=P.FAILURE_MODE_FAIL_CLOSED,
                     retention_s=86400, lease_ms=30000),
            P.Policy(service="mail", operation="*", failure_mode=P.FAILURE_MODE_FAIL_OPEN,
                     retention_s=1, lease_ms=1),
            P.Policy(service="*", operation="charge", failure_mode=P.FAILURE_MODE_FAIL_OPEN),
        ],
        "DeletePolicy": [
            P.DeletePolicyRequest(service="payment", operation="charge"),
            P.DeletePolicyRequest(service="mail", operation="*"),
        ],
        "ListPolicies": [P.ListPoliciesRequest()],
        "ListAudit": [
            P.ListAuditRequest(),
            P.ListAuditRequest(global_id="g-1", page_size=1),
            P.ListAuditRequest(page_token=audit_token("default", "", 99)),
        ],
        "GetStatus": [P.GetStatusRequest()],
        "HealthCheck": [HealthCheckRequest(service=s)
                        for s in ("", "idem.v1.Coordinator", "other")],
    }
    order = method_order()
    if sorted(order) != sorted(seeds):
        sys.exit("gen_corpus.py: rpc_methods.c has %s; seeds cover %s" % (order, sorted(seeds)))
    for name, msgs in seeds.items():
        i = order.index(name)
        for k, m in enumerate(msgs, 1):
            write("rpc", "%s-%d" % (name, k), bytes([i]) + m.SerializeToString(deterministic=True))
    # the store unreachable: fail-open (payment/charge) and fail-closed answers
    write("rpc", "BeginStep-down-1", bytes([order.index("BeginStep") + n]) +
          seeds["BeginStep"][0].SerializeToString(deterministic=True))
    inventory = P.BeginStepRequest(key=key("g-8", "inventory", "reserve"))
    write("rpc", "BeginStep-down-2", bytes([order.index("BeginStep") + n]) +
          inventory.SerializeToString(deterministic=True))
    write("rpc", "GetStatus-down-1", bytes([order.index("GetStatus") + n]))
    # the idem-tenant metadata given (flag 2): another tenant, an invalid one, one too long
    for name, k in (("BeginStep", 0), ("ListSteps", 4), ("SetPolicy", 0)):
        for tenant in (b"acme", b"bad tenant!", b"t" * 130):
            msg = seeds[name][k].SerializeToString(deterministic=True)
            write("rpc", "%s-tenant-%d" % (name, len(tenant)),
                  bytes([order.index(name) + 2 * n, len(tenant)]) + tenant + msg)
    # a string field holding a NUL byte (refused by rpc__decode)
    write("rpc", "GetSaga-nul", bytes([order.index("GetSaga")]) + b"\x0a\x03g\x001")


# --- page tokens, as server/coord/coord_admin.c makes them (FNV-1a, base64url) ---

def fnv(h, s):
    for c in s.encode():
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return ((h ^ 0x1F) * 1099511628211) & 0xFFFFFFFFFFFFFFFF


def b64url(raw):
    import base64
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def steps_token(tenant, gid, svc, op, phase, state=0, before=0, expired=0):
    h = fnv(0xCBF29CE484222325, tenant)
    h = fnv(h, "%d/%d/%d" % (state, before, expired))
    for s in ("", "", ""):  # service, operation, global_id filters: none
        h = fnv(h, s)
    return b64url(("s%016x%s\x1f%s\x1f%s\x1f%d" % (h, gid, svc, op, phase)).encode())


def audit_token(tenant, gid, last_id):
    h = fnv(fnv(0xCBF29CE484222325, tenant), gid)
    return b64url(("a%016x%d" % (h, last_id)).encode())


# --- etcd v3 gateway replies ---

HDR = ('{"cluster_id":"14841639068965178418","member_id":"10276657743932975437",'
       '"revision":"%s","raft_term":"2"}')

ETCD = {
    "grant": '0{"header":%s,"ID":"7587869562384651013","TTL":"5"}' % (HDR % 5),
    "grant-numbers": '0{"header":{"revision":5},"ID":7587869562384651013,"TTL":5}',
    "grant-no-id": '0{"header":%s,"TTL":"5"}' % (HDR % 5),
    "keepalive": '0{"result":{"header":%s,"ID":"7587869562384651013","TTL":"5"}}\n'
                 % (HDR % 6),
    "keepalive-expired": '0{"result":{"header":%s,"ID":"7587869562384651013"}}\n' % (HDR % 9),
    "keepalive-two": '1{"result":{"header":{"revision":"6"},"ID":"1","TTL":"4"}}\n'
                     '{"result":{"header":{"revision":"6"},"ID":"1","TTL":"5"}}\n',
    "keepalive-stream-error": '6{"error":{"grpc_code":14,"http_code":503,'
                              '"message":"etcdserver: no leader","http_status":"Service Unavailable"}}',
    "campaign": '0{"header":%s,"leader":{"name":"L2lkZW0vbGVhZGVy",'
                '"key":"L2lkZW0vbGVhZGVyLzY5MzQ4ZjFhYjM4MjE5MDU=","rev":"12",'
                '"lease":"7587869562384651013"}}' % (HDR % 12),
    "campaign-no-rev": '0{"header":%s,"leader":{"name":"L2lkZW0vbGVhZGVy",'
                       '"key":"L2lkZW0vbGVhZGVyLzE="}}' % (HDR % 12),
    "leader": '0{"header":%s,"kv":{"key":"L2lkZW0vbGVhZGVyLzY5MzQ4ZjFhYjM4MjE5MDU=",'
              '"create_revision":"12","mod_revision":"12","version":"1",'
              '"value":"MTI3LjAuMC4xOjUwMDUx","lease":"7587869562384651013"}}' % (HDR % 15),
    "leader-empty-value": '0{"header":%s,"kv":{"key":"L2lkZW0vbGVhZGVyLzE=",'
                          '"create_revision":"3","mod_revision":"3","version":"1"}}' % (HDR % 3),
    "leader-bad-b64": '0{"header":{"revision":"4"},"kv":{"key":"a2V5","value":"MTI3=LjA"}}',
    "leader-padding": '0{"kv":{"key":"a2V5","value":"YQ=="},"header":{"revision":"7"}}',
    "no-leader": '5{"error":"election: no leader","code":2,"message":"election: no leader"}',
    "revoke": '0{"header":%s}' % (HDR % 20),
    "revoke-not-found": '4{"error":"etcdserver: requested lease not found","code":5,'
                        '"message":"etcdserver: requested lease not found"}',
    "range": '0{"header":%s,"kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":"2",'
             '"version":"1","value":"YmFy"}],"count":"1"}' % (HDR % 2),
    "range-empty": '0{"header":%s}' % (HDR % 2),
    "txn-succeeded": '0{"header":%s,"succeeded":true,"responses":[{"response_put":'
                     '{"header":{"revision":"6"}}}]}' % (HDR % 6),
    "txn-failed": '0{"header":%s,"responses":[{"response_range":{"header":{"revision":"6"},'
                  '"kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":"5",'
                  '"version":"3","value":"YmF6"}],"count":"1"}}]}' % (HDR % 6),
    "compacted": '3{"error":"etcdserver: mvcc: required revision has been compacted",'
                 '"code":11,"message":"etcdserver: mvcc: required revision has been compacted"}',
    "leader-changed": '6{"error":"etcdserver: leader changed","code":14,'
                      '"message":"etcdserver: leader changed"}',
    "gateway-text": '6upstream connect error or disconnect/reset before headers',
    "empty-200": '0',
    "error-on-200": '0{"error":"etcdserver: request timed out","code":14}',
    "no-status": '7{"header":{"revision":"1"}}',
    # found by fuzzing: a number outside int64 (was undefined behaviour in etcd__i64)
    "regress-i64-range": '0{"header":{"revision":0},"ID":8.3e113,"TTL":-1e300,'
                         '"leader":{"key":"a2V5","rev":1e19}}',
    "unicode": '0{"header":{"revision":"1"},"kv":{"key":"\\u00e9\\ud83d\\ude00","value":""}}',
}

# --- config files ---

CONFIG = {
    "readme": """listen = 127.0.0.1:50051
pg = postgresql://idem@db/idem
workers = 8
reaper-interval = 60          ; underscores work too: reaper_interval

[policy "payment charge"]     ; or [policy payment/charge]; "*" allowed as above
failure_mode = fail-closed    ; fail-closed | fail-open
retention = 7d                ; ms, s, m, h, d; a bare number is seconds
lease = 30s
; tenant = shop               ; default "*": a server-wide row, for every tenant

[policy mail/*]
failure_mode = fail-open
retention = 1h
""",
    "server-section": """# all options under [server]
[server]
listen = 0.0.0.0:50051
log_format = json
store_timeout_ms = 1500
node-id = node-a
etcd = http://127.0.0.1:2379,http://127.0.0.1:22379
election-ttl = 5
metrics = 127.0.0.1:9464
""",
    "policies": """[policy "* *"]
mode = closed
retention = 86400
lease = 250ms

[policy "inventory\treserve"]
failure-mode = FAIL_OPEN
lease = 1h
tenant = shop

[policy payment/*]
retention = 90d
tenant = *
""",
    "bad-key": "colour = blue\n",
    "bad-section": "[clients]\nlisten = x\n",
    "bad-policy": "[policy payment]\nretention = 1s\n",
    "bad-durations": "[policy a/b]\nretention = 1500ms\nlease = 0\n",
    "bad-mode": "[policy a/b]\nfailure_mode = sometimes\n",
    "syntax": "listen\n[policy \"x y\"\n",
    "bom-multiline": "\ufefflisten = 127.0.0.1:1\n  continued\n[policy a/b]\ntenant = t-1\n",
    "long-line": "pg = " + "x" * 300 + "\n",
    "empty": "",
}


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    rpc_seeds(protos())
    for name, body in ETCD.items():
        write("etcd", name + ".json", body.encode())
    for name, body in CONFIG.items():
        write("config", name + ".ini", body.encode())
    for sub in sorted(os.listdir(OUT)):
        print("%s: %d files" % (os.path.join("fuzz/corpus", sub), len(os.listdir(os.path.join(OUT, sub)))))


if __name__ == "__main__":
    main()
