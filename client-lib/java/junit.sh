#!/usr/bin/env bash
# client-lib/java/junit.sh BUILD_DIR SELECTOR... — builds the Java SDK (build.sh) into BUILD_DIR
# and runs JUnit 5 tests with Debian's console launcher (junit-platform-console-standalone), e.g.
#   client-lib/java/junit.sh build/java --select-class dev.idem.client.StepHelperTest
# Exits non-zero when a test failed or none was found.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: client-lib/java/junit.sh BUILD_DIR SELECTOR..." >&2; exit 2; }
build=$(mkdir -p "$1" && cd "$1" && pwd)
shift
"$here/build.sh" "$build"
exec java -jar /usr/share/java/junit-platform-console-standalone.jar --disable-banner --disable-ansi-colors \
  --details=tree --fail-if-no-tests --class-path "$(cat "$build/test-classpath")" "$@"
