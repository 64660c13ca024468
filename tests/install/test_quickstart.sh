#!/usr/bin/env bash
# tests/install/test_quickstart.sh — scripts/quickstart fails loudly: --help, an
# unknown flag (usage, exit 2), an address in use (names the port and the variable, exit 1), a
# second quickstart on the same data (names the first one's PID and address, exit 1). None of
# these builds or starts anything: they are checked before.
set -euo pipefail
src=${IDEM_SOURCE_DIR:?IDEM_SOURCE_DIR is not set}
qs="$src/scripts/quickstart"
work=$(mktemp -d /tmp/idem-qs-test.XXXXXX)
holder=""
sleeper=""
cleanup() {
  [ -n "$holder" ] && kill "$holder" 2>/dev/null
  [ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "test_quickstart: FAILED: $*" >&2; exit 1; }
export IDEM_DEV_DIR="$work/dev"

expect_exit() { # expect_exit WANT OUTFILE ARGS...: runs quickstart, checks its status and time
  local want=$1 out=$2 rc=0 t0=$SECONDS
  shift 2
  timeout 20 "$qs" "$@" >"$out" 2>&1 </dev/null || rc=$?
  [ "$rc" = "$want" ] || { cat "$out"; fail "quickstart $*: exit $rc, expected $want"; }
  [ $((SECONDS - t0)) -le 5 ] || fail "quickstart $*: took $((SECONDS - t0)) s (checks come before the build)"
}

expect_exit 0 "$work/help" --help
grep -q "^usage: scripts/quickstart" "$work/help" || fail "--help prints no usage"
grep -q "IDEM_LISTEN" "$work/help" || fail "--help does not name IDEM_LISTEN"
[ ! -e "$IDEM_DEV_DIR" ] || fail "--help created $IDEM_DEV_DIR"

expect_exit 2 "$work/bogus" --bogus
grep -q "unknown argument '--bogus'" "$work/bogus" || fail "an unknown flag is not named"
grep -q "^usage:" "$work/bogus" || fail "an unknown flag prints no usage"
expect_exit 2 "$work/both" --demo --ha

# an address in use: a listener of our own on a free port
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
/usr/bin/python3 -c "
import socket, time
s = socket.socket(); s.bind(('127.0.0.1', $port)); s.listen(); time.sleep(120)" &
holder=$!
for _ in $(seq 100); do # until it listens
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.05
done
IDEM_LISTEN="127.0.0.1:$port" expect_exit 1 "$work/inuse"
grep -q "port $port" "$work/inuse" || { cat "$work/inuse"; fail "the port in use is not named"; }
grep -q "IDEM_LISTEN" "$work/inuse" || fail "the variable to change is not named"
grep -q "Address already in use" "$work/inuse" || fail "the reason is not given"

# a port whose last connection is in TIME_WAIT (a coordinator just stopped with Ctrl-C)
# is free: the check of IDEM_LISTEN passes and the next one, IDEM_CONSOLE on the held port, fails
tw=$(/usr/bin/python3 -c '
import socket
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC listens
l.bind(("127.0.0.1", 0)); l.listen(); port = l.getsockname()[1]
c = socket.create_connection(("127.0.0.1", port)); a, _ = l.accept()
a.close(); c.close(); l.close()  # the server side closed first: its end waits in TIME_WAIT
print(port)')
[ -n "$(ss -Htan state time-wait "( sport = :$tw )")" ] || fail "no TIME_WAIT socket on port $tw to test with"
IDEM_LISTEN="127.0.0.1:$tw" IDEM_CONSOLE="127.0.0.1:$port" expect_exit 1 "$work/timewait"
grep -q "IDEM_CONSOLE" "$work/timewait" || { cat "$work/timewait"; fail "a port in TIME_WAIT was refused"; }
# IDEM_METRICS: documented, checked like the others, refused with --ha
grep -q "IDEM_METRICS" "$work/help" || fail "--help does not name IDEM_METRICS"
IDEM_METRICS="127.0.0.1:$port" IDEM_CONSOLE="127.0.0.1:$tw" expect_exit 1 "$work/metrics"
grep -q "IDEM_METRICS" "$work/metrics" || { cat "$work/metrics"; fail "IDEM_METRICS in use is not named"; }
IDEM_METRICS="127.0.0.1:$tw" expect_exit 2 "$work/metrics-ha" --ha
grep -q "not supported with --ha" "$work/metrics-ha" || { cat "$work/metrics-ha"; fail "IDEM_METRICS with --ha"; }

# a quickstart already running on the same data: its pid file names a live process
mkdir -p "$IDEM_DEV_DIR"
sleep 120 &
sleeper=$!
echo "$sleeper 127.0.0.1:50999" >"$IDEM_DEV_DIR/quickstart.pid"
expect_exit 1 "$work/twice"
grep -q "already running (pid $sleeper, coordinator on 127.0.0.1:50999" "$work/twice" \
  || { cat "$work/twice"; fail "a second quickstart does not name the first"; }
echo "test_quickstart: ok (--help, unknown flag, --demo --ha, address in use, TIME_WAIT is free, IDEM_METRICS, already running)"
