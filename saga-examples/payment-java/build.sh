#!/usr/bin/env bash
# saga-examples/payment-java/build.sh BUILD_DIR — builds the Java payment participant offline with
# javac against Debian's jars: the Java SDK first (client-lib/java/build.sh BUILD_DIR/java), then
# the shop.v1 classes (protoc + grpc_java_plugin from saga-examples/proto) and this folder's
# sources into BUILD_DIR/payment-java/classes; writes BUILD_DIR/payment-java/classpath (the SDK's
# run-time classpath plus PostgreSQL's JDBC driver). Does nothing when no source changed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: saga-examples/payment-java/build.sh BUILD_DIR" >&2; exit 2; }
build=$(mkdir -p "$1" && cd "$1" && pwd)
"$root/client-lib/java/build.sh" "$build/java"
out=$build/payment-java
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
stamp=$out/.built
if [ -f "$stamp" ] && [ -z "$(find "$here" "$root/saga-examples/proto" "$build/java/idem-client.jar" -newer "$stamp" -print -quit)" ]; then
  exit 0
fi
jdbc=/usr/share/java/postgresql.jar
[ -f "$jdbc" ] || { echo "payment-java/build.sh: $jdbc is missing (saga-examples/payment-java/deps.sh installs it)" >&2; exit 2; }
rm -rf "$out/gen" "$out/classes"
mkdir -p "$out/gen" "$out/classes"
protoc -I "$root/saga-examples/proto" --java_out="$out/gen" --plugin=protoc-gen-grpc-java=/usr/bin/grpc_java_plugin \
  --grpc-java_out="$out/gen" "$root/saga-examples/proto/shop/v1/step.proto" "$root/saga-examples/proto/shop/v1/payments.proto"
# grpc_java_plugin 1.41 marks its stubs @javax.annotation.Generated, which JDK 17 does not have
sed -i '/^@javax.annotation.Generated(/,/)$/d' "$out"/gen/shop/v1/*Grpc.java
cp=$(cat "$build/java/classpath")
javac -nowarn -encoding UTF-8 --release 17 -d "$out/classes" -cp "$cp" $(find "$out/gen" -name '*.java')
javac -Xlint:all -Xlint:-serial -Werror -encoding UTF-8 --release 17 -d "$out/classes" -cp "$out/classes:$cp" \
  $(find "$here/src" -name '*.java')
echo "$out/classes:$cp:$jdbc" >"$out/classpath"
touch "$stamp"
