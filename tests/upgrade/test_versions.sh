#!/usr/bin/env bash
# tests/upgrade/test_versions.sh VERSION BUILD_DIR — one version everywhere (docs/api.md §23):
# VERSION is CMake's project(VERSION), the newest release; the SDK packages (Go's Version const,
# Node's package.json, Python's __version__ and setup.py) and CHANGELOG.md's newest release say
# it. A build reports the version of cmake/idem_version.cmake (scripts/lib/release.sh,
# release_build_version: VERSION at a release, X.Y.(Z+1)-dev+<commit> from any other commit):
# every program's --version, libidem's idem_version() (the shared library), the Debian packages
# (CPack's version, "~" for "-") and GetStatus (in test_schema_promise.sh) must say it.
set -euo pipefail
want=${1:?version} build=${2:?build dir}
src=${IDEM_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/scripts/lib/release.sh"
base=$want
built=$(release_build_version "$src")
bad=0
check() { # WHAT GOT [WANT]
  local w=${3:-$want}
  if [ "$2" = "$w" ]; then echo "ok    $1: $2"; else echo "WRONG $1: '$2', wanted $w"; bad=1; fi
}
# the build's version: SemVer 2.0 (semver.org's regular expression), the release or its dev form
semver='^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-((0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?(\+([0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*))?$'
if [[ $built =~ $semver ]]; then echo "ok    build version $built is SemVer"; else echo "WRONG build version '$built' is not SemVer"; bad=1; fi
if [ "$built" = "$base" ]; then
  echo "ok    a release build (HEAD tagged v$base, or no git history): $built"
else
  case $built in
    "${base%.*}.$((${base##*.} + 1))-dev+$(git -C "$src" rev-parse --short=7 HEAD)") echo "ok    a dev build of $(git -C "$src" rev-parse --short=7 HEAD): $built" ;;
    *) echo "WRONG a build that is not $base reports '$built'"; bad=1 ;;
  esac
fi
want=$built
check "idem-coordinator --version" "$("$build/server/idem-coordinator" --version | awk '{print $2}')"
check "idemctl --version" "$("$build/tools/idemctl/idemctl" --version | awk '{print $2}')"
check "idemctl's libidem" "$("$build/tools/idemctl/idemctl" --version | sed -n 's/.*(libidem \(.*\))/\1/p')"
check "idem-bench --version" "$("$build/bench/idem-bench" --version | awk '{print $2}')"
check "idem_version() of libidem.so" "$("$build/tests/upgrade_version_probe")"
want=$base
check "Go SDK Version" "$(sed -n 's/^const Version = "\(.*\)"$/\1/p' "$src/client-lib/go/client.go")"
check "Node SDK package.json" "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$src/client-lib/node/package.json")"
check "Node SDK user agent" "$(sed -n "s|.*'idem-client-node/\(.*\)',\$|\1|p" "$src/client-lib/node/src/client.ts")"
check "Python SDK __version__" "$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$src/client-lib/python/idem_client/__init__.py")"
check "Python SDK setup.py" "$(sed -n 's/^ *version="\(.*\)",$/\1/p' "$src/client-lib/python/setup.py")"
check "Debian packages (CPack)" "$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")" \
  "$(release_deb_version "$src")"
check "CHANGELOG.md's newest release" "$(sed -n 's/^## \[\([0-9][0-9.]*\)\].*/\1/p' "$src/CHANGELOG.md" | head -1)"
exit "$bad"
