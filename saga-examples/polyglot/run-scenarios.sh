#!/usr/bin/env bash
# saga-examples/polyglot/run-scenarios.sh BUILD_DIR go|node|c TEST_BINARY [criterion args...]
# Runs the saga example's own acceptance scenarios (tests/saga/test_scenarios.c, unchanged: the
# double click, the gateway's retry, the late payment callback, 100 identical requests, the
# refund before its charge, a declined charge, a reused key — each cross-checked table by table;
# or test_faults, kill -9 at the crash points) with the payment participant replaced by the Go
# or the Node one: a folder of saga-* programs
# (the C order and inventory, the chosen payment) is handed to the test as IDEM_SAGA_BIN_DIR.
# Installs and builds what the participant needs first (deps.sh, build.sh / npm ci).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -ge 3 ] || { echo "usage: run-scenarios.sh BUILD_DIR go|node|c TEST_BINARY [args...]" >&2; exit 2; }
build=$(cd "$1" && pwd) lang=$2 test_bin=$3
shift 3
bins=$(mktemp -d /tmp/idem-saga-$lang.XXXXXX)
trap 'rm -rf "$bins"' EXIT
"$here/payment-bin.sh" "$build" "$lang" "$bins/saga-payment"
for s in order inventory; do ln -s "$build/saga-examples/saga-$s" "$bins/saga-$s"; done
export IDEM_SAGA_BIN_DIR=$bins
"$test_bin" "$@"
