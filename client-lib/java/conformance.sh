#!/usr/bin/env bash
# client-lib/java/conformance.sh BUILD_DIR [SCENARIO...] — builds the Java SDK (build.sh) into
# BUILD_DIR and runs its conformance runner (dev.idem.conformance.Runner); meant as the RUNNER of
# client-lib/conformance/run, which provides the environment (README.md there).
# --junit instead of scenario names runs the same scenarios as JUnit 5 tests (ConformanceTest)
# through Debian's console launcher.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: client-lib/java/conformance.sh BUILD_DIR [--junit | SCENARIO...]" >&2; exit 2; }
build=$(mkdir -p "$1" && cd "$1" && pwd)
shift
"$here/build.sh" "$build"
if [ "${1:-}" = --junit ]; then
  exec "$here/junit.sh" "$build" --select-class dev.idem.conformance.ConformanceTest
fi
exec java -cp "$(cat "$build/test-classpath")" dev.idem.conformance.Runner "$@"
