#!/usr/bin/env bash
# client-lib/java/build.sh BUILD_DIR — builds the Java SDK offline with javac against Debian's
# jars under /usr/share/java (README.md, "Building"): the generated idem.v1 classes (protoc +
# grpc_java_plugin), the SDK and the servlet filter (BUILD_DIR/idem-client.jar), and the tests,
# conformance runner and example server (BUILD_DIR/test-classes). Writes BUILD_DIR/classpath
# (what the SDK needs at run time) and BUILD_DIR/test-classpath (that plus the tests, JUnit and
# Tomcat). Does nothing when no source changed since the last build; concurrent callers (ctest
# -j) wait for each other on BUILD_DIR/.lock.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: client-lib/java/build.sh BUILD_DIR" >&2; exit 2; }
build=$(mkdir -p "$1" && cd "$1" && pwd)
J=/usr/share/java
# run time: gRPC Java 1.41 over Netty, protobuf-java 3.21, and what they load (Debian's
# libgrpc-java declares none of them); gson for the filter's stored answers
runtime="grpc-api grpc-core grpc-netty grpc-stub grpc-protobuf grpc-protobuf-lite grpc-context protobuf
  guava perfmark-api gson netty-buffer netty-codec netty-codec-http netty-codec-http2
  netty-codec-socks netty-common netty-handler netty-handler-proxy netty-resolver netty-transport
  jsr305 error_prone_annotations"
compile_only="jakarta-servlet-api"
# the tests: JUnit 5 through the console launcher's standalone jar (it carries the Jupiter API and
# engine), and embedded Tomcat 10 for the filter's HTTP tests and the example server
junit=$J/junit-platform-console-standalone.jar
tests="tomcat10-embed-core jakarta-annotation-api"
cp_of() {
  local out="" j
  for j in "$@"; do
    [ -f "$J/$j.jar" ] || { echo "client-lib/java/build.sh: $J/$j.jar is missing (client-lib/java/deps.sh installs it)" >&2; exit 2; }
    out="$out:$J/$j.jar"
  done
  echo "${out#:}"
}
# shellcheck disable=SC2086
rcp=$(cp_of $runtime)
# shellcheck disable=SC2086
ccp=$(cp_of $compile_only)
# shellcheck disable=SC2086
tcp=$(cp_of $tests)

exec 9>"$build/.lock"
flock 9
stamp=$build/.built
if [ -f "$stamp" ] && [ -f "$build/idem-client.jar" ] && \
   [ -z "$(find "$here/src" "$here/examples" "$root/proto/idem/v1/coordinator.proto" "$here/build.sh" -newer "$stamp" -print -quit)" ]; then
  exit 0
fi
rm -rf "$build/gen" "$build/classes" "$build/test-classes"
mkdir -p "$build/gen" "$build/classes" "$build/test-classes"
protoc -I "$root/proto" --java_out="$build/gen" --plugin=protoc-gen-grpc-java=/usr/bin/grpc_java_plugin \
  --grpc-java_out="$build/gen" "$root/proto/idem/v1/coordinator.proto"
# grpc_java_plugin 1.41 marks its stubs @javax.annotation.Generated, which JDK 17 does not have
sed -i '/^@javax.annotation.Generated(/,/)$/d' "$build/gen"/idem/v1/*Grpc.java
javac -nowarn -encoding UTF-8 --release 17 -d "$build/classes" -cp "$rcp" $(find "$build/gen" -name '*.java')
javac -Xlint:all -Xlint:-serial -Xlint:-processing -Werror -encoding UTF-8 --release 17 -d "$build/classes" \
  -cp "$build/classes:$rcp:$ccp" $(find "$here/src/main/java" -name '*.java')
(cd "$build/classes" && jar --create --file "$build/idem-client.jar" .)
javac -Xlint:all -Xlint:-serial -Xlint:-processing -Xlint:-try -Werror -encoding UTF-8 --release 17 \
  -d "$build/test-classes" -cp "$build/idem-client.jar:$rcp:$ccp:$tcp:$junit" $(find "$here/src/test/java" "$here/examples" -name '*.java')
echo "$build/idem-client.jar:$rcp" >"$build/classpath"
echo "$build/test-classes:$build/idem-client.jar:$rcp:$tcp" >"$build/test-classpath"
touch "$stamp"
