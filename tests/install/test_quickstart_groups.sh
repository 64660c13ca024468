#!/usr/bin/env bash
# tests/install/test_quickstart_groups.sh — scripts/quickstart --groups 2 (docs/scaling-out.md):
# it writes .idem-dev/groups.env (IDEM_GROUPS_COUNT, _STORE_1, _STORE_2, _COORDINATOR), a saga's
# step run through the address it prints lands in the database of its slot's group and not in the other, and
# Ctrl-C (SIGINT to its process group, as a terminal sends it) stops the coordinator and its
# PostgreSQL and exits 0. Also: --groups 0 / 9 and --ha --groups are refused (exit 2).
# Without a build: `cmake` on PATH is a stand-in whose --install links the binaries this build
# made (IDEM_COORDINATOR_BIN, IDEMCTL_BIN) into the prefix; the PostgreSQL is quickstart's own.
set -euo pipefail
src=${IDEM_SOURCE_DIR:?IDEM_SOURCE_DIR is not set}
coord=${IDEM_COORDINATOR_BIN:?IDEM_COORDINATOR_BIN is not set}
ctl=${IDEMCTL_BIN:?IDEMCTL_BIN is not set}
work=$(mktemp -d /tmp/idem-qs-groups.XXXXXX)
chmod 755 "$work"
qs_pid=""
cleanup() {
  if [ -n "$qs_pid" ]; then kill -KILL -- "-$qs_pid" 2>/dev/null || true; fi
  if [ -f "$work/dev/pg/data/postmaster.pid" ]; then # a failed run: its PostgreSQL too
    kill -KILL "$(head -1 "$work/dev/pg/data/postmaster.pid")" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "test_quickstart_groups: FAILED: $*" >&2; cat "$work/out" >&2 2>/dev/null; exit 1; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
qs="$src/scripts/quickstart"

# refusals, before anything starts
for bad in "--groups 0" "--groups 9" "--groups x" "--groups"; do
  rc=0
  # shellcheck disable=SC2086
  IDEM_DEV_DIR="$work/refused" timeout 20 "$qs" $bad >"$work/bad" 2>&1 </dev/null || rc=$?
  [ "$rc" = 2 ] || fail "quickstart $bad: exit $rc, expected 2"
  grep -q -- "--groups: expected a number of groups from 1 to 8" "$work/bad" || fail "quickstart $bad: $(cat "$work/bad")"
done
rc=0
IDEM_DEV_DIR="$work/refused" timeout 20 "$qs" --ha --groups 2 >"$work/bad" 2>&1 </dev/null || rc=$?
[ "$rc" = 2 ] && grep -q -- "--ha with --groups is not built yet" "$work/bad" || fail "--ha --groups: exit $rc: $(cat "$work/bad")"

mkdir -p "$work/bin"
cat >"$work/bin/cmake" <<SH
#!/bin/sh
# a stand-in: no configure, no build; --install links the binaries of the build under test
for a in "\$@"; do
  if [ "\$a" = --install ]; then
    while [ \$# -gt 0 ] && [ "\$1" != --prefix ]; do shift; done
    mkdir -p "\$2/bin" "\$2/lib/pkgconfig"
    ln -sf "$coord" "\$2/bin/idem-coordinator"
    ln -sf "$ctl" "\$2/bin/idemctl"
    : >"\$2/lib/pkgconfig/idem.pc"
  fi
done
exit 0
SH
chmod +x "$work/bin/cmake"

listen="127.0.0.1:$(free_port)"
set -m # its own process group, SIGINT not ignored: as started from a terminal
PATH="$work/bin:$PATH" IDEM_DEV_DIR="$work/dev" IDEM_LISTEN="$listen" \
  IDEM_CONSOLE="127.0.0.1:$(free_port)" "$qs" --groups 2 >"$work/out" 2>&1 </dev/null &
qs_pid=$!
set +m
env="$work/dev/groups.env"
deadline=$((SECONDS + 120))
until [ -f "$env" ] && "$ctl" --addr "$listen" --deadline-ms 1000 slots >/dev/null 2>&1; do
  kill -0 "$qs_pid" 2>/dev/null || fail "quickstart exited before its coordinator served"
  [ "$SECONDS" -lt "$deadline" ] || fail "the coordinator did not serve both groups within 120 s"
  sleep 0.2
done

# groups.env: the number of groups, each group's store string, the coordinator
# shellcheck disable=SC1090
. "$env"
[ "$IDEM_GROUPS_COUNT" = 2 ] || fail "IDEM_GROUPS_COUNT=$IDEM_GROUPS_COUNT"
[ "$IDEM_GROUPS_SLOTS" = 256 ] || fail "IDEM_GROUPS_SLOTS=$IDEM_GROUPS_SLOTS"
[ "$IDEM_GROUPS_COORDINATOR" = "$listen" ] || fail "IDEM_GROUPS_COORDINATOR=$IDEM_GROUPS_COORDINATOR, not $listen"
case "$IDEM_GROUPS_STORE_1" in g1=postgresql://*/idem_g1) ;; *) fail "STORE_1=$IDEM_GROUPS_STORE_1" ;; esac
case "$IDEM_GROUPS_STORE_2" in g2=postgresql://*/idem_g2) ;; *) fail "STORE_2=$IDEM_GROUPS_STORE_2" ;; esac
[ -z "${IDEM_GROUPS_STORE_3:-}" ] || fail "IDEM_GROUPS_STORE_3 for two groups"
url1=${IDEM_GROUPS_STORE_1#g1=}
url2=${IDEM_GROUPS_STORE_2#g2=}

# the printed address, a saga and its step through it
addr=$(sed -n 's/^== idem-coordinator on \([^ ]*\) .*/\1/p' "$work/out" | head -1)
[ "$addr" = "$listen" ] || fail "printed address '$addr', expected $listen"
IDEM_ADDRESS="$addr" /usr/bin/python3 "$src/client-lib/examples/python/step.py" order-groups-1 \
  >"$work/step" 2>&1 || { cat "$work/step" >&2; fail "step.py failed"; }
gid=$(sed -n 's/^saga \([^ ]*\) .*/\1/p' "$work/step")
[ -n "$gid" ] || fail "no saga id in $(cat "$work/step")"
# its group, computed here: fnv1a64(tenant "\0" id) mod 256; g1 serves 0-127, g2 128-255
slot=$(/usr/bin/python3 -c '
import sys
h = 14695981039346656037
for b in b"shop\0" + sys.argv[1].encode():
    h = ((h ^ b) * 1099511628211) % 2**64
print(h % 256)' "$gid")
if [ "$slot" -lt 128 ]; then mine=$url1 other=$url2 g=g1; else mine=$url2 other=$url1 g=g2; fi
count() { psql -qtA "$1" -c "select count(*) from idem_steps where tenant = 'shop' and global_id = '$gid'"; }
[ "$(count "$mine")" = 1 ] || fail "the step of $gid (slot $slot) is not in $g's database ($mine)"
[ "$(count "$other")" = 0 ] || fail "the step of $gid (slot $slot) is also in the other group's database"
echo "saga $gid: slot $slot, its step in $g only"

# Ctrl-C: SIGINT to the process group stops the coordinator and PostgreSQL, exit 0
pg_pid=$(head -1 "$work/dev/pg/data/postmaster.pid")
kill -INT -- "-$qs_pid"
rc=0
wait "$qs_pid" || rc=$?
qs_pid=""
[ "$rc" = 0 ] || fail "exit $rc after SIGINT, expected 0"
grep -q '^stopped (data kept' "$work/out" || fail "no clean-up message"
# PostgreSQL got the SIGINT too (a fast shutdown, as from a terminal): gone within 15 s
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
deadline=$((SECONDS + 15))
while alive "$pg_pid"; do
  [ "$SECONDS" -lt "$deadline" ] || fail "PostgreSQL (pid $pg_pid) still runs 15 s after Ctrl-C"
  sleep 0.1
done
! "$ctl" --addr "$listen" --deadline-ms 500 status >/dev/null 2>&1 || fail "the coordinator still answers"
echo "test_quickstart_groups: ok"
