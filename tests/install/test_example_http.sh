#!/usr/bin/env bash
# tests/install/test_example_http.sh BUILD — the HTTP examples (scripts/example-http go|node|python|java)
# fail loudly and run side by side:
#   1. on a port another program listens on, each exits non-zero within 30 s, naming the port and
#      PORT=, and never says "listening" (scripts/example-http checks before building);
#   2. on a port another socket has bound without listening (the wrapper's check cannot see it),
#      each example itself refuses it the same way, after its build (within 90 s);
#   3. beside scripts/quickstart (no build: first_hour_lib.sh; its console on the default
#      127.0.0.1:8080), all four started together on their default ports (8081, 8082, 8083, 8084)
#      answer; one Idempotency-Key sent to each runs once in each (their own services) and is
#      replayed on the retry; `idemctl --tenant shop steps` shows http-go, http-node, http-python.
# Needs 127.0.0.1:8080-8084 free (it says which one is not). Everything it starts is stopped by PID.
set -euo pipefail
build=$(cd "${1:?usage: test_example_http.sh BUILD_DIR}" && pwd)
src=${IDEM_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
work=$(mktemp -d /tmp/idem-example-http.XXXXXX)
chmod 755 "$work"
fail() { echo "test_example_http: FAILED: $*" >&2; exit 1; }
# shellcheck source=tests/install/first_hour_lib.sh
. "$src/tests/install/first_hour_lib.sh"
pids=() # the holders and the examples started here
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  qs_stop
  rm -rf "$work"
}
trap cleanup EXIT
export IDEM_GO_BUILD_DIR="$build/go" # the Go tests' cache (go.sh links the same client-lib/go)
unset PORT IDEM_TENANT IDEM_SERVICE
langs=(go node python java)

# hold MODE: a socket on a free port of 127.0.0.1, kept until killed; prints the port
hold() {
  /usr/bin/python3 -u -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
if sys.argv[1] == "listen":
    s.listen()
print(s.getsockname()[1])
time.sleep(3600)' "$1" >"$work/hold-$1" &
  pids+=($!)
  local deadline=$((SECONDS + 10))
  until [ -s "$work/hold-$1" ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "the $1 holder did not start"
    sleep 0.05
  done
}

# refused LANG PORT LIMIT: scripts/example-http LANG on PORT must exit non-zero within LIMIT s
refused() {
  local lang=$1 port=$2 limit=$3 rc=0 t0=$SECONDS out
  out="$work/refused-$1-$2"
  PORT=$port IDEM_ADDRESS=127.0.0.1:1 timeout $((limit + 5)) "$src/scripts/example-http" "$lang" \
    >"$out" 2>&1 </dev/null || rc=$?
  local took=$((SECONDS - t0))
  [ "$rc" != 0 ] || fail "$lang on taken port $port: exit 0: $(cat "$out")"
  [ "$rc" != 124 ] || fail "$lang on taken port $port: still running after $((limit + 5)) s: $(cat "$out")"
  [ "$took" -le "$limit" ] || fail "$lang on taken port $port: took $took s (limit $limit)"
  grep -q -- "$port" "$out" || fail "$lang on taken port $port: the port is not named: $(cat "$out")"
  grep -q -- "PORT=" "$out" || fail "$lang on taken port $port: PORT= is not named: $(cat "$out")"
  ! grep -qi listening "$out" || fail "$lang on taken port $port: says listening: $(cat "$out")"
  echo "$lang on taken port $port: exit $rc after $took s: $(grep -m1 -- "PORT=" "$out")"
}

# 1. a port something listens on
hold listen
for lang in "${langs[@]}"; do refused "$lang" "$(cat "$work/hold-listen")" 30; done
# 2. a port bound without listening: each example's own refusal, after its build
hold bind
for lang in "${langs[@]}"; do refused "$lang" "$(cat "$work/hold-bind")" 90; done

# 3. side by side beside quickstart, on the default ports
for port in 8080 8081 8082 8083 8084; do # bound by another socket (SO_REUSEADDR: TIME-WAIT does not count)
  /usr/bin/python3 -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null ||
    fail "127.0.0.1:$port is taken by another program: this test needs 8080 (quickstart's console) and 8081-8084 (the examples' defaults)"
done
qs_standin "$build"
listen="127.0.0.1:$(free_port)"
qs_start "$src" "$work/dev" "$listen" "127.0.0.1:8080" "$work/quickstart.out"
ctl="$work/dev/prefix/bin/idemctl"
declare -A port=([go]=8081 [node]=8082 [python]=8083 [java]=8084)
for lang in "${langs[@]}"; do
  IDEM_ADDRESS=$listen "$src/scripts/example-http" "$lang" >"$work/example-$lang" 2>&1 </dev/null &
  pids+=($!)
  eval "pid_$lang=$!"
done
deadline=$((SECONDS + 180))
for lang in "${langs[@]}"; do
  p="pid_$lang"
  until curl -fsS -o /dev/null "http://127.0.0.1:${port[$lang]}/stats" 2>/dev/null; do
    kill -0 "${!p}" 2>/dev/null || fail "$lang exited: $(cat "$work/example-$lang")"
    [ "$SECONDS" -lt "$deadline" ] || fail "$lang did not answer on ${port[$lang]}: $(cat "$work/example-$lang")"
    sleep 0.2
  done
  grep -q "listening on.*${port[$lang]}" "$work/example-$lang" || fail "$lang: no listening line: $(cat "$work/example-$lang")"
  timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/8080' || fail "quickstart's console no longer listens on 8080"
  echo "$lang answers on ${port[$lang]} beside quickstart (console on 8080)"
done

key="first-hour-$$-$RANDOM"
post() { # post PORT: prints "STATUS REPLAYED" for POST /payments under $key
  curl -sS -o /dev/null -D - -X POST -H "Idempotency-Key: \"$key\"" -H 'Content-Type: application/json' \
    -d '{"amount":100}' "http://127.0.0.1:$1/payments" |
    awk 'NR == 1 { s = $2 } tolower($1) == "idempotent-replayed:" { r = $2 } END { sub(/\r/, "", r); print s, (r == "" ? "-" : r) }'
}
for lang in "${langs[@]}"; do
  first=$(post "${port[$lang]}")
  [ "$first" = "201 -" ] || fail "$lang: the first POST under a key the others also got: '$first' (expected 201, not replayed); its log: $(tail -n 8 "$work/example-$lang")"
  second=$(post "${port[$lang]}")
  [ "$second" = "201 true" ] || fail "$lang: the retry: '$second' (expected 201 Idempotent-Replayed: true)"
  echo "$lang: the key ran once ($first), its retry was replayed ($second)"
done
out=$("$ctl" --addr "$listen" --tenant shop steps 2>&1) || fail "idemctl --tenant shop steps: $out"
for svc in http-go http-node http-python http-java; do
  grep -q -- "$svc" <<<"$out" || fail "idemctl --tenant shop steps does not show $svc: $out"
done
echo "test_example_http: ok (each refused a taken port, naming it; all four answered beside quickstart)"
