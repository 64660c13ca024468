#!/usr/bin/env bash
# saga-examples/polyglot/payment-bin.sh BUILD_DIR c|go|node|java OUT — makes OUT an executable
# saga-payment in the chosen language (what demo.sh and run-scenarios.sh start): c links the C
# build's saga-payment; go installs lib/pq when missing and builds saga-examples/payment-go
# (offline, GOPATH mode); node runs npm ci from payment-node's lock file when node_modules is
# older than it, builds client-lib/node when its dist/ is missing, and writes a wrapper that
# execs node (so SIGTERM reaches the service); java installs Debian's Java packages when missing,
# builds saga-examples/payment-java with javac (BUILD_DIR/payment-java) and writes a wrapper that
# execs java. All four take the same flags.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sx=$(cd "$here/.." && pwd)
root=$(cd "$sx/.." && pwd)
build=$(cd "$1" && pwd) lang=$2 out=$3
case "$lang" in
  c)
    ln -sf "$build/saga-examples/saga-payment" "$out" ;;
  go)
    bash "$sx/payment-go/deps.sh" "$root" >&2
    "$sx/payment-go/build.sh" "$build" "$build/saga-examples/saga-payment-go" >&2
    ln -sf "$build/saga-examples/saga-payment-go" "$out" ;;
  node)
    bash "$sx/payment-node/deps.sh" "$root" >&2
    printf '#!/bin/sh\nexec node %q "$@"\n' "$sx/payment-node/payment.js" >"$out"
    chmod +x "$out" ;;
  java)
    bash "$sx/payment-java/deps.sh" "$root" >&2
    "$sx/payment-java/build.sh" "$build" >&2
    printf '#!/bin/sh\nexec java -XX:TieredStopAtLevel=1 -cp %q dev.idem.saga.payment.Main "$@"\n' \
      "$(cat "$build/payment-java/classpath")" >"$out"
    chmod +x "$out" ;;
  *)
    echo "payment-bin.sh: PAYMENT must be c, go, node or java (got '$lang')" >&2
    exit 2 ;;
esac
