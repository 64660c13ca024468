#!/usr/bin/python3
"""bench-stages.py — the stages of a step call over one paced run, from two scrapes of /metrics
(before and after the run) and the run's idem-bench --json line (scripts/bench --stages). With
STAGES_SUMMARY set, also appends the run's p99s as one JSON line to that file (STAGES_VARIANT
names the coordinator).

  bench-stages.py BEFORE.prom AFTER.prom BENCH.json LABEL [METHOD]

Prints, for METHOD (default Coordinator/BeginStep), one row per stage of idem_stage_seconds and
one for the whole call (idem_stage_call_seconds): calls counted, mean, p50, p99, p99.9 and the
share of calls over 5 and 10 ms, each percentile interpolated inside its bucket as Prometheus's
histogram_quantile does (the buckets are a factor of about 1.26 apart: a percentile is good to
that factor). Then the RPC's p99 as the client saw it (idem-bench: from the intended start, and
the RPC alone), and what the stages leave unexplained:
  - in the mean: the call's mean minus the stages arrive..reply (0 up to rounding when they add up);
  - at p99: the client's RPC p99 minus the server's call p99 (the network, gRPC's transport on
    both sides before the call reaches the completion queue thread, and the client library).
"""
import json
import os
import re
import sys

LINE = re.compile(r'^(idem_stage_seconds|idem_stage_call_seconds)_(bucket|sum|count)\{([^}]*)\} (\S+)$')
STAGES = ["arrive", "handler", "queue", "read", "write", "commit", "answer", "reply", "send"]


def parse(path, method):
    """{stage or 'call': {'b': [(le, cum)], 'sum': s, 'count': n}}"""
    out = {}
    for line in open(path):
        m = LINE.match(line.strip())
        if not m:
            continue
        fam, kind, labels, v = m.groups()
        lab = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if lab.get("method") != method:
            continue
        key = lab.get("stage", "call") if fam == "idem_stage_seconds" else "call"
        h = out.setdefault(key, {"b": [], "sum": 0.0, "count": 0.0})
        if kind == "bucket":
            le = float("inf") if lab["le"] == "+Inf" else float(lab["le"])
            h["b"].append((le, float(v)))
        elif kind == "sum":
            h["sum"] = float(v)
        else:
            h["count"] = float(v)
    return out


def diff(a, b):
    """b - a, per bucket"""
    out = {}
    for k, hb in b.items():
        ha = a.get(k, {"b": [], "sum": 0.0, "count": 0.0})
        before = dict(ha["b"])
        out[k] = {"b": [(le, c - before.get(le, 0.0)) for le, c in hb["b"]],
                  "sum": hb["sum"] - ha["sum"], "count": hb["count"] - ha["count"]}
    return out


def quantile(h, q):
    """histogram_quantile over cumulative buckets, in ms; None without calls"""
    b = h["b"]
    n = b[-1][1] if b else 0
    if n <= 0:
        return None
    rank = q * n
    prev_le, prev_c = 0.0, 0.0
    for le, c in b:
        if c >= rank:
            if le == float("inf"):
                return prev_le * 1000
            if c == prev_c:
                return le * 1000
            return (prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)) * 1000
        prev_le, prev_c = le, c
    return prev_le * 1000


def over(h, ms):
    """share of calls above ms (at a bucket bound), in %"""
    b = h["b"]
    n = b[-1][1] if b else 0
    if n <= 0:
        return None
    below = max((c for le, c in b if le <= ms / 1000 + 1e-12), default=0.0)
    return 100.0 * (n - below) / n


def fmt(v, unit=""):
    if v is None:
        return "-"
    if not unit and v <= 0.05:  # inside the first bucket: below its bound, nothing more is known
        return "<= 0.05"
    return "%.2f%s" % (v, unit)


