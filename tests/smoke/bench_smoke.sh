#!/usr/bin/env bash
# Smoke test, not a benchmark: every idem-bench workload runs briefly against a real
# idem-coordinator and must finish exactly --count operations with no errors, reporting the
# BeginStep latency too; a run paced with --rate must take at least as long as the rate says.
# usage: bench_smoke.sh IDEM_BENCH_BIN   (IDEM_COORDINATOR_BIN and IDEM_TEST_PG_URL from scripts/test)
set -euo pipefail
bench=$1
: "${IDEM_COORDINATOR_BIN:?run through scripts/test}" "${IDEM_TEST_PG_URL:?run through scripts/test}"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
log=$(mktemp /tmp/idem-bench-smoke.XXXXXX)
"$IDEM_COORDINATOR_BIN" --listen "127.0.0.1:$port" --pg "$IDEM_TEST_PG_URL" 2>"$log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 1 300); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.1
done
tenant="smoke-$$-$RANDOM"
fail=0
# the last run is paced: --rate 100 for 20 operations cannot finish in under 0.19 s; storm-wait
# and dups wait on the coordinator (wait_ms) for the caller that proceeds. The paced run also
# reports how late its timer started the operations that waited, and (--stall-probe) the
# machine's stalls: a probe thread's wake-ups every 2 ms over the run
for run in pairs replay storm storm-wait dups saga paced; do
  w=$run extra=(--count 40)
  case $run in
    paced) w=pairs extra=(--rate 100 --count 20 --stall-probe) ;;
    storm-wait) w=storm extra=(--count 40 --wait-ms 5000) ;;
    dups) extra=(--count 40 --wait-ms 5000 --action-ms 5) ;;
  esac
  out=$("$bench" --addr "127.0.0.1:$port" --tenant "$tenant" --workload "$w" "${extra[@]}" \
        --concurrency 8 --channels 2 --keys 50 --json) || { echo "$run: exit $?: $out"; fail=1; continue; }
  echo "$out"
  /usr/bin/python3 - "$out" "$run" <<'PY' || fail=1
import json, sys
r, run = json.loads(sys.argv[1]), sys.argv[2]
for k in ("workload", "ops", "seconds", "throughput", "p50_ms", "p90_ms", "p99_ms", "max_ms", "errors",
          "begins", "begin_p50_ms", "begin_p90_ms", "begin_p99_ms", "begin_max_ms", "rate",
          "p999_ms", "begin_p999_ms"):
    assert k in r, "missing key %s" % k
assert r["ops"] == (20 if run == "paced" else 40), "ops %d, not the --count" % r["ops"]
assert r["errors"] == {}, "errors: %r" % r["errors"]
assert r["p50_ms"] <= r["p90_ms"] <= r["p99_ms"] <= r["p999_ms"] <= r["max_ms"], "percentiles out of order"
assert run == "dups" or r["begins"] >= r["ops"], "BeginStep latencies missing"
assert r["begin_p50_ms"] <= r["begin_p90_ms"] <= r["begin_p99_ms"] <= r["begin_p999_ms"] <= r["begin_max_ms"], \
    "BeginStep percentiles out of order"
if run == "paced":
    assert r["rate"] == 100 and r["seconds"] >= 0.19, "--rate 100 ran 20 ops in %.3f s" % r["seconds"]
    for k in ("start_late_p50_ms", "start_late_p99_ms", "start_late_p999_ms", "stall_p99_ms",
              "stall_p999_ms", "stall_max_ms", "stall_wakeups", "stalls_over_5ms"):
        assert k in r, "paced run: missing key %s" % k
    assert 0 <= r["start_late_p50_ms"] <= r["start_late_p99_ms"] <= r["start_late_p999_ms"], \
        "start lateness out of order: %r" % r
    assert 0 <= r["stall_p99_ms"] <= r["stall_p999_ms"] <= r["stall_max_ms"], "stalls out of order: %r" % r
    # 0.19 s or more at one wake-up every 2 ms: about 95; a long stall skips the periods it ate
    assert r["stall_wakeups"] >= 10 and r["stalls_over_5ms"] <= r["stall_wakeups"], \
        "stall probe: %d wake-ups, %d late" % (r["stall_wakeups"], r["stalls_over_5ms"])
PY
done

# no coordinated omission: one caller paced at 2,000 pairs/s cannot keep up (a pair is a
# round trip of two durable commits), so operation i starts ever later than i/2000 s; counted
# from the intended start its latency grows with the backlog, far beyond the RPC's own.
out=$("$bench" --addr "127.0.0.1:$port" --tenant "$tenant" --workload pairs --rate 2000 --count 200 \
      --concurrency 1 --channels 1 --json) || { echo "behind: exit $?: $out"; fail=1; }
echo "$out"
/usr/bin/python3 - "$out" <<'PY' || fail=1
import json, sys
r = json.loads(sys.argv[1])
late_ms = (r["seconds"] - 200 / 2000.0) * 1000  # how far behind the schedule the run ended
assert late_ms > 20, "the run kept up with 2,000/s (%.1f ms behind): cannot tell" % late_ms
assert r["max_ms"] >= 0.5 * late_ms, "max %.1f ms while the run ended %.1f ms behind: latency " \
    "counted from the actual start (coordinated omission)" % (r["max_ms"], late_ms)
assert r["p99_ms"] > 3 * r["begin_rpc_p99_ms"], "p99 %.2f ms, the BeginStep RPC alone %.2f ms" % (
    r["p99_ms"], r["begin_rpc_p99_ms"])
PY

# --sweep: the maximum first, then each point at its rate, one JSON object per line
out=$("$bench" --addr "127.0.0.1:$port" --tenant "$tenant" --workload pairs --duration 1 \
      --concurrency 8 --channels 2 --sweep 50,50% --json) || { echo "sweep: exit $?: $out"; fail=1; }
echo "$out"
/usr/bin/python3 - "$out" <<'PY' || fail=1
import json, sys
rs = [json.loads(l) for l in sys.argv[1].splitlines() if l.startswith("{")]
assert [r["phase"] for r in rs] == ["maximum", "50 per s", "50% of the maximum"], [r.get("phase") for r in rs]
mx = rs[0]["throughput"]
assert rs[0]["rate"] == 0 and mx > 0, rs[0]
assert rs[1]["rate"] == 50 and 25 <= rs[1]["throughput"] <= 60, rs[1]
assert abs(rs[2]["rate"] - mx / 2) < 1, (rs[2]["rate"], mx)
assert all(r["errors"] == {} for r in rs), [r["errors"] for r in rs]
PY
for bad in "0" "abc" "150%" "10,,x"; do
  if err=$("$bench" --addr "127.0.0.1:$port" --workload pairs --sweep "$bad" 2>&1); then
    echo "--sweep $bad was accepted"; fail=1
  else
    case $err in *"--sweep"*) ;; *) echo "--sweep $bad: the error does not name the flag: $err"; fail=1 ;; esac
  fi
done
exit $fail
