# scripts/lib/release.sh — the releases CHANGELOG.md names, and the previous one built from its
# commit (docs/upgrading.md). Source it; then:
#   release_version ROOT            CMake's project(VERSION) of the checkout at ROOT: the newest release
#   release_build_version ROOT      the version a build of ROOT reports (cmake/idem_version.cmake):
#                                   release_version at a release (HEAD tagged vX.Y.Z, or no git
#                                   history of ROOT's own), else X.Y.(Z+1)-dev+<7-digit commit>
#   release_deb_version ROOT        the same as the Debian packages spell it ("~" for "-")
#   release_previous ROOT           "VERSION COMMIT" of the newest release in CHANGELOG.md whose
#                                   version is not ROOT's (the one this checkout is compared with)
#   release_build ROOT DIR TYPE TARGET...
#                                   the previous release checked out at DIR/src (a git worktree of
#                                   its commit, detached) and built into DIR/build (CMAKE_BUILD_TYPE
#                                   TYPE, only TARGET...); kept, so that a rerun builds nothing.
#                                   Serialized on DIR.lock (the ABI check and the upgrade test may
#                                   both ask). Prints the build directory.

release_version() {
  sed -n 's/^project(idem VERSION \([0-9][0-9.]*\) .*/\1/p' "$1/CMakeLists.txt"
}

release_build_version() {
  local root=$1 base top major minor patch
  base=$(release_version "$root")
  top=$(git -C "$root" rev-parse --show-toplevel 2>/dev/null) || top=""
  if [ -z "$top" ] || [ "$(realpath "$top")" != "$(realpath "$root")" ] ||
    git -C "$root" tag --points-at HEAD | grep -qxF "v$base"; then
    echo "$base"
    return
  fi
  IFS=. read -r major minor patch <<<"$base"
  echo "$major.$minor.$((patch + 1))-dev+$(git -C "$root" rev-parse --short=7 HEAD)"
}

release_deb_version() {
  release_build_version "$1" | tr - '~'
}

release_previous() {
  local root=$1 now ver commit
  now=$(release_version "$root")
  # "## [X.Y.Z] - DATE" then, in its entry, "Commit: `SHA`"
  /usr/bin/python3 - "$root/CHANGELOG.md" "$now" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
for m in re.finditer(r'^## \[(\d+\.\d+\.\d+)\][^\n]*\n(.*?)(?=^## |\Z)', text, re.M | re.S):
    c = re.search(r'^Commit: `([0-9a-f]{7,40})`', m.group(2), re.M)
    if m.group(1) != sys.argv[2] and c:
        print(m.group(1), c.group(1))
        sys.exit(0)
sys.exit("CHANGELOG.md: no release before %s names its commit" % sys.argv[2])
PY
}

release_build() {
  local root=$1 dir=$2 type=$3
  shift 3
  local prev version commit
  prev=$(release_previous "$root") || return 1
  version=${prev% *} commit=${prev#* }
  mkdir -p "$dir"
  (
    flock 9
    if [ "$(git -C "$dir/src" rev-parse HEAD 2>/dev/null)" != "$(git -C "$root" rev-parse "$commit^{commit}" 2>/dev/null)" ]; then
      git -C "$root" rev-parse --verify -q "$commit^{commit}" >/dev/null ||
        { echo "release_build: commit $commit of release $version is not in this clone (fetch its history)" >&2; exit 1; }
      rm -rf "$dir/src" "$dir/build"
      git -C "$root" worktree prune
      git -C "$root" worktree add -q --detach "$dir/src" "$commit" >&2 || exit 1
    fi
    cmake -S "$dir/src" -B "$dir/build" -DCMAKE_BUILD_TYPE="$type" -DIDEM_WERROR=OFF \
      -DIDEM_TESTS=OFF "${RELEASE_CMAKE_ARGS[@]}" >"$dir/configure.log" 2>&1 ||
      { cat "$dir/configure.log" >&2; exit 1; }
    cmake --build "$dir/build" -j"$(nproc)" --target "$@" >"$dir/build.log" 2>&1 ||
      { grep -Ev '^\[ *[0-9]+%\]' "$dir/build.log" >&2; exit 1; }
  ) 9>"$dir.lock" || return 1
  echo "$dir/build"
}