def main():
    before, after, bench, label = sys.argv[1:5]
    method = sys.argv[5] if len(sys.argv) > 5 else "Coordinator/BeginStep"
    d = diff(parse(before, method), parse(after, method))
    r = {}
    for line in open(bench):
        if line.strip().startswith("{"):
            r = json.loads(line)
    print("### %s: %s pairs/s asked, %s got (%s, %s s)" % (
        label, r.get("rate", "?"), r.get("throughput", "?"), method.split("/")[-1], r.get("seconds", "?")))
    print()
    print("| stage | calls | mean ms | p50 ms | p99 ms | p99.9 ms | > 5 ms | > 10 ms |")
    print("|---|---|---|---|---|---|---|---|")
    inside = 0.0
    for s in STAGES + ["call"]:
        h = d.get(s)
        if not h or h["count"] <= 0:
            print("| %s | 0 | - | - | - | - | - | - |" % s)
            continue
        mean = 1000 * h["sum"] / h["count"]
        if s in STAGES[:-1]:
            inside += mean
        name = "**call** (arrive..reply)" if s == "call" else s
        print("| %s | %d | %.3f | %s | %s | %s | %s | %s |" % (
            name, h["count"], mean, fmt(quantile(h, .5)), fmt(quantile(h, .99)),
            fmt(quantile(h, .999)), fmt(over(h, 5), " %"), fmt(over(h, 10), " %")))
    call = d.get("call")
    call_mean = 1000 * call["sum"] / call["count"] if call and call["count"] > 0 else None
    call_p99 = quantile(call, .99) if call else None
    print()
    cl_rpc, cl_int = r.get("begin_rpc_p99_ms"), r.get("begin_p99_ms")
    print("- client-seen BeginStep p50/p99/p99.9: %s / %s / %s ms from the intended start; "
          "the RPC alone %s / %s / %s ms" % (
              r.get("begin_p50_ms"), cl_int, r.get("begin_p999_ms"),
              r.get("begin_rpc_p50_ms"), cl_rpc, r.get("begin_rpc_p999_ms")))
    if call_mean is not None:
        print("- unexplained in the mean: call %.3f ms - stages arrive..reply %.3f ms = %.3f ms" % (
            call_mean, inside, call_mean - inside))
    if call_p99 is not None and cl_rpc is not None:
        print("- unexplained at p99: client RPC p99 %.2f ms - server call p99 %.2f ms = %.2f ms "
              "(network, gRPC transport outside the call's clock, the client)" % (
                  cl_rpc, call_p99, cl_rpc - call_p99))
    summary = os.environ.get("STAGES_SUMMARY")
    if summary:
        row = {"label": label, "variant": os.environ.get("STAGES_VARIANT", "A"), "method": method,
               "got": r.get("throughput"), "client_p50": r.get("begin_p50_ms"), "client_p99": cl_int,
               "client_p999": r.get("begin_p999_ms"), "client_rpc_p99": cl_rpc,
               "start_late_p50": r.get("start_late_p50_ms"), "start_late_p99": r.get("start_late_p99_ms"),
               "stall_max": r.get("stall_max_ms"),
               "call_p99": call_p99, "call_p999": quantile(call, .999) if call else None,
               "call_over10": over(call, 10) if call else None}
        for s in STAGES:
            h = d.get(s)
            row[s + "_p99"] = quantile(h, .99) if h and h["count"] > 0 else None
        with open(summary, "a") as f:
            f.write(json.dumps(row) + "\n")
    if cl_int is not None and cl_rpc is not None:
        print("- the load generator's own lag at p99 (intended start vs RPC alone): %.2f ms" % (
            cl_int - cl_rpc))
    if r.get("stall_max_ms") is not None:
        print("- the machine's stalls during the run (a 2 ms sleep, idem-bench --stall-probe): woke late "
              "by p99/p99.9/max %s / %s / %s ms; %s of %s wake-ups more than 5 ms late" % (
                  r.get("stall_p99_ms"), r.get("stall_p999_ms"), r.get("stall_max_ms"),
                  r.get("stalls_over_5ms"), r.get("stall_wakeups")))
    if r.get("start_late_p50_ms") is not None:
        print("- paced calls started late by p50/p99/p99.9 %s / %s / %s ms (idem-bench's timer)" % (
            r.get("start_late_p50_ms"), r.get("start_late_p99_ms"), r.get("start_late_p999_ms")))
    print()


if __name__ == "__main__":
    main()
