#!/usr/bin/env bash
# tests/install/test_quickstart_interrupt.sh — scripts/quickstart --ha stopped by SIGTERM during
# its start-up stops at once: it cleans up (etcd gone, "stopped") and does not go on to Patroni.
# Fast and without Patroni or a build: `cmake` is a no-op on PATH, and `curl` always fails, so the
# start-up sits in its wait for etcd (10 s) when the signal comes.
set -euo pipefail
src=${IDEM_SOURCE_DIR:?IDEM_SOURCE_DIR is not set}
work=$(mktemp -d /tmp/idem-qs-int.XXXXXX)
qs_pid=""
cleanup() {
  [ -n "$qs_pid" ] && kill -9 "$qs_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "test_quickstart_interrupt: FAILED: $*" >&2; cat "$work/out" >&2; exit 1; }
mkdir -p "$work/bin"
printf '#!/bin/sh\nexit 0\n' >"$work/bin/cmake"
printf '#!/bin/sh\nexit 7\n' >"$work/bin/curl"
chmod +x "$work/bin/cmake" "$work/bin/curl"
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

PATH="$work/bin:$PATH" IDEM_DEV_DIR="$work/dev" IDEM_LISTEN="127.0.0.1:$(free_port)" \
  IDEM_LISTEN2="127.0.0.1:$(free_port)" "$src/scripts/quickstart" --ha >"$work/out" 2>&1 </dev/null &
qs_pid=$!
deadline=$((SECONDS + 60))
until grep -q '^== etcd on' "$work/out"; do # the start-up reached its wait for etcd
  kill -0 "$qs_pid" 2>/dev/null || fail "quickstart exited before starting etcd"
  [ "$SECONDS" -lt "$deadline" ] || fail "quickstart did not start etcd within 60 s"
  sleep 0.05
done
etcd_pid=$(pgrep -P "$qs_pid" -x etcd || true)
[ -n "$etcd_pid" ] || fail "no etcd child of quickstart"
t0=$(date +%s%N)
kill -TERM "$qs_pid"
rc=0
wait "$qs_pid" || rc=$?
qs_pid=""
ms=$((($(date +%s%N) - t0) / 1000000))
echo "quickstart --ha ended ${ms} ms after SIGTERM (exit $rc)"
[ "$rc" = 0 ] || fail "exit $rc after SIGTERM, expected 0"
[ "$ms" -lt 3000 ] || fail "took $ms ms to stop (the start-up went on after the cleanup)"
grep -q '^stopped (data kept' "$work/out" || fail "no clean-up"
! grep -q '^== patroni' "$work/out" || fail "the start-up went on to Patroni after the signal"
! kill -0 "$etcd_pid" 2>/dev/null || fail "etcd (pid $etcd_pid) still runs"
echo "ok"
