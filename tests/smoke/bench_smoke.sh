#!/usr/bin/env bash
# Smoke test, not a benchmark: every idem-bench workload runs briefly against a real
# idem-coordinator and must finish with operations done and no errors.
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
for w in pairs replay storm saga; do
  out=$("$bench" --addr "127.0.0.1:$port" --tenant "$tenant" --workload "$w" --count 40 \
        --concurrency 8 --channels 2 --keys 50 --json) || { echo "$w: exit $?: $out"; fail=1; continue; }
  echo "$out"
  /usr/bin/python3 - "$out" <<'PY' || fail=1
import json, sys
r = json.loads(sys.argv[1])
for k in ("workload", "ops", "seconds", "throughput", "p50_ms", "p90_ms", "p99_ms", "max_ms", "errors"):
    assert k in r, "missing key %s" % k
assert r["ops"] > 0, "no operations"
assert r["errors"] == {}, "errors: %r" % r["errors"]
assert r["p50_ms"] <= r["p90_ms"] <= r["p99_ms"] <= r["max_ms"], "percentiles out of order"
PY
done
exit $fail
