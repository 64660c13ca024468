#!/bin/sh
# ci_skip_test.sh HA_TEST_BINARY — an HA test on a machine without Patroni (IDEM_PATRONI_BIN
# pointed at a path that does not exist; nothing is started): skipped (exit 0) when CI is not
# "true", failed (non-zero, saying why) under CI=true, so a CI run cannot pass with the HA suite
# skipped (issue 31 #5).
set -u
bin=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
missing=/nonexistent/idem-ci-skip-test/patroni
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }

env -u CI IDEM_PATRONI_BIN=$missing "$bin" --verbose >"$out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "without CI: exit $rc, expected 0 (a skip)"
grep -q "^\[SKIP\]" "$out" || fail "without CI: not reported as skipped"

CI=true IDEM_PATRONI_BIN=$missing "$bin" --verbose >"$out" 2>&1
rc=$?
[ "$rc" -ne 0 ] || fail "CI=true: exit 0, expected a failure"
grep -q "CI=true: the HA tests must run in CI" "$out" || fail "CI=true: the reason is not printed"
echo "ok: skipped without CI, failed under CI=true"
