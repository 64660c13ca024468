#!/usr/bin/env bash
# tests/upgrade/test_versions.sh VERSION BUILD_DIR — one version everywhere (docs/api.md §23):
# VERSION is CMake's project(VERSION); every program's --version, libidem's idem_version() (the
# shared library), the SDK packages (Go's Version const, Node's package.json, Python's
# __version__ and setup.py), the Debian packages (CPack's version) and GetStatus (in
# test_schema_promise.sh) must say the same.
set -euo pipefail
want=${1:?version} build=${2:?build dir}
src=${IDEM_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bad=0
check() { # WHAT GOT
  if [ "$2" = "$want" ]; then echo "ok    $1: $2"; else echo "WRONG $1: '$2', CMake says $want"; bad=1; fi
}
check "idem-coordinator --version" "$("$build/server/idem-coordinator" --version | awk '{print $2}')"
check "idemctl --version" "$("$build/tools/idemctl/idemctl" --version | awk '{print $2}')"
check "idemctl's libidem" "$("$build/tools/idemctl/idemctl" --version | sed -n 's/.*(libidem \(.*\))/\1/p')"
check "idem-bench --version" "$("$build/bench/idem-bench" --version | awk '{print $2}')"
check "idem_version() of libidem.so" "$("$build/tests/upgrade_version_probe")"
check "Go SDK Version" "$(sed -n 's/^const Version = "\(.*\)"$/\1/p' "$src/client-lib/go/client.go")"
check "Node SDK package.json" "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$src/client-lib/node/package.json")"
check "Node SDK user agent" "$(sed -n "s|.*'idem-client-node/\(.*\)',\$|\1|p" "$src/client-lib/node/src/client.ts")"
check "Python SDK __version__" "$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$src/client-lib/python/idem_client/__init__.py")"
check "Python SDK setup.py" "$(sed -n 's/^ *version="\(.*\)",$/\1/p' "$src/client-lib/python/setup.py")"
check "Debian packages (CPack)" "$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")"
check "CHANGELOG.md's newest release" "$(sed -n 's/^## \[\([0-9][0-9.]*\)\].*/\1/p' "$src/CHANGELOG.md" | head -1)"
exit "$bad"
