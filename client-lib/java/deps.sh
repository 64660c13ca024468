#!/usr/bin/env bash
# client-lib/java/deps.sh ROOT — installs what the Java SDK, its servlet filter and their tests
# need from Debian's archive when missing (run by scripts/test): IDEM_JAVA_DEBS of
# scripts/lib/deps.sh. Nothing comes from Maven Central: build.sh compiles with javac against
# the jars under /usr/share/java.
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
. "$root/scripts/lib/deps.sh"
# shellcheck disable=SC2086
deps_debs $IDEM_JAVA_DEBS
