#!/usr/bin/env bash
# tests/install/test_install.sh BUILD_DIR — a new user's first hour, from an installed prefix:
#   1. `cmake --install` into a temporary prefix (server, idemctl, libidem, headers, idem.pc,
#      the CMake package);
#   2. client-lib/examples/c/step.c built against that prefix with pkg-config and with CMake
#      (find_package(idem)); both binaries start without LD_LIBRARY_PATH;
#   3. the installed idem-coordinator started on loopback against $IDEM_TEST_PG_URL;
#   4. each example (C from pkg-config, C from CMake, Python, Node) pays for its own order:
#      the first request runs the charge, the duplicate replays it, one charge in all.
# Needs IDEM_TEST_PG_URL and IDEM_SOURCE_DIR (scripts/test exports them) and the Node SDK built
# in client-lib/node (dist/: client-lib/node/deps.sh, which scripts/test runs). The Python and
# Node examples use their SDKs from the source tree.
set -euo pipefail
build=$(cd "$1" && pwd)
src=${IDEM_SOURCE_DIR:?IDEM_SOURCE_DIR is not set}
: "${IDEM_TEST_PG_URL:?IDEM_TEST_PG_URL is not set}"
work=$(mktemp -d /tmp/idem-install.XXXXXX)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "test_install: FAILED: $*" >&2; [ -f "$work/server.log" ] && tail -20 "$work/server.log" >&2; exit 1; }

prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install"; }
for f in bin/idem-coordinator bin/idemctl include/idem/idem.h; do
  [ -e "$prefix/$f" ] || fail "the install has no $f"
done
pc=$(find "$prefix" -name idem.pc | head -1)
[ -n "$pc" ] || fail "the install has no idem.pc"
cfg=$(find "$prefix" -name idemConfig.cmake | head -1)
[ -n "$cfg" ] || fail "the install has no idemConfig.cmake"
echo "installed into $prefix (idem.pc in ${pc#"$prefix"/})"

# --- the C example, both ways, with the user's own compiler invocation
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
# shellcheck disable=SC2046 # pkg-config's words are meant to split
cc -Wall -Wextra -Werror "$src/client-lib/examples/c/step.c" $(pkg-config --cflags --libs idem) \
  -o "$work/step-pc" 2>"$work/cc.log" || { cat "$work/cc.log"; fail "cc with pkg-config"; }
cmake -S "$src/client-lib/examples/c" -B "$work/cmake-example" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "cmake configure"; }
cmake --build "$work/cmake-example" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "cmake build"; }
for b in "$work/step-pc" "$work/cmake-example/step"; do
  libs=$(env -u LD_LIBRARY_PATH ldd "$b") # captured: grep -q would cut ldd's pipe (pipefail)
  if grep -q "not found" <<<"$libs"; then
    echo "$libs"
    fail "$b does not find its libraries without LD_LIBRARY_PATH"
  fi
  grep -qF "$prefix/" <<<"$libs" || { echo "$libs"; fail "$b does not load the installed libidem"; }
done
echo "built the C example with pkg-config and with CMake; both load $prefix's libidem.so.0"

# --- the installed server
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export IDEM_ADDRESS="127.0.0.1:$port"
"$prefix/bin/idem-coordinator" --listen "$IDEM_ADDRESS" --pg "$IDEM_TEST_PG_URL" >"$work/server.log" 2>&1 &
server_pid=$!
deadline=$((SECONDS + 30))
until "$prefix/bin/idemctl" --addr "$IDEM_ADDRESS" status >/dev/null 2>&1; do
  kill -0 "$server_pid" 2>/dev/null || fail "the installed server exited"
  [ "$SECONDS" -lt "$deadline" ] || fail "the installed server did not answer idemctl status within 30 s"
  sleep 0.1
done

export IDEM_TENANT="install-$$-$RANDOM"
run_example() { # run_example NAME COMMAND...: pays for order NAME; expects ran, replayed, 1 charge
  local name=$1 out
  shift
  out=$(env -u LD_LIBRARY_PATH "$@" "order-$name" 2>&1) || { echo "$out"; fail "$name example exited non-zero"; }
  sed "s/^/  $name: /" <<<"$out"
  grep -q "^ran: " <<<"$out" || fail "$name: the first request did not run the charge"
  grep -q "^replayed: " <<<"$out" || fail "$name: the duplicate was not replayed"
  grep -qF "charged 1 time(s) for two requests" <<<"$out" || fail "$name: not one charge"
}
run_example c-pkg-config "$work/step-pc"
run_example c-cmake "$work/cmake-example/step"
run_example python /usr/bin/python3 "$src/client-lib/examples/python/step.py"
[ -f "$src/client-lib/node/dist/index.js" ] \
  || fail "client-lib/node/dist is missing: the Node example needs the SDK built (client-lib/node/deps.sh)"
run_example node node "$src/client-lib/examples/node/step.js"

# the same order again: nothing runs twice, across processes
out=$(env -u LD_LIBRARY_PATH "$work/step-pc" order-c-pkg-config 2>&1) || { echo "$out"; fail "rerun"; }
grep -q "^ran: " <<<"$out" && fail "a second process ran the charge of order-c-pkg-config again"
grep -qF "charged 0 time(s) for two requests" <<<"$out" || { echo "$out"; fail "rerun: expected no charge"; }
echo "test_install: ok (4 examples, each charged once; a rerun charged nothing)"
