#!/usr/bin/env bash
# client-lib/examples/java/run.sh [ORDER-ID] — builds the Java SDK offline
# (client-lib/java/build.sh: javac against Debian's jars; `bash client-lib/java/deps.sh .`
# installs them, as root) and Step.java, then runs it. The build goes outside the checkout:
# IDEM_JAVA_BUILD_DIR, default ${XDG_CACHE_HOME:-~/.cache}/idem-java (the first build takes a few
# seconds; later runs rebuild only what changed). IDEM_ADDRESS, IDEM_TENANT: Step.java.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${IDEM_JAVA_BUILD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/idem-java}
if ! command -v javac >/dev/null || [ ! -f /usr/share/java/grpc-api.jar ]; then
  echo "client-lib/examples/java: a JDK or gRPC Java is missing: run 'bash client-lib/java/deps.sh .' (as root) first" >&2
  exit 1
fi
"$root/client-lib/java/build.sh" "$build" >&2
cp=$(cat "$build/classpath")
out=$build/step-example
class=$out/dev/idem/examples/Step.class
if [ ! -f "$class" ] || [ "$here/Step.java" -nt "$class" ] || [ "$build/idem-client.jar" -nt "$class" ]; then
  rm -rf "$out"
  javac -Xlint:all -Werror -encoding UTF-8 --release 17 -d "$out" -cp "$cp" "$here/Step.java" >&2
fi
exec java -cp "$out:$cp" dev.idem.examples.Step "$@"
