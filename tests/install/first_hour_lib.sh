# shellcheck shell=bash disable=SC2154 # $work: the caller's
# tests/install/first_hour_lib.sh — sourced by test_first_steps.sh and test_example_http.sh: start
# scripts/quickstart without a build and stop it again, as a user at a terminal would.
#
# Without a build: `cmake` on PATH is a stand-in whose configure and build do nothing and whose
# --install installs the build under test (BUILD, the ctest binary dir) into quickstart's prefix
# with the real cmake, so that the prefix holds what quickstart's own build would put there
# (libidem, headers, idem.pc, idemctl, the server). The PostgreSQL is quickstart's own.
# The caller sets $work (a temporary folder) and defines fail(); everything started here is
# stopped by PID in qs_stop (its process group: quickstart, its coordinator and PostgreSQL).

qs_pid=""
qs_dev=""

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# qs_standin BUILD: writes $work/bin/cmake, the stand-in
qs_standin() {
  local real
  real=$(command -v cmake) || fail "cmake is not on PATH"
  mkdir -p "$work/bin"
  cat >"$work/bin/cmake" <<SH
#!/bin/sh
# a stand-in: no configure, no build; --install installs the build under test ($1)
for a in "\$@"; do
  if [ "\$a" = --install ]; then
    while [ \$# -gt 0 ] && [ "\$1" != --prefix ]; do shift; done
    exec "$real" --install "$1" --prefix "\$2"
  fi
done
exit 0
SH
  chmod +x "$work/bin/cmake"
}

# qs_start SRC DEV_DIR LISTEN CONSOLE OUT: scripts/quickstart of SRC in its own process group (as
# from a terminal); returns once `idemctl status` answers on LISTEN (deadline 120 s). DEV_DIR ""
# = quickstart's default (.idem-dev in SRC).
qs_start() {
  local src=$1 dev=$2 listen=$3 console=$4 out=$5 deadline
  qs_dev=${dev:-$src/.idem-dev}
  set -m
  if [ -n "$dev" ]; then
    (cd "$src" && PATH="$work/bin:$PATH" IDEM_DEV_DIR="$dev" IDEM_LISTEN="$listen" \
      IDEM_CONSOLE="$console" exec scripts/quickstart) >"$out" 2>&1 </dev/null &
  else
    (cd "$src" && PATH="$work/bin:$PATH" IDEM_LISTEN="$listen" IDEM_CONSOLE="$console" \
      exec scripts/quickstart) >"$out" 2>&1 </dev/null &
  fi
  qs_pid=$!
  set +m
  deadline=$((SECONDS + 120))
  until [ -x "$qs_dev/prefix/bin/idemctl" ] &&
    "$qs_dev/prefix/bin/idemctl" --addr "$listen" --deadline-ms 1000 status >/dev/null 2>&1; do
    kill -0 "$qs_pid" 2>/dev/null || { cat "$out" >&2; fail "quickstart exited before its coordinator served"; }
    [ "$SECONDS" -lt "$deadline" ] || { cat "$out" >&2; fail "quickstart's coordinator did not answer within 120 s"; }
    sleep 0.2
  done
}

# qs_stop: Ctrl-C (SIGINT to quickstart's process group), then waits for it (deadline 30 s; then
# SIGKILL to the group and to its PostgreSQL)
qs_stop() {
  [ -n "$qs_pid" ] || return 0
  local pid=$qs_pid pg="" deadline
  qs_pid=""
  [ -f "$qs_dev/pg/data/postmaster.pid" ] && pg=$(head -1 "$qs_dev/pg/data/postmaster.pid")
  kill -INT -- "-$pid" 2>/dev/null || true
  deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
  if [ -n "$pg" ]; then # its PostgreSQL got the SIGINT too (a fast shutdown): gone within 15 s
    deadline=$((SECONDS + 15))
    while [ -e "/proc/$pg" ] && ! grep -q '^State:.*Z' "/proc/$pg/status" 2>/dev/null &&
      [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    if [ -e "/proc/$pg" ]; then kill -KILL "$pg" 2>/dev/null || true; fi
  fi
}
