#!/usr/bin/env bash
# client-lib/java/example-http.sh — run by `scripts/example-http java`: builds the Java SDK
# (build.sh, into build/java of the source tree unless IDEM_JAVA_BUILD says otherwise) and runs
# examples/http (dev.idem.examples.HttpExample) on embedded Tomcat 10 in the foreground on
# 127.0.0.1:$PORT (IDEM_ADDRESS, IDEM_TENANT, PORT; docs/api.md §19).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${IDEM_JAVA_BUILD:-$here/../../build/java}
"$here/build.sh" "$build"
exec java -cp "$(cat "$build/test-classpath")" dev.idem.examples.HttpExample
