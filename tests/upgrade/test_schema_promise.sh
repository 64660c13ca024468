#!/usr/bin/env bash
# tests/upgrade/test_schema_promise.sh COORDINATOR IDEMCTL VERSION — the schema promise
# (docs/upgrading.md) against a real PostgreSQL ($IDEM_TEST_PG_URL, a database of its own):
#   1. a node migrates a fresh database; `idemctl status --json` shows the version the build
#      reports (VERSION, CMake's, or its dev form: scripts/lib/release.sh) and the
#      schema it runs on = the newest it knows (N);
#   2. a newer expansion recorded (version N+1, needs 0: what a newer release's migration writes)
#      → the node starts, says so in its log, and GetStatus shows schema N+1 of N known;
#   3. a newer contraction recorded (version N+2, needs N+1) → the node refuses to start: exit 2,
#      its error naming the schema's version, the version it needs and the node's own.
set -euo pipefail
coord=${1:?coordinator} ctl=${2:?idemctl} base=${3:?version}
. "$(cd "$(dirname "$0")/../.." && pwd)/scripts/lib/release.sh"
want=$(release_build_version "$(cd "$(dirname "$0")/../.." && pwd)")
case $want in "$base" | *-dev+*) ;; *) echo "test_schema_promise: a build of $base reports $want" >&2; exit 1 ;; esac
url=${IDEM_TEST_PG_URL:?IDEM_TEST_PG_URL is not set}
work=$(mktemp -d /tmp/idem-schema.XXXXXX)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "test_schema_promise: FAILED: $*" >&2; for f in "$work"/*.log; do echo "--- $f" >&2; tail -n 20 "$f" >&2; done; exit 1; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
sql() { psql -qAt "$url" -v ON_ERROR_STOP=1 -c "$1"; }

# start LOG: a node on the database; waits until it answers GetStatus (60 s), its status in $work/status.json
start() {
  local log=$1 tries=0
  while :; do
    addr="127.0.0.1:$(free_port)"
    "$coord" --pg "$url" --listen "$addr" >"$work/$log" 2>&1 &
    pid=$!
    local deadline=$((SECONDS + 60))
    until "$ctl" --addr "$addr" --deadline-ms 1000 --json status >"$work/status.json" 2>/dev/null; do
      if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid" || true
        pid=""
        # a lost race for the port: again on another
        grep -q "cannot start the server\|address in use" "$work/$log" && [ $((tries += 1)) -lt 5 ] && continue 2
        fail "the node exited during its start ($log)"
      fi
      [ "$SECONDS" -lt "$deadline" ] || fail "the node did not answer within 60 s ($log)"
      sleep 0.2
    done
    return 0
  done
}
stop() { kill -TERM "$pid"; wait "$pid" || fail "the node's exit on SIGTERM: $?"; pid=""; }
field() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$work/status.json" "$1"; }

# 1. a fresh database
start node1.log
[ "$(field version)" = "$want" ] || fail "GetStatus version $(field version), the build's $want"
newest=$(field schema_newest)
[ "$newest" -ge 10 ] || fail "schema_newest $newest"
[ "$(field schema_version)" = "$newest" ] || fail "schema_version $(field schema_version), newest $newest"
[ "$(sql "SELECT max(version) FROM idem_schema_version")" = "$newest" ] ||
  fail "idem_schema_version holds $(sql "SELECT max(version) FROM idem_schema_version"), the node says $newest"
[ "$(sql "SELECT count(*) FROM idem_schema_version WHERE needs <> 0")" = 0 ] ||
  fail "a migration up to $newest recorded as a contraction"
stop
echo "fresh database: schema $newest, version $want"

# 2. a newer expansion: the node runs on it
sql "INSERT INTO idem_schema_version (version, applied_ms, needs) VALUES ($((newest + 1)), 0, 0)"
start node2.log
[ "$(field schema_version)" = $((newest + 1)) ] || fail "schema_version $(field schema_version) after an expansion to $((newest + 1))"
[ "$(field schema_newest)" = "$newest" ] || fail "schema_newest $(field schema_newest)"
grep -q "the schema is newer than this node knows; running on it" "$work/node2.log" || fail "no warning of the newer schema"
stop
echo "expansion to $((newest + 1)): the node of schema $newest runs on it"

# 3. a newer contraction: exit 2 naming the versions
sql "INSERT INTO idem_schema_version (version, applied_ms, needs) VALUES ($((newest + 2)), 0, $((newest + 1)))"
rc=0
timeout 60 "$coord" --pg "$url" --listen "127.0.0.1:$(free_port)" >"$work/node3.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "on a contraction needing schema $((newest + 1)): exit $rc, expected 2"
grep -q "the schema is at version $((newest + 2)), which needs a node that knows schema version $((newest + 1)) or newer; this node knows up to version $newest" \
  "$work/node3.log" || fail "the refusal does not name the versions"
echo "contraction to $((newest + 2)) needing $((newest + 1)): refused, exit 2:"
grep "not starting" "$work/node3.log"
