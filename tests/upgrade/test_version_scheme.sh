#!/usr/bin/env bash
# tests/upgrade/test_version_scheme.sh — the version a build reports (cmake/idem_version.cmake and
# its shell twin release_build_version in scripts/lib/release.sh), on a throwaway git repository
# whose CMakeLists.txt says project(idem VERSION 4.5.6):
#   a commit that is not tagged                        → 4.5.7-dev+<its 7-digit commit>
#   the same commit tagged v4.5.6                       → 4.5.6
#   a later commit                                      → 4.5.7-dev+<that commit>
#   IDEM_VERSION_RELEASE=ON on it (a release override)  → 4.5.6
#   the tree without .git (a release tarball)           → 4.5.6
#   the tarball unpacked inside another repository      → 4.5.6 (not the other repository's commit)
# Each answer must be SemVer 2.0; the header the build includes must say the same.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$src/scripts/lib/release.sh"
work=$(mktemp -d /tmp/idem-version.XXXXXX)
trap 'rm -rf "$work"' EXIT
bad=0
semver='^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-((0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?(\+([0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*))?$'
# cmake_version DIR [RELEASE]: the header's IDEM_VERSION for a build of DIR
cmake_version() {
  rm -f "$work/v.h"
  cmake -DIDEM_SOURCE_DIR="$1" -DIDEM_BASE_VERSION="$(release_version "$1")" \
    -DIDEM_VERSION_RELEASE="${2:-OFF}" -DIDEM_VERSION_OUT="$work/v.h" -P "$src/cmake/idem_version.cmake" >/dev/null
  sed -n 's/^#define IDEM_VERSION "\(.*\)"$/\1/p' "$work/v.h"
}
expect() { # CASE DIR WANT [RELEASE]
  local got shell=""
  got=$(cmake_version "$2" "${4:-OFF}")
  [ "${4:-OFF}" = ON ] || shell=$(release_build_version "$2")
  if [ "$got" != "$3" ]; then echo "WRONG $1: the build says '$got', wanted $3"; bad=1; return; fi
  if [ -n "$shell" ] && [ "$shell" != "$3" ]; then echo "WRONG $1: release_build_version says '$shell', wanted $3"; bad=1; return; fi
  if ! [[ $got =~ $semver ]]; then echo "WRONG $1: '$got' is not SemVer"; bad=1; return; fi
  echo "ok    $1: $got"
}
repo=$work/repo
mkdir -p "$repo"
printf 'cmake_minimum_required(VERSION 3.18)\nproject(idem VERSION 4.5.6 LANGUAGES C)\n' >"$repo/CMakeLists.txt"
git -C "$repo" init -q
git -C "$repo" -c user.name=t -c user.email=t@localhost add CMakeLists.txt
git -C "$repo" -c user.name=t -c user.email=t@localhost commit -qm one
c1=$(git -C "$repo" rev-parse --short=7 HEAD)
expect "untagged commit" "$repo" "4.5.7-dev+$c1"
git -C "$repo" tag v4.5.6
expect "commit tagged v4.5.6" "$repo" "4.5.6"
git -C "$repo" -c user.name=t -c user.email=t@localhost commit -qm two --allow-empty
c2=$(git -C "$repo" rev-parse --short=7 HEAD)
expect "a commit after the tag" "$repo" "4.5.7-dev+$c2"
expect "IDEM_VERSION_RELEASE=ON" "$repo" "4.5.6" ON
mkdir -p "$work/tarball"
cp "$repo/CMakeLists.txt" "$work/tarball/"
expect "a tree without git (a tarball)" "$work/tarball" "4.5.6"
mkdir -p "$repo/vendor/idem"
cp "$repo/CMakeLists.txt" "$repo/vendor/idem/"
expect "a tarball inside another repository" "$repo/vendor/idem" "4.5.6"
exit "$bad"
